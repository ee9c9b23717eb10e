import { useCallback, useEffect, useRef, useState } from "react";
import {
  fetchPage,
  fetchViewFilter,
  received,
  updated,
  upsert,
  without,
  type ListFilter,
  type StatusFilter,
} from "./list.js";
import type { Counts, InboxItem, NotifyHubClient, ReadAllFilter } from "./notifyhub.js";
import { useNotifyHub } from "./provider.js";

function asError(failure: unknown): Error {
  return failure instanceof Error ? failure : new Error(String(failure));
}

export interface NotificationsOptions {
  /** Which copies to list (default "all"). */
  status?: StatusFilter;
  category?: string;
  /** Page size, 1 to 100 (default 20). */
  limit?: number;
}

export interface NotificationsResult {
  /** Newest first: the pages loaded so far, kept current by the stream. */
  items: InboxItem[];
  loading: boolean;
  error: Error | null;
  /** More pages on the hub: call `loadMore()`. */
  hasMore: boolean;
  loadMore(): Promise<void>;
  /** Load the first page again (also done on the stream's `reset`). */
  refresh(): Promise<void>;
  markRead(id: string): Promise<void>;
  markUnread(id: string): Promise<void>;
  /**
   * Every unread copy of this list: of its view (only the copies the view holds), and of
   * `options.category`, if given; the stream updates the list and the counts.
   */
  markAllRead(): Promise<void>;
  remove(id: string): Promise<void>;
}

interface ListState {
  items: InboxItem[];
  loading: boolean;
  error: Error | null;
  hasMore: boolean;
}

/** What the effect that owns one list hands to the callbacks below. */
interface ListSession {
  client: NotifyHubClient;
  /** The hub's filter of "mark all read": the list's view and category. */
  readAll: ReadAllFilter;
  filter: ListFilter;
  load(reset: boolean): Promise<void>;
  apply(change: (items: InboxItem[]) => InboxItem[]): void;
}

const EMPTY: ListState = { items: [], loading: false, error: null, hasMore: false };

/**
 * The user's notifications with live updates: new ones appear, read state and deletions
 * follow every tab and device. `view` names one of the user's views (tabs): its pages are
 * the hub's `?view=` list, and as the hub's items do not say which views they are in, the
 * view's filter is fetched once (`GET /v1/me/views`) and a live notification (or a thread
 * an activity joined) is added only if it passes it (`inView`), as the hub decides. When
 * the filter cannot be had (a hub without views, a view the user does not have), such a
 * live item reloads the first page instead of being added.
 */
export function useNotifications(view?: string, options: NotificationsOptions = {}): NotificationsResult {
  const { client } = useNotifyHub();
  const status = options.status ?? "all";
  const category = options.category ?? null;
  const limit = options.limit ?? 20;
  const [state, setState] = useState<ListState>(EMPTY);
  const session = useRef<ListSession | null>(null);
  const shown = useRef<InboxItem[]>(EMPTY.items);
  shown.current = state.items;

  useEffect(() => {
    setState(EMPTY);
    if (client === null) return undefined;
    // `filter` places live items: with a view, only once its filter is known (`placed`);
    // until then, or if it cannot be known, a live item reloads the first page. The
    // hub's pages are the view's already: `paged` does not check the view again.
    const filter: ListFilter = { status, category, viewFilter: null };
    const paged: ListFilter = { status, category };
    let placed = view === undefined;
    let closed = false;
    let cursor: string | null = null;
    let current: Promise<void> | null = null;
    let reloadAfter = false;
    const queued: Array<(items: InboxItem[]) => InboxItem[]> = [];
    // Never fails: the first load waits for it, so events queued meanwhile find it known.
    const definition: Promise<void> =
      view === undefined
        ? Promise.resolve()
        : fetchViewFilter(client, view).then((found) => {
            if (found === null) return;
            filter.viewFilter = found;
            placed = true;
          });

    // While a page loads, events wait: the page may predate them, so they go on top of it.
    const apply = (change: (items: InboxItem[]) => InboxItem[]): void => {
      if (closed) return;
      if (current !== null) queued.push(change);
      else setState((s) => ({ ...s, items: change(s.items) }));
    };

    const load = (reset: boolean): Promise<void> => {
      if (current !== null) {
        reloadAfter ||= reset;
        return current;
      }
      if (!reset && cursor === null) return Promise.resolve();
      setState((s) => ({ ...s, loading: true, error: null }));
      current = (async () => {
        try {
          const page = await fetchPage(client, { view, status, category, limit, cursor: reset ? null : cursor });
          await definition;
          if (closed) return;
          cursor = page.next_cursor;
          setState((s) => ({
            ...s,
            items: page.items.reduce((items, item) => upsert(items, item, paged), reset ? [] : s.items),
            hasMore: page.next_cursor !== null,
          }));
        } catch (failure) {
          if (!closed) setState((s) => ({ ...s, error: asError(failure) }));
        } finally {
          current = null;
          if (!closed) {
            setState((s) => ({ ...s, loading: false }));
            for (const change of queued.splice(0)) apply(change);
            if (reloadAfter) {
              reloadAfter = false;
              void load(true);
            }
          }
        }
      })();
      return current;
    };

    const offs = [
      client.on("notification", (event) => {
        if (placed) apply((items) => received(items, event, filter));
        else void load(true); // in the view or not: the hub's first page says
      }),
      client.on("update", (update) => {
        // A thread's whole item may have moved into or out of the view (the activity's
        // category, tags and severity are now the item's); a state change cannot move it.
        if (update.thread !== undefined && !placed) {
          void load(true);
          return;
        }
        apply((items) => updated(items, update, filter));
        // A copy not shown may have come into the list (unarchived, unsnoozed, or marked
        // unread elsewhere while this lists unread ones, or the reverse): fetch it, unless
        // it is older than every loaded one while older pages are unloaded (they bring it).
        const loaded = shown.current;
        if (
          update.thread !== undefined || // the whole item: placed above
          loaded.some((item) => item.id === update.id) ||
          update.archived === true ||
          (update.snoozed_until ?? null) !== null ||
          (filter.status !== "all" && update.status !== filter.status) ||
          (cursor !== null && loaded.every((item) => item.id > update.id))
        ) {
          return;
        }
        if (!placed) {
          if (filter.status !== "all") void load(true);
          return;
        }
        client.get(update.id).then(
          (item) => apply((items) => upsert(items, item, filter)),
          () => {}, // deleted meanwhile: nothing to show
        );
      }),
      client.on("delete", ({ id }) => apply((items) => without(items, id))),
      client.on("reset", () => void load(true)),
    ];
    const readAll: ReadAllFilter = {
      ...(view === undefined ? {} : { view }),
      ...(category === null ? {} : { category }),
    };
    session.current = { client, readAll, filter, load, apply };
    void load(true);
    return () => {
      closed = true;
      session.current = null;
      for (const off of offs) off();
    };
  }, [client, view, status, category, limit]);

  const loadMore = useCallback(async () => session.current?.load(false), []);
  const refresh = useCallback(async () => session.current?.load(true), []);
  const mark = useCallback(async (id: string, read: boolean) => {
    const s = session.current;
    if (s === null) return;
    const item = await s.client.markRead(id, read);
    s.apply((items) => upsert(items, item, s.filter));
  }, []);
  const markRead = useCallback((id: string) => mark(id, true), [mark]);
  const markUnread = useCallback((id: string) => mark(id, false), [mark]);
  const markAllRead = useCallback(async () => {
    const s = session.current;
    if (s !== null) await s.client.markAllRead(s.readAll);
  }, []);
  const remove = useCallback(async (id: string) => {
    const s = session.current;
    if (s === null) return;
    await s.client.delete(id);
    s.apply((items) => without(items, id));
  }, []);

  return { ...state, loadMore, refresh, markRead, markUnread, markAllRead, remove };
}

