"""notifyhub-client against a real hub (uvicorn, Redis, PostgreSQL): no mocks. 429s come
from a hub with a low per-key rate limit; dropped connections from a TCP proxy that
really closes them (support/proxy.py)."""

from __future__ import annotations

import asyncio
import itertools
import secrets
import socket
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from datetime import datetime
from typing import Any

import httpx
import pytest

from notifyhub.settings import DeliverySettings, RateLimits, Settings
from notifyhub_client import (
    NO_RETRIES,
    AsyncClient,
    Client,
    Conflict,
    CountsEvent,
    DeleteEvent,
    Forbidden,
    HubUnreachable,
    NotFound,
    NotificationEvent,
    NotifyhubError,
    RetryPolicy,
    RuleRecipient,
    StreamEvent,
    Unauthorized,
    UnexpectedAnswer,
    UpdateEvent,
    ValidationError,
)
from support.proxy import CuttableProxy
from support.receiver import Receiver, Reply, receiver

MakeKey = Callable[..., Awaitable[str]]
FAST = RetryPolicy(max_attempts=8, max_total_s=10, backoff_s=0.05, max_backoff_s=0.3)
UNKNOWN_ID = "01" + "0" * 24


@pytest.fixture
def settings(settings: Settings) -> Settings:
    """Streams reconnect after 100 ms; webhooks may reach this machine's receiver."""
    stream = settings.stream.model_copy(update={"retry_ms": 100})
    deliveries = DeliverySettings(
        allow_networks=["127.0.0.1/32"], dispatcher_interval_s=0.05, lease_s=5, max_timeout_s=4
    )
    return settings.model_copy(update={"stream": stream, "deliveries": deliveries})


@pytest.fixture
async def proxy(hub: Any) -> AsyncIterator[CuttableProxy]:
    p = await CuttableProxy(int(hub.base_url.rsplit(":", 1)[1])).start()
    yield p
    await p.close()


def unique(name: str) -> str:
    return f"{name}-{secrets.token_hex(4)}"


async def inbox(hub: Any, token: str) -> list[dict[str, Any]]:
    headers = {"Authorization": f"Bearer {token}"}
    page = await hub.client.get("/v1/me/notifications?limit=100", headers=headers)
    assert page.status_code == 200, page.text
    items: list[dict[str, Any]] = page.json()["items"]
    return items


async def wait_until(condition: Callable[[], bool], timeout_s: float = 10.0) -> None:
    async with asyncio.timeout(timeout_s):
        while not condition():
            await asyncio.sleep(0.02)


# --- Publish: idempotency and retries ----------------------------------------------


async def test_publish_retries_429s_honouring_retry_after_with_one_key_per_call(
    start_hub: Any, settings: Settings, create_key: MakeKey, make_token: Callable[..., str]
) -> None:
    limits = RateLimits(per_key_per_s=1, per_key_burst=2)
    sent: list[tuple[str, int, str | None]] = []

    async def record(response: httpx.Response) -> None:
        key = response.request.headers["idempotency-key"]
        sent.append((key, response.status_code, response.headers.get("retry-after")))

    async with start_hub(settings.model_copy(update={"rate_limits": limits})) as hub:
        user = unique("rl")
        http = httpx.AsyncClient(event_hooks={"response": [record]})
        async with AsyncClient(
            hub.base_url, await create_key("rl", "publish"), http_client=http
        ) as c:
            accepted = [await c.notify(f"n{i}", users=[user]) for i in range(3)]  # burst 2
        items = await inbox(hub, make_token(user))

    assert [a.recipients for a in accepted] == [1, 1, 1]
    statuses = [status for _key, status, _ra in sent]
    assert 429 in statuses, statuses  # the hub really refused some ...
    for (key, status, retry_after), (next_key, _s, _r) in itertools.pairwise(sent):
        if status == 429:  # ... each was retried after its Retry-After, with the same key
            assert retry_after is not None
            assert next_key == key
    assert len({key for key, _s, _r in sent}) == 3  # one key per logical call
    assert sorted(i["title"] for i in items) == ["n0", "n1", "n2"]  # once each


