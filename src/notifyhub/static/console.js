// The operator console: plain ES modules served by the hub (no build step, no outside
// asset). The admin key lives in this tab's sessionStorage and travels only in the
// Authorization header; every text from the hub goes in through textContent.

const KEY = "notifyhub.console.key";
const TENANT = "notifyhub.console.tenant";
const $ = (id) => document.getElementById(id);

let shown = 0; // which call of show() owns the screen: an older one still loading is stale

// --- DOM ------------------------------------------------------------------------------

function h(tag, attrs = {}, ...children) {
  const el = document.createElement(tag);
  for (const [name, value] of Object.entries(attrs)) {
    if (value === undefined || value === null || value === false) continue;
    if (name.startsWith("on")) el.addEventListener(name.slice(2), value);
    else if (name === "class") el.className = value;
    else el.setAttribute(name, value === true ? "" : String(value));
  }
  append(el, children);
  return el;
}

function append(el, children) {
  for (const child of children.flat(Infinity)) {
    if (child === undefined || child === null || child === false) continue;
    el.append(child instanceof Node ? child : document.createTextNode(String(child)));
  }
}

function table(headers, rows) {
  return h("table", {},
    h("thead", {}, h("tr", {}, headers.map((name) => h("th", {}, name)))),
    h("tbody", {}, rows));
}

function badge(text) {
  return h("span", { class: `badge ${text}` }, text);
}

function when(iso) {
  return iso ? new Date(iso).toLocaleString() : "";
}

function problemText(err) {
  return err instanceof ApiError ? `${err.status}: ${err.message}` : String(err);
}

// A problem from parsing the operator's JSON, or any other.
function jsonProblem(err) {
  return err instanceof SyntaxError ? `the JSON does not parse: ${err.message}` : err;
}

// The names typed in a comma-separated input.
function names(input) {
  return input.value.split(",").map((s) => s.trim()).filter(Boolean);
}

function errorLine(err) {
  return h("p", { class: "error", role: "alert" }, problemText(err));
}

// --- API ------------------------------------------------------------------------------

class ApiError extends Error {
  constructor(status, message) {
    super(message);
    this.status = status;
  }
}

function key() {
  return sessionStorage.getItem(KEY);
}

function tenant() {
  return $("tenant").value.trim() || "default";
}

async function api(method, path, body) {
  const headers = { Authorization: `Bearer ${key()}` };
  if (body !== undefined) headers["Content-Type"] = "application/json";
  const response = await fetch(path, {
    method,
    headers,
    cache: "no-store",
    body: body === undefined ? undefined : JSON.stringify(body),
  });
  if (response.status === 401) {
    logout("The key was refused (revoked?): log in again.");
    throw new ApiError(401, "unauthorized");
  }
  const text = await response.text();
  let data = null;
  try {
    data = text ? JSON.parse(text) : null;
  } catch {
    data = null;
  }
  if (!response.ok) {
    throw new ApiError(response.status, (data && (data.detail || data.title)) || text);
  }
  return data;
}

function q(params) {
  const search = new URLSearchParams();
  for (const [name, value] of Object.entries(params)) {
    for (const one of [value].flat()) {
      if (one !== undefined && one !== null && one !== "") search.append(name, one);
    }
  }
  return search.toString();
}

// A Server-Sent-Event stream read with fetch (EventSource cannot send headers).
async function readEvents(path, signal, onEvent) {
  const response = await fetch(path, {
    headers: { Authorization: `Bearer ${key()}`, Accept: "text/event-stream" },
    signal,
    cache: "no-store",
  });
  if (!response.ok) {
    const text = await response.text();
    let detail = text;
    try {
      detail = JSON.parse(text).detail || text;
    } catch {
      /* plain text */
    }
    throw new ApiError(response.status, detail);
  }
  const reader = response.body.pipeThrough(new TextDecoderStream()).getReader();
  let buffer = "";
  for (;;) {
    const { value, done } = await reader.read();
    if (done) return;
    buffer += value;
    let end;
    while ((end = buffer.indexOf("\n\n")) >= 0) {
      const block = buffer.slice(0, end);
      buffer = buffer.slice(end + 2);
      const event = { event: "message", id: null, data: "" };
      for (const line of block.split("\n")) {
        if (line.startsWith(":")) continue;
        const colon = line.indexOf(":");
        const name = colon < 0 ? line : line.slice(0, colon);
        const field = colon < 0 ? "" : line.slice(colon + 1).replace(/^ /, "");
        if (name === "event") event.event = field;
        else if (name === "id") event.id = field;
        else if (name === "data") event.data += field;
      }
      if (event.data) onEvent(event.event, event.id, JSON.parse(event.data));
    }
  }
}

// --- metrics --------------------------------------------------------------------------

