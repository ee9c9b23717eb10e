/*
 * notifyhub-push-sw.js - the Web Push service worker that `hub.enablePush()` registers
 * (notifyhub.js). A push from the hub carries the notification as the hub stores it
 * (`{id, title, body, action_url, severity, category, thread_key, collapse_key, ...}`),
 * bare or wrapped as `{"notification": {...}}`; the worker shows it as a system
 * notification, one per thread (or collapse key), and a click focuses a tab already on its
 * `action_url` or opens one (http(s) URLs only; a relative one is on this origin).
 *
 * An app on another origin than the hub serves its own worker file that imports this one:
 *   importScripts("https://hub.example/static/notifyhub-push-sw.js");
 *
 * Loaded in a page (the tests do), it only defines `NotifyHubPush`: the pure functions the
 * handlers use.
 */
(function (root) {
  "use strict";

  const FALLBACK_TITLE = "New notification";

  /** The notification inside a push's JSON: bare, or as `{notification: {...}}`. */
  function notificationOf(payload) {
    if (payload && typeof payload === "object" && payload.notification && typeof payload.notification === "object") {
      return payload.notification;
    }
    return payload && typeof payload === "object" ? payload : {};
  }

  /** `url` resolved against `origin` if it is http(s), else null (no javascript:, data:...). */
  function clickTarget(url, origin) {
    if (typeof url !== "string" || url === "") return null;
    try {
      const target = new URL(url, origin);
      return target.protocol === "https:" || target.protocol === "http:" ? target.href : null;
    } catch (error) {
      return null;
    }
  }

  /**
   * What `showNotification(title, options)` gets for a push's JSON: the body as text, one
   * notification per thread or collapse key (`tag`, alerting again when it is replaced),
   * and what a click needs in `data`.
   */
  function display(payload, origin) {
    const n = notificationOf(payload);
    const tag = (n.thread && n.thread.key) || n.thread_key || n.collapse_key || null;
    const options = {
      body: typeof n.body === "string" ? n.body : "",
      data: { id: n.id || null, action_url: clickTarget(n.action_url, origin) },
      requireInteraction: n.severity === "critical",
    };
    if (tag) Object.assign(options, { tag: String(tag), renotify: true });
    const title = typeof n.title === "string" && n.title !== "" ? n.title : FALLBACK_TITLE;
    return { title, options };
  }

  /** A push's JSON, or null (a push without data, or not JSON, still shows something). */
  function payloadOf(event) {
    if (!event.data) return null;
    try {
      return event.data.json();
    } catch (error) {
      return { title: FALLBACK_TITLE, body: event.data.text() };
    }
  }

  async function focusOrOpen(url) {
    const windows = await root.clients.matchAll({ type: "window", includeUncontrolled: true });
    const open = windows.find((client) => client.url === url);
    if (open) return open.focus();
    return url === null ? null : root.clients.openWindow(url);
  }

  root.NotifyHubPush = { notificationOf, clickTarget, display };

  if (typeof root.ServiceWorkerGlobalScope !== "function" || !(root instanceof root.ServiceWorkerGlobalScope)) return;

  root.addEventListener("install", () => root.skipWaiting());
  root.addEventListener("activate", (event) => event.waitUntil(root.clients.claim()));
  root.addEventListener("push", (event) => {
    const { title, options } = display(payloadOf(event), root.location.origin);
    // userVisibleOnly: every push shows a notification, even one we cannot read
    event.waitUntil(root.registration.showNotification(title, options));
  });
  root.addEventListener("notificationclick", (event) => {
    event.notification.close();
    const url = event.notification.data ? event.notification.data.action_url : null;
    event.waitUntil(focusOrOpen(url || null));
  });
})(self);
