/*
 * notifyhub-worker.js - the SharedWorker behind notifyhub.js: one stream for every tab of
 * one browser and user. It relays each event to every tab, asks a tab for stream tokens
 * (the token callback lives in the page), and marks each new notification as the toast of
 * exactly one tab: the visible one made visible last.
 */
/* global importScripts, NotifyHub */
"use strict";

importScripts("notifyhub.js");

const { StreamConnection, electToastTab, wantsToast } = NotifyHub.internal;

const tabs = new Map(); // port -> the tab's presence {id, visible, since, at}
const pending = new Map(); // token request id -> {resolve, reject, timer}
let connection = null;
let counts = null;
let lastEventId = null;
let nextRequest = 1;

function broadcast(message) {
  for (const port of tabs.keys()) port.postMessage(message);
}

function onEvent({ event, id, data }) {
  lastEventId = id;
  if (event === "counts" || event === "reset") counts = data;
  const toastTab =
    event === "notification" && wantsToast(data) ? electToastTab(tabs.values(), Date.now()) : null;
  for (const [port, tab] of tabs) {
    port.postMessage({ type: "event", event, id, data, toast: tab.id === toastTab });
  }
}

/** Tabs to ask for a token: visible and recently heard from first. */
function tokenCandidates() {
  const now = Date.now();
  const score = (tab) => (tab.visible ? 2 : 0) + (now - tab.at < NotifyHub.PRESENCE_STALE_MS ? 1 : 0);
  return [...tabs].sort((a, b) => score(b[1]) - score(a[1])).map(([port]) => port);
}

function askTab(port) {
  return new Promise((resolve, reject) => {
    const rid = nextRequest++;
    const timer = setTimeout(() => {
      pending.delete(rid);
      reject(new Error("no token answer"));
    }, NotifyHub.TOKEN_TIMEOUT_MS);
    pending.set(rid, { resolve, reject, timer });
    port.postMessage({ type: "token-request", rid });
  });
}

async function streamToken() {
  for (const port of tokenCandidates()) {
    try {
      return await askTab(port);
    } catch (error) {
      // that tab is gone or its callback failed: ask the next one
    }
  }
  throw new Error("no tab could provide a stream token");
}

function answerTokenRequest(message) {
  const request = pending.get(message.rid);
  if (request === undefined) return;
  pending.delete(message.rid);
  clearTimeout(request.timer);
  if (message.type === "token") request.resolve(message.token);
  else request.reject(new Error(message.message));
}

function start(hello) {
  if (connection !== null) return;
  connection = new StreamConnection({
    url: hello.url,
    getToken: streamToken,
    onEvent,
    onStatus: (status) => broadcast({ type: "status", status }),
    backoff: hello.backoff,
    lastEventId,
  });
  connection.start();
}

function leave(port) {
  tabs.delete(port);
  if (tabs.size === 0 && connection !== null) {
    connection.stop(); // the last tab left: close the stream, keep the cursor
    connection = null;
  }
}

function receive(port, message) {
  switch (message.type) {
    case "hello":
      tabs.set(port, message.tab);
      start(message);
      port.postMessage({ type: "state", counts, status: connection.status });
      break;
    case "presence":
      tabs.set(port, message.tab);
      break;
    case "token":
    case "token-error":
      answerTokenRequest(message);
      break;
    case "reconnect":
      if (connection !== null) connection.reconnect();
      break;
    case "bye":
      leave(port);
      break;
    default:
      break;
  }
}

self.onconnect = (connect) => {
  const port = connect.ports[0];
  port.onmessage = (message) => receive(port, message.data);
  port.start();
};
