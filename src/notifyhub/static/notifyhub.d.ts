/*
 * notifyhub.d.ts - types for notifyhub.js, the hub's browser client (served next to it:
 * `GET /static/notifyhub.d.ts`). notifyhub.js is a classic script, not a module: it sets
 * the global `NotifyHub`. This file declares that global and exports the types:
 *
 *   import type { InboxItem, NotifyHubClient } from "./notifyhub";  // a TypeScript module
 *   /// <reference path="notifyhub.d.ts" />                          // a script
 *
 * The payloads are the hub's JSON as it sends it (times are RFC 3339 strings in UTC with
 * milliseconds, e.g. "2025-01-31T09:30:00.000Z"; every field is present, null when unset).
 */

/** Any JSON value, as in a notification's `data`. */
export type JsonValue = string | number | boolean | null | JsonValue[] | { [key: string]: JsonValue };

export type Severity = "info" | "success" | "warning" | "error" | "critical";

/** Where a notification shows: the inbox, a toast, or both (`toast` fires unless "inbox"). */
export type Display = "inbox" | "toast" | "both";

export type NotificationStatus = "unread" | "read";

/** An RFC 3339 time in UTC with milliseconds, e.g. "2025-01-31T09:30:00.000Z". */
export type Timestamp = string;

/**
 * A stream event id, `<seq>-<epoch>` (a bare `<seq>` for seqs older than epochs). Treat it
 * as opaque: the client sends it back verbatim as `last_event_id` to resume.
 */
export type EventId = string;

/** A typed reference to something outside notifyhub (an actor or a target). */
export interface Ref {
  type: string;
  id: string;
}

/** Who caused a notification, with what a client shows of them. */
export interface Actor extends Ref {
  /** `user` unless the publisher said otherwise. */
  type: string;
  name: string | null;
  /** An https URL or a small `data:image/...;base64` URL. */
  avatar_url: string | null;
}

/** A button on a notification; the user completes one of a notification's actions once. */
export interface Action {
  /** Unique within the notification: a lowercase slug. */
  id: string;
  label: string;
  /** Where to go after completing it (http(s) URL or absolute path). */
  url: string | null;
  /** The delivery definition the hub tells of the completion (a signed webhook). */
  webhook: string | null;
  style: "primary" | "secondary" | "danger";
}

/** A thread item's activities: every notification with its key, counted once. */
export interface Thread {
  key: string;
  /** The id of the activity the item shows (its content and actions). */
  latest_id: string;
  activity_count: number;
  /** The latest 10 distinct actors, the latest first. */
  actors: Actor[];
  first_at: Timestamp;
  last_at: Timestamp;
}

/** Which action the user completed, and when. */
export interface Completed {
  action: string;
  completed_at: Timestamp;
}

/** A user's copy of a notification: the shared content plus that user's read state. */
export interface InboxItem {
  /** A ULID: ids sort by creation time, so newest first is descending id order. */
  id: string;
  tenant: string;
  title: string;
  body: string;
  /** How to render `body`: plain text, or the markdown subset (`renderBody`). */
  body_format: "text" | "markdown";
  severity: Severity;
  category: string | null;
  source: string | null;
  display: Display;
  data: { [key: string]: JsonValue };
  action_url: string | null;
  actor: Actor | null;
  target: Ref | null;
  created_at: Timestamp;
  expires_at: Timestamp;
  collapse_key: string | null;
  status: NotificationStatus;
  seen: boolean;
  read_at: Timestamp | null;
  /** Archived copies leave the default list and every count (`list({status: "archived"})`). */
  archived: boolean;
  /** Pinned copies come first in the default list (at most 20 per user). */
  pinned: boolean;
  /** Hidden from the default list and the counts until then; null when not snoozed. */
  snoozed_until: Timestamp | null;
  /** Up to 10 slugs (`^[a-z0-9][a-z0-9_-]{0,31}$`) that views filter on. */
  tags: string[];
  /** Up to 3 buttons (`completeAction`). */
  actions: Action[];
  /** The action this user completed (the others are closed); null before. */
  completed: Completed | null;
  /** A thread (its notifications had a `thread_key`): the item shows its latest activity. */
  thread: Thread | null;
  thread_key?: string | null;
}

/**
 * The `notification` event: a new copy; `replaces` names the copy it collapsed;
 * `resurfaced` marks a snoozed copy whose time came (unread again, at the top).
 */
