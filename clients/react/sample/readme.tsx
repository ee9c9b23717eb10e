import { Inbox, NotifyHubProvider, useCounts } from "@notifyhub/react";

const getStreamToken = async () => (await (await fetch("/my/notifyhub-token")).json()).token;
const Bell = () => <span>{useCounts()?.unread ?? 0}</span>;

export const App = ({ jwt }: { jwt: string }) => (
  <NotifyHubProvider url="https://hub.example" getStreamToken={getStreamToken} getAccessToken={() => jwt}>
    <Bell />
    <Inbox status="all" limit={20} />
  </NotifyHubProvider>
);
