import { useCallback, useEffect, useRef, useState, type ReactNode } from "react";
import type { CategoryPreference, Preferences, PreferencesUpdate } from "./notifyhub.js";
import { useNotifyHub } from "./provider.js";

/** The channels a category can reach the user on, in the order they are shown. */
export const CHANNELS: readonly string[] = ["inbox", "email", "push"];

/**
 * The channels the hub answers with (a hub without e-mail has no `email`), known ones
 * first; all of `CHANNELS` while the user has no category set.
 */
export function channelsOf(preferences: Preferences | null): string[] {
  const found = new Set(Object.values(preferences?.categories ?? {}).flatMap((pref) => Object.keys(pref)));
  if (found.size === 0) return [...CHANNELS];
  return [...CHANNELS.filter((name) => found.has(name)), ...[...found].filter((name) => !CHANNELS.includes(name))];
}

/** Whether `category` reaches the user on `channel` (a channel left unset is on). */
export function isOn(preferences: Preferences | null, category: string, channel: string): boolean {
  return preferences?.categories[category]?.[channel] !== false;
}

/**
 * The `PUT` body that changes one cell: every category the hub has, as it answered, with
 * this one's channel set (a category the hub does not have yet names only that channel).
 */
export function withChannel(
  preferences: Preferences | null,
  category: string,
  channel: string,
  on: boolean,
): { categories: { [category: string]: CategoryPreference } } {
  const categories: { [category: string]: CategoryPreference } = {};
  for (const [name, pref] of Object.entries(preferences?.categories ?? {})) categories[name] = { ...pref };
  categories[category] = { ...categories[category], [channel]: on };
  return { categories };
}

export interface PreferencesResult {
  /** What the hub last answered; null until loaded. */
  preferences: Preferences | null;
  /** The matrix's columns: `channelsOf(preferences)`. */
  channels: string[];
  loading: boolean;
  /** The last load's or save's failure (a NotifyHubError for the hub's answers). */
  error: Error | null;
  /** Set one category's channel; resolves when the hub has it. */
  setChannel(category: string, channel: string, on: boolean): Promise<void>;
  /** `PUT /v1/me/preferences` as is (`categories` replaces them all). */
  save(update: PreferencesUpdate): Promise<void>;
  refresh(): Promise<void>;
}

function asError(failure: unknown): Error {
  return failure instanceof Error ? failure : new Error(String(failure));
}

/** The user's per-category, per-channel preferences (`GET/PUT /v1/me/preferences`). */
export function usePreferences(): PreferencesResult {
  const { client } = useNotifyHub();
  const [preferences, setPreferences] = useState<Preferences | null>(null);
  const [loading, setLoading] = useState(false);
  const [error, setError] = useState<Error | null>(null);
  const latest = useRef<Preferences | null>(null);
  latest.current = preferences;

  const run = useCallback(
    async (call: () => Promise<Preferences>): Promise<void> => {
      setLoading(true);
      try {
        const next = await call();
        latest.current = next;
        setPreferences(next);
        setError(null);
      } catch (failure) {
        setError(asError(failure));
      } finally {
        setLoading(false);
      }
    },
    [],
  );

  const refresh = useCallback(async () => {
    if (client !== null) await run(() => client.fetchPreferences());
  }, [client, run]);

  useEffect(() => {
    setPreferences(null);
    void refresh();
  }, [refresh]);

  const save = useCallback(
    async (update: PreferencesUpdate) => {
      if (client !== null) await run(() => client.savePreferences(update));
    },
    [client, run],
  );
  const setChannel = useCallback(
    (category: string, channel: string, on: boolean) => save(withChannel(latest.current, category, channel, on)),
    [save],
  );

  return { preferences, channels: channelsOf(preferences), loading, error, setChannel, save, refresh };
}

export interface PreferenceMatrixProps {
  /** Categories to show besides those the user has set (e.g. every category your app sends). */
  categories?: string[];
  /** Column headings by channel (default "Inbox", "E-mail", "Push"). */
  labels?: { [channel: string]: string };
  className?: string;
}

const LABELS: { [channel: string]: string } = { inbox: "Inbox", email: "E-mail", push: "Push" };

/**
 * An unstyled category x channel table of checkboxes: a click saves at once (the row then
 * shows what the hub answered). Rows: `categories` and the ones the user has set, sorted;
 * columns: the channels the hub answers with. Styled through `data-nh` attributes.
 */
export function PreferenceMatrix({ categories = [], labels = {}, className }: PreferenceMatrixProps): ReactNode {
  const { preferences, channels, loading, error, setChannel } = usePreferences();
  const rows = [...new Set([...categories, ...Object.keys(preferences?.categories ?? {})])].sort();
  return (
    <section data-nh="preferences" className={className} aria-busy={loading}>
      {error !== null && (
        <p data-nh="error" role="alert">
          {error.message}
        </p>
      )}
      <table>
        <thead>
          <tr>
            <th scope="col">Category</th>
            {channels.map((channel) => (
              <th scope="col" key={channel} data-channel={channel}>
                {labels[channel] ?? LABELS[channel] ?? channel}
              </th>
            ))}
          </tr>
        </thead>
        <tbody>
          {rows.map((category) => (
            <tr key={category} data-nh="preference" data-category={category}>
              <td>{category}</td>
              {channels.map((channel) => (
                <td key={channel}>
                  <input
                    type="checkbox"
                    data-channel={channel}
                    aria-label={`${category}: ${labels[channel] ?? LABELS[channel] ?? channel}`}
                    checked={isOn(preferences, category, channel)}
                    disabled={preferences === null || loading}
                    onChange={(event) => void setChannel(category, channel, event.target.checked)}
                  />
                </td>
              ))}
            </tr>
          ))}
        </tbody>
      </table>
    </section>
  );
}