async def test_the_same_idempotency_key_publishes_once(
    hub: Any, publish_key: str, make_token: Callable[..., str]
) -> None:
    user, key = unique("idem"), unique("key")
    async with AsyncClient(hub.base_url, publish_key) as client:
        first = await client.notify("Once", users=[user], idempotency_key=key)
        again = await client.notify("Once", users=[user], idempotency_key=key)
        with pytest.raises(ValidationError) as other_body:
            await client.notify("Other", users=[user], idempotency_key=key)
    assert again.id == first.id
    assert other_body.value.status == 422
    assert [i["id"] for i in await inbox(hub, make_token(user))] == [first.id]


async def test_a_publish_is_retried_across_dropped_connections_and_lands_once(
    hub: Any, proxy: CuttableProxy, publish_key: str, make_token: Callable[..., str]
) -> None:
    user = unique("drop")
    proxy.cut(hold=True)  # every connection is accepted, then dropped unanswered

    async def heal() -> None:
        await wait_until(lambda: proxy.refused >= 2)
        proxy.resume()

    healing = asyncio.create_task(heal())
    async with AsyncClient(proxy.url, publish_key, retry=FAST) as client:
        accepted = await client.notify("Through the storm", users=[user])
    await healing
    assert accepted.recipients == 1
    assert [i["id"] for i in await inbox(hub, make_token(user))] == [accepted.id]


async def test_retries_are_bounded_and_unsafe_calls_are_not_repeated(
    hub: Any, proxy: CuttableProxy, publish_key: str
) -> None:
    with socket.socket() as s:  # a port nobody listens on
        s.bind(("127.0.0.1", 0))
        closed = s.getsockname()[1]
    policy = RetryPolicy(max_attempts=3, max_total_s=5, backoff_s=0.01, max_backoff_s=0.02)
    started = time.monotonic()
    async with AsyncClient(f"http://127.0.0.1:{closed}", publish_key, retry=policy) as client:
        with pytest.raises(HubUnreachable) as refused:
            await client.notify("Nobody home", users=["x"])
    assert refused.value.status == 0
    assert time.monotonic() - started < 2

    # An event may have been acted on when the connection dropped: not sent twice.
    proxy.cut(hold=True)
    async with AsyncClient(proxy.url, publish_key, retry=FAST) as client:
        with pytest.raises(HubUnreachable):
            await client.send_event(
                "some-rule", actor={"type": "user", "id": "a"}, target={"type": "post", "id": "p"}
            )
    assert proxy.refused == 1


async def test_a_secret_rotation_is_not_repeated_after_a_dropped_connection(
    hub: Any, proxy: CuttableProxy, admin_key: str
) -> None:
    # A repeat of a rotation that landed rotates again: the secret receivers still verify
    # with (the one before the first rotation) would be dropped at once, not after a grace.
    name, url = unique("rot"), "https://receiver.example/h"
    async with AsyncClient(hub.base_url, admin_key) as client:
        assert (await client.put_delivery_definition(name, url=url)).secret is not None
    proxy.cut(hold=True)
    async with AsyncClient(proxy.url, admin_key, retry=FAST) as client:
        with pytest.raises(HubUnreachable):
            await client.put_delivery_definition(name, url=url, rotate_secret=True)
        assert proxy.refused == 1
        # A plain PUT (the same definition again) is safe to repeat, and is.
        with pytest.raises(HubUnreachable):
            await client.put_delivery_definition(name, url=url)
        assert proxy.refused > 2


# --- Errors ------------------------------------------------------------------------


