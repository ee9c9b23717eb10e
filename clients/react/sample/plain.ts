// notifyhub.js without React, as a TypeScript page would use it: `tsc --noEmit` checks
// notifyhub.d.ts against this (and the @ts-expect-error lines prove the types bite).
import type {
  ConnectionStatus,
  CategoryPreference,
  Counts,
  InboxItem,
  InboxPage,
  NotificationUpdate,
  NotifyHubClient,
  Preferences,
  PushState,
  PushSubscriptionRecord,
  SnoozePreset,
  StreamCounts,
  Updated,
  ViewCounts,
  ViewList,
} from "../../../src/notifyhub/static/notifyhub.js";

declare const userJwt: string;

export async function plainClient(): Promise<NotifyHubClient> {
  const hub = NotifyHub.connect({
    getStreamToken: async () => {
      const response = await fetch("/my/notifyhub-token");
      return ((await response.json()) as { token: string }).token;
    },
    getAccessToken: () => userJwt,
    user: "default/alice",
    backoff: { baseMs: 500, maxMs: 15_000 },
    sharedWorker: true,
  });

  hub.on("notification", (n) => {
    const title: string = n.title;
    const replaced: string | undefined = n.replaces;
    const url: string | null = n.action_url;
    console.log(title, replaced, url, n.severity === "critical", n.data["order"]);
  });
  hub.on("update", (u: NotificationUpdate) => console.log(u.id, u.status === "read", u.read_at));
  hub.on("delete", ({ id }) => console.log(id));
  const off = hub.on("counts", (c: StreamCounts) => console.log(c.unread, c.seq));
  hub.on("reset", (c) => console.log(c.total));
  hub.on("toast", (n) => console.log(n.display !== "inbox"));
  hub.on("status", (s: ConnectionStatus) => console.log(s === "open"));
  off();

  const page: InboxPage = await hub.list({ status: "unread", limit: 20, cursor: null });
  const first: InboxItem | undefined = page.items[0];
  if (first !== undefined && page.next_cursor !== null) {
    await hub.list({ cursor: page.next_cursor, category: "orders" });
    const read: InboxItem = await hub.markRead(first.id);
    await hub.markRead(first.id, false);
    await hub.markUnread(read.id);
    const seen: Updated = await hub.markSeen([first.id]);
    console.log(seen.updated);
    await hub.delete(first.id);
  }
  await hub.markAllRead();
  await hub.markAllRead({ category: "orders", before: "2025-01-31T00:00:00Z" });

  // Issue 18: archive, snooze, pin, views and their live counts.
  const archived: InboxPage = await hub.list({ status: "archived" });
  await hub.list({ view: "mentions", pinned: true, tagsAny: ["billing"], severityAtLeast: "warning" });
  await hub.list({ tagsAll: ["a", "b"], actor: "bob", createdAfter: new Date(), createdBefore: "2025-01-31T00:00:00Z" });
  const item = archived.items[0];
  if (item !== undefined) {
    const restored: InboxItem = await hub.unarchive(item.id);
    console.log(restored.archived, restored.pinned, restored.snoozed_until, restored.tags.join());
    await hub.archive(item.id);
    await hub.archive(item.id, false);
    await hub.snooze(item.id, 3600);
    await hub.snooze(item.id, new Date(Date.now() + 60_000));
    await hub.snooze(item.id, "2025-01-31T09:00:00.000Z");
    for (const preset of NotifyHub.SNOOZE_PRESETS) {
      const name: SnoozePreset = preset.name;
      await hub.snooze(item.id, name);
      console.log(preset.label, NotifyHub.snoozeTime(name, new Date()).getTime());
    }
    await hub.unsnooze(item.id);
    await hub.pin(item.id);
    await hub.unpin(item.id);
    console.log(NotifyHub.matchesList(item, { status: "unread", view: "mentions" }, { tags_any: ["x"] }));
    console.log(NotifyHub.matchesView(item, { severity_at_least: "error", categories: ["orders"] }));
  }
  console.log((await hub.archiveAll({ category: "orders" })).updated, NotifyHub.snoozeBody("hour"));
  const views: ViewList = await hub.fetchViews();
  for (const view of views.views) console.log(view.name, view.label ?? view.name, view.scope, view.filter.tags_any);
  await hub.saveView("billing", { filter: { tags_any: ["billing"] }, label: "Billing" });
  await hub.deleteView("billing");
  hub.on("notification", (n) => console.log(n.resurfaced === true));
  hub.on("update", (u) => console.log(u.archived, u.pinned, u.snoozed_until));
  hub.on("counts", (c) => {
    const tab: ViewCounts | undefined = c.views["billing"];
    console.log(tab?.unread, tab?.exact);
  });

  const counts: Counts = await hub.fetchCounts();
  console.log(counts.unseen, hub.counts?.seq, hub.mode, hub.status, hub.baseUrl, hub.streamUrl);

  try {
    await hub.get("01JJ0000000000000000000000");
  } catch (error) {
    if (error instanceof NotifyHub.NotifyHubError) console.log(error.status, error.problem?.detail);
  }
  // Issue 37: preferences per category and channel, and Web Push.
  const preferences: Preferences = await hub.fetchPreferences();
  const orders: CategoryPreference | undefined = preferences.categories["orders"];
  console.log(orders?.inbox, orders?.email, orders?.push, preferences.locale);
  await hub.savePreferences({ categories: { orders: { inbox: true, email: false, push: true } } });
  await hub.savePreferences({ locale: null });
  const pushState: PushState = await hub.pushState();
  if (pushState === "disabled") {
    try {
      const registered: PushSubscriptionRecord = await hub.enablePush({ serviceWorkerUrl: "/push-sw.js" });
      console.log(registered.id, registered.endpoint, registered.created_at);
    } catch (error) {
      if (error instanceof NotifyHub.PushError) console.log(error.reason === "denied", error.message);
    }
  }
  await hub.disablePush();
  hub.reconnect();
  hub.close();

  // @ts-expect-error getStreamToken is required
  NotifyHub.connect({ user: "default/alice" });
  // @ts-expect-error not an event
  hub.on("message", () => {});
  // @ts-expect-error an update carries no title
  hub.on("update", (u) => console.log(u.title));
  // @ts-expect-error status is all | unread | read | archived | snoozed
  await hub.list({ status: "deleted" });
  // @ts-expect-error not a preset
  NotifyHub.snoozeTime("someday");
  // @ts-expect-error views have no counts of archived copies
  hub.counts?.views["billing"]?.archived;
  // @ts-expect-error an update carries no tags
  hub.on("update", (u) => console.log(u.tags));
  // @ts-expect-error counts are read-only to callers
  hub.counts = null;
  // @ts-expect-error not a push state
  console.log((await hub.pushState()) === "granted");
  // @ts-expect-error a preference is a boolean per channel
  await hub.savePreferences({ categories: { orders: { email: "yes" } } });
  // @ts-expect-error the REST counts have no seq
  (await hub.fetchCounts()).seq;
  return hub;
}
