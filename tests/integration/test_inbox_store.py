"""The Redis inbox store: counters never drift, retried fan-outs fill gaps only."""

from __future__ import annotations

import asyncio
import math
import os
import re
import uuid
from collections.abc import AsyncGenerator, Callable
from dataclasses import replace
from datetime import UTC, datetime, timedelta
from functools import partial
from typing import Any

import pytest
from hypothesis import HealthCheck
from hypothesis import settings as hsettings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, precondition, rule
from redis.asyncio import Redis
from redis.exceptions import ResponseError
from redis.exceptions import TimeoutError as RedisTimeoutError
from ulid import ULID

from notifyhub.domain.notification import (
    SEVERITY_RANK,
    Draft,
    Notification,
    Recipients,
    Severity,
)
from notifyhub.domain.views import View, ViewFilter, ViewSet
from notifyhub.services.ingest import body_sha
from notifyhub.settings import Limits
from notifyhub.store import scripts
from notifyhub.store.changes import ChangeType
from notifyhub.store.client import create_redis
from notifyhub.store.codecs import ViewsArgs
from notifyhub.store.idempotency import IdempotencyRecord, IdempotencyStore
from notifyhub.store.inbox import SHARED_MAX_PLACEMENTS, ChangeRead, InboxStore, PageQuery
from notifyhub.store.keys import INBOX_FIELDS, Keys


def make_notification(**fields: Any) -> Notification:
    now = datetime.now(UTC)
    return Notification(
        id=str(ULID()),
        tenant="default",
        title=fields.pop("title", "t"),
        created_at=now,
        expires_at=now + timedelta(seconds=fields.pop("ttl_s", 600)),
        **fields,
    )


async def test_retried_fan_out_fills_the_gap_only(redis: Redis, settings: Any) -> None:
    store = InboxStore(redis, Keys(settings.redis_prefix), Limits())
    users = [("default", f"u{i}") for i in range(10)]
    notification = make_notification()
    first_half = await store.place(notification, users[:5])  # the crash came here
    assert all(first_half)
    retry = await store.place(notification, users)
    assert retry[:5] == [0] * 5 and all(retry[5:])
    for tenant, user in users:
        counts, _ = await store.counts(tenant, user)
        assert counts.total == 1 and counts.unread == 1


async def test_idempotent_publish_after_half_done_fan_out(
    hub: Any, publish_key: str, make_token: Any, redis: Redis, settings: Any
) -> None:
    """A request that died mid-fan-out is retried with its key: each user ends with one copy."""
    users = [f"r{i}" for i in range(6)]
    body = {"recipients": {"users": users}, "title": "half"}
    draft = Draft(title="half")
    recipients = Recipients(users=tuple(users))
    now_ms = int(datetime.now(UTC).timestamp() * 1000)
    record = IdempotencyRecord(
        body_sha(draft, recipients), str(ULID.from_timestamp(now_ms / 1000)), now_ms
    )
    keys = Keys(settings.redis_prefix)
    await IdempotencyStore(redis, keys, 3600).begin("default", "crashy", record)
    store = InboxStore(redis, keys, Limits())
    partial = Notification(
        id=record.notification_id,
        tenant="default",
        title="half",
        created_at=datetime.fromtimestamp(now_ms / 1000, UTC),
        expires_at=datetime.fromtimestamp(now_ms / 1000, UTC)
        + timedelta(seconds=settings.default_ttl_s),
    )
    await store.place(partial, [("default", u) for u in users[:3]])

    headers = {"Authorization": f"Bearer {publish_key}", "Idempotency-Key": "crashy"}
    response = await hub.client.post("/v1/notifications", json=body, headers=headers)
    assert response.status_code == 202 and response.json()["id"] == record.notification_id
    for user in users:
        page = (
            await hub.client.get(
                "/v1/me/notifications", headers={"Authorization": f"Bearer {make_token(user)}"}
            )
        ).json()
        assert [i["id"] for i in page["items"]] == [record.notification_id]


