"""Views (tabs): the tenant's and a user's own, their lists (`?view=`) and their counts
(`counts.views`, REST and SSE), recounted when a view changes; and what is refused.

Each test works in a tenant of its own: a tenant's views reach every user of it."""

from __future__ import annotations

import asyncio
import secrets
from typing import Any

import asyncpg

from notifyhub.store.keys import Keys
from support.database import asyncpg_dsn
from support.sse import open_stream

BASE = "/v1/me/notifications"
RECOUNTED = "notifyhub_view_recompute_users_total"
PENDING = "notifyhub_view_recompute_pending_users"


def _auth(token: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {token}"}


class Tenant:
    """A fresh tenant: an admin key of every tenant, a publish key, users' tokens."""

    def __init__(self, hub: Any, admin_key: str, publish_key: str, make_token: Any) -> None:
        self.name = f"views-{secrets.token_hex(4)}"
        self.hub, self.client = hub, hub.client
        self.admin = _auth(admin_key)
        self.publisher = _auth(publish_key)
        self._make_token = make_token

    def token(self, user: str) -> str:
        return str(self._make_token(user, self.name))

    def me(self, user: str) -> dict[str, str]:
        return _auth(self.token(user))

    async def define(self, name: str, status: int = 201, **view: Any) -> Any:
        url = f"/v1/admin/views/{name}?tenant={self.name}"
        response = await self.client.put(url, json=view, headers=self.admin)
        assert response.status_code == status, response.text
        return response.json()

    async def publish(self, users: list[str], **fields: Any) -> str:
        body = {"tenant": self.name, "recipients": {"users": users}, "title": "t", **fields}
        response = await self.client.post("/v1/notifications", json=body, headers=self.publisher)
        assert response.status_code == 202, response.text
        return str(response.json()["id"])

    async def ids(self, user: str, query: str = "") -> list[str]:
        response = await self.client.get(f"{BASE}{query}", headers=self.me(user))
        assert response.status_code == 200, response.text
        return [item["id"] for item in response.json()["items"]]

    async def counts(self, user: str) -> dict[str, Any]:
        response = await self.client.get(f"{BASE}/counts", headers=self.me(user))
        assert response.status_code == 200, response.text
        return dict(response.json())

    async def views(self, user: str) -> dict[str, tuple[int, int, int]]:
        found = (await self.counts(user))["views"]
        return {name: (c["unread"], c["unseen"], c["total"]) for name, c in found.items()}


async def _tenant(hub: Any, admin_key: str, publish_key: str, make_token: Any) -> Tenant:
    return Tenant(hub, admin_key, publish_key, make_token)


async def _metric(hub: Any, name: str) -> float:
    """A sample of the hub's `GET /metrics`, as Prometheus scrapes it."""
    response = await hub.client.get("/metrics")
    assert response.status_code == 200
    for line in response.text.splitlines():
        sample, _, value = line.partition(" ")
        if sample == name:
            return float(value)
    raise AssertionError(f"{name} is not in /metrics")


async def test_a_tenant_view_and_a_personal_view_list_and_count(
    hub: Any, admin_key: str, publish_key: str, make_token: Any
) -> None:
    t = await _tenant(hub, admin_key, publish_key, make_token)
    made = await t.define("alarms", filter={"severity_at_least": "error"}, label="Alarms")
    assert made.pop("updated_at")
    assert made == {
        "name": "alarms",
        "label": "Alarms",
        "filter": {"severity_at_least": "error"},
        "scope": "tenant",
    }
    await t.define("alarms", status=200, filter={"severity_at_least": "error"}, label="Alarms!")
    mine = {"filter": {"tags_any": ["billing", "invoice"], "categories": ["finance"]}}
    answer = await t.client.put("/v1/me/views/money", json=mine, headers=t.me("ana"))
    assert answer.status_code == 201, answer.text

    fire = await t.publish(["ana", "ben"], severity="critical")
    bill = await t.publish(["ana"], category="finance", tags=["invoice"])
    await t.publish(["ana"], category="finance")  # no tag: in no view
    other = await t.publish(["ana"], category="chat", tags=["billing"], severity="error")

    assert await t.ids("ana", "?view=alarms") == [other, fire]
    assert await t.ids("ana", "?view=money") == [bill]
    assert await t.views("ana") == {"alarms": (2, 2, 2), "money": (1, 1, 1)}
    assert await t.views("ben") == {"alarms": (1, 1, 1)}  # ben has no view of his own
    assert all(c["exact"] for c in (await t.counts("ana"))["views"].values())

    await t.client.patch(f"{BASE}/{fire}", json={"read": True}, headers=t.me("ana"))
    await t.client.patch(f"{BASE}/{other}", json={"archived": True}, headers=t.me("ana"))
    await t.client.patch(f"{BASE}/{bill}", json={"snooze": 3600}, headers=t.me("ana"))
    assert await t.views("ana") == {"alarms": (0, 0, 1), "money": (0, 0, 0)}
    assert await t.ids("ana", "?view=alarms") == [fire]
    assert await t.ids("ana", "?view=alarms&status=archived") == [other]
    assert await t.ids("ana", "?view=money&status=snoozed") == [bill]

    listed = (await t.client.get("/v1/me/views", headers=t.me("ana"))).json()["views"]
    assert [(v["name"], v["scope"], v["label"]) for v in listed] == [
        ("alarms", "tenant", "Alarms!"),
        ("money", "personal", None),
    ]
    assert listed[1]["filter"] == {"categories": ["finance"], "tags_any": ["billing", "invoice"]}


async def test_redefining_a_tenant_view_recounts_its_users_in_the_background(
    hub: Any, admin_key: str, publish_key: str, make_token: Any
) -> None:
    t = await _tenant(hub, admin_key, publish_key, make_token)
    users = [f"u{i}" for i in range(5)]
    await t.publish(users, severity="warning", tags=["ops"])
    await t.publish(users, severity="critical")
    before = await _metric(hub, RECOUNTED)
    async with open_stream(hub.client, t.token("u0")) as stream:
        await stream.until("counts")
        await t.define("ops", filter={"tags_any": ["ops"]})
        await hub.app_state["views"].settled()
        # the sweep reached every user holding notifications (the stream's user too) ...
        assert await _metric(hub, RECOUNTED) - before == len(users)
        assert await _metric(hub, PENDING) == 0
        event, _ = await stream.until("counts")  # ... whose streams get the new counts
        assert event.data["views"] == {"ops": {"unread": 1, "unseen": 1, "total": 1}}

        await t.define("ops", status=200, filter={"severity_at_least": "warning"})
        await hub.app_state["views"].settled()
        event, _ = await stream.until("counts")
        assert event.data["views"] == {"ops": {"unread": 2, "unseen": 2, "total": 2}}
        # a later copy is counted by the script that stores it, the event says so
        await t.publish(["u0"], severity="error")
        event, before_it = await stream.until("counts")
        assert [e.event for e in before_it] == ["notification"]
        assert event.data["views"] == {"ops": {"unread": 3, "unseen": 3, "total": 3}}
    for user in users[1:]:
        assert await t.views(user) == {"ops": (2, 2, 2)}

    deleted = await t.client.delete(f"/v1/admin/views/ops?tenant={t.name}", headers=t.admin)
    assert deleted.status_code == 204
    await hub.app_state["views"].settled()
    assert await t.views("u1") == {}
    refused = await t.client.get(f"{BASE}?view=ops", headers=t.me("u1"))
    assert refused.status_code == 422


async def _waiting_for(watch: asyncpg.Connection, table: str) -> None:
    """Until a backend of this database waits for a lock on `table`."""
    query = (
        "SELECT count(*) FROM pg_locks l JOIN pg_class c ON c.oid = l.relation "
        "JOIN pg_database d ON d.oid = l.database "
        "WHERE NOT l.granted AND c.relname = $1 AND d.datname = current_database()"
    )
    async with asyncio.timeout(10):
        while not await watch.fetchval(query, table):
            await asyncio.sleep(0.01)


async def test_a_stream_opened_on_an_old_copy_of_the_views_syncs_it_first(
    hub: Any, admin_key: str, publish_key: str, make_token: Any
) -> None:
    """A stream opened while the user's copy of the tenant's views is older than the
    tenant's (the sweep has not reached them: made here by setting the copy's version and
    definitions back) syncs the copy before its first counts, as GET /v1/me/counts does:
    the view's counts are its definition's now, exact (no `exact: false`), and each copy
    after is counted by it. A copy only behind in version is synced alike."""
    t = await _tenant(hub, admin_key, publish_key, make_token)
    await t.publish(["ana"], tags=["ops"])
    await t.publish(["ana"], tags=["foo"])
    await t.define("ops", filter={"tags_any": ["ops"]})
    views = hub.app_state["views"]
    await views.settled()
    version = (await views.tenant_set(t.name)).version
    assert views.known(t.name) is not None and version > 0
    cnt = Keys(hub.app_state["settings"].redis_prefix).inbox(t.name, "ana").cnt
    redis = hub.app_state["redis"]
    # as before the view was redefined: a filter by the tag foo, counting nothing
    await redis.hset(cnt, mapping={"vt": version - 1, "vdefs": "ops\t\t0\tfoo\t"})

    async with open_stream(hub.client, t.token("ana")) as stream:
        event, _ = await stream.until("counts")
        assert event.data["views"] == {"ops": {"unread": 1, "unseen": 1, "total": 1}}
        await t.publish(["ana"], tags=["ops"])
        event, before = await stream.until("counts")
        assert [e.event for e in before] == ["notification"]
        assert event.data["views"] == {"ops": {"unread": 2, "unseen": 2, "total": 2}}

    await redis.hset(cnt, "vt", version - 1)  # behind in version only
    async with open_stream(hub.client, t.token("ana")) as stream:
        event, _ = await stream.until("counts")
        assert event.data["views"] == {"ops": {"unread": 2, "unseen": 2, "total": 2}}
        assert int(await redis.hget(cnt, "vt")) == version  # synced
        await t.publish(["ana"], tags=["ops"])
        event, _ = await stream.until("counts")
        assert event.data["views"] == {"ops": {"unread": 3, "unseen": 3, "total": 3}}


async def test_a_redefined_view_is_inexact_until_recounted_while_postgresql_stalls(
    hub: Any, admin_key: str, publish_key: str, make_token: Any, database_url: str
) -> None:
    """A read of counts recounts a user whose copy of the views is older than the
    tenant's, so it is `exact: false` only when it cannot: PostgreSQL does not give the
    views within CATALOG_WAIT_S. Here the views' tables are locked from the commit of a
    redefinition on (its audit entry held it open until the lock was queued behind it),
    so the background recount waits too: the user's counts are the old view's, marked
    `exact: false`, /metrics shows no user recounted; once PostgreSQL answers the recount
    runs and the counts are the new view's, exact."""
    t = await _tenant(hub, admin_key, publish_key, make_token)
    users = ["u0", "u1", "u2"]
    await t.publish(users, severity="warning", tags=["ops"])
    await t.publish(users, severity="critical")
    await t.define("ops", filter={"tags_any": ["ops"]})
    await hub.app_state["views"].settled()
    assert (await t.counts("u0"))["views"] == {
        "ops": {"unread": 1, "unseen": 1, "total": 1, "exact": True}
    }
    recounted = await _metric(hub, RECOUNTED)

    dsn = asyncpg_dsn(database_url)
    audit, catalog, watch = [await asyncpg.connect(dsn) for _ in range(3)]
    tasks: list[asyncio.Task[Any]] = []
    try:
        await audit.execute("BEGIN; LOCK TABLE audit_log IN ACCESS EXCLUSIVE MODE")
        url = f"/v1/admin/views/ops?tenant={t.name}"
        redefine = {"filter": {"severity_at_least": "warning"}}
        tasks.append(put := asyncio.create_task(t.client.put(url, json=redefine, headers=t.admin)))
        await _waiting_for(watch, "audit_log")  # the view is written, not committed yet
        stall = "BEGIN; LOCK TABLE inbox_view_versions IN ACCESS EXCLUSIVE MODE"
        tasks.append(locked := asyncio.create_task(catalog.execute(stall)))
        await _waiting_for(watch, "inbox_view_versions")  # queued behind the PUT's writes
        await audit.execute("ROLLBACK")
        assert (await put).status_code == 200
        await locked  # granted at the PUT's commit: every read of the views waits now

        assert (await t.counts("u0"))["views"] == {
            "ops": {"unread": 1, "unseen": 1, "total": 1, "exact": False}
        }
        assert await _metric(hub, RECOUNTED) == recounted  # the recount waits as well
        assert await _metric(hub, PENDING) == 0
        await catalog.execute("ROLLBACK")
    finally:  # a failure above must not leave the locks held
        for task in tasks:
            task.cancel()
        for connection in (audit, catalog, watch):
            connection.terminate()

    await hub.app_state["views"].settled()
    assert await _metric(hub, RECOUNTED) - recounted == len(users)
    assert await _metric(hub, PENDING) == 0
    for user in users:
        assert (await t.counts(user))["views"] == {
            "ops": {"unread": 2, "unseen": 2, "total": 2, "exact": True}
        }


async def test_a_user_nobody_wrote_to_gets_views_on_first_read(
    hub: Any, admin_key: str, publish_key: str, make_token: Any
) -> None:
    """The sweep visits inboxes holding notifications; anyone else is synced when they
    first read (or when Redis lost their inbox)."""
    t = await _tenant(hub, admin_key, publish_key, make_token)
    await t.define("every", filter={})
    await hub.app_state["views"].settled()
    assert await t.views("new") == {"every": (0, 0, 0)}
    await t.publish(["new"])
    assert await t.views("new") == {"every": (1, 1, 1)}


async def test_a_new_users_first_stream_counts_carry_the_tenants_views(
    hub: Any, admin_key: str, publish_key: str, make_token: Any
) -> None:
    """A user with no inbox yet opens a stream: its first `counts` names the tenant's
    views, each at zero (exact: nothing is in any view of an empty inbox), as an existing
    user's carry theirs, and as GET counts says."""
    t = await _tenant(hub, admin_key, publish_key, make_token)
    await t.publish(["old"], tags=["ops"])
    await t.define("ops", filter={"tags_any": ["ops"]})
    await t.define("alarms", filter={"severity_at_least": "error"})
    await hub.app_state["views"].settled()
    zero = {"unread": 0, "unseen": 0, "total": 0}
    async with open_stream(hub.client, t.token("old")) as stream:  # reached by the sweep
        event, _ = await stream.until("counts")
        one = {"unread": 1, "unseen": 1, "total": 1}
        assert event.data["views"] == {"ops": one, "alarms": zero}
    async with open_stream(hub.client, t.token("newcomer")) as stream:
        event, _ = await stream.until("counts")
        assert (event.data["unread"], event.data["total"]) == (0, 0)
        assert event.data["views"] == {"ops": zero, "alarms": zero}
        # their first copy's counts still name the tabs, its view counted (the stream
        # synced their copy of the views at its opening: no REST read in between)
        await t.publish(["newcomer"], tags=["ops"])
        event, before_it = await stream.until("counts")
        assert [e.event for e in before_it] == ["notification"]
        one = {"unread": 1, "unseen": 1, "total": 1}
        assert event.data["views"] == {"ops": one, "alarms": zero}
    assert await t.views("newcomer") == {"ops": (1, 1, 1), "alarms": (0, 0, 0)}  # as REST says


async def test_bad_input_is_refused_precisely_and_changes_nothing(
    hub: Any, admin_key: str, publish_key: str, make_token: Any
) -> None:
    t = await _tenant(hub, admin_key, publish_key, make_token)
    me = t.me("ana")
    await t.publish(["ana"], tags=["billing"])

    async def refused(method: str, url: str, status: int, detail: str, **kw: Any) -> None:
        headers = kw.pop("headers", me)
        response = await t.client.request(method, url, headers=headers, **kw)
        assert response.status_code == status, response.text
        assert response.headers["content-type"] == "application/problem+json"
        assert detail in response.text, response.text

    await refused("GET", f"{BASE}?view=nope", 422, "you have no view 'nope'")
    await refused("GET", f"{BASE}?view=Bad%20Name", 422, "view")
    body = {"filter": {"tags_any": ["billing"]}}
    await refused("PUT", "/v1/me/views/Bad!", 422, "name")
    await refused("PUT", "/v1/me/views/x", 422, "colour", json={**body, "colour": "red"})
    await refused("PUT", "/v1/me/views/x", 422, "tags_any", json={"filter": {"tags_any": ["A B"]}})
    eleven = {"filter": {"tags_all": [f"t{i}" for i in range(11)]}}
    await refused("PUT", "/v1/me/views/x", 422, "tags_all", json=eleven)
    twice = {"filter": {"categories": ["billing", "billing"]}}
    await refused("PUT", "/v1/me/views/x", 422, "categories must be distinct", json=twice)
    await refused("DELETE", "/v1/me/views/x", 404, "no view x")

    for i in range(10):
        answer = await t.client.put(f"/v1/me/views/v{i}", json=body, headers=me)
        assert answer.status_code == 201
    await refused("PUT", "/v1/me/views/v10", 409, "10 views", json=body)
    problem = (await t.client.put("/v1/me/views/v10", json=body, headers=me)).json()
    assert problem["limit"] == 10
    admin_url = f"/v1/admin/views/{{}}?tenant={t.name}"
    for i in range(10):
        await t.define(f"t{i}", filter={})
    await refused("PUT", admin_url.format("t10"), 409, "10 views", json=body, headers=t.admin)
    await refused("PUT", "/v1/me/views/t0", 409, "the tenant has a view", json=body)
    await refused("GET", admin_url.format("nope"), 404, "no view nope", headers=t.admin)
    await refused("DELETE", admin_url.format("nope"), 404, "no view nope", headers=t.admin)

    counts = await t.counts("ana")
    assert sorted(counts["views"]) == sorted(
        [f"v{i}" for i in range(10)] + [f"t{i}" for i in range(10)]
    )
    assert counts["views"]["v0"]["total"] == 1 and counts["views"]["t0"]["total"] == 1


async def test_the_admin_list_of_views_pages_by_name(
    hub: Any, admin_key: str, publish_key: str, make_token: Any
) -> None:
    t = await _tenant(hub, admin_key, publish_key, make_token)
    for name in ("c", "a", "b"):
        await t.define(name, filter={})
    url = f"/v1/admin/views?tenant={t.name}&limit=2"
    first = (await t.client.get(url, headers=t.admin)).json()
    assert [v["name"] for v in first["views"]] == ["a", "b"] and first["next_cursor"] == "b"
    rest = (await t.client.get(f"{url}&cursor=b", headers=t.admin)).json()
    assert [v["name"] for v in rest["views"]] == ["c"] and rest["next_cursor"] is None