export interface NotificationEvent extends InboxItem {
  replaces?: string;
  resurfaced?: true;
}

/**
 * An `update` event whose `thread` is set: an activity joined the thread, and the event is
 * the whole item as it now is (unread again, on top, showing the latest activity).
 */
export interface ThreadUpdate extends InboxItem {
  thread: Thread;
}

/**
 * The `update` event: a copy's state changed (here or in another tab or device): read,
 * seen, archived, pinned or snoozed, or an action completed. An archived or snoozed copy
 * leaves the default list.
 */
export interface NotificationUpdate {
  id: string;
  status: NotificationStatus;
  seen: boolean;
  read_at: Timestamp | null;
  archived: boolean;
  pinned: boolean;
  snoozed_until: Timestamp | null;
  /** Only in the update of an action's completion; other updates leave it as it was. */
  completed?: Completed;
  /** Set when an activity joined the thread: the event is then the whole `ThreadUpdate`. */
  thread?: Thread;
}

/** The `delete` event: a copy was deleted, recalled or expired. */
export interface NotificationDelete {
  id: string;
}

/** One view's counts. `exact` is false while the hub recomputes a new or changed view. */
export interface ViewCounts {
  unread: number;
  unseen: number;
  total: number;
  exact: boolean;
}

/**
 * `GET /v1/me/notifications/counts` (`fetchCounts()`): the default inbox's counts (no
 * archived or snoozed copies), and each view's under its name.
 */
export interface Counts {
  unread: number;
  unseen: number;
  total: number;
  views: { [name: string]: ViewCounts };
}

/** The `counts` and `reset` events: the counts as of the user's change `seq`. */
export interface StreamCounts extends Counts {
  seq: number;
}

/** One page of `list()`; `next_cursor` is null on the last page. */
export interface InboxPage {
  items: InboxItem[];
  next_cursor: string | null;
  unread: number;
}

/** `markSeen()` and `markAllRead()`: how many copies changed. */
export interface Updated {
  updated: number;
}

/** The connection's state, as the `status` event and `client.status` report it. */
export type ConnectionStatus = "idle" | "connecting" | "reconnecting" | "open" | "closed";

/** `shared-worker`: one stream per browser and user; `tab`: this tab's own stream. */
export type TransportMode = "shared-worker" | "tab";

/** What each event's handler receives. */
export interface NotifyHubEventMap {
  notification: NotificationEvent;
  update: NotificationUpdate;
  delete: NotificationDelete;
  counts: StreamCounts;
  /**
   * The gap since the last event is older than the change log, or the hub's Redis lost
   * the user's data: reload what you show. Without any `reset` listener the page reloads.
   */
  reset: StreamCounts;
  /** A new notification (not `display: "inbox"`), in exactly one visible tab. */
  toast: NotificationEvent;
  status: ConnectionStatus;
}

export type NotifyHubEvent = keyof NotifyHubEventMap;

/** The events the hub's stream sends (`toast` and `status` come from the client). */
export type StreamEventName = "notification" | "update" | "delete" | "counts" | "reset";

/** Calls `on()` returned: removes that handler. */
export type Unsubscribe = () => void;

/** A token, or a promise of one. */
export type TokenGetter = () => string | Promise<string>;

export interface BackoffOptions {
  /** The first retry's ceiling, doubled per attempt (default 500). */
  baseMs?: number;
  /** The largest ceiling (default 15000); each delay is random in [0.5, 1] x ceiling. */
  maxMs?: number;
}

export interface ConnectOptions {
  /**
   * Required: a fresh stream token (`POST /v1/me/stream-tokens`, valid 60 s), normally
   * from your backend. Called for every connection and reconnection.
   */
  getStreamToken: TokenGetter;
  /** The user's token for the REST calls (sent as `Authorization: Bearer`). */
  getAccessToken?: TokenGetter;
  /** Names the shared stream: one per browser *and user* (default "default"). */
  user?: string;
  /** The hub's origin (default: where notifyhub.js was loaded from). */
  baseUrl?: string;
  /** The SharedWorker script (default: notifyhub-worker.js next to notifyhub.js). */
  workerUrl?: string;
  /** false: one stream per tab, no SharedWorker (also the fallback where it is missing). */
  sharedWorker?: boolean;
  backoff?: BackoffOptions;
  /** `fetch` credentials for the REST calls (default "same-origin"). */
  credentials?: RequestCredentials;
}