export function parseMetrics(text) {
  const samples = [];
  for (const line of text.split("\n")) {
    if (!line || line.startsWith("#")) continue;
    const match = /^([a-zA-Z_:][\w:]*)(\{([^}]*)\})?\s+(\S+)/.exec(line);
    if (!match) continue;
    const labels = {};
    for (const pair of (match[3] || "").matchAll(/(\w+)="((?:[^"\\]|\\.)*)"/g)) {
      labels[pair[1]] = pair[2];
    }
    samples.push({ name: match[1], labels, value: Number(match[4]) });
  }
  return samples;
}

function sum(samples, name, filter = () => true) {
  return samples
    .filter((s) => s.name === name && filter(s.labels))
    .reduce((total, s) => total + s.value, 0);
}

// The q-quantile of a histogram's observations between two scrapes (cumulative buckets).
export function quantile(before, after, name, q) {
  const buckets = (samples) =>
    new Map(samples.filter((s) => s.name === `${name}_bucket`).map((s) => [s.labels.le, s.value]));
  const b = buckets(before);
  const a = [...buckets(after)].map(([le, n]) => [Number(le), n - (b.get(le) || 0)]);
  a.sort((x, y) => x[0] - y[0]);
  const total = a.length ? a[a.length - 1][1] : 0;
  if (!total) return null;
  const rank = q * total;
  let lower = 0;
  let below = 0;
  for (const [le, n] of a) {
    if (n >= rank) {
      if (!Number.isFinite(le)) return lower;
      return lower + ((le - lower) * (rank - below)) / Math.max(n - below, 1);
    }
    lower = le;
    below = n;
  }
  return lower;
}

function sparkline(values) {
  const ns = "http://www.w3.org/2000/svg";
  const svg = document.createElementNS(ns, "svg");
  svg.setAttribute("viewBox", "0 0 100 36");
  svg.setAttribute("preserveAspectRatio", "none");
  const finite = values.filter((v) => Number.isFinite(v));
  const top = Math.max(...finite, 1e-9);
  const points = values
    .map((v, i) => `${(i / Math.max(values.length - 1, 1)) * 100},${34 - ((Number.isFinite(v) ? v : 0) / top) * 32}`)
    .join(" ");
  const line = document.createElementNS(ns, "polyline");
  line.setAttribute("points", points);
  svg.append(line);
  return svg;
}

// --- screens --------------------------------------------------------------------------

const SCREENS = {
  overview: ["Overview", overview],
  users: ["Users", users],
  trace: ["Trace", trace],
  broadcast: ["Broadcast", broadcast],
  deliveries: ["Deliveries", deliveries],
  queues: ["Queues", queues],
  groups: ["Groups", groups],
  topics: ["Topics", topics],
  rules: ["Rules", rules],
  views: ["Views", views],
  keys: ["API keys", apiKeys],
  audit: ["Audit log", audit],
};

