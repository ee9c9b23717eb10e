/*
 * notifyhub.js - the browser client for notifyhub (plain modern JavaScript, no build step).
 *
 *   <script src="/static/notifyhub.js"></script>
 *   const hub = NotifyHub.connect({
 *     getStreamToken: async () => (await myBackend.post("/notifyhub/stream-token")).token,
 *     getAccessToken: async () => userJwt,        // for the REST calls (optional)
 *   });
 *   hub.on("notification", (n) => ...);           // also: update, delete, counts, reset,
 *   hub.on("toast", (n) => ...);                  //       toast, status
 *   await hub.list({ status: "unread", limit: 20 });   // also view, pinned, tagsAny, ...
 *   await hub.markRead(id); await hub.markAllRead(); await hub.delete(id);
 *   await hub.archive(id); await hub.pin(id); await hub.snooze(id, "tomorrow");
 *   await hub.completeAction(id, "approve");       // one of its buttons, once
 *   node.append(NotifyHub.renderBody(item));        // text, or sanitised markdown
 *   hub.counts.views["mentions"].unread;           // a view's (tab's) live counts
 *   await hub.fetchPreferences(); await hub.savePreferences({ categories });
 *   await hub.enablePush(); await hub.disablePush(); await hub.pushState();  // Web Push
 *
 * One stream per browser and user: a SharedWorker (notifyhub-worker.js, same folder) holds
 * the EventSource and every tab talks to it; where SharedWorker is missing each tab opens
 * its own EventSource. Reconnects use a fresh stream token and the last event id seen,
 * with exponential backoff and full jitter. A new notification is announced as a `toast`
 * in exactly one visible tab: the one most recently made visible.
 *
 * This file is also loaded by the worker (importScripts), so its top level must not touch
 * `window` or `document`.
 */