/**
 * The user's counts ({unread, unseen, total}), kept current by the stream; null until
 * known. The stream's counts carry `seq` too.
 */
export function useCounts(): Counts | null {
  const { client } = useNotifyHub();
  const [counts, setCounts] = useState<Counts | null>(client?.counts ?? null);

  useEffect(() => {
    setCounts(client?.counts ?? null);
    if (client === null) return undefined;
    let live = client.counts !== null;
    let active = true;
    const onCounts = (next: Counts): void => {
      live = true;
      setCounts(next);
    };
    const offs = [client.on("counts", onCounts), client.on("reset", onCounts)];
    if (!live) {
      client.fetchCounts().then(
        (fetched) => active && !live && setCounts(fetched), // the stream's may have overtaken it
        () => {},
      );
    }
    return () => {
      active = false;
      for (const off of offs) off();
    };
  }, [client]);

  return counts;
}

export interface NotificationResult {
  /** null while loading, when missing, and once deleted. */
  notification: InboxItem | null;
  loading: boolean;
  /** The hub's answer to the fetch (a NotifyHubError with status 404 when it is unknown). */
  error: Error | null;
  deleted: boolean;
}

/**
 * One notification by id, kept current by the stream: its state (read, seen, archived,
 * pinned, snoozed, a completed action), a thread's whole item when an activity joins it,
 * and a snoozed copy coming back.
 */
export function useNotification(id: string): NotificationResult {
  const { client } = useNotifyHub();
  const [result, setResult] = useState<NotificationResult>({
    notification: null,
    loading: true,
    error: null,
    deleted: false,
  });

  useEffect(() => {
    setResult({ notification: null, loading: client !== null, error: null, deleted: false });
    if (client === null) return undefined;
    let active = true;
    const set = (change: (r: NotificationResult) => NotificationResult): void => {
      if (active) setResult(change);
    };
    const offs = [
      client.on("update", (update) => {
        if (update.id !== id) return;
        // The state fields, or with `thread` set the whole item: both replace what they carry.
        set((r) => (r.notification === null ? r : { ...r, notification: { ...r.notification, ...update } }));
      }),
      client.on("delete", (event) => {
        if (event.id === id) set(() => ({ notification: null, loading: false, error: null, deleted: true }));
      }),
      client.on("notification", (event) => {
        if (event.replaces === id) set(() => ({ notification: null, loading: false, error: null, deleted: true }));
        // A snoozed copy whose time came: unread again, no longer snoozed.
        else if (event.id === id) set(() => ({ notification: event, loading: false, error: null, deleted: false }));
      }),
    ];
    client.get(id).then(
      (notification) => set((r) => (r.deleted ? r : { notification, loading: false, error: null, deleted: false })),
      (failure: unknown) => set((r) => ({ ...r, loading: false, error: asError(failure) })),
    );
    return () => {
      active = false;
      for (const off of offs) off();
    };
  }, [client, id]);

  return result;
}
