export { Inbox, MarkdownBody, type InboxProps } from "./Inbox.js";
export {
  useCounts,
  useNotification,
  useNotifications,
  type NotificationResult,
  type NotificationsOptions,
  type NotificationsResult,
} from "./hooks.js";
export { fetchPage, inView, type StatusFilter } from "./list.js";
export {
  CHANNELS,
  channelsOf,
  isOn,
  PreferenceMatrix,
  usePreferences,
  withChannel,
  type PreferenceMatrixProps,
  type PreferencesResult,
} from "./preferences.js";
export {
  loadNotifyHub,
  NotifyHubProvider,
  useNotifyHub,
  type NotifyHubContextValue,
  type NotifyHubProviderProps,
} from "./provider.js";
export type * from "./notifyhub.js";