/**
 * Which list: "all" (default), "unread" and "read" list the default inbox (no archived or
 * snoozed copies; pinned first, then newest); "archived" and "snoozed" list those.
 */
export type ListStatus = "all" | "unread" | "read" | "archived" | "snoozed";

export interface ListOptions {
  /** Default "all". */
  status?: ListStatus;
  /** 1 to 100, default 20. */
  limit?: number;
  /** The previous page's `next_cursor`. */
  cursor?: string | null;
  category?: string | null;
  /** A view's name (`fetchViews()`): its filter applies; an unknown view is a 404. */
  view?: string | null;
  /** true: only pinned copies; false: only unpinned ones; omitted: pinned first. */
  pinned?: boolean | null;
  /** Copies with at least one of these tags. */
  tagsAny?: string[] | null;
  /** Copies with all of these tags. */
  tagsAll?: string[] | null;
  severityAtLeast?: Severity | null;
  /** An actor's id (`actor.id`). */
  actor?: string | null;
  createdAfter?: Timestamp | Date | null;
  createdBefore?: Timestamp | Date | null;
}

/** A view's filter: every given part must match (tags_any: one of them; tags_all: all). */
export interface ViewFilter {
  tags_any?: string[];
  tags_all?: string[];
  categories?: string[];
  severity_at_least?: Severity;
}

/** What `saveView()` sends: the filter and an optional label to show. */
export interface ViewDefinition {
  filter: ViewFilter;
  label?: string | null;
}

/** A named view (a tab), the tenant's or the user's own. */
export interface View extends ViewDefinition {
  name: string;
  label: string | null;
  /** Who defined it: the tenant's admin, or this user. */
  scope: "tenant" | "personal";
}

/** `fetchViews()`: the tenant's views, then the user's own. */
export interface ViewList {
  views: View[];
}

/** The snooze menu's presets (`NotifyHub.SNOOZE_PRESETS`), resolved in local time. */
export type SnoozePreset = "hour" | "tomorrow" | "next-week";

/**
 * `snooze(id, when)`: seconds from now (an integer, 1 to 7776000 = 90 days), a time, or a
 * preset. A time in the past or more than 90 days ahead is a 422.
 */
export type SnoozeWhen = number | Date | Timestamp | SnoozePreset;

/** The PATCH body `snooze()` sends. */
export type SnoozeBody = { snooze: number } | { snoozed_until: Timestamp };

/** What read-all and archive-all change; what is given combines (all must hold). */
export interface ReadAllFilter {
  category?: string;
  /** Only copies created before this time (RFC 3339, or epoch milliseconds). */
  before?: string | number;
  /** Only the copies in this view (tab) of the user's, as `list({view})` lists them. */
  view?: string;
}

/** RFC 9457 problem details, as the hub sends them for errors. */
export interface Problem {
  type?: string;
  title?: string;
  status?: number;
  detail?: string;
  instance?: string;
  [extension: string]: unknown;
}

/** An error answer from the hub's REST API. */
export interface NotifyHubError extends Error {
  name: "NotifyHubError";
  /** The HTTP status. */
  status: number;
  /** The problem details, when the answer had a JSON body. */
  problem: Problem | null;
}

export interface NotifyHubErrorConstructor {
  new (status: number, problem?: Problem | null): NotifyHubError;
  readonly prototype: NotifyHubError;
}

/**
 * How one category reaches the user, per channel: `inbox` (false drops it unless
 * critical), `email`, `push` (the live toast and Web Push). A hub answers with every
 * channel it has; a channel left out of a `PUT` is true.
 */
export interface CategoryPreference {
  inbox?: boolean;
  email?: boolean;
  push?: boolean;
  [channel: string]: boolean | undefined;
}

/** `GET /v1/me/preferences` (`fetchPreferences()`): categories not named get the defaults. */
export interface Preferences {
  categories: { [category: string]: CategoryPreference };
  /** A BCP 47 tag (`pt-BR`), or null for the default. */
  locale: string | null;
}

/** `savePreferences()`: `categories` replaces them all; a field left out stays as it is. */
export interface PreferencesUpdate {
  categories?: { [category: string]: CategoryPreference };
  locale?: string | null;
}

