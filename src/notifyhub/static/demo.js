/*
 * demo.js - the demo inbox on top of notifyhub.js. The user token comes from the URL
 * fragment (#token=...) or the paste box and stays in sessionStorage; the page asks the
 * hub for stream tokens itself (a real app's backend would). Everything user-supplied is
 * rendered with textContent, never as HTML. Tabs: All (the default inbox), one per view
 * with its live counts, Snoozed and Archived; pinned rows sit in their own section on top.
 */
/* global NotifyHub */
"use strict";

(function () {
  const TOKEN_KEY = "notifyhub.demo.token";
  const PAGE_SIZE = 10;
  const TOAST_MS = { critical: 15000, error: 10000 };
  const TOAST_DEFAULT_MS = 7000;
  const SEVERITIES = ["info", "success", "warning", "error", "critical"];
  const ICONS = {
    info: "M12 2a10 10 0 1 0 0 20 10 10 0 0 0 0-20Zm1 15h-2v-6h2v6Zm0-8h-2V7h2v2Z",
    success: "M12 2a10 10 0 1 0 0 20 10 10 0 0 0 0-20Zm-1.5 14.5-4-4 1.4-1.4 2.6 2.6 5.6-5.6 1.4 1.4-7 7Z",
    warning: "M1 21h22L12 2 1 21Zm12-3h-2v-2h2v2Zm0-4h-2v-4h2v4Z",
    error: "M12 2a10 10 0 1 0 0 20 10 10 0 0 0 0-20Zm1 15h-2v-2h2v2Zm0-4h-2V7h2v6Z",
    critical: "M15.7 2H8.3L3 7.3v7.4L8.3 22h7.4l5.3-5.3V7.3L15.7 2ZM13 17h-2v-2h2v2Zm0-4h-2V7h2v6Z",
  };

  const $ = (selector, root = document) => root.querySelector(selector);

  /** Test and console handle: the client, toasts shown here, stream-token callback calls. */
  const demo = { client: null, toasts: [], tokenCalls: 0, streamTokens: [], ready: false };
  window.notifyhubDemo = demo;

  /** What the page shows: one tab (All, a view, Snoozed or Archived) and its rows. */
  const shown = {
    tab: "all", // "all" | "view:<name>" | "snoozed" | "archived"
    filter: "all", // the read filter of the inbox tabs: "all" | "unread"
    views: [], // GET /v1/me/views: [{name, label, filter, ...}]
    countedViews: null, // the view names the last counts had
    cursor: null,
    loading: false,
    generation: 0, // one per list (re)load: late answers for an older list are dropped
    queued: [],
    rows: new Map(), // id -> <li>
    items: new Map(), // id -> notification
    touched: new Map(), // id -> events seen for it, so a late fetch loses to a newer event
  };
  // The demo's words in the browser's language (notifyhub.js STRINGS: English, Portuguese).
  const words = NotifyHub.strings();
  const t = words.text;

  // The state fields an `update` event carries (archived, pinned and snooze since issue 18).
  const STATE_FIELDS = ["status", "seen", "read_at", "archived", "pinned", "snoozed_until", "completed"];

  // ---- token -------------------------------------------------------------------------

  function takeToken() {
    const fragment = new URLSearchParams(location.hash.slice(1));
    const fromUrl = fragment.get("token");
    if (fromUrl) {
      sessionStorage.setItem(TOKEN_KEY, fromUrl);
      history.replaceState(null, "", location.pathname + location.search); // keep it out of history
    }
    return sessionStorage.getItem(TOKEN_KEY);
  }

  function claimsOf(jwt) {
    try {
      const part = jwt.split(".")[1].replace(/-/g, "+").replace(/_/g, "/");
      return JSON.parse(atob(part.padEnd(part.length + ((4 - (part.length % 4)) % 4), "=")));
    } catch (error) {
      return null;
    }
  }

  function showSignIn(message) {
    $("[data-testid=inbox]").hidden = true;
    $("[data-testid=signout]").hidden = true;
    $("[data-testid=settings-toggle]").hidden = true;
    $("[data-testid=settings]").hidden = true;
    $("[data-testid=user]").hidden = true;
    const form = $("[data-testid=signin]");
    form.hidden = false;
    const error = $(".signin-error", form);
    error.textContent = message || "";
    error.hidden = !message;
  }

  function signOut(message) {
    sessionStorage.removeItem(TOKEN_KEY);
    if (demo.client !== null) demo.client.close();
    demo.client = null;
    showSignIn(message);
  }

  async function streamToken(jwt) {
    demo.tokenCalls += 1;
    const response = await fetch("/v1/me/stream-tokens", {
      method: "POST",
      headers: { Authorization: `Bearer ${jwt}` },
    });
    if (response.status === 401) {
      signOut("The hub refused this token (expired or wrong secret). Paste a fresh one.");
      throw new Error("user token refused");
    }
    if (!response.ok) throw new Error(`stream token: HTTP ${response.status}`);
    const { token } = await response.json();
    demo.streamTokens.push(token);
    return token;
  }

  // ---- small DOM helpers ---------------------------------------------------------------

  function el(tag, className, text) {
    const node = document.createElement(tag);
    if (className) node.className = className;
    if (text !== undefined && text !== null) node.textContent = text;
    return node;
  }

  function icon(severity) {
    const box = el("span", "icon");
    const svg = document.createElementNS("http://www.w3.org/2000/svg", "svg");
    svg.setAttribute("viewBox", "0 0 24 24");
    svg.setAttribute("aria-hidden", "true");
    const path = document.createElementNS("http://www.w3.org/2000/svg", "path");
    path.setAttribute("d", ICONS[severity] || ICONS.info);
    svg.append(path);
    box.append(svg);
    return box;
  }

  /** An actor's face: their avatar, else their initials (also when the image fails). */
  function avatar(actor) {
    const name = actor.name || actor.id;
    const box = el("span", "avatar");
    box.title = name;
    const initials = () => {
      const words = name.trim().split(/\s+/).filter(Boolean);
      box.replaceChildren(words.slice(0, 2).map((w) => [...w][0].toUpperCase()).join(""));
    };
    const url = actor.avatar_url && /^(https:|data:image\/(png|jpeg|gif|webp);)/.test(actor.avatar_url)
      ? actor.avatar_url
      : null;
    if (url === null) {
      initials();
      return box;
    }
    const img = document.createElement("img");
    img.alt = name;
    img.referrerPolicy = "no-referrer";
    img.addEventListener("error", initials);
    img.src = url;
    box.append(img);
    return box;
  }

  /** A thread's actors as stacked avatars: the latest first, five at most, then "+n". */
  function faces(actors) {
    const stack = el("span", "faces");
    stack.dataset.testid = "faces";
    for (const actor of actors.slice(0, 5)) stack.append(avatar(actor));
    if (actors.length > 5) stack.append(el("span", "avatar more", `+${actors.length - 5}`));
    return stack;
  }

  function severityOf(item) {
    return SEVERITIES.includes(item.severity) ? item.severity : "info";
  }

  function ago(iso) {
    const seconds = Math.max(0, (Date.now() - Date.parse(iso)) / 1000);
    if (seconds < 45) return "just now";
    if (seconds < 3600) return `${Math.round(seconds / 60)} min ago`;
    if (seconds < 86400) return `${Math.round(seconds / 3600)} h ago`;
    return new Date(iso).toLocaleDateString(undefined, { month: "short", day: "numeric" });
  }

  function safeUrl(url) {
    try {
      const parsed = new URL(url, location.href);
      return parsed.protocol === "https:" || parsed.protocol === "http:" ? parsed.href : null;
    } catch (error) {
      return null;
    }
  }

  function button(label, action, className) {
    const node = el("button", className || "", label);
    node.type = "button";
    node.dataset.action = action;
    return node;
  }

  // ---- which list ----------------------------------------------------------------------

  /** The inbox tabs (All and the views) list the default inbox: read filter, pinned section. */
  function inboxTab() {
    return shown.tab === "all" || shown.tab.startsWith("view:");
  }

  function viewName() {
    return shown.tab.startsWith("view:") ? shown.tab.slice(5) : null;
  }

  /** The `list()` options of the shown tab. */
  function query() {
    if (!inboxTab()) return { status: shown.tab };
    const name = viewName();
    return name === null ? { status: shown.filter } : { status: shown.filter, view: name };
  }

  function viewFilter() {
    const found = shown.views.find((candidate) => candidate.name === viewName());
    return found ? found.filter : null;
  }

  function belongs(item) {
    return NotifyHub.matchesList(item, query(), viewFilter());
  }

  function listFor(item) {
    return $(inboxTab() && item.pinned ? "[data-testid=pinned-list]" : "[data-testid=list]");
  }

  // ---- the rows ------------------------------------------------------------------------

  function untilText(iso) {
    const options = { weekday: "short", hour: "2-digit", minute: "2-digit" };
    return new Date(iso).toLocaleString(undefined, options);
  }

  function meta(item) {
    const row = el("div", "meta");
    if (item.pinned) row.append(el("span", "chip pin", t("chip.pinned")));
    if (item.resurfaced) row.append(el("span", "chip back", t("chip.resurfaced")));
    if (item.snoozed_until) {
      row.append(el("span", "chip until", t("chip.until", { time: untilText(item.snoozed_until) })));
    }
    if (item.category) row.append(el("span", "chip", item.category));
    for (const tag of item.tags || []) row.append(el("span", "chip hash", `#${tag}`));
    if (item.source) row.append(el("span", "", t("chip.from", { source: item.source })));
    const url = item.action_url ? safeUrl(item.action_url) : null;
    if (url !== null) {
      const link = el("a", "", t("link.open"));
      link.href = url;
      link.target = "_blank";
      link.rel = "noopener noreferrer";
      row.append(link);
    }
    return row;
  }

  function actionsFor(item) {
    const unread = item.status === "unread";
    const actions = el("div", "actions");
    actions.append(button(t(unread ? "action.read" : "action.unread"), "toggle-read"));
    if (!item.archived) actions.append(button(t(item.pinned ? "action.unpin" : "action.pin"), "pin"));
    if (item.snoozed_until) {
      actions.append(button(t("action.unsnooze"), "unsnooze"));
    } else if (!item.archived) {
      const wrap = el("span", "snooze-wrap");
      const open = button(t("action.snooze"), "snooze");
      open.setAttribute("aria-haspopup", "menu");
      open.setAttribute("aria-expanded", "false");
      wrap.append(open);
      actions.append(wrap);
    }
    actions.append(button(t(item.archived ? "action.unarchive" : "action.archive"), "archive"));
    actions.append(button(t("action.delete"), "delete", "danger"));
    return actions;
  }

  /** The notification's own buttons: one choice, done once (then shown done, in every tab). */
  function choicesFor(item) {
    const row = el("div", "choices");
    row.dataset.testid = "choices";
    for (const action of item.actions) {
      const done = item.completed !== null && item.completed.action === action.id;
      const node = button(done ? `✓ ${action.label}` : action.label, "complete", `choice ${action.style}`);
      node.dataset.choice = action.id;
      node.disabled = item.completed !== null;
      if (done) {
        node.classList.add("done");
        node.title = t("done", { time: new Date(item.completed.completed_at).toLocaleString() });
      }
      row.append(node);
    }
    return row;
  }

  function rowFor(item) {
    const severity = severityOf(item);
    const unread = item.status === "unread";
    const li = el("li", `item sev-${severity}${unread ? " unread" : ""}${item.pinned ? " pinned" : ""}`);
    li.dataset.testid = "item";
    li.dataset.id = item.id;
    li.dataset.status = item.status;
    li.dataset.severity = severity;
    li.dataset.pinned = String(Boolean(item.pinned));
    const main = el("div", "main");
    const titleRow = el("div", "title-row");
    if (item.thread) titleRow.append(faces(item.thread.actors));
    else if (item.actor && item.actor.type === "user") titleRow.append(avatar(item.actor));
    titleRow.append(el("span", "title", item.title));
    if (item.thread && item.thread.activity_count > 1) {
      const count = el("span", "chip count", `${item.thread.activity_count}`);
      count.dataset.testid = "activity-count";
      count.title = t("thread.count", { n: item.thread.activity_count });
      titleRow.append(count);
    }
    if (severity === "critical") titleRow.append(el("span", "tag", "critical"));
    main.append(titleRow);
    if (item.body) {
      const body = el("div", `body ${item.body_format === "markdown" ? "markdown" : "text"}`);
      body.append(NotifyHub.renderBody(item));
      main.append(body);
    }
    if (item.actions && item.actions.length) main.append(choicesFor({ completed: null, ...item }));
    main.append(meta(item));
    const side = el("div", "side");
    const time = el("time", "time", ago(item.created_at));
    time.dateTime = item.created_at;
    time.title = new Date(item.created_at).toLocaleString();
    side.append(time, actionsFor(item));
    li.append(icon(severity), main, side);
    return li;
  }

  /** Put a row in its list: at the top (a new or resurfaced copy) or in id order. */
  function place(row, item, top) {
    const list = listFor(item);
    if (top) {
      list.prepend(row);
      return;
    }
    const after = [...list.children].find((other) => other.dataset.id < item.id);
    list.insertBefore(row, after === undefined ? null : after);
  }

  /** Show `item` as it now is: a new row, a refreshed one, or none if it left this list. */
  function upsert(item, { fresh = false, top = false } = {}) {
    if (!belongs(item)) {
      remove(item.id);
      return;
    }
    const old = shown.rows.get(item.id);
    shown.items.set(item.id, item);
    const row = rowFor(item);
    if (fresh) row.classList.add("fresh");
    if (old && !top && old.parentNode === listFor(item)) {
      old.replaceWith(row);
    } else {
      if (old) old.remove();
      place(row, item, top);
    }
    shown.rows.set(item.id, row);
    renderEmpty();
  }

  function remove(id) {
    const row = shown.rows.get(id);
    if (row) row.remove();
    shown.rows.delete(id);
    shown.items.delete(id);
    renderEmpty();
  }

  function renderEmpty() {
    const pinned = $("[data-testid=pinned-list]").children.length;
    $("[data-testid=pinned]").hidden = pinned === 0;
    const empty = shown.rows.size === 0 && !shown.loading;
    $("[data-testid=empty]").hidden = !empty;
    $("[data-testid=more]").hidden = shown.cursor === null;
  }

  function clearRows() {
    $("[data-testid=list]").replaceChildren();
    $("[data-testid=pinned-list]").replaceChildren();
    shown.rows.clear();
    shown.items.clear();
  }

  async function loadPage(reset) {
    const client = demo.client;
    if (reset) shown.generation += 1;
    const generation = shown.generation;
    shown.loading = true;
    try {
      const page = await client.list({
        ...query(),
        limit: PAGE_SIZE,
        cursor: reset ? null : shown.cursor,
      });
      if (client !== demo.client || generation !== shown.generation) return;
      if (reset) clearRows();
      shown.cursor = page.next_cursor;
      for (const item of page.items) if (!shown.rows.has(item.id)) appendRow(item);
    } finally {
      if (generation === shown.generation) {
        shown.loading = false;
        for (const [event, data] of shown.queued.splice(0)) apply(event, data);
        renderEmpty();
      }
    }
  }

  /** A page's rows come in the hub's order (pinned first, then newest). */
  function appendRow(item) {
    const row = rowFor(item);
    listFor(item).append(row);
    shown.rows.set(item.id, row);
    shown.items.set(item.id, item);
  }

  // ---- live events ---------------------------------------------------------------------

  function touch(id) {
    shown.touched.set(id, (shown.touched.get(id) || 0) + 1);
  }

  function apply(event, data) {
    if (shown.loading) {
      shown.queued.push([event, data]); // the page being fetched may predate it: replay after
      return;
    }
    touch(data.id);
    if (event === "notification") {
      if (data.replaces) remove(data.replaces);
      upsert(data, { fresh: true, top: true }); // new, or resurfaced from a snooze: on top
      if (belongs(data)) ringBell();
    } else if (event === "update" && data.thread) {
      upsert(data, { fresh: true, top: true }); // an activity joined the thread: the whole item
      if (belongs(data)) ringBell();
    } else if (event === "update") {
      const item = shown.items.get(data.id);
      if (item) upsert(withState(item, data));
      else if (NotifyHub.matchesList({ tags: [], ...data }, { status: query().status })) fetchInto(data.id);
    } else if (event === "delete") {
      remove(data.id);
    }
  }

  function withState(item, update) {
    const next = { ...item };
    for (const field of STATE_FIELDS) if (field in update) next[field] = update[field];
    if ("snoozed_until" in update) delete next.resurfaced;
    return next;
  }

  /**
   * A copy not shown here changed so that it may belong (unarchived, unsnoozed or unread
   * elsewhere): fetch it, and show it unless a newer event about it came meanwhile.
   */
  function fetchInto(id) {
    const client = demo.client;
    const generation = shown.generation;
    const mark = shown.touched.get(id);
    client.get(id).then(
      (item) => {
        if (client !== demo.client || generation !== shown.generation) return;
        if (shown.touched.get(id) === mark && !beyondLoaded(item)) upsert(item);
      },
      () => {}, // deleted meanwhile: nothing to show
    );
  }

  /** Older than every loaded row while older pages are unloaded: "Load older" brings it. */
  function beyondLoaded(item) {
    if (shown.cursor === null) return false;
    return [...shown.rows.keys()].every((id) => id > item.id);
  }

  // ---- counts and tabs -----------------------------------------------------------------

  function setCount(node, counts) {
    const unread = counts ? counts.unread : 0;
    node.textContent = unread > 99 ? "99+" : String(unread);
    node.hidden = !counts || unread === 0;
    node.dataset.unread = String(unread);
    node.dataset.total = String(counts ? counts.total : 0);
    node.dataset.exact = String(!counts || counts.exact !== false);
  }

  /** What "Mark all read" acts on: the view's unread in a view tab, else the inbox's. */
  function tabUnread(counts) {
    const name = viewName();
    if (name === null) return counts.unread;
    const view = (counts.views || {})[name];
    return view ? view.unread : 0;
  }

  function renderCounts(counts) {
    if (!counts) return;
    const badge = $("[data-testid=badge]");
    badge.textContent = counts.unread > 99 ? "99+" : String(counts.unread);
    badge.hidden = counts.unread === 0;
    const summary = counts.total === 1 ? "summary.one" : "summary.other";
    $("[data-testid=summary]").textContent = t(summary, { unread: counts.unread, total: counts.total });
    document.title = counts.unread ? `(${counts.unread}) notifyhub inbox` : "notifyhub inbox";
    $("[data-testid=mark-all]").disabled = tabUnread(counts) === 0;
    $("[data-testid=archive-all]").disabled = counts.total === 0;
    const views = counts.views || {};
    for (const tab of document.querySelectorAll("[data-testid=tab]")) {
      const count = $("[data-testid=tab-count]", tab);
      if (tab.dataset.tab === "all") setCount(count, counts);
      else if (tab.dataset.view) setCount(count, views[tab.dataset.view]);
    }
    const names = Object.keys(views).sort().join("\n");
    if (names !== shown.countedViews) {
      shown.countedViews = names; // a view was added or removed: fetch the list of views once
      const known = new Set(shown.views.map((found) => found.name));
      if (Object.keys(views).some((name) => !known.has(name))) loadViews();
    }
  }

  function tabButton(tab, label, counted) {
    const node = el("button", "tab");
    node.type = "button";
    node.setAttribute("role", "tab");
    node.dataset.testid = "tab";
    node.dataset.tab = tab;
    node.setAttribute("aria-selected", String(tab === shown.tab));
    node.append(el("span", "tab-label", label));
    if (counted) {
      const count = el("span", "count");
      count.dataset.testid = "tab-count";
      count.hidden = true;
      node.append(count);
    }
    return node;
  }

  function renderTabs() {
    const tabs = [tabButton("all", t("tab.all"), true)];
    for (const found of shown.views) {
      const tab = tabButton(`view:${found.name}`, found.label || found.name, true);
      tab.dataset.view = found.name;
      tabs.push(tab);
    }
    tabs.push(tabButton("snoozed", t("tab.snoozed"), false), tabButton("archived", t("tab.archived"), false));
    $("[data-testid=tabs]").replaceChildren(...tabs);
    $("[data-testid=delete-view]").hidden = !personalView();
    renderCounts(demo.client && demo.client.counts);
  }

  /** The tenant's and the user's views; a hub without views (before issue 18) has none. */
  async function loadViews() {
    const client = demo.client;
    let views = [];
    let supported = true;
    try {
      views = (await client.fetchViews()).views || [];
    } catch (error) {
      views = [];
      supported = false; // a hub without views: no "+" to add one
    }
    if (client !== demo.client) return;
    $("[data-testid=add-view]").hidden = !supported;
    shown.views = views;
    const gone = viewName() !== null && !views.some((found) => found.name === viewName());
    if (gone) shown.tab = "all"; // the shown view was deleted
    renderTabs();
    if (gone) await setTab("all");
  }

  function renderStatus(status) {
    const pill = $("[data-testid=status]");
    pill.dataset.status = status;
    const text = { open: "live", connecting: "connecting…", reconnecting: "reconnecting…" };
    $(".conn-text", pill).textContent = text[status] || "offline";
  }

  function ringBell() {
    const bell = $("[data-testid=bell]");
    bell.classList.remove("ring");
    void bell.offsetWidth; // restart the animation
    bell.classList.add("ring");
  }

  // ---- toasts --------------------------------------------------------------------------

  function dismiss(toast) {
    toast.classList.add("leaving");
    setTimeout(() => toast.remove(), 200);
  }

  function showToast(item) {
    demo.toasts.push(item.id);
    const severity = severityOf(item);
    const toast = el("div", `toast sev-${severity}`);
    toast.dataset.testid = "toast";
    toast.dataset.id = item.id;
    toast.setAttribute("role", severity === "critical" || severity === "error" ? "alert" : "status");
    const text = el("div", "main");
    text.append(el("div", "title", item.title));
    if (item.body) text.append(el("p", "body", item.body));
    const close = el("button", "close", "×");
    close.type = "button";
    close.setAttribute("aria-label", t("toast.dismiss"));
    close.addEventListener("click", () => dismiss(toast));
    toast.append(icon(severity), text, close);
    $("[data-testid=toasts]").append(toast);
    setTimeout(() => dismiss(toast), TOAST_MS[severity] || TOAST_DEFAULT_MS);
  }

  /** An error the user should see (a 409 for a 21st pin, say); not a notification toast. */
  function notice(message) {
    const toast = el("div", "toast sev-error");
    toast.dataset.testid = "notice";
    toast.setAttribute("role", "alert");
    const text = el("div", "main");
    text.append(el("div", "title", message));
    toast.append(icon("error"), text);
    $("[data-testid=toasts]").append(toast);
    setTimeout(() => dismiss(toast), TOAST_DEFAULT_MS);
  }

  // ---- the snooze menu -----------------------------------------------------------------

  function closeMenus() {
    for (const menu of document.querySelectorAll("[data-testid=snooze-menu]")) {
      menu.closest(".item").classList.remove("menu-open");
      menu.previousElementSibling.setAttribute("aria-expanded", "false");
      menu.remove();
    }
  }

  /** The presets with the local time each one ends, computed when the menu opens. */
  function openMenu(opener) {
    const wasOpen = opener.getAttribute("aria-expanded") === "true";
    closeMenus();
    if (wasOpen) return;
    const menu = el("div", "menu");
    menu.dataset.testid = "snooze-menu";
    menu.setAttribute("role", "menu");
    const now = new Date();
    for (const preset of NotifyHub.SNOOZE_PRESETS) {
      const choice = button("", "snooze-preset");
      choice.setAttribute("role", "menuitem");
      choice.dataset.preset = preset.name;
      const until = NotifyHub.snoozeTime(preset.name, now);
      choice.append(el("span", "", t(`snooze.${preset.name}`)), el("span", "when", untilText(until)));
      menu.append(choice);
    }
    opener.after(menu);
    opener.setAttribute("aria-expanded", "true");
    opener.closest(".item").classList.add("menu-open");
    menu.querySelector("button").focus();
  }

  // ---- settings: Web Push and the category x channel matrix ---------------------------

  const CHANNELS = ["inbox", "email", "push"];
  const CHANNEL_LABELS = { inbox: "Inbox", email: "E-mail", push: "Push" };
  const PUSH_TEXT = {
    enabled: "on in this browser",
    disabled: "off",
    denied: "blocked in this browser's site settings",
    unsupported: "not supported here",
    working: "…",
  };
  /** The preferences as the hub last answered, and categories added here but not yet set. */
  const settings = { preferences: null, added: new Set() };
  demo.push = { state: "unknown", error: null, subscription: null };

  /** The channels the hub answers with (a hub without e-mail has none), else all three. */
  function channelsOf(categories) {
    const found = new Set(Object.values(categories).flatMap((pref) => Object.keys(pref)));
    if (found.size === 0) return CHANNELS;
    return [...CHANNELS.filter((name) => found.has(name)), ...[...found].filter((n) => !CHANNELS.includes(n))];
  }

  /** The user's categories, those of the notifications shown and those added here. */
  function matrixCategories() {
    const names = new Set([...Object.keys(settings.preferences.categories), ...settings.added]);
    for (const item of shown.items.values()) if (item.category) names.add(item.category);
    return [...names].sort();
  }

  function renderMatrix() {
    if (settings.preferences === null) return;
    const { categories } = settings.preferences;
    const channels = channelsOf(categories);
    const head = el("tr");
    head.append(el("th", "", "Category"), ...channels.map((name) => el("th", "", CHANNEL_LABELS[name] || name)));
    for (const node of head.children) node.scope = "col";
    const rows = matrixCategories().map((category) => {
      const row = el("tr");
      row.dataset.testid = "matrix-row";
      row.dataset.category = category;
      row.append(el("td", "", category));
      for (const channel of channels) {
        const box = el("input");
        box.type = "checkbox";
        box.dataset.channel = channel;
        box.checked = (categories[category] || {})[channel] !== false; // missing: on
        box.setAttribute("aria-label", `${category}: ${CHANNEL_LABELS[channel] || channel}`);
        const cell = el("td");
        cell.append(box);
        row.append(cell);
      }
      return row;
    });
    $("[data-testid=matrix] thead").replaceChildren(head);
    $("[data-testid=matrix] tbody").replaceChildren(...rows);
  }

  function matrixError(message) {
    const node = $("[data-testid=matrix-error]");
    node.textContent = message || "";
    node.hidden = !message;
  }

  async function loadPreferences() {
    try {
      settings.preferences = await demo.client.fetchPreferences();
      matrixError(null);
    } catch (error) {
      matrixError(`Could not load your preferences: ${error.message}`);
    }
    renderMatrix();
  }

  /**
   * One checkbox: PUT every category the hub has (as it answered) with this one changed;
   * a channel left out of a category the hub does not have yet stays on.
   */
  async function toggleChannel(box) {
    const category = box.closest("[data-category]").dataset.category;
    const next = {};
    for (const [name, pref] of Object.entries(settings.preferences.categories)) next[name] = { ...pref };
    next[category] = { ...(next[category] || {}), [box.dataset.channel]: box.checked };
    const table = $("[data-testid=matrix]");
    table.setAttribute("aria-busy", "true");
    try {
      settings.preferences = await demo.client.savePreferences({ categories: next });
      matrixError(null);
    } catch (error) {
      matrixError(`Could not save that: ${error.message}`);
    } finally {
      table.removeAttribute("aria-busy");
      renderMatrix(); // what the hub has, also after a refusal
    }
  }

  function renderPush(state, message) {
    demo.push.state = state;
    const box = $("[data-testid=push-switch]");
    if (state !== "working") box.checked = state === "enabled"; // while working: as clicked
    box.disabled = state === "unsupported" || state === "denied" || state === "working";
    const text = $("[data-testid=push-state]");
    text.dataset.state = state;
    text.textContent = message || PUSH_TEXT[state] || "";
  }

  async function refreshPush() {
    try {
      renderPush(await demo.client.pushState());
    } catch (error) {
      renderPush("error", error.message);
    }
  }

  /** The switch: on subscribes this browser and registers it with the hub; off undoes it. */
  async function switchPush(on) {
    renderPush("working");
    demo.push.error = null;
    try {
      if (on) demo.push.subscription = await demo.client.enablePush();
      else await demo.client.disablePush();
    } catch (error) {
      demo.push.error = error.message;
      renderPush(error.reason === "denied" ? "denied" : "error", error.message);
      return;
    }
    await refreshPush();
  }

  function toggleSettings(open) {
    $("[data-testid=settings]").hidden = !open;
    $("[data-testid=settings-toggle]").setAttribute("aria-expanded", String(open));
    if (open) return Promise.all([loadPreferences(), refreshPush()]);
    return Promise.resolve();
  }

  function wireSettings() {
    $("[data-testid=settings-toggle]").addEventListener("click", () =>
      toggleSettings($("[data-testid=settings]").hidden),
    );
    $("[data-testid=push-switch]").addEventListener("change", (event) => switchPush(event.target.checked));
    $("[data-testid=matrix]").addEventListener("change", (event) => {
      if (event.target.matches("input[data-channel]")) toggleChannel(event.target);
    });
    $("[data-testid=add-category]").addEventListener("submit", (event) => {
      event.preventDefault();
      settings.added.add(event.target.elements.category.value.trim());
      event.target.reset();
      renderMatrix();
    });
  }

  // ---- wiring --------------------------------------------------------------------------

  /** Each row action: the PATCH's answer is the copy's new state (the stream says it too). */
  function act(action, id, item, target) {
    const client = demo.client;
    if (action === "delete") return client.delete(id).then(() => remove(id));
    if (!item) return Promise.resolve();
    const calls = {
      "toggle-read": () => client.markRead(id, item.status === "unread"),
      pin: () => client.pin(id, !item.pinned),
      archive: () => client.archive(id, !item.archived),
      unsnooze: () => client.unsnooze(id),
      "snooze-preset": () => client.snooze(id, target.dataset.preset),
      complete: () => client.completeAction(id, target.dataset.choice).then((next) => {
        const chosen = item.actions.find((a) => a.id === target.dataset.choice);
        const url = chosen && chosen.url ? safeUrl(chosen.url) : null;
        if (url !== null) window.open(url, "_blank", "noopener,noreferrer");
        return next;
      }),
    };
    if (!(action in calls)) return Promise.resolve();
    return calls[action]().then((next) => next && upsert(next));
  }

  async function onListClick(event) {
    const target = event.target.closest("button[data-action]");
    if (!target) return;
    const action = target.dataset.action;
    if (action === "snooze") {
      openMenu(target);
      return;
    }
    const id = target.closest("[data-id]").dataset.id;
    if (action === "snooze-preset") closeMenus();
    target.disabled = true;
    try {
      await act(action, id, shown.items.get(id), target);
    } catch (error) {
      target.disabled = false;
      if (action === "complete" && error.status === 409) {
        // done already (another tab or device): show it as the hub has it
        demo.client.get(id).then((next) => upsert(next), () => {});
        notice(error.message);
      } else if (error.status === 409) notice(error.message);
      else if (error.status !== 404) notice(`Could not do that: ${error.message}`);
    }
  }

  function setFilter(filter) {
    shown.filter = filter;
    shown.cursor = null;
    for (const tab of document.querySelectorAll("[data-filter]")) {
      tab.setAttribute("aria-selected", String(tab.dataset.filter === filter));
    }
    return loadPage(true);
  }

  function setTab(tab) {
    shown.tab = tab;
    shown.cursor = null;
    for (const node of document.querySelectorAll("[data-testid=tab]")) {
      node.setAttribute("aria-selected", String(node.dataset.tab === tab));
    }
    $("[data-testid=filters]").hidden = !inboxTab();
    $("[data-testid=archive-all]").hidden = tab !== "all";
    if (demo.client && demo.client.counts) {
      $("[data-testid=mark-all]").disabled = tabUnread(demo.client.counts) === 0;
    }
    $("[data-testid=delete-view]").hidden = !personalView();
    const help = { archived: t("empty.archived"), snoozed: t("empty.snoozed") };
    $(".empty-title").textContent = help[tab] || t("empty.all");
    $(".empty-help").hidden = tab !== "all";
    return loadPage(true);
  }

  // ---- personal views: a tab by tags --------------------------------------------------

  function toggleViewForm(open) {
    const form = $("[data-testid=view-form]");
    form.hidden = !open;
    $("[data-testid=add-view]").setAttribute("aria-expanded", String(open));
    $(".view-error", form).hidden = true;
    if (open) form.elements.name.focus();
  }

  async function addView(form) {
    const name = form.elements.name.value.trim();
    const tags = form.elements.tags.value.split(",").map((tag) => tag.trim()).filter(Boolean);
    try {
      await demo.client.saveView(name, { filter: { tags_any: tags }, label: name });
    } catch (error) {
      const message = $(".view-error", form);
      message.textContent = error.message;
      message.hidden = false;
      return;
    }
    form.reset();
    toggleViewForm(false);
    await loadViews();
    setTab(`view:${name}`);
  }

  function personalView() {
    return shown.views.find((found) => found.name === viewName() && found.scope === "personal");
  }

  async function removeView() {
    const found = personalView();
    if (!found) return;
    try {
      await demo.client.deleteView(found.name);
    } catch (error) {
      notice(`Could not remove the tab: ${error.message}`);
      return;
    }
    await loadViews(); // the shown view is gone: back to All
  }

  /** The page's own labels (data-i18n) in the chosen language. */
  function translatePage() {
    document.documentElement.lang = words.language;
    for (const node of document.querySelectorAll("[data-i18n]")) node.textContent = t(node.dataset.i18n);
  }

  function wireControls() {
    translatePage();
    wireSettings();
    $("[data-testid=add-view]").addEventListener("click", () =>
      toggleViewForm($("[data-testid=view-form]").hidden),
    );
    $("[data-testid=view-form]").addEventListener("submit", (event) => {
      event.preventDefault();
      addView(event.target);
    });
    $("[data-testid=delete-view]").addEventListener("click", removeView);
    for (const list of document.querySelectorAll(".list")) list.addEventListener("click", onListClick);
    $("[data-testid=tabs]").addEventListener("click", (event) => {
      const tab = event.target.closest("[data-testid=tab]");
      if (tab) setTab(tab.dataset.tab);
    });
    $("[data-testid=more]").addEventListener("click", () => loadPage(false));
    $("[data-testid=mark-all]").addEventListener("click", () => {
      const name = viewName(); // in a view's tab, only the view's copies
      demo.client.markAllRead(name === null ? {} : { view: name });
    });
    $("[data-testid=archive-all]").addEventListener("click", () => demo.client.archiveAll());
    $("[data-testid=bell]").addEventListener("click", () => {
      window.scrollTo({ top: 0, behavior: "smooth" });
      if (!inboxTab()) setTab("all");
      setFilter("unread");
    });
    $("[data-testid=signout]").addEventListener("click", () => signOut());
    for (const tab of document.querySelectorAll("[data-filter]")) {
      tab.addEventListener("click", () => setFilter(tab.dataset.filter));
    }
    document.addEventListener("click", (event) => {
      if (!event.target.closest(".snooze-wrap")) closeMenus();
    });
    document.addEventListener("keydown", (event) => event.key === "Escape" && closeMenus());
    $(".signin-form").addEventListener("submit", (event) => {
      event.preventDefault();
      const value = new FormData(event.target).get("token").trim();
      sessionStorage.setItem(TOKEN_KEY, value);
      open(value);
    });
    setInterval(() => {
      for (const time of document.querySelectorAll("time.time")) time.textContent = ago(time.dateTime);
    }, 30000);
  }

  async function open(jwt) {
    demo.ready = false;
    const claims = claimsOf(jwt);
    if (claims === null || !claims.sub) return showSignIn("That does not look like a user token.");
    if (claims.exp && claims.exp * 1000 < Date.now()) return showSignIn("That token has expired.");
    const user = `${claims.tenant || "default"}/${claims.sub}`;
    $("[data-testid=signin]").hidden = true;
    $("[data-testid=inbox]").hidden = false;
    $("[data-testid=signout]").hidden = false;
    $("[data-testid=settings-toggle]").hidden = false;
    settings.preferences = null;
    settings.added.clear();
    const who = $("[data-testid=user]");
    who.textContent = claims.sub;
    who.hidden = false;
    for (const node of document.querySelectorAll(".me")) node.textContent = claims.sub;
    for (const node of document.querySelectorAll(".origin")) node.textContent = location.origin;
    const client = NotifyHub.connect({
      user,
      getStreamToken: () => streamToken(jwt),
      getAccessToken: () => jwt,
      sharedWorker: new URLSearchParams(location.search).get("transport") !== "tab",
    });
    demo.client = client;
    shown.views = [];
    shown.countedViews = null;
    renderTabs();
    client.on("status", renderStatus);
    client.on("counts", renderCounts);
    client.on("reset", (counts) => {
      renderCounts(counts);
      loadViews();
      loadPage(true);
    });
    for (const event of ["notification", "update", "delete"]) client.on(event, (d) => apply(event, d));
    client.on("toast", showToast);
    renderStatus(client.status);
    try {
      await Promise.all([setTab(new URLSearchParams(location.search).get("tab") || "all"), loadViews()]);
    } catch (error) {
      if (error.status === 401) signOut("The hub refused this token (expired or wrong secret).");
      else $("[data-testid=summary]").textContent = `Could not load the inbox: ${error.message}`;
      return;
    }
    const counts = client.counts || (await client.fetchCounts());
    renderCounts(client.counts || counts); // a live `counts` may have overtaken the fetch
    demo.ready = true;
  }

  function main() {
    wireControls();
    addEventListener("hashchange", () => {
      if (!new URLSearchParams(location.hash.slice(1)).has("token")) return;
      if (demo.client !== null) demo.client.close();
      open(takeToken()); // a demo link pasted into this tab: no reload happens
    });
    const jwt = takeToken();
    if (jwt) open(jwt);
    else showSignIn();
  }

  main();
})();