(function (root) {
  "use strict";

  const STREAM_EVENTS = ["notification", "update", "delete", "counts", "reset"];
  const HEARTBEAT_MS = 4000;
  const PRESENCE_STALE_MS = 3 * HEARTBEAT_MS;
  const TOKEN_TIMEOUT_MS = 10000;
  const WORKER_ANSWER_MS = 5000; // a loaded worker answers `hello` at once

  /** Full-jitter backoff: a random delay in [0.5, 1] x min(max, base * 2^attempt). */
  function backoffDelay(attempt, baseMs, maxMs) {
    const ceiling = Math.min(maxMs, baseMs * 2 ** Math.min(attempt, 20));
    return Math.round(ceiling * (0.5 + Math.random() * 0.5));
  }

  /** The tab that shows toasts: the visible one made visible last (ties: the larger id). */
  /**
   * An event id is "<seq>-<epoch>" (the bare seq for seqs older than epochs): the epoch
   * changes when the hub's Redis lost the user's data and the seq began again at 1.
   */
  function parseEventId(value) {
    if (!value) return null;
    const [seq, epoch = ""] = String(value).split("-", 2);
    const n = Number(seq);
    return Number.isSafeInteger(n) ? { seq: n, epoch } : null;
  }

  function electToastTab(tabs, now) {
    let best = null;
    for (const tab of tabs) {
      if (!tab.visible || now - tab.at > PRESENCE_STALE_MS) continue;
      if (best === null || tab.since > best.since || (tab.since === best.since && tab.id > best.id)) {
        best = tab;
      }
    }
    return best === null ? null : best.id;
  }

  function wantsToast(notification) {
    // `quiet`: the user is in quiet hours (issue 41): the inbox shows it, no toast.
    return Boolean(notification) && notification.display !== "inbox" && notification.quiet !== true;
  }

  /**
   * One EventSource with our own reconnect loop: the browser's would reuse an expired
   * token, so every attempt asks for a fresh one and resumes after the last event seen.
   */
  class StreamConnection {
    constructor({ url, getToken, onEvent, onStatus, backoff, lastEventId }) {
      this.url = url;
      this.lastEventId = lastEventId || null;
      this._getToken = getToken;
      this._onEvent = onEvent;
      this._onStatus = onStatus || (() => {});
      this._baseMs = (backoff && backoff.baseMs) || 500;
      this._maxMs = (backoff && backoff.maxMs) || 15000;
      this._attempt = 0;
      this._source = null;
      this._timer = null;
      this._running = false;
      this.status = "idle";
    }

    start() {
      if (this._running) return;
      this._running = true;
      this._connect();
    }

    stop() {
      this._running = false;
      clearTimeout(this._timer);
      this._timer = null;
      this._closeSource();
      this._setStatus("closed");
    }

    /** Drop the current connection and open a new one at once (fresh token, same cursor). */
    reconnect() {
      if (!this._running) return;
      clearTimeout(this._timer);
      this._closeSource();
      this._attempt = 0;
      this._connect();
    }

    async _connect() {
      this._timer = null;
      this._setStatus(this._attempt === 0 ? "connecting" : "reconnecting");
      let token;
      try {
        token = await this._getToken();
      } catch (error) {
        this._retry();
        return;
      }
      if (!this._running || this._source !== null || this._timer !== null) return;
      const url = new URL(this.url);
      url.searchParams.set("access_token", token);
      if (this.lastEventId !== null) url.searchParams.set("last_event_id", this.lastEventId);
      const source = new EventSource(url.toString());
      this._source = source;
      source.onopen = () => {
        this._attempt = 0;
        this._setStatus("open");
      };
      source.onerror = () => {
        if (this._source !== source) return;
        this._closeSource();
        this._retry();
      };
      for (const name of STREAM_EVENTS) {
        source.addEventListener(name, (message) => this._receive(name, message));
      }
    }

    _receive(name, message) {
      const id = parseEventId(message.lastEventId);
      const last = parseEventId(this.lastEventId);
      // The hub sends each change once after the cursor; this only guards against replays
      // (seqs of another epoch do not compare: the hub sends a reset before those).
      if (name !== "reset" && id !== null && last !== null && id.epoch === last.epoch) {
        if (id.seq < last.seq || (id.seq === last.seq && name !== "counts")) return;
      }
      let data;
      try {
        data = JSON.parse(message.data);
      } catch (error) {
        return;
      }
      if (id !== null) this.lastEventId = message.lastEventId;
      this._onEvent({ event: name, id: this.lastEventId, data });
    }

    _retry() {
      if (!this._running) return;
      this._setStatus("reconnecting");
      const delay = backoffDelay(this._attempt, this._baseMs, this._maxMs);
      this._attempt += 1;
      this._timer = setTimeout(() => this._connect(), delay);
    }

    _closeSource() {
      if (this._source !== null) {
        this._source.onerror = null;
        this._source.close();
        this._source = null;
      }
    }

    _setStatus(status) {
      if (status === this.status) return;
      this.status = status;
      this._onStatus(status);
    }
  }

  /** An error answer from the hub's REST API (RFC 9457 problem details when it sent them). */
  class NotifyHubError extends Error {
    constructor(status, problem) {
      super((problem && (problem.detail || problem.title)) || `HTTP ${status}`);
      this.name = "NotifyHubError";
      this.status = status;
      this.problem = problem || null;
    }
  }

  /**
   * Web Push cannot be turned on here: `reason` is "unsupported" (no service worker, Push
   * API or Notification API, or not a secure context), "denied" (the user blocked
   * notifications for this site) or "dismissed" (the permission prompt was closed).
   */
  class PushError extends Error {
    constructor(reason, message) {
      super(message);
      this.name = "PushError";
      this.reason = reason;
    }
  }

  /** A base64url string (the hub's VAPID public key) as the bytes `subscribe()` takes. */
  function base64UrlBytes(text) {
    const base64 = String(text).replace(/-/g, "+").replace(/_/g, "/");
    const binary = atob(base64.padEnd(base64.length + ((4 - (base64.length % 4)) % 4), "="));
    return Uint8Array.from(binary, (c) => c.charCodeAt(0));
  }

  function sameBytes(a, b) {
    const x = new Uint8Array(a);
    const y = new Uint8Array(b);
    return x.length === y.length && x.every((byte, i) => byte === y[i]);
  }

  // ---- snooze presets and list membership: pure functions, tested in a browser --------

  const DAY_MS = 86400000;
  const MORNING_HOUR = 9;
  const SEVERITY_RANK = { info: 0, success: 1, warning: 2, error: 3, critical: 4 };

  /** The snooze menu's choices; `snoozeTime(name, now)` says when each one ends. */
  const SNOOZE_PRESETS = [
    { name: "hour", label: "1 hour" },
    { name: "tomorrow", label: "Tomorrow, 9:00" },
    { name: "next-week", label: "Next week" },
  ];

  /** `days` calendar days after `now`'s local date, at 9:00 local time (DST-safe). */
  function localMorning(now, days) {
    return new Date(now.getFullYear(), now.getMonth(), now.getDate() + days, MORNING_HOUR);
  }

  /**
   * When a preset snooze ends, in the browser's time zone: "hour" is now + 1 h; "tomorrow"
   * is 9:00 on the next calendar day; "next-week" is 9:00 on the next Monday (a Monday
   * gives the one a week later). Calendar arithmetic, so a DST change keeps 9:00 at 9:00.
   */
  function snoozeTime(preset, now = new Date()) {
    const at = new Date(now.getTime());
    if (preset === "hour") return new Date(at.getTime() + 3600000);
    if (preset === "tomorrow") return localMorning(at, 1);
    if (preset === "next-week") return localMorning(at, ((8 - at.getDay()) % 7) || 7);
    throw new RangeError(`unknown snooze preset: ${preset}`);
  }

  /**
   * The PATCH body for `snooze(id, when)`: seconds from now (a number), a time (a Date or
   * an RFC 3339 string) or a preset's name (resolved here, in local time).
   */
  function snoozeBody(when, now = new Date()) {
    if (typeof when === "number") {
      if (!Number.isInteger(when) || when < 1) throw new RangeError("snooze seconds: an integer >= 1");
      return { snooze: when };
    }
    if (SNOOZE_PRESETS.some((preset) => preset.name === when)) {
      return { snoozed_until: snoozeTime(when, now).toISOString() };
    }
    if (when instanceof Date) return { snoozed_until: when.toISOString() };
    if (typeof when === "string" && when !== "") return { snoozed_until: when };
    throw new TypeError("snooze: seconds, a Date, an RFC 3339 time or a preset name");
  }

  function hasTags(item, tags, every) {
    if (!tags || tags.length === 0) return true;
    const own = new Set(item.tags || []);
    return every ? tags.every((tag) => own.has(tag)) : tags.some((tag) => own.has(tag));
  }

  function atLeast(item, severity) {
    return !severity || SEVERITY_RANK[item.severity] >= SEVERITY_RANK[severity];
  }

  /** Whether `item` passes a view's filter ({tags_any, tags_all, categories, severity_at_least}). */
  function matchesView(item, filter) {
    if (!filter) return true;
    if (filter.categories && filter.categories.length && !filter.categories.includes(item.category)) {
      return false;
    }
    return hasTags(item, filter.tags_any, false) && hasTags(item, filter.tags_all, true) &&
      atLeast(item, filter.severity_at_least);
  }

  function inStatus(item, status) {
    const snoozed = Boolean(item.snoozed_until);
    if (status === "archived") return Boolean(item.archived);
    if (status === "snoozed") return snoozed && !item.archived;
    if (item.archived || snoozed) return false; // the default list hides both
    return !status || status === "all" || item.status === status;
  }

  function timeMs(value) {
    return value instanceof Date ? value.getTime() : Date.parse(value);
  }

  /**
   * Whether `item` belongs in the list `list(options)` returns (what a live event does to a
   * shown list). `viewFilter` is the filter of `options.view`, which the caller knows.
   */
  function matchesList(item, options = {}, viewFilter = null) {
    const o = options;
    if (!inStatus(item, o.status)) return false;
    if (typeof o.pinned === "boolean" && Boolean(item.pinned) !== o.pinned) return false;
    if (o.category && item.category !== o.category) return false;
    if (o.actor && !(item.actor && item.actor.id === o.actor)) return false;
    if (o.createdAfter && !(Date.parse(item.created_at) > timeMs(o.createdAfter))) return false;
    if (o.createdBefore && !(Date.parse(item.created_at) < timeMs(o.createdBefore))) return false;
    if (!hasTags(item, o.tagsAny, false) || !hasTags(item, o.tagsAll, true)) return false;
    return atLeast(item, o.severityAtLeast) && (!o.view || matchesView(item, viewFilter));
  }

  // ---- bodies: plain text, or the safe markdown subset ----------------------------------

  const MARKDOWN_TAGS = ["p", "em", "strong", "code", "pre", "a", "ul", "ol", "li", "br"];
  const HTTP_URL = /^https?:\/\//i;
  let markdown = null;

  /** markdown-it (vendor/markdown-it.min.js) with only the subset's rules; null without it. */
  function markdownRenderer() {
    if (markdown === null && typeof root.markdownit === "function") {
      markdown = root.markdownit("zero", { html: false, linkify: false, breaks: true }).enable([
        "emphasis", "backticks", "link", "escape", "entity", "newline", "list", "code", "fence",
      ]);
    }
    return markdown;
  }

  /**
   * `item.body` as DOM nodes. Text stays text. Markdown (`body_format: "markdown"`) goes
   * through markdown-it (no HTML, the subset's rules only) and then DOMPurify (only the
   * subset's tags, only `href` attributes, only http(s) URLs), and links open in a new tab
   * without a referrer. Both scripts ship in /static/vendor/; a page without them shows the
   * markdown as its text, never as HTML.
   */
  function renderBody(item, doc = root.document) {
    const fragment = doc.createDocumentFragment();
    const md = item.body_format === "markdown" ? markdownRenderer() : null;
    const purify = root.DOMPurify;
    if (md === null || !purify || !purify.isSupported) {
      fragment.append(doc.createTextNode(item.body || ""));
      return fragment;
    }
    const clean = purify.sanitize(md.render(item.body || ""), {
      ALLOWED_TAGS: MARKDOWN_TAGS,
      ALLOWED_ATTR: ["href"],
      ALLOWED_URI_REGEXP: HTTP_URL,
      RETURN_DOM_FRAGMENT: true,
    });
    for (const link of clean.querySelectorAll("a")) {
      if (!HTTP_URL.test(link.getAttribute("href") || "")) link.removeAttribute("href");
      link.target = "_blank";
      link.rel = "noopener noreferrer nofollow";
    }
    fragment.append(clean);
    return fragment;
  }

  // ---- the client's own words: one table per language, picked from the browser's ----------

  /** Every string a client UI built on notifyhub.js shows; `{name}` marks a value. */
  const STRINGS = {
    en: {
      "snooze.hour": "1 hour", "snooze.tomorrow": "Tomorrow, 9:00", "snooze.next-week": "Next week",
      "action.read": "Mark read", "action.unread": "Mark unread", "action.pin": "Pin",
      "action.unpin": "Unpin", "action.snooze": "Snooze", "action.unsnooze": "Unsnooze",
      "action.archive": "Archive", "action.unarchive": "Unarchive", "action.delete": "Delete",
      "chip.pinned": "Pinned", "chip.resurfaced": "Snooze ended", "chip.until": "Until {time}",
      "chip.from": "from {source}", "link.open": "Open →", "thread.count": "{n} in this thread",
      "tab.all": "All", "tab.snoozed": "Snoozed", "tab.archived": "Archived",
      "filter.all": "All", "filter.unread": "Unread", "inbox.title": "Inbox",
      "inbox.mark-all": "Mark all read", "inbox.archive-all": "Archive all",
      "inbox.more": "Load older", "inbox.pinned": "Pinned",
      "summary.one": "{unread} unread · {total} notification",
      "summary.other": "{unread} unread · {total} notifications",
      "empty.all": "You're all caught up", "empty.archived": "Nothing archived",
      "empty.snoozed": "Nothing snoozed", "toast.dismiss": "Dismiss", "signout": "Sign out",
      "done": "Done {time}",
    },
    pt: {
      "snooze.hour": "1 hora", "snooze.tomorrow": "Amanhã, 9:00", "snooze.next-week": "Próxima semana",
      "action.read": "Marcar como lida", "action.unread": "Marcar como não lida", "action.pin": "Fixar",
      "action.unpin": "Desafixar", "action.snooze": "Adiar", "action.unsnooze": "Cancelar adiamento",
      "action.archive": "Arquivar", "action.unarchive": "Desarquivar", "action.delete": "Excluir",
      "chip.pinned": "Fixada", "chip.resurfaced": "Adiamento terminou", "chip.until": "Até {time}",
      "chip.from": "de {source}", "link.open": "Abrir →", "thread.count": "{n} nesta conversa",
      "tab.all": "Todas", "tab.snoozed": "Adiadas", "tab.archived": "Arquivadas",
      "filter.all": "Todas", "filter.unread": "Não lidas", "inbox.title": "Caixa de entrada",
      "inbox.mark-all": "Marcar todas como lidas", "inbox.archive-all": "Arquivar todas",
      "inbox.more": "Carregar anteriores", "inbox.pinned": "Fixadas",
      "summary.one": "{unread} não lidas · {total} notificação",
      "summary.other": "{unread} não lidas · {total} notificações",
      "empty.all": "Você está em dia", "empty.archived": "Nada arquivado",
      "empty.snoozed": "Nada adiado", "toast.dismiss": "Dispensar", "signout": "Sair",
      "done": "Concluída {time}",
    },
  };

  /**
   * The strings for `language` (default: the browser's), falling back `pt-BR` -> `pt` ->
   * English for any missing one; `text(key, values)` fills in `{name}`s. `language` says
   * which table answered (`en` when none did).
   */
  function strings(language = root.navigator && root.navigator.language) {
    const tags = String(language || "en").toLowerCase().split("-");
    const chain = tags.map((_, i) => tags.slice(0, tags.length - i).join("-"));
    const found = chain.find((tag) => tag in STRINGS) || "en";
    const table = { ...STRINGS.en, ...STRINGS[found] };
    const text = (key, values = {}) =>
      (table[key] || key).replace(/\{(\w+)\}/g, (_, name) => String(values[name] ?? ""));
    return { language: found, table, text };
  }

  const internal = {
    StreamConnection,
    backoffDelay,
    electToastTab,
    parseEventId,
    wantsToast,
    STREAM_EVENTS,
  };
  const api = {
    internal,
    NotifyHubError,
    PushError,
    HEARTBEAT_MS,
    PRESENCE_STALE_MS,
    TOKEN_TIMEOUT_MS,
    SNOOZE_PRESETS,
    snoozeTime,
    snoozeBody,
    matchesList,
    matchesView,
    renderBody,
    STRINGS,
    strings,
  };

  if (typeof document === "undefined") {
    root.NotifyHub = api; // inside the SharedWorker: only the connection machinery
    return;
  }

  const scriptSrc = document.currentScript ? document.currentScript.src : location.href;

  function newTabId() {
    const random = Math.random().toString(36).slice(2, 10);
    return `${Date.now().toString(36)}-${random}`;
  }

  function isVisible() {
    return document.visibilityState === "visible";
  }

  /**
   * Where this tab stands for the toast election; sent to the worker or to peer tabs.
   * `since` is when the tab last became visible, so the tab the user just looked at wins.
   */
  class Presence {
    constructor(onChange) {
      this.id = newTabId();
      this.since = isVisible() ? Date.now() : 0;
      this._onChange = onChange;
      this._listener = () => {
        if (isVisible()) this.since = Date.now();
        this._onChange();
      };
      document.addEventListener("visibilitychange", this._listener);
      this._timer = setInterval(() => isVisible() && this._onChange(), HEARTBEAT_MS);
    }

    get state() {
      return { id: this.id, visible: isVisible(), since: this.since, at: Date.now() };
    }

    close() {
      document.removeEventListener("visibilitychange", this._listener);
      clearInterval(this._timer);
    }
  }

  /** One SharedWorker for this browser and user; the worker holds the only stream. */
  class WorkerTransport {
    constructor(client, workerUrl, name) {
      this._client = client;
      this._worker = new SharedWorker(workerUrl, { name });
      this._worker.onerror = () => client._workerFailed(); // e.g. the script did not load
      // ... and when no `error` comes (seen in Chromium under load), no answer says it
      this._unanswered = setTimeout(() => client._workerFailed(), WORKER_ANSWER_MS);
      this._port = this._worker.port;
      this._port.onmessage = (message) => {
        clearTimeout(this._unanswered);
        this._receive(message.data);
      };
      this._presence = new Presence(() => this._post({ type: "presence", tab: this._presence.state }));
      this._port.start();
      this._post({
        type: "hello",
        tab: this._presence.state,
        url: client.streamUrl,
        backoff: client.options.backoff || null,
      });
    }

    _post(message) {
      this._port.postMessage(message);
    }

    async _receive(message) {
      if (message.type === "event") {
        this._client._dispatch(message.event, message.data);
        if (message.toast && isVisible()) this._client._toast(message.data);
      } else if (message.type === "state") {
        if (message.counts) this._client._dispatch("counts", message.counts);
        this._client._setStatus(message.status);
      } else if (message.type === "status") {
        this._client._setStatus(message.status);
      } else if (message.type === "token-request") {
        await this._answerToken(message.rid);
      }
    }

    async _answerToken(rid) {
      try {
        const token = await this._client._streamToken();
        this._post({ type: "token", rid, token });
      } catch (error) {
        this._post({ type: "token-error", rid, message: String(error) });
      }
    }

    reconnect() {
      this._post({ type: "reconnect" });
    }

    close() {
      clearTimeout(this._unanswered);
      this._presence.close();
      this._post({ type: "bye" });
      this._port.close();
    }
  }

  /**
   * No SharedWorker: this tab's own stream. Tabs tell each other their presence over a
   * BroadcastChannel and each runs the same election, so one visible tab shows the toast.
   */
  class TabTransport {
    constructor(client, channelName) {
      this._client = client;
      this._peers = new Map();
      this._toasted = new Set();
      this._channel = typeof BroadcastChannel === "function" ? new BroadcastChannel(channelName) : null;
      this._presence = new Presence(() => this._announce("presence"));
      if (this._channel !== null) {
        this._channel.onmessage = (message) => this._hear(message.data);
        this._announce("hello");
      }
      this._connection = new StreamConnection({
        url: client.streamUrl,
        getToken: () => client._streamToken(),
        onEvent: (event) => this._onEvent(event),
        onStatus: (status) => client._setStatus(status),
        backoff: client.options.backoff,
      });
      this._connection.start();
    }

    _announce(type) {
      if (this._channel !== null) this._channel.postMessage({ type, tab: this._presence.state });
    }

    _hear(message) {
      if (message.type === "bye") {
        this._peers.delete(message.tab.id);
        return;
      }
      if (message.type === "toasted") {
        this._toasted.add(message.id);
        return;
      }
      this._peers.set(message.tab.id, { ...message.tab, at: Date.now() });
      if (message.type === "hello") this._announce("presence");
    }

    _onEvent({ event, data }) {
      this._client._dispatch(event, data);
      if (event !== "notification" || !wantsToast(data) || this._toasted.has(data.id)) return;
      const tabs = [this._presence.state, ...this._peers.values()];
      if (electToastTab(tabs, Date.now()) !== this._presence.id) return;
      this._toasted.add(data.id);
      if (this._channel !== null) this._channel.postMessage({ type: "toasted", id: data.id });
      this._client._toast(data);
    }

    reconnect() {
      this._connection.reconnect();
    }

    close() {
      this._connection.stop();
      this._presence.close();
      this._announce("bye");
      if (this._channel !== null) this._channel.close();
    }
  }

  function isoTime(value) {
    return value instanceof Date ? value.toISOString() : String(value);
  }

  /** `list()`'s options as the hub's query string (camelCase here, snake_case there). */
  function listQuery(options) {
    const { status = "all", limit = 20, cursor, category, view, pinned, actor } = options;
    const query = new URLSearchParams({ status, limit: String(limit) });
    if (cursor) query.set("cursor", cursor);
    if (category) query.set("category", category);
    if (view) query.set("view", view);
    if (typeof pinned === "boolean") query.set("pinned", String(pinned));
    if (actor) query.set("actor", actor);
    if (options.severityAtLeast) query.set("severity_at_least", options.severityAtLeast);
    if (options.createdAfter) query.set("created_after", isoTime(options.createdAfter));
    if (options.createdBefore) query.set("created_before", isoTime(options.createdBefore));
    for (const tag of options.tagsAny || []) query.append("tags_any", tag);
    for (const tag of options.tagsAll || []) query.append("tags_all", tag);
    return query;
  }

  function pushSupported() {
    return isSecureContext && "serviceWorker" in navigator && typeof PushManager === "function" &&
      typeof Notification === "function";
  }

  /** The push service worker's URL; a PushError where Web Push cannot work. */
  function pushWorkerUrl(options) {
    if (!pushSupported()) {
      throw new PushError("unsupported", "This browser cannot receive Web Push here (it needs service workers, the Push API and a secure context)");
    }
    const url = new URL(options.serviceWorkerUrl || new URL("notifyhub-push-sw.js", scriptSrc), location.href);
    if (url.origin !== location.origin) {
      throw new PushError("unsupported", `A service worker must be on the page's origin (${location.origin}): pass serviceWorkerUrl`);
    }
    return url;
  }

  /** Resolves once the registration has an active worker (`subscribe()` needs one). */
  function activated(registration) {
    const worker = registration.installing || registration.waiting;
    if (registration.active || !worker) return Promise.resolve();
    return new Promise((resolve, reject) => {
      worker.addEventListener("statechange", () => {
        if (worker.state === "activated") resolve();
        if (worker.state === "redundant") reject(new PushError("unsupported", "The push service worker failed to install"));
      });
    });
  }

  /** What `NotifyHub.connect()` returns: live events, current counts, and the REST calls. */
  class NotifyHubClient {
    constructor(options) {
      if (typeof options.getStreamToken !== "function") {
        throw new TypeError("NotifyHub.connect needs a getStreamToken() callback");
      }
      this.options = options;
      this.baseUrl = new URL(options.baseUrl || scriptSrc, location.href).origin;
      this.streamUrl = `${this.baseUrl}/v1/me/stream`;
      this.counts = null;
      this.status = "idle";
      this.mode = null;
      this._listeners = new Map();
      this._transport = null;
      this._name = null;
      // Leave on pagehide (the worker forgets this tab); come back from the back/forward cache.
      this._onPageHide = () => this._stop();
      this._onPageShow = (event) => event.persisted && this._transport === null && this._start();
    }

    _start() {
      this._name = `notifyhub:${this.baseUrl}:${this.options.user || "default"}`;
      this._transport = this._workerTransport(this._name);
      this.mode = this._transport === null ? "tab" : "shared-worker";
      if (this._transport === null) this._transport = new TabTransport(this, this._name);
      addEventListener("pagehide", this._onPageHide);
      addEventListener("pageshow", this._onPageShow);
      return this;
    }

    _stop() {
      if (this._transport !== null) this._transport.close();
      this._transport = null;
      this._setStatus("closed");
    }

    _workerFailed() {
      if (this.mode !== "shared-worker") return;
      this._transport.close();
      this._transport = new TabTransport(this, this._name);
      this.mode = "tab";
    }

    _workerTransport(name) {
      if (this.options.sharedWorker === false || typeof SharedWorker !== "function") return null;
      const url = this.options.workerUrl || new URL("notifyhub-worker.js", scriptSrc).toString();
      try {
        return new WorkerTransport(this, url, name);
      } catch (error) {
        return null; // e.g. a cross-origin worker URL: fall back to a stream per tab
      }
    }

    /** Subscribe to notification | update | delete | counts | reset | toast | status. */
    on(event, handler) {
      if (!this._listeners.has(event)) this._listeners.set(event, new Set());
      this._listeners.get(event).add(handler);
      return () => this._listeners.get(event).delete(handler);
    }

    /** Open a new stream now (fresh token, resuming after the last event). */
    reconnect() {
      if (this._transport !== null) this._transport.reconnect();
    }

    close() {
      removeEventListener("pagehide", this._onPageHide);
      removeEventListener("pageshow", this._onPageShow);
      this._stop();
    }

    /**
     * One page of the inbox. `status` "all" | "unread" | "read" lists the default inbox
     * (no archived or snoozed copies; pinned first, then newest); "archived" and "snoozed"
     * list those. The other options narrow it and combine.
     */
    list(options = {}) {
      return this._request("GET", `/v1/me/notifications?${listQuery(options)}`);
    }

    get(id) {
      return this._request("GET", `/v1/me/notifications/${encodeURIComponent(id)}`);
    }

    markRead(id, read = true) {
      return this._request("PATCH", `/v1/me/notifications/${encodeURIComponent(id)}`, { read });
    }

    markUnread(id) {
      return this.markRead(id, false);
    }

    markSeen(ids) {
      return this._request("POST", "/v1/me/notifications/bulk", { ids, seen: true });
    }

    markAllRead(filter = {}) {
      return this._request("POST", "/v1/me/notifications/read-all", filter);
    }

    delete(id) {
      return this._request("DELETE", `/v1/me/notifications/${encodeURIComponent(id)}`);
    }

    fetchCounts() {
      return this._request("GET", "/v1/me/notifications/counts");
    }

    /** Archive (or, with false, restore) a copy: it leaves the default list and the counts. */
    archive(id, archived = true) {
      return this._patch(id, { archived });
    }

    unarchive(id) {
      return this.archive(id, false);
    }

    /** Archive every copy in the default inbox (optionally one category, or older ones). */
    archiveAll(filter = {}) {
      return this._request("POST", "/v1/me/notifications/archive-all", filter);
    }

    /** Snooze until a time (Date or RFC 3339), for `when` seconds, or by preset name. */
    snooze(id, when) {
      return this._patch(id, snoozeBody(when));
    }

    unsnooze(id) {
      return this._patch(id, { snoozed_until: null });
    }

    pin(id, pinned = true) {
      return this._patch(id, { pinned });
    }

    unpin(id) {
      return this.pin(id, false);
    }

    /**
     * Complete one of the notification's actions (its buttons are one choice, completed
     * once): the answer is the copy with `completed` set, and every tab hears an `update`.
     * A 503 or a lost connection is retried (the hub keeps the first completion, so a
     * retry never completes twice and lets the hub send the action's webhook); a 409
     * means one was completed already: its problem's `completed` names it.
     */
    async completeAction(id, actionId, { retries = 3 } = {}) {
      const path = `/v1/me/notifications/${encodeURIComponent(id)}/actions/${encodeURIComponent(actionId)}`;
      for (let attempt = 0; ; attempt++) {
        try {
          return await this._request("POST", path);
        } catch (error) {
          const transient = error instanceof TypeError || (error instanceof NotifyHubError && error.status === 503);
          if (!transient || attempt >= retries) throw error;
          await new Promise((resolve) => setTimeout(resolve, backoffDelay(attempt, 250, 4000)));
        }
      }
    }

    /** The views (tabs) this user has: the tenant's and their own. */
    fetchViews() {
      return this._request("GET", "/v1/me/views");
    }

    /** Create or replace one of this user's own views: `{filter, label?}`. */
    saveView(name, view) {
      return this._request("PUT", `/v1/me/views/${encodeURIComponent(name)}`, view);
    }

    deleteView(name) {
      return this._request("DELETE", `/v1/me/views/${encodeURIComponent(name)}`);
    }

    /** The user's preferences: `{categories: {name: {inbox, email, push}}, locale}`. */
    fetchPreferences() {
      return this._request("GET", "/v1/me/preferences");
    }

    /**
     * Set them (`PUT /v1/me/preferences`): `categories` replaces every category's (left
     * out: unchanged), `locale` sets the language; the answer is what the hub now has.
     */
    savePreferences(preferences) {
      return this._request("PUT", "/v1/me/preferences", preferences);
    }

    /**
     * Web Push: register the push service worker (`serviceWorkerUrl`, default
     * notifyhub-push-sw.js next to notifyhub.js; it must be on the page's origin), ask for
     * Notification permission, subscribe with the hub's VAPID key and register the
     * subscription with the hub. The answer is the hub's `{id, endpoint, created_at}`.
     * Call it from a user's click: browsers ask for permission only then.
     */
    async enablePush(options = {}) {
      pushWorkerUrl(options); // unsupported here: say so before asking anything
      const permission = await Notification.requestPermission(); // first, while the click counts
      if (permission === "denied") {
        throw new PushError("denied", "Notifications are blocked for this site (the browser's site settings can allow them)");
      }
      if (permission !== "granted") throw new PushError("dismissed", "Notification permission was not given");
      const registration = await this._pushRegistration(options, true);
      const { public_key: publicKey } = await this._request("GET", "/v1/me/push-key");
      const applicationServerKey = base64UrlBytes(publicKey);
      let subscription = await registration.pushManager.getSubscription();
      if (subscription !== null && !sameBytes(subscription.options.applicationServerKey || [], applicationServerKey)) {
        await subscription.unsubscribe(); // made with another key: the hub could not use it
        subscription = null;
      }
      if (subscription === null) {
        subscription = await registration.pushManager.subscribe({ userVisibleOnly: true, applicationServerKey });
      }
      return this._request("POST", "/v1/me/push-subscriptions", subscription.toJSON());
    }

    /** Stop Web Push in this browser: forget the subscription at the hub, then unsubscribe. */
    async disablePush(options = {}) {
      const registration = await this._pushRegistration(options, false);
      const subscription = registration && (await registration.pushManager.getSubscription());
      if (!subscription) return;
      try {
        const listed = await this._request("GET", "/v1/me/push-subscriptions");
        const items = Array.isArray(listed) ? listed : listed.subscriptions || listed.items || [];
        for (const found of items.filter((item) => item.endpoint === subscription.endpoint)) {
          await this._request("DELETE", `/v1/me/push-subscriptions/${encodeURIComponent(found.id)}`);
        }
      } finally {
        await subscription.unsubscribe(); // the endpoint dies even when the hub could not be told
      }
    }

    /**
     * "unsupported", "denied" (notifications blocked), "enabled" (this browser has a push
     * subscription) or "disabled".
     */
    async pushState(options = {}) {
      if (!pushSupported()) return "unsupported";
      if (Notification.permission === "denied") return "denied";
      const registration = await this._pushRegistration(options, false);
      const subscription = registration && (await registration.pushManager.getSubscription());
      return subscription && Notification.permission === "granted" ? "enabled" : "disabled";
    }

    /** The push service worker's registration: registered and active when `register`. */
    async _pushRegistration(options, register) {
      const url = pushWorkerUrl(options);
      const scope = options.scope ? new URL(options.scope, location.href).href : undefined;
      if (!register) return (await navigator.serviceWorker.getRegistration(scope || url.href)) || null;
      const registration = await navigator.serviceWorker.register(url.href, scope ? { scope } : {});
      await activated(registration);
      return registration;
    }

    _patch(id, body) {
      return this._request("PATCH", `/v1/me/notifications/${encodeURIComponent(id)}`, body);
    }

    async _request(method, path, body) {
      const headers = { Accept: "application/json" };
      if (body !== undefined) headers["Content-Type"] = "application/json";
      if (typeof this.options.getAccessToken === "function") {
        headers.Authorization = `Bearer ${await this.options.getAccessToken()}`;
      }
      const response = await fetch(`${this.baseUrl}${path}`, {
        method,
        headers,
        body: body === undefined ? undefined : JSON.stringify(body),
        credentials: this.options.credentials || "same-origin",
      });
      if (response.status === 204) return null;
      const payload = await response.json().catch(() => null);
      if (!response.ok) throw new NotifyHubError(response.status, payload);
      return payload;
    }

    async _streamToken() {
      const token = await this.options.getStreamToken();
      if (typeof token !== "string" || token === "") throw new Error("getStreamToken gave no token");
      return token;
    }

    _dispatch(event, data) {
      if (event === "counts" || event === "reset") this._setCounts(data);
      if (event === "reset" && !this._has("reset")) {
        location.reload(); // nobody reloads the list: reload the page, the safe default
        return;
      }
      this._emit(event, data);
    }

    _toast(notification) {
      this._emit("toast", notification);
    }

    _setCounts(counts) {
      // a stream marks only a view being recounted (`exact: false`); REST says it of each
      for (const view of Object.values((counts && counts.views) || {})) view.exact = view.exact !== false;
      this.counts = counts;
    }

    _setStatus(status) {
      if (!status || status === this.status) return;
      this.status = status;
      this._emit("status", status);
    }

    _has(event) {
      return this._listeners.has(event) && this._listeners.get(event).size > 0;
    }

    _emit(event, data) {
      for (const handler of this._listeners.get(event) || []) {
        try {
          handler(data);
        } catch (error) {
          setTimeout(() => {
            throw error; // report it without breaking the other listeners
          });
        }
      }
    }
  }

  /** Start the client: `options.getStreamToken` is required; see the header comment. */
  function connect(options) {
    return new NotifyHubClient(options)._start();
  }

  root.NotifyHub = { ...api, connect, NotifyHubClient };
})(typeof self !== "undefined" ? self : globalThis);