async def test_a_refused_retry_keeps_the_claim_it_did_not_make(
    hub: Any, publish_key: str, admin_key: str, redis: Redis, settings: Any
) -> None:
    """A request that died mid-fan-out to a group keeps its key when the retry is refused
    (the group deleted meanwhile): copies were written, so the key is never free for
    another body."""
    group = f"crashed-{uuid.uuid4().hex[:8]}"
    admin = {"Authorization": f"Bearer {admin_key}"}
    assert (await hub.client.put(f"/v1/admin/groups/{group}", headers=admin)).status_code == 201
    now_ms = int(datetime.now(UTC).timestamp() * 1000)
    draft, recipients = Draft(title="half"), Recipients(groups=(group,))
    record = IdempotencyRecord(
        body_sha(draft, recipients), str(ULID.from_timestamp(now_ms / 1000)), now_ms
    )
    await IdempotencyStore(redis, Keys(settings.redis_prefix), 3600).begin(
        "default", "crashed", record
    )
    assert (await hub.client.delete(f"/v1/admin/groups/{group}", headers=admin)).status_code == 204

    headers = {"Authorization": f"Bearer {publish_key}", "Idempotency-Key": "crashed"}
    retry = {"recipients": {"groups": [group]}, "title": "half"}
    response = await hub.client.post("/v1/notifications", json=retry, headers=headers)
    assert response.status_code == 422 and group in response.json()["detail"]
    other = {"recipients": {"users": ["someone"]}, "title": "half"}
    response = await hub.client.post("/v1/notifications", json=other, headers=headers)
    assert response.status_code == 422 and "different request body" in response.json()["detail"]


async def test_an_answer_is_recorded_though_a_refused_twin_freed_the_key(
    redis: Redis, settings: Any
) -> None:
    """Two requests with one key and body at once: the first claims the key and is refused,
    the second took over its claim and publishes. Its answer is recorded all the same, so
    a retry gets it rather than publishing again."""
    store = IdempotencyStore(redis, Keys(settings.redis_prefix), 3600)
    now_ms = int(datetime.now(UTC).timestamp() * 1000)
    claim = IdempotencyRecord("sha", str(ULID()), now_ms)
    assert await store.begin("default", "twins", claim) == claim
    twin = await store.begin("default", "twins", replace(claim, notification_id=str(ULID())))
    assert twin == claim
    assert await store.release("default", "twins", claim)  # the first, refused
    answered = replace(twin, response={"id": twin.notification_id, "recipients": 1})
    await store.finish("default", "twins", answered)
    assert not await store.release("default", "twins", claim)  # an answer stays
    retry = await store.begin("default", "twins", replace(claim, notification_id=str(ULID())))
    assert retry == answered


PIN_MAX = 3
"""Small, so the state machine meets the pin limit often."""


VIEW_POOL = {
    "cat-a": ViewFilter(categories=("a",)),
    "loud": ViewFilter(severity_at_least=Severity.ERROR),
    "bill": ViewFilter(tags_any=("billing", "invoice")),
    "eu-bill": ViewFilter(tags_all=("billing", "eu"), severity_at_least=Severity.WARNING),
    "every": ViewFilter(),
}
"""Views the state machine defines and redefines (tenant and personal, names shared)."""


CROCKFORD = "0123456789ABCDEFGHJKMNPQRSTVWXYZ"


def sort_key(nid: str, resurfaced_ms: int) -> str:
    """Where a moved copy sorts: a ULID of when it moved (the id's random part), then
    the id's time."""
    digits = [CROCKFORD[(resurfaced_ms >> (5 * i)) & 31] for i in reversed(range(10))]
    return "".join(digits) + nid[10:] + nid[:10]


def in_view(item: dict[str, Any], f: ViewFilter) -> bool:
    """The model's reading of a view's filter (domain/views.py ViewFilter)."""
    if f.categories and item["category"] not in f.categories:
        return False
    if f.tags_any and not set(f.tags_any) & item["tags"]:
        return False
    if not set(f.tags_all) <= item["tags"]:
        return False
    return f.severity_at_least is None or (
        SEVERITY_RANK[item["severity"]] >= SEVERITY_RANK[f.severity_at_least]
    )


