/*
 * demo.js - the demo inbox on top of notifyhub.js. The user token comes from the URL
 * fragment (#token=...) or the paste box and stays in sessionStorage; the page asks the
 * hub for stream tokens itself (a real app's backend would). Everything user-supplied is
 * rendered with textContent, never as HTML.
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

  const view = {
    filter: "all",
    cursor: null,
    loading: false,
    queued: [],
    rows: new Map(), // id -> <li>
    items: new Map(), // id -> notification
  };

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

  // ---- the list ------------------------------------------------------------------------

  function meta(item) {
    const row = el("div", "meta");
    if (item.category) row.append(el("span", "chip", item.category));
    if (item.source) row.append(el("span", "", `from ${item.source}`));
    const url = item.action_url ? safeUrl(item.action_url) : null;
    if (url !== null) {
      const link = el("a", "", "Open →");
      link.href = url;
      link.target = "_blank";
      link.rel = "noopener noreferrer";
      row.append(link);
    }
    return row;
  }

  function rowFor(item) {
    const severity = severityOf(item);
    const unread = item.status === "unread";
    const li = el("li", `item sev-${severity}${unread ? " unread" : ""}`);
    li.dataset.testid = "item";
    li.dataset.id = item.id;
    li.dataset.status = item.status;
    li.dataset.severity = severity;
    const main = el("div", "main");
    const titleRow = el("div", "title-row");
    titleRow.append(el("span", "title", item.title));
    if (severity === "critical") titleRow.append(el("span", "tag", "critical"));
    main.append(titleRow);
    if (item.body) main.append(el("p", "body", item.body));
    main.append(meta(item));
    const side = el("div", "side");
    const time = el("time", "time", ago(item.created_at));
    time.dateTime = item.created_at;
    time.title = new Date(item.created_at).toLocaleString();
    const actions = el("div", "actions");
    actions.append(button(unread ? "Mark read" : "Mark unread", "toggle-read"));
    actions.append(button("Delete", "delete", "danger"));
    side.append(time, actions);
    li.append(icon(severity), main, side);
    return li;
  }

  function visibleInFilter(item) {
    return view.filter === "all" || item.status === "unread";
  }

  /** Insert or refresh one row, keeping the list newest first (ULIDs sort by time). */
  function upsert(item, { fresh = false } = {}) {
    const old = view.rows.get(item.id);
    if (!visibleInFilter(item)) {
      remove(item.id);
      return;
    }
    view.items.set(item.id, item);
    const row = rowFor(item);
    if (fresh) row.classList.add("fresh");
    if (old) {
      old.replaceWith(row);
    } else {
      const after = [...view.rows.keys()].find((id) => id < item.id);
      const list = $("[data-testid=list]");
      list.insertBefore(row, after === undefined ? null : view.rows.get(after));
    }
    view.rows.set(item.id, row);
    renderEmpty();
  }

  function remove(id) {
    const row = view.rows.get(id);
    if (row) row.remove();
    view.rows.delete(id);
    view.items.delete(id);
    renderEmpty();
  }

  function renderEmpty() {
    const empty = view.rows.size === 0 && !view.loading;
    $("[data-testid=empty]").hidden = !empty;
    $("[data-testid=more]").hidden = view.cursor === null;
  }

  async function loadPage(reset) {
    const client = demo.client;
    view.loading = true;
    try {
      const page = await client.list({
        status: view.filter,
        limit: PAGE_SIZE,
        cursor: reset ? null : view.cursor,
      });
      if (client !== demo.client) return;
      if (reset) {
        $("[data-testid=list]").replaceChildren();
        view.rows.clear();
        view.items.clear();
      }
      view.cursor = page.next_cursor;
      for (const item of page.items) if (!view.rows.has(item.id)) appendRow(item);
    } finally {
      view.loading = false;
      for (const [event, data] of view.queued.splice(0)) apply(event, data);
      renderEmpty();
    }
  }

  function appendRow(item) {
    const row = rowFor(item);
    $("[data-testid=list]").append(row);
    view.rows.set(item.id, row);
    view.items.set(item.id, item);
  }

  // ---- live events ---------------------------------------------------------------------

  function apply(event, data) {
    if (view.loading) {
      view.queued.push([event, data]); // the page being fetched may predate it: replay after
      return;
    }
    if (event === "notification") {
      if (data.replaces) remove(data.replaces);
      upsert(data, { fresh: true });
      ringBell();
    } else if (event === "update") {
      const item = view.items.get(data.id);
      if (item) upsert({ ...item, status: data.status, seen: data.seen, read_at: data.read_at });
      else if (data.status === "unread" && view.filter === "unread") showAgain(data.id);
    } else if (event === "delete") {
      remove(data.id);
    }
  }

  /** Marked unread elsewhere while this tab lists unread ones: fetch it back into view. */
  function showAgain(id) {
    const client = demo.client;
    client.get(id).then(
      (item) => client === demo.client && view.filter === "unread" && upsert(item),
      () => {}, // deleted meanwhile: nothing to show
    );
  }

  function renderCounts(counts) {
    if (!counts) return;
    const badge = $("[data-testid=badge]");
    badge.textContent = counts.unread > 99 ? "99+" : String(counts.unread);
    badge.hidden = counts.unread === 0;
    $("[data-testid=summary]").textContent =
      `${counts.unread} unread · ${counts.total} notification${counts.total === 1 ? "" : "s"}`;
    document.title = counts.unread ? `(${counts.unread}) notifyhub inbox` : "notifyhub inbox";
    $("[data-testid=mark-all]").disabled = counts.unread === 0;
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
    close.setAttribute("aria-label", "Dismiss");
    close.addEventListener("click", () => dismiss(toast));
    toast.append(icon(severity), text, close);
    $("[data-testid=toasts]").append(toast);
    setTimeout(() => dismiss(toast), TOAST_MS[severity] || TOAST_DEFAULT_MS);
  }

  // ---- wiring --------------------------------------------------------------------------

  async function onListClick(event) {
    const target = event.target.closest("button[data-action]");
    if (!target) return;
    const id = target.closest("[data-id]").dataset.id;
    const item = view.items.get(id);
    target.disabled = true;
    try {
      if (target.dataset.action === "delete") {
        await demo.client.delete(id);
        remove(id);
      } else if (item) {
        upsert(await demo.client.markRead(id, item.status === "unread"));
      }
    } catch (error) {
      target.disabled = false;
    }
  }

  function setFilter(filter) {
    view.filter = filter;
    view.cursor = null;
    for (const tab of document.querySelectorAll("[data-filter]")) {
      tab.setAttribute("aria-selected", String(tab.dataset.filter === filter));
    }
    return loadPage(true);
  }

  function wireControls() {
    $("[data-testid=list]").addEventListener("click", onListClick);
    $("[data-testid=more]").addEventListener("click", () => loadPage(false));
    $("[data-testid=mark-all]").addEventListener("click", () => demo.client.markAllRead());
    $("[data-testid=bell]").addEventListener("click", () => {
      window.scrollTo({ top: 0, behavior: "smooth" });
      setFilter("unread");
    });
    $("[data-testid=signout]").addEventListener("click", () => signOut());
    for (const tab of document.querySelectorAll("[data-filter]")) {
      tab.addEventListener("click", () => setFilter(tab.dataset.filter));
    }
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
    client.on("status", renderStatus);
    client.on("counts", renderCounts);
    client.on("reset", (counts) => {
      renderCounts(counts);
      loadPage(true);
    });
    for (const event of ["notification", "update", "delete"]) client.on(event, (d) => apply(event, d));
    client.on("toast", showToast);
    renderStatus(client.status);
    try {
      await loadPage(true);
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