export interface PushOptions {
  /** The push service worker, on the page's origin (default: notifyhub-push-sw.js next to notifyhub.js). */
  serviceWorkerUrl?: string;
  /** Its scope (default: its folder; a wider one needs a `Service-Worker-Allowed` header). */
  scope?: string;
}

/** `pushState()`: "enabled" when this browser has a push subscription. */
export type PushState = "unsupported" | "denied" | "enabled" | "disabled";

/** The hub's record of a push subscription (`POST /v1/me/push-subscriptions`). */
export interface PushSubscriptionRecord {
  id: string;
  endpoint: string;
  created_at: Timestamp;
}

/** Why `enablePush()` could not turn Web Push on. */
export interface PushError extends Error {
  name: "PushError";
  /** No service worker / Push API / secure context; notifications blocked; prompt closed. */
  reason: "unsupported" | "denied" | "dismissed";
}

export interface PushErrorConstructor {
  new (reason: PushError["reason"], message: string): PushError;
  readonly prototype: PushError;
}

/** What `NotifyHub.connect()` returns: live events, current counts, and the REST calls. */
export interface NotifyHubClient {
  readonly options: ConnectOptions;
  /** The hub's origin. */
  readonly baseUrl: string;
  /** `${baseUrl}/v1/me/stream`. */
  readonly streamUrl: string;
  /** The latest counts from the stream; null until the first `counts` or `reset`. */
  readonly counts: StreamCounts | null;
  readonly status: ConnectionStatus;
  /** null once closed before it started, else how this tab gets its events. */
  readonly mode: TransportMode | null;

  /** Subscribe to an event; call the result to unsubscribe. */
  on<K extends NotifyHubEvent>(event: K, handler: (data: NotifyHubEventMap[K]) => void): Unsubscribe;
  /** Open a new stream now (fresh token, resuming after the last event). */
  reconnect(): void;
  /** Leave: this tab stops listening (the shared stream closes with its last tab). */
  close(): void;

  list(options?: ListOptions): Promise<InboxPage>;
  get(id: string): Promise<InboxItem>;
  markRead(id: string, read?: boolean): Promise<InboxItem>;
  markUnread(id: string): Promise<InboxItem>;
  markSeen(ids: string[]): Promise<Updated>;
  markAllRead(filter?: ReadAllFilter): Promise<Updated>;
  delete(id: string): Promise<null>;
  fetchCounts(): Promise<Counts>;
  /** Archive (`archived` false: restore) a copy; the stream sends the `update`. */
  archive(id: string, archived?: boolean): Promise<InboxItem>;
  unarchive(id: string): Promise<InboxItem>;
  /** Archive the default inbox's copies (optionally one category, or older ones). */
  archiveAll(filter?: ReadAllFilter): Promise<Updated>;
  /** Snooze: it leaves the default list until then, and comes back as `resurfaced`. */
  snooze(id: string, when: SnoozeWhen): Promise<InboxItem>;
  unsnooze(id: string): Promise<InboxItem>;
  /** Pin (`pinned` false: unpin); a 21st pinned copy is a 409 with `limit` in the problem. */
  pin(id: string, pinned?: boolean): Promise<InboxItem>;
  unpin(id: string): Promise<InboxItem>;
  /**
   * Complete one of the notification's actions (once; 503s and lost connections are
   * retried `retries` times, 3 by default); a 409's `problem.completed` names the first.
   */
  completeAction(id: string, actionId: string, options?: { retries?: number }): Promise<InboxItem>;
  fetchViews(): Promise<ViewList>;
  /** Create or replace one of the user's own views (at most 10). */
  saveView(name: string, view: ViewDefinition): Promise<View>;
  deleteView(name: string): Promise<null>;
  fetchPreferences(): Promise<Preferences>;
  /** Set the preferences; the answer is what the hub now has. */
  savePreferences(preferences: PreferencesUpdate): Promise<Preferences>;
  /**
   * Register the push service worker, ask for Notification permission (call it from a
   * click), subscribe with the hub's VAPID key and register the subscription with the hub.
   * Rejects with a `PushError` (unsupported, denied, dismissed) or a `NotifyHubError`.
   */
  enablePush(options?: PushOptions): Promise<PushSubscriptionRecord>;
  /** Forget this browser's subscription at the hub and unsubscribe it. */
  disablePush(options?: PushOptions): Promise<void>;
  pushState(options?: PushOptions): Promise<PushState>;
}