class InboxModel(RuleBasedStateMachine):
    """Random publish (collapsing, with tags and severities; joining threads),
    read/unread/seen, archive, pin, snooze and resurface, delete, recall, expiry,
    read-all, archive-all, and (re)defining the tenant's and the user's views, against a
    plain-Python model: the counts (global and every view's), the default list (pinned
    first), the archived, snoozed, pinned and every view's lists always match it."""

    redis_url = "redis://127.0.0.1:6379/0"

    def __init__(self) -> None:
        super().__init__()
        self.loop = asyncio.new_event_loop()
        self.redis = Redis.from_url(self.redis_url)
        self.keys = Keys(f"nhtest:sm:{uuid.uuid4().hex[:8]}:")
        self.store = InboxStore(self.redis, self.keys, Limits(pinned_per_user=PIN_MAX))
        self.model: dict[str, dict[str, Any]] = {}
        self.clock_ms = int(datetime.now(UTC).timestamp() * 1000)
        self.views: dict[str, ViewFilter] = {}
        self.versions = [0, 0]
        """The tenant's and the user's view versions."""
        self.tenant_names: list[str] = []
        self.published: list[str] = []
        self.tenant_set = ViewSet(-1)
        """The tenant's views the user follows (a fan-out's hint)."""
        self.own_names: list[str] = []

    def run(self, coro: Any) -> Any:
        return self.loop.run_until_complete(coro)

    def place(self, n: Notification, *, defer: bool, views: ViewSet | None) -> None:
        """Place `n` for the user as a publish does: a deferred fan-out's recipient index
        first (`announce_deferred`, services/ingest.py), its ring after its copies."""
        users = [("default", "m")]
        named = self.run(self.store.announce_deferred(n, users)) if defer else []
        self.run(self.store.place(n, users, defer=defer, views=views))
        if defer:
            self.run(self.store.ring_deferred(named))

    @rule(
        category=st.sampled_from(["a", "b", None]),
        defer=st.booleans(),
        severity=st.sampled_from(list(Severity)),
        tags=st.sets(st.sampled_from(["billing", "invoice", "eu"]), max_size=3),
        collapse=st.sampled_from([None, None, "k1", "k2"]),
        hint=st.sampled_from(["current", "stale", "none"]),
    )
    def publish(
        self,
        category: str | None,
        defer: bool,
        severity: Severity,
        tags: set[str],
        collapse: str | None,
        hint: str,
    ) -> None:
        """`hint`: the tenant's views as the publishing process knows them (the user's
        version: the script takes the tenant's bits from it; another version, as a stale
        cache has: ignored; none)."""
        n = make_notification(
            category=category, severity=severity, tags=tuple(sorted(tags)), collapse_key=collapse
        )
        views = {
            "current": self.tenant_set,
            "stale": ViewSet(self.tenant_set.version + 1, (View("every", ViewFilter(), "tenant"),)),
            "none": None,
        }[hint]
        self.place(n, defer=defer, views=views)
        self.published.append(n.id)
        if collapse is not None:  # the copy with the same collapse key is replaced
            for nid in [nid for nid, i in self.model.items() if i["ck"] == collapse]:
                del self.model[nid]
        self.model[n.id] = {
            "read": False,
            "seen": False,
            "cat": category == "a",
            "category": category or "",
            "severity": severity,
            "tags": tags,
            "ck": collapse,
            "archived": False,
            "pinned": False,
            "snoozed": 0,
        }

    @rule(
        thread=st.sampled_from(["t1", "t2"]),
        category=st.sampled_from(["a", "b", None]),
        defer=st.booleans(),
        severity=st.sampled_from(list(Severity)),
        tags=st.sets(st.sampled_from(["billing", "invoice", "eu"]), max_size=3),
    )
    def publish_to_thread(
        self, thread: str, category: str | None, defer: bool, severity: Severity, tags: set[str]
    ) -> None:
        """A notification with a thread key joins the open thread with that key (unread
        again, on top, now showing its category, severity and tags; archived, pinned and
        snoozed as it was), or starts one."""
        n = make_notification(
            category=category, severity=severity, tags=tuple(sorted(tags)), thread_key=thread
        )
        self.place(n, defer=defer, views=self.tenant_set)
        self.published.append(n.id)
        shown = {"cat": category == "a", "category": category or "", "severity": severity}
        shown["tags"] = tags
        open_ = [nid for nid, i in self.model.items() if i.get("thread") == thread]
        if open_:
            item = self.model[open_[0]]
            item.update(shown, read=False, seen=False)
            item["key"] = sort_key(open_[0], int(n.created_at.timestamp() * 1000))
            return
        self.model[n.id] = {
            **shown,
            "read": False,
            "seen": False,
            "ck": None,
            "archived": False,
            "pinned": False,
            "snoozed": 0,
            "thread": thread,
        }

    @rule(
        tenant=st.lists(st.sampled_from(sorted(VIEW_POOL)), max_size=3, unique=True),
        own=st.lists(st.sampled_from(sorted(VIEW_POOL)), max_size=2, unique=True),
        change=st.sampled_from(["tenant", "own", "both"]),
    )
    def define_views(self, tenant: list[str], own: list[str], change: str) -> None:
        """The tenant's views, the user's, or both, change; the user is synced (as the
        sweep or their next read does). A personal view named like a tenant view is
        hidden by it."""
        versions = list(self.versions)
        sets = []
        for i, names in enumerate((tenant, own)):
            if change in (("tenant", "own")[i], "both"):
                versions[i] += 1
            views = tuple(View(n, VIEW_POOL[n], "tenant" if i == 0 else "personal") for n in names)
            sets.append(ViewSet(versions[i], views))
        changed = [change in ("tenant", "both"), change in ("own", "both")]
        args = ViewsArgs(
            100,
            sets[0].version if changed[0] else -2,
            sets[0].lines(),
            sets[1].version if changed[1] else -2,
            sets[1].lines(),
        )
        synced = self.run(self.store.sync_views("default", "m", args))
        self.versions = [synced.tenant_version, synced.personal_version]
        if changed[0]:
            self.tenant_set = sets[0]
        tenant_names = list(self.tenant_names) if not changed[0] else tenant
        own_names = list(self.own_names) if not changed[1] else own
        self.tenant_names, self.own_names = tenant_names, own_names
        names = [*tenant_names, *(n for n in own_names if n not in tenant_names)]
        self.views = {n: VIEW_POOL[n] for n in names}

    @precondition(lambda self: self.model)
    @rule(data=st.data())
    def expire(self, data: st.DataObject) -> None:
        """A copy's time is up (its expiry moved to the past, as the clock would) and the
        next read drops it. (A thread keeps its expiry in its record too, which the clock
        would have passed as well: so the read comes before any join could.)"""
        nid = data.draw(st.sampled_from(sorted(self.model)))
        self.run(self.redis.zadd(self.keys.inbox("default", "m").exp, {nid: 1}))
        self.run(self.store.purge("default", "m"))
        del self.model[nid]

    @precondition(lambda self: self.model)
    @rule(data=st.data())
    def recall(self, data: st.DataObject) -> None:
        """The producer recalls it: every holder loses it (RecallOp's replay)."""
        nid = data.draw(st.sampled_from(sorted(self.model)))
        for tenant, user in self.run(self.store.recipients(nid)):
            self.run(self.store.remove(tenant, user, [nid]))
        self.run(self.store.forget(nid))
        del self.model[nid]

    @precondition(lambda self: self.model)
    @rule(data=st.data(), read=st.sampled_from([True, False, None]), seen=st.booleans())
    def mark(self, data: st.DataObject, read: bool | None, seen: bool) -> None:
        nid = data.draw(st.sampled_from(sorted(self.model)))
        self.run(self.store.mark("default", "m", [nid], read=read, seen=seen))
        item = self.model[nid]
        if read is True:
            item["read"] = item["seen"] = True
        elif read is False:
            item["read"] = False
        if seen:
            item["seen"] = True

    @precondition(lambda self: self.model)
    @rule(data=st.data())
    def delete(self, data: st.DataObject) -> None:
        nid = data.draw(st.sampled_from(sorted(self.model)))
        self.run(self.store.remove("default", "m", [nid]))
        del self.model[nid]

    @precondition(lambda self: self.model)
    @rule(data=st.data(), archived=st.booleans())
    def archive(self, data: st.DataObject, archived: bool) -> None:
        nid = data.draw(st.sampled_from(sorted(self.model)))
        marked = self.run(
            self.store.mark("default", "m", [nid], read=None, seen=False, archived=archived)
        )
        item = self.model[nid]
        assert marked.codes == [2 if item["archived"] != archived else 1]
        item["archived"] = archived

    @precondition(lambda self: self.model)
    @rule(data=st.data(), pinned=st.booleans())
    def pin(self, data: st.DataObject, pinned: bool) -> None:
        nid = data.draw(st.sampled_from(sorted(self.model)))
        marked = self.run(
            self.store.mark("default", "m", [nid], read=None, seen=False, pinned=pinned)
        )
        item = self.model[nid]
        full = sum(i["pinned"] for i in self.model.values()) >= PIN_MAX
        if pinned and not item["pinned"] and full:
            assert marked.codes == [3]  # refused, nothing changed
            return
        assert marked.codes == [2 if item["pinned"] != pinned else 1]
        item["pinned"] = pinned

    @precondition(lambda self: self.model)
    @rule(data=st.data(), minutes=st.integers(min_value=0, max_value=3))
    def snooze(self, data: st.DataObject, minutes: int) -> None:
        """Snooze for 1-3 minutes (0: unsnooze)."""
        nid = data.draw(st.sampled_from(sorted(self.model)))
        until = self.clock_ms + minutes * 60_000 if minutes else 0
        mark = self.store.mark("default", "m", [nid], read=None, seen=False, snooze_until_ms=until)
        self.run(mark)
        self.model[nid]["snoozed"] = until

    @precondition(lambda self: self.model)
    @rule(data=st.data(), stale=st.booleans())
    def resurface(self, data: st.DataObject, stale: bool) -> None:
        """A wake-up falls due: its own snooze's (the copy comes back unread), or a stale
        one (a snooze changed since: nothing happens)."""
        nid = data.draw(st.sampled_from(sorted(self.model)))
        item = self.model[nid]
        until = item["snoozed"] + 1 if stale else item["snoozed"]
        seq = self.run(self.store.resurface("default", "m", nid, until))
        if item["snoozed"] and not stale:
            assert seq > 0
            item.update(snoozed=0, read=False, seen=False)
            state = self.run(self.redis.hget(self.keys.inbox("default", "m").state, nid))
            came_back = re.search(rb"r(\d+)", state.partition(b"\x1f")[2])
            assert came_back is not None
            item["key"] = sort_key(nid, int(came_back[1]))  # at the top of the lists
        else:
            assert seq == 0

    @rule(only_a=st.booleans())
    def archive_all(self, only_a: bool) -> None:
        category = "a" if only_a else None
        self.run(
            self.store.mark_all("default", "m", category=category, before_id=None, action="archive")
        )
        for item in self.model.values():
            if item["cat"] or not only_a:
                item["archived"] = True

    @rule(only_a=st.booleans())
    def read_all(self, only_a: bool) -> None:
        self.run(
            self.store.mark_all("default", "m", category="a" if only_a else None, before_id=None)
        )
        for item in self.model.values():
            if not item["read"] and (item["cat"] or not only_a):
                item["read"] = item["seen"] = True

    @invariant()
    def counts_match_a_recount(self) -> None:
        shown = {n: i for n, i in self.model.items() if not (i["archived"] or i["snoozed"])}
        counts, _ = self.run(self.store.counts("default", "m"))
        assert counts.total == len(shown)
        assert counts.unread == sum(not i["read"] for i in shown.values())
        assert counts.unseen == sum(not i["seen"] for i in shown.values())

    @invariant()
    def views_match_the_model(self) -> None:
        """Every view's counts (kept by the same scripts as the change) and its list."""
        shown = {n: i for n, i in self.model.items() if not (i["archived"] or i["snoozed"])}
        position = self.run(self.store.position("default", "m"))
        expected = {}
        for name, f in self.views.items():
            held = {nid: i for nid, i in shown.items() if in_view(i, f)}
            unread = sum(not i["read"] for i in held.values())
            unseen = sum(not i["seen"] for i in held.values())
            expected[name] = (unread, unseen, len(held))
            page = self.run(self.store.page("default", "m", PageQuery(view=name, limit=100)))
            assert sorted(i.id for i in page.items) == sorted(held), name
        got = {n: (c.unread, c.unseen, c.total) for n, c in position.counts.views.items()}
        assert got == expected

    @invariant()
    def lists_match_the_model(self) -> None:
        shown = {n: i for n, i in self.model.items() if not (i["archived"] or i["snoozed"])}
        pinned = [nid for nid, i in shown.items() if i["pinned"]]
        pinned.sort(key=lambda nid: shown[nid].get("key", nid), reverse=True)
        unpinned = [nid for nid, i in shown.items() if not i["pinned"]]
        rest = sorted(unpinned, key=lambda nid: shown[nid].get("key", nid), reverse=True)
        page = self.run(self.store.page("default", "m", PageQuery(limit=100)))
        assert [i.id for i in page.items] == pinned + rest
        assert all(i.pinned == (i.id in pinned) and not i.archived for i in page.items)
        archived = self.run(
            self.store.page("default", "m", PageQuery(status="archived", limit=100))
        )
        expected = sorted(nid for nid, i in self.model.items() if i["archived"])
        assert sorted(i.id for i in archived.items) == expected
        assert all(i.archived for i in archived.items)
        snoozed = self.run(self.store.page("default", "m", PageQuery(status="snoozed", limit=100)))
        expected = sorted(n for n, i in self.model.items() if i["snoozed"] and not i["archived"])
        assert sorted(i.id for i in snoozed.items) == expected
        only = self.run(self.store.page("default", "m", PageQuery(pinned=True, limit=100)))
        assert [i.id for i in only.items] == pinned
        others = self.run(self.store.page("default", "m", PageQuery(pinned=False, limit=100)))
        assert [i.id for i in others.items] == rest
        assert self.paged(limit=2) == pinned + rest  # `limit` counts pinned items too

    def paged(self, limit: int) -> list[str]:
        """The default list's ids, page after page of `limit` (each at most `limit`)."""
        ids: list[str] = []
        page = self.run(self.store.page("default", "m", PageQuery(limit=limit)))
        while True:
            assert len(page.items) <= limit
            ids += [i.id for i in page.items]
            if page.next_cursor is None:
                return ids
            query = PageQuery(limit=limit, cursor=page.next_cursor)
            page = self.run(self.store.page("default", "m", query))

    def teardown(self) -> None:
        async def clean() -> None:
            """Its own keys by name: a SCAN would walk whatever else Redis holds."""
            keys = self.keys
            mine = [*keys.inbox_list("default", "m"), keys.expiry]
            mine += [keys.recipients(nid) for nid in self.published]
            await self.redis.delete(*mine)
            await self.redis.aclose()

        self.run(clean())
        self.loop.close()


