// The list logic without React: fetching a page, and keeping a list newest first as
// stream events arrive.
import type {
  InboxItem,
  InboxPage,
  NotificationEvent,
  NotificationUpdate,
  ThreadUpdate,
  NotifyHubClient,
  Problem,
} from "./notifyhub.js";

export type StatusFilter = "all" | "unread" | "read";

export interface ListFilter {
  status: StatusFilter;
  category: string | null;
}

export interface PageQuery extends ListFilter {
  view: string | undefined;
  limit: number;
  cursor: string | null;
}

/**
 * One page of the user's inbox. `view` goes to the hub as `?view=`: hubs before the views
 * feature (issue 18) ignore it and list everything, so pass one only once your hub has it.
 * notifyhub.js's `list()` has no `view` yet, so this one request is made here, with the
 * client's own base URL, access token and credentials.
 */
export async function fetchPage(client: NotifyHubClient, query: PageQuery): Promise<InboxPage> {
  const { view, status, category, limit, cursor } = query;
  if (view === undefined) return client.list({ status, category, limit, cursor });
  const params = new URLSearchParams({ status, limit: String(limit), view });
  if (cursor !== null) params.set("cursor", cursor);
  if (category !== null) params.set("category", category);
  const headers: Record<string, string> = { Accept: "application/json" };
  const { getAccessToken, credentials } = client.options;
  if (getAccessToken !== undefined) headers["Authorization"] = `Bearer ${await getAccessToken()}`;
  const response = await fetch(`${client.baseUrl}/v1/me/notifications?${params}`, {
    headers,
    credentials: credentials ?? "same-origin",
  });
  const payload: unknown = await response.json().catch(() => null);
  if (!response.ok) {
    const problem = (payload ?? null) as Problem | null;
    const HubError = globalThis.NotifyHub?.NotifyHubError;
    throw HubError !== undefined ? new HubError(response.status, problem) : new Error(`HTTP ${response.status}`);
  }
  return payload as InboxPage;
}

/** In the lists this hook shows (the default inbox): archived and snoozed copies are not. */
export function matches(item: InboxItem, filter: ListFilter): boolean {
  if (item.archived === true || (item.snoozed_until ?? null) !== null) return false;
  if (filter.status !== "all" && item.status !== filter.status) return false;
  return filter.category === null || item.category === filter.category;
}

export function without(items: InboxItem[], id: string): InboxItem[] {
  return items.some((item) => item.id === id) ? items.filter((item) => item.id !== id) : items;
}

/** Insert or replace `item` (or drop it if it left the filter), newest first by ULID. */
export function upsert(items: InboxItem[], item: InboxItem, filter: ListFilter): InboxItem[] {
  const rest = without(items, item.id);
  if (!matches(item, filter)) return rest;
  const at = rest.findIndex((other) => other.id < item.id);
  return at === -1 ? [...rest, item] : [...rest.slice(0, at), item, ...rest.slice(at)];
}

/**
 * A `notification` event: the new copy, minus the copy it collapsed. A resurfaced snooze
 * goes on top, as the hub lists it.
 */
export function received(items: InboxItem[], event: NotificationEvent, filter: ListFilter): InboxItem[] {
  const { replaces, resurfaced, ...item } = event;
  const rest = without(replaces === undefined ? items : without(items, replaces), item.id);
  if (resurfaced === true && matches(item, filter)) return [item, ...rest];
  return upsert(rest, item, filter);
}

/**
 * An `update` event: the item's new state (it may leave a filtered list: read, archived,
 * snoozed); or, with `thread` set, the whole thread item an activity joined: on top.
 */
export function updated(items: InboxItem[], update: NotificationUpdate, filter: ListFilter): InboxItem[] {
  if (update.thread !== undefined) {
    const whole = update as ThreadUpdate;
    const rest = without(items, whole.id);
    return matches(whole, filter) ? [whole, ...rest] : rest;
  }
  const item = items.find((other) => other.id === update.id);
  if (item === undefined) return items;
  return upsert(items, { ...item, ...update }, filter);
}
