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
  ViewFilter,
} from "./notifyhub.js";

export type StatusFilter = "all" | "unread" | "read";

export interface ListFilter {
  status: StatusFilter;
  category: string | null;
  /** A view's filter (`inView`): live items outside it stay out. Absent or null: none. */
  viewFilter?: ViewFilter | null;
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

/**
 * The filter of the user's view `name` (`GET /v1/me/views`, the tenant's views first: a
 * user's own view of the same name is hidden by the tenant's), or null when it cannot be
 * known: a hub (or a notifyhub.js) without views, a view the user does not have, a failure.
 */
export async function fetchViewFilter(client: NotifyHubClient, name: string): Promise<ViewFilter | null> {
  if (typeof client.fetchViews !== "function") return null; // notifyhub.js before views
  try {
    const { views } = await client.fetchViews();
    return views.find((view) => view.name === name)?.filter ?? null;
  } catch {
    return null;
  }
}

/** lua/common.lua's RANK: an unknown or missing severity counts as info. */
const SEVERITY_RANK: Readonly<Record<string, number>> = { info: 1, success: 2, warning: 3, error: 4, critical: 5 };

/**
 * Whether `item` is in the view whose filter is `filter`, as the hub decides it when it
 * stores the copy (lua/common.lua `view_mask`): all of what is given must hold, i.e. one of
 * `categories` (an item without a category is in none), one of `tags_any`, every one of
 * `tags_all`, and a severity at least `severity_at_least` (info < success < warning <
 * error < critical). An empty list, or an absent part, holds for every item.
 */
export function inView(filter: ViewFilter, item: Pick<InboxItem, "category" | "severity" | "tags">): boolean {
  const categories = filter.categories ?? [];
  if (categories.length > 0 && !categories.includes(item.category ?? "")) return false;
  const tags = new Set(item.tags ?? []);
  const any = filter.tags_any ?? [];
  if (any.length > 0 && !any.some((tag) => tags.has(tag))) return false;
  if (!(filter.tags_all ?? []).every((tag) => tags.has(tag))) return false;
  const least = filter.severity_at_least ?? null;
  return least === null || (SEVERITY_RANK[item.severity] ?? 1) >= (SEVERITY_RANK[least] ?? 1);
}

/**
 * In the lists this hook shows (the default inbox): archived and snoozed copies are not,
 * nor, in a view's list, copies outside the view.
 */
export function matches(item: InboxItem, filter: ListFilter): boolean {
  if (item.archived === true || (item.snoozed_until ?? null) !== null) return false;
  if (filter.status !== "all" && item.status !== filter.status) return false;
  if (filter.category !== null && item.category !== filter.category) return false;
  const view = filter.viewFilter ?? null;
  return view === null || inView(view, item);
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