async def test_problems_are_typed_errors(hub: Any, publish_key: str, create_key: MakeKey) -> None:
    async with AsyncClient(hub.base_url, "nh_not_a_key") as stranger:
        with pytest.raises(Unauthorized) as unauthorized:
            await stranger.notify("Hi", users=["a"])
    assert (unauthorized.value.status, unauthorized.value.type) == (401, "about:blank")

    async with AsyncClient(hub.base_url, publish_key) as client:
        with pytest.raises(Forbidden) as forbidden:
            await client.put_group(unique("g"))  # admin only
        with pytest.raises(NotFound) as not_found:
            await client.get_delayed(UNKNOWN_ID)
        with pytest.raises(ValidationError) as invalid:
            await client.notify("x" * 201, users=["a"])
    assert forbidden.value.status == 403 and forbidden.value.detail
    assert not_found.value.status == 404 and not_found.value.title
    assert invalid.value.status == 422
    assert invalid.value.errors and invalid.value.errors[0]["field"] == "body.title"

    bound = await create_key("bound", "publish", tenant="acme")
    async with AsyncClient(hub.base_url, bound, tenant="other") as client:
        with pytest.raises(Forbidden):
            await client.notify("Elsewhere", users=["a"])


async def test_a_success_the_client_cannot_read_is_its_own_error() -> None:
    """Something answering 2xx with a body that is not the answer (not JSON, or not its
    shape: a hub of another version, a proxy's page) raises `UnexpectedAnswer`, a
    NotifyhubError with the HTTP status and the parsing error chained, not pydantic's."""
    path = "/v1/notifications"
    async with receiver() as fake:
        fake.plan(path, Reply(202, body=b"<html>accepted</html>"), Reply(202, body=b'{"id": 7}'))
        async with AsyncClient(fake.url(""), "nh_key", retry=NO_RETRIES) as client:
            with pytest.raises(UnexpectedAnswer) as not_json:
                await client.notify("Hi", users=["a"])
            with pytest.raises(UnexpectedAnswer) as wrong_shape:
                await client.notify("Hi", users=["a"])
    assert isinstance(not_json.value, NotifyhubError) and not_json.value.status == 202
    assert isinstance(not_json.value.__cause__, ValueError)
    assert wrong_shape.value.status == 202 and wrong_shape.value.response is not None
    fields = {e["field"] for e in wrong_shape.value.errors}
    assert {"id", "recipients"} <= fields, wrong_shape.value.errors


async def test_a_bare_string_for_a_list_of_names_is_refused_not_split_into_letters(
    hub: Any, publish_key: str, admin_key: str, make_token: Callable[..., str]
) -> None:
    # A str is a Sequence[str] to type checkers: `users="ab"` must not publish to "a" and "b".
    letters = unique("x")
    async with AsyncClient(hub.base_url, publish_key) as client:
        with pytest.raises(TypeError, match="users"):
            await client.notify("Hi", users=letters)
        with pytest.raises(TypeError, match="tags"):
            await client.notify("Hi", users=[letters], tags="billing")
    async with AsyncClient(hub.base_url, admin_key) as admin:
        group = unique("g")
        await admin.put_group(group)
        with pytest.raises(TypeError, match="add"):
            await admin.change_group_members(group, add=letters)
        with pytest.raises(TypeError, match="groups"):
            await admin.put_topic(unique("topic"), users=[letters], groups=group)
        assert (await admin.change_group_members(group)).members == 0
    for letter in set(letters):
        assert await inbox(hub, make_token(letter)) == []
    assert await inbox(hub, make_token(letters)) == []


async def test_the_blocking_client_has_the_same_operations(
    hub: Any, publish_key: str, make_token: Callable[..., str]
) -> None:
    user = unique("sync")

    def work() -> str:  # in a thread: the hub runs on this test's loop
        with Client(hub.base_url, publish_key) as client:
            accepted = client.notify("Blocking", users=[user], severity="warning")
            with pytest.raises(NotFound):
                client.recall(UNKNOWN_ID)
            with pytest.raises(ValidationError):
                client.notify("", users=[user])
            return accepted.id

    notification_id = await asyncio.to_thread(work)
    [item] = await inbox(hub, make_token(user))
    assert (item["id"], item["severity"]) == (notification_id, "warning")


