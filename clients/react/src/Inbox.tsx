import { useLayoutEffect, useRef, type ReactNode } from "react";
import { useCounts, useNotifications, type NotificationsOptions } from "./hooks.js";
import type { InboxItem, NotifyHubGlobal } from "./notifyhub.js";
import { useNotifyHub } from "./provider.js";

export interface InboxProps extends NotificationsOptions {
  /** A view (tab) name, sent as `?view=` (see `useNotifications`). */
  view?: string;
  /** The content of one item's button (default: title, body and time). */
  renderItem?: (item: InboxItem) => ReactNode;
  /** Called on a click on an item, after it is marked read (e.g. to open its `action_url`). */
  onItemClick?: (item: InboxItem) => void;
  /** Shown when the list is empty (default "No notifications"). */
  empty?: ReactNode;
  className?: string;
}

/**
 * A markdown body as notifyhub.js's `NotifyHub.renderBody` makes it: the safe subset
 * (emphasis, code, lists, http(s) links) through markdown-it and DOMPurify, loaded with
 * notifyhub.js by the provider. Without them (or without notifyhub.js), its text.
 */
export function MarkdownBody({ item }: { item: Pick<InboxItem, "body" | "body_format"> }): ReactNode {
  const ref = useRef<HTMLSpanElement>(null);
  const { body, body_format } = item;
  useLayoutEffect(() => {
    const node = ref.current;
    if (node === null) return;
    const hub = (globalThis as { NotifyHub?: Partial<NotifyHubGlobal> }).NotifyHub;
    if (typeof hub?.renderBody === "function") node.replaceChildren(hub.renderBody({ body, body_format }));
    else node.textContent = body;
  }, [body, body_format]);
  return <span data-nh="body" data-format="markdown" ref={ref} />;
}

function DefaultItem({ item }: { item: InboxItem }): ReactNode {
  const body =
    item.body_format === "markdown" ? <MarkdownBody item={item} /> : <span data-nh="body">{item.body}</span>;
  return (
    <>
      <strong data-nh="title">{item.title}</strong>
      {item.body !== "" && body}
      <time data-nh="time" dateTime={item.created_at}>
        {new Date(item.created_at).toLocaleString()}
      </time>
    </>
  );
}

/**
 * An unstyled inbox: the unread count, the list newest first (a click marks an item
 * read), "Mark all read" and "Load more". Style it through the `data-nh` attributes;
 * items carry `data-id` and `data-status` ("unread" | "read"). With a `view`, the list and
 * "Mark all read" are the view's (the hub marks only the view's copies, and the button is
 * disabled once the view has none unread); the badge counts the whole inbox.
 */
export function Inbox({ view, renderItem, onItemClick, empty, className, ...options }: InboxProps): ReactNode {
  const { status } = useNotifyHub();
  const counts = useCounts();
  const list = useNotifications(view, options);
  const unread = counts?.unread ?? 0;
  // A hub before views sends no `views`: the inbox's count is then the best known.
  const markable = view === undefined ? unread : (counts?.views?.[view]?.unread ?? unread);

  return (
    <section data-nh="inbox" data-connection={status} className={className}>
      <header data-nh="header">
        <span data-nh="badge" data-count={unread} aria-label={`${unread} unread`}>
          {unread}
        </span>
        <button type="button" data-nh="mark-all" disabled={markable === 0} onClick={() => void list.markAllRead().catch(() => {})}>
          Mark all read
        </button>
      </header>
      {list.error !== null && (
        <p data-nh="error" role="alert">
          {list.error.message}
        </p>
      )}
      <ul data-nh="list" aria-busy={list.loading}>
        {list.items.map((item) => (
          <li key={item.id} data-nh="item" data-id={item.id} data-status={item.status} data-severity={item.severity}>
            <button
              type="button"
              onClick={() => {
                if (item.status === "unread") void list.markRead(item.id).catch(() => {});
                onItemClick?.(item);
              }}
            >
              {renderItem === undefined ? <DefaultItem item={item} /> : renderItem(item)}
            </button>
          </li>
        ))}
      </ul>
      {!list.loading && list.items.length === 0 && <p data-nh="empty">{empty ?? "No notifications"}</p>}
      {list.hasMore && (
        <button type="button" data-nh="more" disabled={list.loading} onClick={() => void list.loadMore()}>
          Load more
        </button>
      )}
    </section>
  );
}