@pytest.mark.slow
@pytest.mark.timeout(900)  # 300 x 60 steps take 1.5 min on an idle 2-core machine
def test_counts_never_drift(settings: Any) -> None:
    InboxModel.redis_url = settings.redis_url
    in_ci = os.environ.get("CI") == "true"  # the bar; a quick look locally
    InboxModel.TestCase.settings = hsettings(
        max_examples=300 if in_ci else 30,
        stateful_step_count=60 if in_ci else 25,
        deadline=None,
        suppress_health_check=[HealthCheck.too_slow],
    )
    InboxModel.TestCase().runTest()


async def test_a_full_inbox_drops_its_oldest(redis: Redis, settings: Any) -> None:
    """Past `items_per_user`, each delivery drops the oldest, as a delete change streams
    see; counts stay exact and the drops are reported (the eviction metric)."""
    evicted: list[int] = []
    store = InboxStore(
        redis, Keys(settings.redis_prefix), Limits(items_per_user=3), on_evicted=evicted.append
    )
    notes = [make_notification(title=f"n{i}") for i in range(5)]
    for note in notes:
        await store.place(note, [("default", "full")])
    page = await store.page("default", "full", PageQuery())
    assert [item.id for item in page.items] == [n.id for n in reversed(notes[2:])]
    counts, _seq = await store.counts("default", "full")
    assert (counts.total, counts.unread, counts.unseen) == (3, 3, 3)
    assert sum(evicted) == 2
    log = await store.changes("default", "full", 0, 100)
    deletes = [c.entry.id for c in log.entries if c.entry.type is ChangeType.DELETE]
    assert deletes == [notes[0].id, notes[1].id]