# --- Every operation family ----------------------------------------------------------


async def test_admin_routing_events_and_recall(
    hub: Any, admin_key: str, make_token: Callable[..., str]
) -> None:
    tenant = unique("t")
    u1, u2, u3 = (unique(n) for n in ("u1", "u2", "u3"))
    group, topic, rule = unique("g"), unique("topic"), unique("rule")
    async with AsyncClient(hub.base_url, admin_key, tenant=tenant) as client:
        assert (await client.put_group(group)).members == 0
        assert (await client.change_group_members(group, add=[u1, u2])).members == 2
        put = await client.put_topic(topic, users=[u3], groups=[group])
        assert (put.tenant, put.users, put.groups) == (tenant, [u3], [group])
        sent = await client.notify("To the topic", topics=[topic], category="restock")
        assert sent.recipients == 3
        await client.recall(sent.id)

        author = RuleRecipient(relationship="author", title="{{ actor.id }} commented")
        saved = await client.put_rule(rule, target_type="post", recipients=[author])
        assert (saved.name, saved.recipients[0].obtain) == (rule, "push")
        post = {"type": "post", "id": "p1"}
        await client.relate(u1, "author", post)
        fired = await client.send_event(rule, actor={"type": "user", "id": "bob"}, target=post)
        assert (fired.notifications, fired.errors) == (1, [])
        await client.unrelate(u1, "author", post)
        again = await client.send_event(rule, actor={"type": "user", "id": "bob"}, target=post)
        assert again.notifications == 0

    assert await inbox(hub, make_token(u3, tenant=tenant)) == []  # recalled
    [commented] = await inbox(hub, make_token(u1, tenant=tenant))
    assert commented["title"] == "bob commented"


async def test_delayed_push_get_cancel_and_the_consume_loop_with_ack(
    hub: Any, publish_key: str, create_key: MakeKey
) -> None:
    queue = unique("sms")
    async with (
        AsyncClient(hub.base_url, publish_key) as producer,
        AsyncClient(hub.base_url, await create_key("consumer", "consume")) as consumer,
    ):
        later = await producer.push_delayed(queue, {"n": "later"}, delay_ms=600_000)
        assert (await producer.get_delayed(later.id)).status == "delayed"
        await producer.cancel_delayed(later.id)
        assert (await producer.get_delayed(later.id)).status == "cancelled"

        pushed = [
            await producer.push_delayed(queue, {"n": n}, delay_ms=0, priority=n, biz_key=f"b{n}")
            for n in range(3)
        ]
        received = []
        # all three are moved in one mover pass: the loop ends at the first empty poll (2 s)
        async for message in consumer.queue(queue).messages(wait=2, batch=2, forever=False):
            received.append((message.body, message.biz_key))
            await message.ack()
        # Each acked once (the order among messages due at once depends on the mover's ticks).
        assert sorted(received, key=str) == [({"n": n}, f"b{n}") for n in range(3)]
        for accepted in pushed:
            assert (await producer.get_delayed(accepted.id)).status == "consumed"
        with pytest.raises(Conflict):
            await producer.cancel_delayed(pushed[0].id)


async def test_deliveries_create_get_confirm(
    hub: Any, admin_key: str, publish_key: str, receiver: Receiver
) -> None:
    name = unique("paid")
    async with (
        AsyncClient(hub.base_url, admin_key) as admin,
        AsyncClient(hub.base_url, publish_key) as client,
    ):
        definition = await admin.put_delivery_definition(
            name, url=receiver.url(), need_confirm=True, retry_intervals="30s"
        )
        assert definition.secret is not None and definition.secret.startswith("whsec_")
        assert (await admin.put_delivery_definition(name, url=receiver.url())).secret is None
        await admin.put_delivery_definition(name, url=receiver.url(), need_confirm=True)

        created = await client.create_delivery(name, {"order": 42}, description="order 42")
        assert created.status == "pending"
        [arrived] = await receiver.wait_for("/hook", 1)
        assert arrived.headers["webhook-id"] == created.id

        async with asyncio.timeout(10):
            while (delivery := await client.get_delivery(created.id)).status != "awaiting_confirm":
                await asyncio.sleep(0.05)
        assert (delivery.payload, delivery.attempts[0].status_code) == ({"order": 42}, 200)
        assert (await client.confirm_delivery(created.id)).status == "sent"


