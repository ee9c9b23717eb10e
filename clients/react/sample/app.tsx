// The React sample the browser test renders (tests/e2e/test_react.py bundles it with
// esbuild). The hub's URL and a user token come in the fragment: #hub=...&token=...,
// optionally the view (tab) the inbox lists: &view=..., and &matrix=a,b to show the
// preference matrix with those categories.
import { StrictMode, useEffect, useState } from "react";
import { createRoot } from "react-dom/client";
import {
  Inbox,
  inView,
  NotifyHubProvider,
  PreferenceMatrix,
  useNotification,
  useNotifyHub,
  type NotifyHubClient,
} from "../src/index.js";

declare global {
  interface Window {
    notifyhubSample?: { client: NotifyHubClient | null; inView: typeof inView };
  }
}

const fragment = new URLSearchParams(location.hash.slice(1));
const hub = fragment.get("hub") ?? location.origin;
const userToken = fragment.get("token") ?? "";
const view = fragment.get("view");
const matrix = fragment.get("matrix");

async function streamToken(): Promise<string> {
  // A real app asks its own backend; the sample holds a user token and asks the hub.
  const response = await fetch(`${hub}/v1/me/stream-tokens`, {
    method: "POST",
    headers: { Authorization: `Bearer ${userToken}` },
  });
  if (!response.ok) throw new Error(`stream token: HTTP ${response.status}`);
  return ((await response.json()) as { token: string }).token;
}

/** The test's handle on the client (its transport mode) and on the view predicate. */
function ExposeClient(): null {
  const { client } = useNotifyHub();
  useEffect(() => {
    window.notifyhubSample = { client, inView };
  }, [client]);
  return null;
}

function Detail({ id }: { id: string }) {
  const { notification, loading, error, deleted } = useNotification(id);
  if (loading) return <p data-nh="detail-loading">Loading…</p>;
  if (deleted) return <p data-nh="detail-deleted">Deleted</p>;
  if (error !== null || notification === null) return <p data-nh="detail-error">{error?.message}</p>;
  return (
    <article data-nh="detail" data-id={notification.id} data-status={notification.status}>
      <h2>{notification.title}</h2>
      <p>{notification.body}</p>
    </article>
  );
}

function App() {
  const [selected, setSelected] = useState<string | null>(null);
  return (
    <NotifyHubProvider url={hub} user="sample" getStreamToken={streamToken} getAccessToken={() => userToken}>
      <ExposeClient />
      <Inbox {...(view === null ? {} : { view })} onItemClick={(item) => setSelected(item.id)} />
      {selected !== null && <Detail id={selected} />}
      {matrix !== null && <PreferenceMatrix categories={matrix.split(",").filter(Boolean)} />}
    </NotifyHubProvider>
  );
}

const root = document.getElementById("root");
if (root === null) throw new Error("no #root");
createRoot(root).render(
  <StrictMode>
    <App />
  </StrictMode>,
);