async def test_pipelined_scripts_survive_redis_forgetting_them(redis: Redis, settings: Any) -> None:
    """Pipelines send EVALSHA without asking SCRIPT EXISTS first; when Redis answers
    NOSCRIPT (restarted, or SCRIPT FLUSH) the scripts are loaded and the pipeline rerun."""
    store = InboxStore(redis, Keys(settings.redis_prefix), Limits())
    known = store.scripts.place.sha, store.scripts.changes.sha
    store.scripts.place.sha = store.scripts.changes.sha = "0" * 40  # a script Redis lacks
    notification = make_notification()
    users = [("default", "forgot-1"), ("default", "forgot-2")]
    assert await store.place(notification, users) == [1, 1]
    reads = [ChangeRead("default", user, 0, 10) for _, user in users]
    changes = await store.changes_many(reads)
    seen = [[change.entry.id for change in c.entries] for c in changes]
    assert seen == [[notification.id]] * 2
    assert (store.scripts.place.sha, store.scripts.changes.sha) == known
    # The retried pipeline repeated only idempotent writes: one copy each.
    for tenant, user in users:
        counts, _ = await store.counts(tenant, user)
        assert counts.total == 1


async def test_a_pipeline_past_its_timeout_fails_and_leaves_no_stale_replies(
    settings: Any,
) -> None:
    """The pipeline client has no per-reply timer; one timer bounds the whole pipeline,
    and the connection it cut off is closed, so the next pipeline reads its own replies."""
    bulk = create_redis(settings.redis_url, pool_size=4, socket_timeout_s=None)
    key = f"{settings.redis_prefix}never-pushed"
    try:
        with pytest.raises(RedisTimeoutError):
            await scripts.pipelined(bulk, lambda pipe: pipe.blpop([key], 2), [], timeout_s=0.2)
        for i in range(3):  # the pool may hand out any of its connections
            echoed = await scripts.pipelined(bulk, lambda pipe, i=i: pipe.echo(f"mine-{i}"), [])
            assert echoed == [f"mine-{i}".encode()]
    finally:
        await bulk.aclose()