# --- The stream reader ---------------------------------------------------------------


async def test_stream_resumes_after_a_cut_connection_without_loss_or_duplicates(
    hub: Any, proxy: CuttableProxy, publish_key: str, make_token: Callable[..., str]
) -> None:
    user = unique("reader")
    events: list[StreamEvent] = []
    streams = hub.app_state["hub"]

    async with (
        AsyncClient(proxy.url, publish_key) as via_proxy,
        AsyncClient(hub.base_url, publish_key) as publisher,
    ):
        stream = via_proxy.stream(make_token(user))

        async def read() -> None:
            async for event in stream:
                events.append(event)

        def notified() -> list[str]:
            return [e.data.id for e in events if isinstance(e, NotificationEvent)]

        reader = asyncio.create_task(read())
        try:
            await wait_until(lambda: streams.stream_count == 1)
            sent = [(await publisher.notify(f"n{i}", users=[user])).id for i in range(2)]
            await wait_until(lambda: len(notified()) == 2)
            cut_at = stream.last_event_id
            assert cut_at is not None and cut_at == events[-1].id

            proxy.cut(hold=True)  # the connection drops; reconnects are refused for now
            await wait_until(lambda: streams.stream_count == 0)
            sent += [(await publisher.notify(f"n{i}", users=[user])).id for i in (2, 3)]
            await wait_until(lambda: proxy.refused >= 1)  # it kept trying, backing off
            proxy.resume()
            await wait_until(lambda: len(notified()) == 4)

            sent.append((await publisher.notify("n4", users=[user])).id)  # live again
            await wait_until(lambda: len(notified()) == 5)
            await publisher.recall(sent[4])
            await wait_until(
                lambda: (
                    any(isinstance(e, DeleteEvent) for e in events)
                    and isinstance(events[-1], CountsEvent)
                )
            )
        finally:
            reader.cancel()
            await asyncio.gather(reader, return_exceptions=True)

    assert notified() == sent  # in order, none lost, none twice
    resumed = proxy.heads[-1].decode().lower()
    assert f"last-event-id: {cut_at}".lower() in resumed  # the id echoed verbatim
    assert any(isinstance(e, DeleteEvent) and e.data.id == sent[4] for e in events)
    counts = [e for e in events if isinstance(e, CountsEvent)]
    assert counts[-1].data.total == 4 and counts[-1].data.seq is not None
    ids = [e.id for e in events]
    assert all(ids.count(i) <= 2 for i in ids)  # a notification and its counts share one


async def test_stream_update_events_and_refused_tokens(
    hub: Any, publish_key: str, make_token: Callable[..., str]
) -> None:
    user = unique("upd")
    token = make_token(user)
    async with AsyncClient(hub.base_url, publish_key) as client:
        with pytest.raises(Unauthorized):
            async for _ in client.stream("not-a-token"):
                pass
        sent = await client.notify("Read me", users=[user])
        # Resuming from before the first change replays it (and what follows), in order.
        stream = client.stream(token, last_event_id="0")
        seen: list[StreamEvent] = []
        async with asyncio.timeout(10):
            async for event in stream:
                seen.append(event)
                if isinstance(event, NotificationEvent):
                    await hub.client.patch(
                        f"/v1/me/notifications/{sent.id}",
                        headers={"Authorization": f"Bearer {token}"},
                        json={"read": True},
                    )
                if isinstance(event, UpdateEvent):
                    break
    update = seen[-1]
    assert isinstance(update, UpdateEvent)
    assert (update.data.id, update.data.status, update.data.read_at is not None) == (
        sent.id,
        "read",
        True,
    )


