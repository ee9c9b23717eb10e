import { createContext, useContext, useEffect, useMemo, useRef, useState, type ReactNode } from "react";
import type {
  BackoffOptions,
  ConnectionStatus,
  NotifyHubClient,
  NotifyHubGlobal,
  TokenGetter,
} from "./notifyhub.js";

export interface NotifyHubProviderProps {
  /** The hub's base URL, e.g. "https://hub.example" (only its origin is used). */
  url: string;
  /** A fresh stream token per connection, normally from your backend. */
  getStreamToken: TokenGetter;
  /** The user's token for the REST calls (list, mark read...), as a Bearer header. */
  getAccessToken?: TokenGetter;
  /** One shared stream per browser and user: name the user, e.g. "acme/alice". */
  user?: string;
  /** false: a stream per tab. A hub on another origin than the page always gets one. */
  sharedWorker?: boolean;
  backoff?: BackoffOptions;
  credentials?: RequestCredentials;
  /** Where to load notifyhub.js from (default `${url}/static/notifyhub.js`). */
  scriptUrl?: string;
  /** A client you made yourself (tests, or a page that already has one): used as is. */
  client?: NotifyHubClient;
  children?: ReactNode;
}

export interface NotifyHubContextValue {
  /** null until notifyhub.js has loaded and the client started. */
  client: NotifyHubClient | null;
  status: ConnectionStatus;
  /** Loading notifyhub.js failed. */
  error: Error | null;
}

const NotifyHubContext = createContext<NotifyHubContextValue | null>(null);

const loading = new Map<string, Promise<NotifyHubGlobal>>();

function loadedGlobal(): NotifyHubGlobal | undefined {
  const found = (globalThis as { NotifyHub?: Partial<NotifyHubGlobal> }).NotifyHub;
  return typeof found?.connect === "function" ? (found as NotifyHubGlobal) : undefined;
}

/** notifyhub.js's markdown renderer and sanitiser (its `renderBody`), served next to it. */
const RENDERERS = ["vendor/markdown-it.min.js", "vendor/purify.min.js"];

function loadScript(src: string): Promise<void> {
  return new Promise<void>((resolve, reject) => {
    const script = document.createElement("script");
    script.src = src;
    script.async = true;
    script.onload = () => resolve();
    script.onerror = () => reject(new Error(`could not load ${src}`));
    document.head.append(script);
  });
}

/** markdown-it and DOMPurify from next to notifyhub.js; without them markdown bodies show
 * as their text (never as HTML), so a failure here is not one of the provider's. */
async function loadRenderers(src: string): Promise<void> {
  const base = new URL(src, document.baseURI);
  await Promise.all(RENDERERS.map((path) => loadScript(new URL(path, base).toString()).catch(() => {})));
}

/**
 * The global `NotifyHub`, loading notifyhub.js from `src` once if the page has not (and
 * with it the markdown renderer its `renderBody` uses). It is loaded as a classic script
 * from the hub: it finds its SharedWorker next to itself.
 */
export function loadNotifyHub(src: string): Promise<NotifyHubGlobal> {
  const ready = loadedGlobal();
  if (ready !== undefined) return Promise.resolve(ready);
  let promise = loading.get(src);
  if (promise === undefined) {
    promise = Promise.all([loadScript(src), loadRenderers(src)]).then(() => {
      const hub = loadedGlobal();
      if (hub === undefined) throw new Error(`${src} did not define NotifyHub`);
      return hub;
    });
    promise.catch(() => loading.delete(src)); // a later mount may try again
    loading.set(src, promise);
  }
  return promise;
}

/**
 * Starts one notifyhub.js client for its children and closes it on unmount. The token
 * callbacks may change on every render; a new `url`, `user` or transport reconnects.
 */
export function NotifyHubProvider(props: NotifyHubProviderProps): ReactNode {
  const { url, user, sharedWorker, scriptUrl, client: given, children } = props;
  const latest = useRef(props);
  latest.current = props;
  const [client, setClient] = useState<NotifyHubClient | null>(given ?? null);
  const [status, setStatus] = useState<ConnectionStatus>(given?.status ?? "idle");
  const [error, setError] = useState<Error | null>(null);

  useEffect(() => {
    if (given !== undefined) {
      setClient(given);
      return undefined;
    }
    let active = true;
    let started: NotifyHubClient | null = null;
    const src = scriptUrl ?? new URL("/static/notifyhub.js", url).toString();
    loadNotifyHub(src).then(
      (hub) => {
        if (!active) return;
        const { backoff, credentials, getAccessToken } = latest.current;
        started = hub.connect({
          baseUrl: url,
          getStreamToken: () => latest.current.getStreamToken(),
          ...(getAccessToken !== undefined && {
            getAccessToken: () => (latest.current.getAccessToken ?? getAccessToken)(),
          }),
          ...(user !== undefined && { user }),
          ...(sharedWorker !== undefined && { sharedWorker }),
          ...(backoff !== undefined && { backoff }),
          ...(credentials !== undefined && { credentials }),
        });
        setError(null);
        setClient(started);
      },
      (failure: unknown) => {
        if (active) setError(failure instanceof Error ? failure : new Error(String(failure)));
      },
    );
    return () => {
      active = false;
      started?.close();
      setClient(null);
    };
  }, [given, url, user, sharedWorker, scriptUrl]);

  useEffect(() => {
    if (client === null) {
      setStatus("idle");
      return undefined;
    }
    setStatus(client.status);
    return client.on("status", setStatus);
  }, [client]);

  const value = useMemo(() => ({ client, status, error }), [client, status, error]);
  return <NotifyHubContext.Provider value={value}>{children}</NotifyHubContext.Provider>;
}

/** The provider's client (null while it starts), its connection status and load error. */
export function useNotifyHub(): NotifyHubContextValue {
  const value = useContext(NotifyHubContext);
  if (value === null) throw new Error("useNotifyHub needs a <NotifyHubProvider> above it");
  return value;
}