async def test_pipelines_each_run_all_with_at_most_two_in_flight(
    redis: Redis, settings: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    """`pipelined_each` runs every build it is given, and builds (packs) a pipeline only
    while fewer than `most` are in flight: the next overlaps Redis' work on the ones
    before, never all at once."""
    key = f"{settings.redis_prefix}each"
    in_flight = most_seen = 0

    async def builds() -> AsyncGenerator[Callable[[Any], None]]:
        for i in range(9):
            yield partial(add, i)

    def add(i: int, pipe: Any) -> None:
        nonlocal in_flight, most_seen
        in_flight += 1
        most_seen = max(most_seen, in_flight)
        pipe.sadd(key, f"m{i}")

    original = scripts.pipelined

    async def counted(*args: Any, **kwargs: Any) -> list[Any]:
        nonlocal in_flight
        try:
            return await original(*args, **kwargs)
        finally:
            in_flight -= 1

    monkeypatch.setattr(scripts, "pipelined", counted)
    await scripts.pipelined_each(redis, builds(), most=2)
    assert sorted(await redis.smembers(key)) == sorted(f"m{i}".encode() for i in range(9))
    assert most_seen == 2


async def test_pipelines_each_raise_the_first_error_and_start_no_more(
    redis: Redis, settings: Any
) -> None:
    """A pipeline that fails (a SADD on a string key) raises its error from
    `pipelined_each`, and no build after it is run."""
    key = f"{settings.redis_prefix}each-wrong"
    await redis.set(key, "a string")
    built: list[int] = []

    async def builds() -> AsyncGenerator[Callable[[Any], None]]:
        for i in range(20):
            yield partial(add, i)

    def add(i: int, pipe: Any) -> None:
        built.append(i)
        pipe.sadd(key, "x")

    with pytest.raises(ResponseError):
        await scripts.pipelined_each(redis, builds(), most=2)
    assert built and len(built) <= 3  # the failing one, and what was in flight with it


async def test_a_replica_shortfall_still_acknowledges(redis: Redis, settings: Any) -> None:
    """`wait_replicas` bounds the wait: with no replica (this Redis has none) WAIT times
    out and the delivery is still stored and acknowledged."""
    store = InboxStore(
        redis, Keys(settings.redis_prefix), Limits(), wait_replicas=1, wait_timeout_ms=20
    )
    users = [("default", "w1"), ("default", "w2")]
    assert await store.place(make_notification(), users) == [1, 1]
    counts, seq = await store.counts("default", "w2")
    assert counts.total == 1 and seq == 1


async def test_small_placements_of_one_tick_share_pipelines(
    redis: Redis, settings: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Publishes to a few users each, made at once (32 connections of a busy service),
    ride shared pipelines of SHARED_MAX_PLACEMENTS (20: three, sent together), and each
    still gets its own seqs."""
    bulk = create_redis(settings.redis_url, socket_timeout_s=None)
    pipelines = 0
    make_pipeline = bulk.pipeline

    def counted(*args: Any, **kwargs: Any) -> Any:
        nonlocal pipelines
        pipelines += 1
        return make_pipeline(*args, **kwargs)

    monkeypatch.setattr(bulk, "pipeline", counted)
    store = InboxStore(redis, Keys(settings.redis_prefix), Limits(), bulk=bulk)
    try:
        first = make_notification()
        await store.place(first, [("default", "tick-0")])
        pipelines = 0
        notes = [make_notification(title=f"n{i}") for i in range(20)]
        users = [[("default", f"tick-{i}"), ("default", "tick-all")] for i in range(20)]
        placed = await asyncio.gather(
            *(store.place(n, u) for n, u in zip(notes, users, strict=True))
        )
        assert pipelines == math.ceil(20 / SHARED_MAX_PLACEMENTS) == 3
        assert placed[0] == [2, 1]  # tick-0 had one already
        assert all(seqs[0] == 1 for seqs in placed[1:])
        assert sorted(seqs[1] for seqs in placed) == list(range(1, 21))
        counts, seq = await store.counts("default", "tick-all")
        assert (counts.total, seq) == (20, 20)
    finally:
        await bulk.aclose()


async def test_an_error_in_a_shared_pipeline_fails_only_its_own_placement(
    redis: Redis, settings: Any
) -> None:
    """A placement whose script fails (here: a user's key of the wrong type) raises; the
    placements sharing its pipeline are stored and answered as if alone."""
    keys = Keys(settings.redis_prefix)
    store = InboxStore(redis, keys, Limits())
    for key in keys.user_keys(["default/broken"], INBOX_FIELDS):
        await redis.set(key, "not a hash")
    good = [make_notification(title=f"g{i}") for i in range(3)]
    results = await asyncio.gather(
        store.place(good[0], [("default", "fine-1")]),
        store.place(make_notification(), [("default", "broken")]),
        store.place(good[1], [("default", "fine-2")]),
        store.place(good[2], [("default", "fine-1")]),
        return_exceptions=True,
    )
    assert results[0] == [1] and results[2] == [1] and results[3] == [2]
    assert isinstance(results[1], ResponseError)
    assert "WRONGTYPE" in str(results[1])
    page = await store.page("default", "fine-1", PageQuery())
    assert [item.id for item in page.items] == [good[2].id, good[0].id]


async def test_replica_waits_of_concurrent_placements_do_not_add_up(
    redis: Redis, settings: Any
) -> None:
    """Each placement's WAIT holds its connection up to the timeout when replicas fall
    short (this Redis has none): concurrent placements wait side by side, not one WAIT
    after another in a shared pipeline (20 x 300 ms would pass the pipeline's 2 s bound)."""
    store = InboxStore(
        redis, Keys(settings.redis_prefix), Limits(), wait_replicas=1, wait_timeout_ms=300
    )
    users = [[("default", f"wait-{i}")] for i in range(20)]
    placed = await asyncio.gather(*(store.place(make_notification(), u) for u in users))
    assert placed == [[1]] * 20