@asynccontextmanager
async def reading(hub: Any, client: AsyncClient, token: str) -> AsyncIterator[list[StreamEvent]]:
    """The user's events as the client's stream reader yields them, from once it is open."""
    events: list[StreamEvent] = []

    async def read() -> None:
        async for event in client.stream(token):
            events.append(event)

    reader = asyncio.create_task(read())
    try:
        await wait_until(lambda: hub.app_state["hub"].stream_count == 1)
        yield events
    finally:
        reader.cancel()
        await asyncio.gather(reader, return_exceptions=True)


async def test_a_threads_next_activity_streams_an_update_carrying_the_whole_item(
    hub: Any, publish_key: str, make_token: Callable[..., str]
) -> None:
    """A thread's second activity is an `update` carrying the whole item: its summary and
    the latest activity's content (`item` gives it as a `Notification`); a state change is
    an `update` with the state only."""
    user = unique("thread")
    token = make_token(user)
    async with (
        AsyncClient(hub.base_url, publish_key) as client,
        reading(hub, client, token) as events,
    ):
        first = await client.notify(
            "Ana commented", users=[user], thread_key="post:p1", actor={"id": "ana"}
        )
        second = await client.notify(
            "Bo commented", users=[user], thread_key="post:p1", actor={"id": "bo"}, body="Hi"
        )
        await wait_until(lambda: any(isinstance(e, UpdateEvent) for e in events))
        marked_read = await hub.client.patch(
            f"/v1/me/notifications/{first.id}",
            headers={"Authorization": f"Bearer {token}"},
            json={"read": True},
        )
        assert marked_read.status_code == 200, marked_read.text
        await wait_until(lambda: len([e for e in events if isinstance(e, UpdateEvent)]) == 2)

    joined, marked = (e.data for e in events if isinstance(e, UpdateEvent))
    assert joined.id == first.id and joined.thread is not None
    assert (joined.thread.activity_count, joined.thread.latest_id) == (2, second.id)
    assert [a.id for a in joined.thread.actors] == ["bo", "ana"]
    assert (joined.tenant, joined.title, joined.body, joined.status) == (
        "default",
        "Bo commented",
        "Hi",
        "unread",
    )
    item = joined.item
    assert item is not None and (item.id, item.title) == (first.id, "Bo commented")
    assert item.thread == joined.thread
    assert (marked.id, marked.status, marked.read_at is not None) == (first.id, "read", True)
    assert (marked.thread, marked.title, marked.item) == (None, None, None)


async def test_a_snoozed_copy_streams_back_as_a_resurfaced_notification(
    hub: Any, publish_key: str, make_token: Callable[..., str]
) -> None:
    """A snoozed copy whose time came is a `notification` event with `resurfaced`, unread
    (its wake-up called as the delayed worker calls it, without waiting for it)."""
    user = unique("snooze")
    token = make_token(user)
    async with (
        AsyncClient(hub.base_url, publish_key) as client,
        reading(hub, client, token) as events,
    ):
        later = await client.notify("Later", users=[user])
        snoozed = await hub.client.patch(
            f"/v1/me/notifications/{later.id}",
            headers={"Authorization": f"Bearer {token}"},
            json={"snooze": 3600},
        )
        assert snoozed.status_code == 200, snoozed.text
        until = datetime.fromisoformat(snoozed.json()["snoozed_until"])
        await wait_until(lambda: any(isinstance(e, UpdateEvent) for e in events))
        until_ms = round(until.timestamp() * 1000)  # the wake-up names the snooze it ends
        assert await hub.app_state["inbox"].resurface("default", user, later.id, until_ms)
        await wait_until(lambda: len([e for e in events if isinstance(e, NotificationEvent)]) == 2)

    notified = [e.data for e in events if isinstance(e, NotificationEvent)]
    assert [(n.id, n.resurfaced) for n in notified] == [(later.id, False), (later.id, True)]
    assert (notified[-1].status, notified[-1].snoozed_until) == ("unread", None)
