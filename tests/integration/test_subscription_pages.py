"""`GET /v1/me/subscriptions` a page at a time, as every list: by rule, target id and
relationship, a cursor that rows added before it do not move, a bad cursor a 422, and one
tenant's subscriptions never in another tenant's user's pages."""

from __future__ import annotations

import secrets
from collections.abc import Awaitable, Callable
from typing import Any

import pytest

CreateKey = Callable[..., Awaitable[str]]
PATH = "/v1/me/subscriptions"


def _auth(token: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {token}"}


class Tenant:
    """One fresh tenant with its own keys, a rule `name` on targets of its own type."""

    def __init__(self, hub: Any, name: str, admin: str, publish: str) -> None:
        self.hub, self.name = hub, name
        self.admin, self.publish = _auth(admin), _auth(publish)
        self.target_type = f"doc-{secrets.token_hex(3)}"

    async def rule(self, name: str) -> None:
        rule = {
            "target_type": self.target_type,
            "recipients": [
                {"relationship": "author", "title": "a"},
                {"relationship": "follower", "obtain": "pull", "title": "f"},
            ],
        }
        url = f"/v1/admin/rules/{name}?tenant={self.name}"
        answer = await self.hub.client.put(url, json=rule, headers=self.admin)
        assert answer.status_code == 201, answer.text

    async def relate(self, user: str, target_id: str, relationship: str = "follower") -> None:
        body = {
            "tenant": self.name,
            "user": user,
            "relationship": relationship,
            "target": {"type": self.target_type, "id": target_id},
        }
        answer = await self.hub.client.post("/v1/relationships", json=body, headers=self.publish)
        assert answer.status_code == 204, answer.text


@pytest.fixture
def new_tenant(hub: Any, create_key: CreateKey) -> Callable[[], Awaitable[Tenant]]:
    async def make() -> Tenant:
        name = f"sp-{secrets.token_hex(3)}"
        admin = await create_key("sp", "admin", name)
        return Tenant(hub, name, admin, await create_key("sp", "publish", name))

    return make


async def _page(hub: Any, token: str, **query: Any) -> dict[str, Any]:
    answer = await hub.client.get(PATH, params=query, headers=_auth(token))
    assert answer.status_code == 200, answer.text
    body: dict[str, Any] = answer.json()
    assert list(body) == ["subscriptions", "next_cursor"]
    return body


def _keys(page: dict[str, Any]) -> list[tuple[str, str, str]]:
    return [(s["rule"], s["target"]["id"], s["relationship"]) for s in page["subscriptions"]]


async def _every_page(hub: Any, token: str, limit: int) -> list[list[tuple[str, str, str]]]:
    pages, cursor = [], None
    while True:
        page = await _page(hub, token, limit=limit, **({"cursor": cursor} if cursor else {}))
        pages.append(_keys(page))
        cursor = page["next_cursor"]
        if cursor is None:
            return pages


async def test_pages_in_key_order_until_a_null_cursor(
    hub: Any, new_tenant: Callable[[], Awaitable[Tenant]], make_token: Any
) -> None:
    t = await new_tenant()
    for rule in ("r2", "r1"):
        await t.rule(rule)
    # a target id may hold the cursor's `/`; two relationships to one target: two rows
    for target_id in ("a/2", "b", "a/1"):
        await t.relate("u", target_id)
    await t.relate("u", "b", "author")
    token = make_token("u", t.name)

    mine = (("a/1", "follower"), ("a/2", "follower"), ("b", "author"), ("b", "follower"))
    whole = [(rule, target_id, rel) for rule in ("r1", "r2") for target_id, rel in mine]
    assert _keys(await _page(hub, token)) == whole  # the default limit: one page
    assert (await _page(hub, token))["next_cursor"] is None
    pages = await _every_page(hub, token, limit=3)
    assert pages == [whole[:3], whole[3:6], whole[6:]]
    assert await _every_page(hub, token, limit=1) == [[k] for k in whole]

    first = await _page(hub, token, limit=1)
    assert first["subscriptions"][0] == {
        "rule": "r1",
        "target": {"type": t.target_type, "id": "a/1"},
        "relationship": "follower",
        "obtain": "pull",
    }
    assert first["next_cursor"] == "r1/a/1/follower"


async def test_a_cursor_survives_rows_added_before_and_after_it(
    hub: Any, new_tenant: Callable[[], Awaitable[Tenant]], make_token: Any
) -> None:
    t = await new_tenant()
    await t.rule("r")
    for target_id in ("b", "d", "f"):
        await t.relate("u", target_id)
    token = make_token("u", t.name)
    first = await _page(hub, token, limit=2)
    assert [k[1] for k in _keys(first)] == ["b", "d"]

    for target_id in ("a", "c", "e"):  # two before the cursor, one after it
        await t.relate("u", target_id)
    cancel = {"rule": "r", "target": {"type": t.target_type, "id": "b"}}  # one shown, gone
    answer = await hub.client.request("DELETE", PATH, json=cancel, headers=_auth(token))
    assert answer.status_code == 204

    second = await _page(hub, token, limit=2, cursor=first["next_cursor"])
    assert [k[1] for k in _keys(second)] == ["e", "f"]  # nothing twice, nothing skipped
    assert second["next_cursor"] is None


@pytest.mark.parametrize(
    "cursor",
    ["nope", "r/p1", "/p1/follower", "r//follower", "r/p1/", "r!/p1/follower", "r/p1/a b"],
)
async def test_a_cursor_this_list_never_gives_is_a_422(
    hub: Any, make_token: Any, cursor: str
) -> None:
    token = make_token(f"u-{secrets.token_hex(3)}")
    answer = await hub.client.get(PATH, params={"cursor": cursor}, headers=_auth(token))
    assert answer.status_code == 422, answer.text
    assert answer.headers["content-type"] == "application/problem+json"
    assert "cursor" in answer.text


@pytest.mark.parametrize(
    "query", [{"cursor": "r/" + "x" * 400 + "/f"}, {"limit": 0}, {"limit": 1001}]
)
async def test_a_cursor_or_limit_out_of_bounds_is_a_422(
    hub: Any, make_token: Any, query: dict[str, Any]
) -> None:
    answer = await hub.client.get(PATH, params=query, headers=_auth(make_token("u")))
    assert answer.status_code == 422, answer.text
    assert answer.headers["content-type"] == "application/problem+json"


async def test_a_longest_cursor_is_taken(
    hub: Any, new_tenant: Callable[[], Awaitable[Tenant]], make_token: Any
) -> None:
    """A rule's name (100), a target id (200) and a relationship (64) at their longest."""
    t = await new_tenant()
    rule = "r" * 100
    await t.rule(rule)
    for end in "ab":
        await t.relate("u", "t" * 199 + end)
    token = make_token("u", t.name)
    first = await _page(hub, token, limit=1)
    assert first["next_cursor"] == f"{rule}/{'t' * 199}a/follower"
    assert [k[1][-1] for k in _keys(await _page(hub, token, cursor=first["next_cursor"]))] == ["b"]
    longest = f"{rule}/{'t' * 200}/{'f' * 64}"
    assert (await _page(hub, token, cursor=longest))["subscriptions"] == []


async def test_a_user_pages_through_their_own_tenant_only(
    hub: Any, new_tenant: Callable[[], Awaitable[Tenant]], make_token: Any
) -> None:
    a, b = await new_tenant(), await new_tenant()
    user = f"u-{secrets.token_hex(3)}"
    for t, targets in ((a, ("t1", "t2", "t3")), (b, ("t0", "t4"))):
        await t.rule("r")  # the same rule name and user id in both tenants
        for target_id in targets:
            await t.relate(user, target_id)
    in_a, in_b = make_token(user, a.name), make_token(user, b.name)

    assert await _every_page(hub, in_a, limit=1) == [
        [("r", t, "follower")] for t in ("t1", "t2", "t3")
    ]
    assert await _every_page(hub, in_b, limit=1) == [[("r", t, "follower")] for t in ("t0", "t4")]
    # A's cursor in B's hands pages through B's subscriptions after that key, never A's
    a_cursor = (await _page(hub, in_a, limit=1))["next_cursor"]
    assert a_cursor == "r/t1/follower"
    assert _keys(await _page(hub, in_b, cursor=a_cursor)) == [("r", "t4", "follower")]
    assert _keys(await _page(hub, make_token(user), limit=1000)) == []  # nor the default's