function route() {
  const [name, query = ""] = location.hash.replace(/^#\/?/, "").split("?");
  return { name: SCREENS[name] ? name : "overview", params: new URLSearchParams(query) };
}

function go(name, params = {}) {
  const query = q(params);
  const hash = `#/${name}${query ? `?${query}` : ""}`;
  if (location.hash === hash) show(); // the same screen again: load it afresh
  else location.hash = hash;
}

// A screen renders into its own view, so a render still waiting on the hub when the
// next one starts (two hash changes in a row) fills a view no longer shown, never the
// page; what it started (a timer, a tail) stops with it, through onLeave.
function leaveView() {
  const view = $("screen").querySelector(":scope > .view");
  if (view && view.leave) view.leave();
}

function onLeave(view, stop) {
  if (view.isConnected) view.leave = stop;
  else stop(); // the screen was left while it loaded
}

async function show() {
  const mine = ++shown;
  leaveView();
  const { name, params } = route();
  for (const link of $("nav").children) {
    link.classList.toggle("active", link.dataset.screen === name);
  }
  const screen = $("screen");
  const view = h("div", { class: "view" });
  screen.replaceChildren(h("h2", {}, SCREENS[name][0]), view);
  screen.dataset.screen = name;
  screen.dataset.ready = "";
  try {
    await SCREENS[name][1](view, params);
  } catch (err) {
    if (!(err instanceof ApiError && err.status === 401)) view.append(errorLine(err));
  }
  if (mine !== shown) return; // a newer show() owns the screen and says when it is ready
  screen.dataset.readyMs = String(Math.round(performance.now())); // read by bench/console.py
  screen.dataset.ready = "1";
}

async function overview(screen) {
  const TILES = [
    ["streams", "Streams open", (m) => sum(m, "notifyhub_streams_open"), ""],
    ["ingest", "Ingest (notifications/s)", null, "/s"],
    ["fanout", "Fan-out (copies/s)", null, "/s"],
    ["p99", "p99 publish-to-stream", null, " ms"],
    ["deliveries", "Delivery backlog", (m) =>
      sum(m, "notifyhub_deliveries", (l) => ["pending", "failed"].includes(l.status)), ""],
    ["delayed", "Delayed backlog", (m) => sum(m, "notifyhub_delayed_backlog"), ""],
  ];
  const history = Object.fromEntries(TILES.map(([id]) => [id, []]));
  const grid = h("div", { class: "tiles" });
  const cells = {};
  for (const [id, label] of TILES) {
    cells[id] = { value: h("div", { class: "value", "data-tile": id }, "…"), chart: h("div") };
    grid.append(h("div", { class: "tile" }, h("div", { class: "label" }, label), cells[id].value, cells[id].chart));
  }
  screen.append(grid, h("p", { class: "muted" }, "From the hub's own /metrics (this process), every 2 s."));
  let last = null;
  const tick = async () => {
    const now = performance.now();
    const samples = parseMetrics(await (await fetch("/metrics", { cache: "no-store" })).text());
    const values = {};
    for (const [id, , value] of TILES) if (value) values[id] = value(samples);
    if (last) {
      const seconds = (now - last.at) / 1000;
      const rate = (name) => (sum(samples, name) - sum(last.samples, name)) / seconds;
      values.ingest = rate("notifyhub_notifications_ingested_total");
      values.fanout = rate("notifyhub_notification_copies_total");
      const p99 = quantile(last.samples, samples, "notifyhub_publish_to_stream_seconds", 0.99);
      values.p99 = p99 === null ? NaN : p99 * 1000;
    }
    last = { at: now, samples };
    for (const [id, , , unit] of TILES) {
      const v = values[id];
      if (v === undefined) continue;
      history[id] = [...history[id], v].slice(-60);
      cells[id].value.textContent = Number.isFinite(v) ? `${Math.round(v * 10) / 10}${unit}` : "–";
      cells[id].chart.replaceChildren(sparkline(history[id]));
    }
  };
  await tick();
  const timer = setInterval(() => tick().catch(() => {}), 2000);
  onLeave(screen, () => clearInterval(timer));
}

/** A user's quiet hours (issue 41): the schedule, whose, the zone, quiet now until when. */
function quietLine(quiet) {
  if (!quiet || !quiet.schedule || !Object.keys(quiet.schedule).length) {
    return h("div", { class: "muted", id: "user-quiet" }, "Quiet hours: none");
  }
  const windows = Object.entries(quiet.schedule).map(([days, [from, to]]) => `${days} ${from}-${to}`);
  const now = quiet.quiet_now ? `quiet now, until ${when(quiet.until)}` : "not quiet now";
  return h("div", { class: "muted", id: "user-quiet" },
    `Quiet hours (${quiet.source === "user" ? "their own" : "tenant default"}, ${quiet.time_zone}): `,
    `${windows.join(", ")}; ${now}`);
}

async function users(screen, params) {
  const user = params.get("user") || "";
  const input = h("input", { name: "user", value: user, placeholder: "user id", required: true });
  screen.append(h("form", {
    class: "row",
    onsubmit: (e) => { e.preventDefault(); go("users", { user: input.value.trim() }); },
  }, h("label", {}, "User", input), h("button", { type: "submit" }, "Look up")));
  if (!user) return;
  const t = tenant();
  const [found, page] = await Promise.all([
    api("GET", `/v1/admin/users/${encodeURIComponent(t)}/${encodeURIComponent(user)}`),
    api("GET", `/v1/admin/inbox?${q({ tenant: t, user, limit: 50 })}`),
  ]);
  const c = found.counts;
  screen.append(h("div", { class: "card", id: "user-summary" },
    h("strong", {}, `${found.user}`), ` in ${found.tenant}: `,
    `${c.unread} unread, ${c.unseen} unseen, ${c.total} in the inbox; change seq ${found.seq}; `,
    `${found.streams_open} stream(s) open; groups: ${found.groups.join(", ") || "none"}; `,
    `topics: ${found.topics.join(", ") || "none"}`,
    h("div", { class: "muted", id: "user-addresses" },
      `E-mail: ${found.email || "none"}; locale: ${found.locale || "default"}; `,
      `time zone: ${found.time_zone || "none"}`),
    quietLine(found.quiet),
    Object.keys(found.preferences.categories).length
      ? h("div", { class: "muted" }, "Preferences: ", Object.entries(found.preferences.categories)
        .map(([cat, p]) => `${cat} (inbox ${p.inbox ? "on" : "off"}, push ${p.push ? "on" : "off"})`).join("; "))
      : null));
  screen.append(await pendingEscalations(t, user));
  const inbox = table(["", "Title", "Status", "Created", "Id"], page.items.map((item) => h("tr", {},
    h("td", {}, item.pinned ? "📌" : ""),
    h("td", { class: item.status === "unread" ? "status-unread" : "" }, item.title),
    h("td", {}, item.status, item.archived ? " · archived" : ""),
    h("td", {}, when(item.created_at)),
    h("td", {}, h("a", { href: `#/trace?${q({ id: item.id, user })}`, class: "mono" }, item.id)))));
  inbox.id = "user-inbox";
  screen.append(await userDigests(t, user));
  const tail = h("ul", { id: "tail", class: "plain" });
  const tailState = h("p", { class: "muted", id: "tail-state" }, "connecting…");
  screen.append(h("div", { class: "split" },
    h("section", {}, h("h3", {}, "Inbox, as they see it"), inbox),
    h("section", {}, h("h3", {}, "Live tail"), tailState, h("div", { class: "card" }, tail))));
  const abort = new AbortController();
  onLeave(screen, () => abort.abort());
  readEvents(`/v1/admin/tail?${q({ tenant: t, user })}`, abort.signal, (event, id, data) => {
    tailState.textContent = "live";
    const what = event === "counts" || event === "reset"
      ? `${data.unread} unread, ${data.unseen} unseen, ${data.total} in the inbox`
      : data.title ? `${data.title} (${data.id})` : data.id || JSON.stringify(data);
    tail.prepend(h("li", { "data-event": event },
      h("span", { class: "badge" }, event), " ", h("span", { class: "mono" }, id || ""), " ", what));
  }).catch((err) => {
    if (!abort.signal.aborted) tailState.replaceChildren(errorLine(err));
  });
}

// The user's digests not sent yet (issue 41), each with a cancel button (audited).
async function userDigests(t, user) {
  const base = `/v1/admin/users/${encodeURIComponent(t)}/${encodeURIComponent(user)}/digests`;
  const open = (await api("GET", base)).digests;
  const section = h("section", { id: "user-digests" }, h("h3", {}, "Open digests"));
  if (!open.length) {
    section.append(h("p", { class: "muted" }, "none"));
    return section;
  }
  section.append(table(["Key", "Items", "State", "Sent at", ""], open.map((d) => h("tr", {},
    h("td", { class: "mono" }, d.key),
    h("td", {}, String(d.items)),
    h("td", {}, d.state),
    h("td", {}, when(d.due_at)),
    h("td", {}, h("button", {
      type: "button",
      onclick: async () => {
        try {
          await api("DELETE", `${base}/${d.id}`);
          go("users", { user });
        } catch (err) {
          section.append(errorLine(err));
        }
      },
    }, "Cancel"))))));
  return section;
}

// The user's escalation steps not run yet, each with a Cancel (audited) (issue 41).
async function pendingEscalations(t, user) {
  const base = `/v1/admin/users/${encodeURIComponent(t)}/${encodeURIComponent(user)}/escalations`;
  const found = await api("GET", base);
  const section = h("section", { id: "user-escalations" }, h("h3", {}, "Pending escalations"));
  if (!found.items.length) {
    section.append(h("p", { class: "muted" }, "None."));
    return section;
  }
  const cancel = (step) => async (e) => {
    const row = e.target.closest("tr");
    try {
      await api("DELETE", `${base}/${encodeURIComponent(step.id)}`);
      row.remove();
    } catch (err) {
      row.append(h("td", {}, errorLine(err)));
    }
  };
  const rows = found.items.map((step) => h("tr", { "data-escalation": step.id },
    h("td", {}, h("a", { href: `#/trace?${q({ id: step.notification_id, user })}`, class: "mono" }, step.notification_id)),
    h("td", { class: "num" }, step.step), h("td", {}, step.channel), h("td", {}, `unless ${step.unless}`),
    h("td", {}, when(step.due_at)),
    h("td", {}, h("button", { type: "button", class: "danger", onclick: cancel(step) }, "Cancel"))));
  section.append(table(["Notification", "Step", "Channel", "Unless", "Due", ""], rows));
  return section;
}

async function trace(screen, params) {
  const id = params.get("id") || "";
  const user = params.get("user") || "";
  const idInput = h("input", { name: "id", value: id, placeholder: "notification id", size: 30, required: true });
  const userInput = h("input", { name: "user", value: user, placeholder: "(every recipient)" });
  screen.append(h("form", {
    class: "row",
    onsubmit: (e) => {
      e.preventDefault();
      go("trace", { id: idInput.value.trim(), user: userInput.value.trim() });
    },
  }, h("label", {}, "Notification", idInput), h("label", {}, "User", userInput),
  h("button", { type: "submit" }, "Show trace")));
  if (!id) return;
  const found = await api("GET", `/v1/admin/notifications/${encodeURIComponent(id)}/trace?${q({ tenant: tenant(), user })}`);
  const named = found.named;
  screen.append(h("div", { class: "card", id: "trace-summary" },
    `Created ${when(found.created_at)}, expires ${when(found.expires_at)}; category ${found.category || "none"}; `,
    `origin ${found.origin}; named ${named.users} user(s)`,
    named.groups.length ? `, groups ${named.groups.join(", ")}` : "",
    named.topics.length ? `, topics ${named.topics.join(", ")}` : "",
    `; resolved to ${found.resolved} user(s). `,
    Object.entries(found.outcomes).filter(([, n]) => n).map(([o, n]) => [badge(o), ` ${n} `]),
    found.recalled_at ? h("strong", {}, ` Recalled ${when(found.recalled_at)}.`) : ""));
  const pushedOut = (line) => [
    line.replaced ? `collapsed: replaced ${line.replaced}` : "",
    line.evicted.length ? `inbox full: evicted ${line.evicted.join(", ")}` : "",
  ].filter(Boolean).join("; ");
  const beyond = (line) => Object.entries(line.channels || {})
    .map(([channel, outcome]) => `${channel}: ${outcome}`).join("; ");
  const lines = table(["User", "Reached through", "Outcome", "Seq", "Streamed to", "Pushed out", "E-mail and push"], found.lines.map((line) => h("tr", {},
    h("td", {}, h("a", { href: `#/users?${q({ user: line.user })}` }, line.user)),
    h("td", { class: "mono", "data-source": line.source }, line.source), h("td", {}, badge(line.outcome)),
    h("td", { class: "num" }, line.seq ?? ""),
    h("td", { class: "num", "data-streamed": line.streamed_to }, line.streamed_to),
    h("td", { class: "mono" }, pushedOut(line)),
    h("td", { "data-channels": beyond(line) }, beyond(line)))));
  lines.id = "trace-lines";
  screen.append(lines);
  if (found.now) {
    const now = found.now;
    screen.append(h("div", { class: "card", id: "trace-now" }, `Now: `,
      now.in_inbox ? `in the inbox, ${now.status}${now.archived ? ", archived" : ""}` : "not in the inbox",
      now.snoozed_until ? `, snoozed until ${when(now.snoozed_until)}` : "",
      now.expired ? "; expired" : "", `; ${now.streams_open} stream(s) open`));
  }
  if (found.recorded < found.resolved) {
    screen.append(h("p", { class: "muted" }, `Lines for the first ${found.recorded} recipients; name a user for another.`));
  }
}

async function broadcast(screen) {
  const field = (name, attrs = {}) => h("input", { name, ...attrs });
  const form = {
    users: field("users", { placeholder: "alice, bob" }),
    groups: field("groups", { placeholder: "replenishers" }),
    topics: field("topics", { placeholder: "restock" }),
    title: field("title", { required: true, maxlength: 200 }),
    body: h("textarea", { name: "body", maxlength: 4000 }),
    severity: h("select", { name: "severity" }, ["info", "success", "warning", "error", "critical"].map((s) => h("option", {}, s))),
    category: field("category", { placeholder: "(none)" }),
  };
  const recipients = () => ({ users: names(form.users), groups: names(form.groups), topics: names(form.topics) });
  const result = h("div", { id: "broadcast-result" });
  const send = h("button", { type: "button", disabled: true, id: "broadcast-send" }, "Send");
  let previewed = null;
  const preview = async () => {
    result.replaceChildren();
    send.disabled = true;
    try {
      const found = await api("POST", "/v1/admin/recipients", { tenant: tenant(), recipients: recipients() });
      previewed = JSON.stringify([recipients(), form.title.value, form.body.value]);
      result.append(h("div", { class: "card" },
        h("div", { class: "muted" }, `Preview (${form.severity.value}${form.category.value ? `, ${form.category.value}` : ""})`),
        h("strong", {}, form.title.value), h("pre", {}, form.body.value),
        h("p", { id: "broadcast-count" }, `Reaches ${found.users} user(s): ${found.sample.join(", ")}${found.users > found.sample.length ? ", …" : ""}`)));
      send.textContent = `Send to ${found.users} user(s)`;
      send.disabled = found.users === 0 || !form.title.value.trim();
    } catch (err) {
      result.append(errorLine(err));
    }
  };
  send.addEventListener("click", async () => {
    if (previewed !== JSON.stringify([recipients(), form.title.value, form.body.value])) {
      result.replaceChildren(h("p", { class: "error" }, "The form changed since the preview: preview again."));
      send.disabled = true;
      return;
    }
    send.disabled = true;
    try {
      const body = {
        tenant: tenant(), recipients: recipients(), title: form.title.value, body: form.body.value,
        severity: form.severity.value,
      };
      if (form.category.value.trim()) body.category = form.category.value.trim();
      const sent = await api("POST", "/v1/notifications", body);
      result.append(h("p", { class: "ok", id: "broadcast-sent" }, `Sent ${sent.id} to ${sent.recipients} user(s). `,
        h("a", { href: `#/trace?${q({ id: sent.id })}` }, "Trace")));
    } catch (err) {
      result.append(errorLine(err));
    }
  });
  screen.append(h("form", { class: "card", onsubmit: (e) => { e.preventDefault(); preview(); } },
    h("div", { class: "row" }, h("label", {}, "Users", form.users), h("label", {}, "Groups", form.groups),
      h("label", {}, "Topics", form.topics)),
    h("div", { class: "row" }, h("label", {}, "Title", form.title), h("label", {}, "Severity", form.severity),
      h("label", {}, "Category", form.category)),
    h("label", { class: "muted" }, "Body", form.body),
    h("div", { class: "row" }, h("button", { type: "submit", class: "plain" }, "Preview"), send)), result);
}

async function deliveries(screen, params) {
  const t = tenant();
  const [bad, rest] = await Promise.all([
    api("GET", `/v1/admin/deliveries?${q({ tenant: t, status: ["failed", "final_failed"], limit: 50 })}`),
    api("GET", `/v1/admin/deliveries?${q({ tenant: t, status: ["pending", "awaiting_confirm", "sent"], limit: 50 })}`),
  ]);
  const detail = h("div", { id: "delivery-detail" });
  const open = async (id) => {
    detail.replaceChildren();
    try {
      const d = await api("GET", `/v1/deliveries/${encodeURIComponent(id)}?${q({ tenant: t })}`);
      const retry = h("button", { type: "button", id: "delivery-retry", onclick: async () => {
        retry.disabled = true;
        try {
          await api("POST", `/v1/deliveries/${encodeURIComponent(id)}/retry?${q({ tenant: t })}`);
          await open(id);
        } catch (err) {
          detail.append(errorLine(err));
        }
      } }, "Retry now");
      detail.append(h("div", { class: "card" }, h("h3", {}, `Delivery ${d.id} `, badge(d.status)),
        h("p", {}, `${d.definition}; ${d.failures} failure(s); last error: ${d.last_error || "none"}`),
        ["failed", "final_failed"].includes(d.status) ? retry : null,
        table(["#", "At", "Status", "Response / error", "ms"], d.attempts.map((a) => h("tr", {},
          h("td", { class: "num" }, a.attempt), h("td", {}, when(a.at)), h("td", {}, a.status_code ?? ""),
          h("td", {}, h("pre", {}, (a.error || "").slice(0, 300))), h("td", { class: "num" }, Math.round(a.duration_ms)))))));
    } catch (err) {
      detail.append(errorLine(err));
    }
  };
  const rows = (page) => page.deliveries.map((d) => h("tr", { "data-delivery": d.id },
    h("td", {}, h("a", { href: `#/deliveries?${q({ id: d.id })}`, class: "mono" }, d.id)),
    h("td", {}, d.definition), h("td", {}, badge(d.status)), h("td", { class: "num" }, d.failures),
    h("td", {}, when(d.last_attempt_at)), h("td", {}, (d.last_error || "").slice(0, 120))));
  const headers = ["Id", "Definition", "Status", "Failures", "Last attempt", "Last error"];
  screen.append(h("h3", {}, "Failed first"), table(headers, rows(bad)), detail,
    h("h3", {}, "Pending and sent"), table(headers, rows(rest)));
  if (params.get("id")) await open(params.get("id"));
}

async function queues(screen) {
  const t = tenant();
  const page = await api("GET", `/v1/admin/queues?${q({ tenant: t })}`);
  screen.append(table(["Queue", "Depth", "Delayed", "Ready", "In flight", "Oldest due"], page.queues.map((queue) =>
    h("tr", {}, h("td", {}, queue.name), h("td", { class: "num" }, queue.depth), h("td", { class: "num" }, queue.delayed),
      h("td", { class: "num" }, queue.ready), h("td", { class: "num" }, queue.in_flight),
      h("td", { class: "num" }, queue.oldest_age_ms === null ? "" : `${Math.round(queue.oldest_age_ms / 1000)} s`)))));
  const id = h("input", { name: "message", placeholder: "message id", size: 30 });
  const out = h("p");
  const act = (method, path) => async () => {
    out.replaceChildren();
    try {
      const answer = await api(method, path());
      out.replaceChildren(h("span", { class: "ok" }, answer ? JSON.stringify(answer) : "done"));
    } catch (err) {
      out.replaceChildren(errorLine(err));
    }
  };
  screen.append(h("h3", {}, "A delayed message"), h("div", { class: "row" }, h("label", {}, "Message", id),
    h("button", { type: "button", class: "danger", onclick: act("DELETE", () => `/v1/delayed/${encodeURIComponent(id.value.trim())}?${q({ tenant: t })}`) }, "Cancel"),
    h("button", { type: "button", class: "plain", onclick: act("POST", () => `/v1/delayed/${encodeURIComponent(id.value.trim())}/restore?${q({ tenant: t })}`) }, "Restore from PostgreSQL"),
    h("button", { type: "button", class: "plain", onclick: act("POST", () => `/v1/delayed/restore?${q({ tenant: t })}`) }, "Restore every queue")), out);
}

// An editor for named JSON objects: a list, and a textarea that PUTs (and DELETEs) one.
async function editor(screen, { list, path, fields, example, rows, extra }) {
  const t = tenant();
  const items = await list(t);
  const name = h("input", { name: "name", placeholder: "name", required: true });
  const text = h("textarea", { name: "body" }, JSON.stringify(example, null, 2));
  const out = h("p");
  const pick = (item) => {
    name.value = item.name;
    text.value = JSON.stringify(Object.fromEntries(fields.map((f) => [f, item[f]]).filter(([, v]) => v !== undefined)), null, 2);
  };
  const send = (method) => async () => {
    out.replaceChildren();
    try {
      const body = method === "PUT" ? JSON.parse(text.value) : undefined;
      await api(method, `${path}/${encodeURIComponent(name.value.trim())}?${q({ tenant: t })}`, body);
      await show();
    } catch (err) {
      out.replaceChildren(errorLine(jsonProblem(err)));
    }
  };
  screen.append(table(rows.headers, items.map((item) => h("tr", {},
    h("td", {}, h("a", { href: "#", onclick: (e) => { e.preventDefault(); pick(item); } }, item.name)),
    rows.cells(item).map((cell) => h("td", {}, cell))))),
  h("div", { class: "card" }, h("div", { class: "row" }, h("label", {}, "Name", name),
    h("button", { type: "button", onclick: send("PUT") }, "Save"),
    h("button", { type: "button", class: "danger", onclick: send("DELETE") }, "Delete")), text, out,
    extra ? extra({ name, text }) : null));
}

// A rule's templates rendered against a sample event (nothing stored or sent).
function rulePreview({ name, text }) {
  const actor = h("input", { name: "actor", value: "alice" });
  const target = h("input", { name: "target", value: "p-1" });
  const data = h("input", { name: "data", value: '{"excerpt": "Looks good to me"}', size: 36 });
  const result = h("div", { id: "rule-preview" });
  const run = async () => {
    try {
      const rule = JSON.parse(text.value);
      const answer = await api("POST", "/v1/admin/rules/preview", {
        rule,
        name: name.value.trim() || "preview",
        actor: { type: "user", id: actor.value.trim() },
        target: { type: rule.target_type, id: target.value.trim() },
        data: JSON.parse(data.value || "{}"),
      });
      result.replaceChildren(table(["Relationship", "Obtain", "Title", "Body"], answer.recipients.map((r) =>
        h("tr", {}, h("td", {}, r.relationship), h("td", {}, r.obtain),
          h("td", {}, r.error ? h("span", { class: "error" }, r.error) : r.title), h("td", {}, h("pre", {}, r.body))))));
    } catch (err) {
      result.replaceChildren(errorLine(jsonProblem(err)));
    }
  };
  return [h("h3", {}, "Preview against sample data"),
    h("div", { class: "row" }, h("label", {}, "Actor (user)", actor), h("label", {}, "Target id", target),
      h("label", {}, "Data (JSON)", data), h("button", { type: "button", class: "plain", onclick: run }, "Preview")),
    result];
}

async function groups(screen) {
  const t = tenant();
  const found = await api("GET", `/v1/admin/groups?${q({ tenant: t })}`);
  const name = h("input", { name: "group", placeholder: "group", required: true });
  const add = h("input", { name: "add", placeholder: "alice, bob" });
  const remove = h("input", { name: "remove", placeholder: "carol" });
  const out = h("p");
  const save = async () => {
    try {
      const g = encodeURIComponent(name.value.trim());
      await api("PUT", `/v1/admin/groups/${g}?${q({ tenant: t })}`);
      if (names(add).length || names(remove).length) {
        await api("POST", `/v1/admin/groups/${g}/members?${q({ tenant: t })}`, { add: names(add), remove: names(remove) });
      }
      await show();
    } catch (err) {
      out.replaceChildren(errorLine(err));
    }
  };
  screen.append(table(["Group", "Members"], found.groups.map((g) => h("tr", {},
    h("td", {}, h("a", { href: "#", onclick: (e) => { e.preventDefault(); name.value = g.name; } }, g.name)),
    h("td", { class: "num" }, g.members)))),
  h("div", { class: "card row" }, h("label", {}, "Group", name), h("label", {}, "Add members", add),
    h("label", {}, "Remove members", remove), h("button", { type: "button", onclick: save }, "Save"),
    h("button", { type: "button", class: "danger", onclick: async () => {
      try {
        await api("DELETE", `/v1/admin/groups/${encodeURIComponent(name.value.trim())}?${q({ tenant: t })}`);
        await show();
      } catch (err) {
        out.replaceChildren(errorLine(err));
      }
    } }, "Delete")), out);
}

async function topics(screen) {
  await editor(screen, {
    list: async (t) => {
      const page = await api("GET", `/v1/admin/topics?${q({ tenant: t, limit: 100 })}`);
      return Promise.all(page.topics.map(async (s) => ({
        ...s, ...(await api("GET", `/v1/admin/topics/${encodeURIComponent(s.name)}?${q({ tenant: t })}`)),
      })));
    },
    path: "/v1/admin/topics",
    fields: ["users", "groups"],
    example: { users: ["alice"], groups: [] },
    rows: { headers: ["Topic", "Users", "Groups"], cells: (s) => [s.user_count, s.group_count] },
  });
}

async function rules(screen) {
  await editor(screen, {
    list: async (t) => (await api("GET", `/v1/admin/rules?${q({ tenant: t, limit: 100 })}`)).rules,
    path: "/v1/admin/rules",
    fields: ["target_type", "recipients", "channels", "digest", "escalate"],
    example: { target_type: "post", recipients: [{ relationship: "author", obtain: "push", title: "{{ actor.id }} commented" }] },
    rows: { headers: ["Rule", "Target type", "Recipients"], cells: (r) => [r.target_type, JSON.stringify(r.recipients)] },
    extra: rulePreview,
  });
}

async function views(screen) {
  await editor(screen, {
    list: async (t) => (await api("GET", `/v1/admin/views?${q({ tenant: t, limit: 100 })}`)).views,
    path: "/v1/admin/views",
    fields: ["label", "filter"],
    example: { label: "Alarms", filter: { severity_at_least: "error" } },
    rows: { headers: ["View", "Label", "Filter"], cells: (v) => [v.label || "", JSON.stringify(v.filter)] },
  });
}

async function apiKeys(screen) {
  const found = await api("GET", "/v1/admin/api-keys");
  const name = h("input", { name: "key-name", placeholder: "billing-worker", required: true });
  const scope = h("select", { name: "scope" }, ["publish", "consume", "admin"].map((s) => h("option", {}, s)));
  const out = h("div", { id: "key-result" });
  // The key's tenant is named: without it the hub revokes the hub-wide key of that name
  // (another tenant's key of the same name: a 409), not the one on this row.
  const revoke = (k) => async () => {
    try {
      await api("DELETE", `/v1/admin/api-keys/${encodeURIComponent(k.name)}?${q({ tenant: k.tenant })}`);
      await show();
    } catch (err) {
      out.replaceChildren(errorLine(err));
    }
  };
  screen.append(table(["Name", "Scope", "Tenant", "Created", "Revoked", ""], found.keys.map((k) => h("tr", { "data-key": k.name },
    h("td", {}, k.name), h("td", {}, k.scope), h("td", {}, k.tenant ?? "(any)"), h("td", {}, when(k.created_at)),
    h("td", {}, when(k.revoked_at)),
    h("td", {}, k.revoked_at ? "" : h("button", { type: "button", class: "danger", onclick: revoke(k) }, "Revoke"))))),
  h("form", { class: "card row", onsubmit: async (e) => {
    e.preventDefault();
    try {
      const made = await api("POST", "/v1/admin/api-keys", { name: name.value.trim(), scope: scope.value, tenant: tenant() });
      await show();
      $("screen").append(h("div", { class: "card" }, h("p", {}, `Key ${made.name} (${made.scope}, ${made.tenant}): copy it now, it is not shown again.`),
        h("div", { class: "secret mono", id: "key-secret" }, made.key)));
    } catch (err) {
      out.replaceChildren(errorLine(err));
    }
  } }, h("label", {}, "Name", name), h("label", {}, "Scope", scope), h("button", { type: "submit" }, "Create key")), out);
}

async function audit(screen, params) {
  const cursor = params.get("cursor") || undefined;
  const page = await api("GET", `/v1/admin/audit?${q({ tenant: tenant(), limit: 50, cursor })}`);
  screen.append(table(["At", "Key", "Method", "Route", "Target", "Status"], page.entries.map((e) => h("tr", {},
    h("td", {}, when(e.at)), h("td", {}, e.key_name), h("td", {}, e.method), h("td", { class: "mono" }, e.route),
    h("td", {}, e.target ?? ""), h("td", { class: "num" }, e.status)))));
  if (page.next_cursor) screen.append(h("p", {}, h("a", { href: `#/audit?${q({ cursor: page.next_cursor })}` }, "Older")));
}

// --- session --------------------------------------------------------------------------

function logout(message = "") {
  sessionStorage.removeItem(KEY);
  leaveView();
  $("app").hidden = true;
  $("logout").hidden = true;
  $("tenant-box").hidden = true;
  $("login").hidden = false;
  $("login-error").textContent = message;
}

function start() {
  $("login").hidden = true;
  $("app").hidden = false;
  $("logout").hidden = false;
  $("tenant-box").hidden = false;
  show();
}

function init() {
  const nav = $("nav");
  for (const [name, [label]] of Object.entries(SCREENS)) {
    nav.append(h("a", { href: `#/${name}`, "data-screen": name }, label));
  }
  $("tenant").value = sessionStorage.getItem(TENANT) || "default";
  $("tenant").addEventListener("change", () => {
    sessionStorage.setItem(TENANT, tenant());
    show();
  });
  $("logout").addEventListener("click", () => logout());
  $("login-form").addEventListener("submit", async (e) => {
    e.preventDefault();
    sessionStorage.setItem(KEY, $("key").value.trim());
    $("key").value = "";
    try {
      await api("GET", "/v1/admin/api-keys");
      start();
    } catch (err) {
      const refused = { 401: "The hub refused that key.", 403: "That key is not an admin key." };
      logout(refused[err instanceof ApiError ? err.status : 0] || problemText(err));
    }
  });
  window.addEventListener("hashchange", () => { if (key()) show(); });
  if (key()) start();
  else logout();
  document.body.dataset.ready = "1";
}

init();