export interface NotifyHubClientConstructor {
  /** Not started: use `NotifyHub.connect()`, which constructs and starts one. */
  new (options: ConnectOptions): NotifyHubClient;
  readonly prototype: NotifyHubClient;
}

/** One event as `StreamConnection` hands it on. */
export interface StreamMessage {
  event: StreamEventName;
  id: EventId | null;
  data: unknown;
}

export interface StreamConnectionOptions {
  url: string;
  getToken: () => Promise<string>;
  onEvent: (message: StreamMessage) => void;
  onStatus?: (status: ConnectionStatus) => void;
  backoff?: BackoffOptions | null;
  lastEventId?: EventId | null;
}

/** A tab's presence in the toast election. */
export interface TabPresence {
  id: string;
  visible: boolean;
  /** When the tab last became visible (epoch ms; 0 if never). */
  since: number;
  /** When this was last heard (epoch ms). */
  at: number;
}

/**
 * The machinery the SharedWorker shares with the page. Not a stable API: it may change
 * in any release.
 */
export interface NotifyHubInternal {
  StreamConnection: new (options: StreamConnectionOptions) => {
    url: string;
    lastEventId: EventId | null;
    status: ConnectionStatus;
    start(): void;
    stop(): void;
    reconnect(): void;
  };
  backoffDelay(attempt: number, baseMs: number, maxMs: number): number;
  electToastTab(tabs: Iterable<TabPresence>, now: number): string | null;
  parseEventId(value: EventId | null | undefined): { seq: number; epoch: string } | null;
  wantsToast(notification: { display?: Display } | null | undefined): boolean;
  STREAM_EVENTS: StreamEventName[];
}

/** The global `NotifyHub` in a page that loaded notifyhub.js. */
export interface NotifyHubGlobal {
  /** Start a client: `options.getStreamToken` is required. */
  connect(options: ConnectOptions): NotifyHubClient;
  NotifyHubClient: NotifyHubClientConstructor;
  NotifyHubError: NotifyHubErrorConstructor;
  PushError: PushErrorConstructor;
  HEARTBEAT_MS: number;
  PRESENCE_STALE_MS: number;
  TOKEN_TIMEOUT_MS: number;
  /** The snooze menu's choices, in order, with an English label each. */
  SNOOZE_PRESETS: ReadonlyArray<{ name: SnoozePreset; label: string }>;
  /**
   * When a preset ends, in the browser's time zone: "hour" = now + 1 h, "tomorrow" = 9:00
   * on the next day, "next-week" = 9:00 on the next Monday (from a Monday: a week later).
   */
  snoozeTime(preset: SnoozePreset, now?: Date): Date;
  /** The PATCH body `snooze(id, when)` sends (a preset resolved with `now`). */
  snoozeBody(when: SnoozeWhen, now?: Date): SnoozeBody;
  /**
   * Whether a copy belongs in the list `list(options)` returns: what a live event does to a
   * shown list. `viewFilter` is the filter of `options.view` (from `fetchViews()`).
   */
  matchesList(
    item: InboxItem,
    options?: ListOptions,
    viewFilter?: ViewFilter | null,
  ): boolean;
  /** Whether a copy passes a view's filter. */
  matchesView(item: InboxItem, filter: ViewFilter | null | undefined): boolean;
  /**
   * `item.body` as DOM nodes: text as text; markdown through markdown-it and DOMPurify
   * (load /static/vendor/markdown-it.min.js and purify.min.js first; without them it is
   * shown as text), only the subset's tags and http(s) links.
   */
  renderBody(item: Pick<InboxItem, "body" | "body_format">, doc?: Document): DocumentFragment;
  /** The client's own words: a table per language (`en`, `pt`), keyed like "action.read". */
  STRINGS: Readonly<Record<string, Readonly<Record<string, string>>>>;
  /**
   * The strings for `language` (default: the browser's), falling back `pt-BR` -> `pt` ->
   * English; `text(key, values)` fills in `{name}` placeholders.
   */
  strings(language?: string): {
    language: string;
    table: Readonly<Record<string, string>>;
    text(key: string, values?: Record<string, string | number>): string;
  };
  /** Not a stable API. */
  internal: NotifyHubInternal;
}

declare global {
  /** Set by notifyhub.js (in a SharedWorker only the machinery: no `connect`). */
  var NotifyHub: NotifyHubGlobal;
}
