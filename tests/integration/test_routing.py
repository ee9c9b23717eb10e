"""Who gets what: topics, rules and relationships, preferences, subscriptions."""

from __future__ import annotations

import random
import uuid
from typing import Any

import httpx
import pytest
from redis.asyncio import Redis

from notifyhub.api.app import create_app
from support.sse import EventReader
from support.tls import TEST_TLS


def _auth(token: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {token}"}


async def _counts(hub: Any, make_token: Any, user: str) -> dict[str, int]:
    response = await hub.client.get("/v1/me/notifications/counts", headers=_auth(make_token(user)))
    return dict(response.json())


async def test_topic_with_group_resolves_at_send_time(hub: Any, admin_key: str) -> None:
    admin = _auth(admin_key)
    await hub.client.put("/v1/admin/groups/replenisher-wh1", headers=admin)
    body = {"users": ["ann"], "groups": ["replenisher-wh1"]}
    created = await hub.client.put("/v1/admin/topics/restock-wh1", json=body, headers=admin)
    assert created.status_code == 201
    # Ben joins the role after the topic was defined: he still gets the next notification.
    await hub.client.post(
        "/v1/admin/groups/replenisher-wh1/members", json={"add": ["ben", "ann"]}, headers=admin
    )
    send = {
        "recipients": {"topics": ["restock-wh1"], "users": ["ann"], "groups": ["replenisher-wh1"]},
        "title": "Restock A-12",
        "category": "restock",
    }
    response = await hub.client.post("/v1/notifications", json=send, headers=admin)
    assert response.status_code == 202
    assert response.json()["recipients"] == 2  # ann once, however many routes name her
    for user in ("ann", "ben"):
        page = (
            await hub.client.get(
                "/v1/me/notifications", headers=_auth(hub.tokens.mint_user_token(user))
            )
        ).json()
        assert len(page["items"]) == 1


async def test_topic_admin_api(hub: Any, admin_key: str) -> None:
    admin = _auth(admin_key)
    await hub.client.put("/v1/admin/topics/t1", json={"users": ["a", "b"]}, headers=admin)
    patched = await hub.client.patch(
        "/v1/admin/topics/t1",
        json={"add": {"users": ["c"]}, "remove": {"users": ["a"]}},
        headers=admin,
    )
    assert patched.json()["users"] == ["b", "c"]
    assert (await hub.client.get("/v1/admin/topics/t1", headers=admin)).json()["users"] == [
        "b",
        "c",
    ]
    unknown_group = await hub.client.put(
        "/v1/admin/topics/t2", json={"groups": ["nope"]}, headers=admin
    )
    assert unknown_group.status_code == 422
    assert (await hub.client.delete("/v1/admin/topics/t1", headers=admin)).status_code == 204
    assert (await hub.client.get("/v1/admin/topics/t1", headers=admin)).status_code == 404
    send = {"recipients": {"topics": ["t1"]}, "title": "x"}
    gone = await hub.client.post("/v1/notifications", json=send, headers=admin)
    assert gone.status_code == 422
    assert "t1" in gone.json()["detail"]


@pytest.mark.slow
async def test_topic_cache_equals_postgres_after_random_changes(hub: Any, admin_key: str) -> None:
    admin = _auth(admin_key)
    rng = random.Random(7)
    pool = [f"u{i}" for i in range(12)]
    await hub.client.put("/v1/admin/topics/churn", json={"users": pool[:4]}, headers=admin)
    cache = hub.app_state["topics"]._cache
    for _ in range(30):
        change = {"add": {"users": rng.sample(pool, 3)}, "remove": {"users": rng.sample(pool, 2)}}
        await hub.client.patch("/v1/admin/topics/churn", json=change, headers=admin)
        truth = (await hub.client.get("/v1/admin/topics/churn", headers=admin)).json()
        cached = await cache.read("default", "churn")
        assert cached is not None
        assert cached.users == truth["users"]


async def test_topic_cache_is_rebuilt_after_redis_loses_it(
    hub: Any, admin_key: str, settings: Any, redis: Redis
) -> None:
    admin = _auth(admin_key)
    await hub.client.put("/v1/admin/topics/durable", json={"users": ["dora"]}, headers=admin)
    # What FLUSHALL does to this run's keys (the shared test Redis is not flushed).
    async for key in redis.scan_iter(match=settings.redis_prefix + "*", count=1000):
        await redis.delete(key)
    app = create_app(settings)
    async with app.router.lifespan_context(app) as state:  # a hub starting up again
        cached = await state["topics"]._cache.read("default", "durable")
    assert cached is not None
    assert cached.users == ["dora"]


async def _social_rule(hub: Any, admin: dict[str, str]) -> None:
    rule = {
        "target_type": "post",
        "recipients": [
            {
                "relationship": "author",
                "obtain": "push",
                "title": "{{ actor.id }} commented on your post {{ target.id }}",
                "body": "{{ data.text }}",
            },
            {
                "relationship": "follower",
                "obtain": "pull",
                "title": "New comment on a post you follow ({{ target.id }})",
            },
        ],
    }
    response = await hub.client.put("/v1/admin/rules/user_comment_post", json=rule, headers=admin)
    assert response.status_code in (200, 201)  # the run's database is shared by its tests


async def test_rule_push_and_pull_over_live_streams(
    hub: Any, admin_key: str, publish_key: str
) -> None:
    admin, pub = _auth(admin_key), _auth(publish_key)
    await _social_rule(hub, admin)
    post = {"type": "post", "id": "p1"}
    for user, rel in (("writer", "author"), ("fan", "follower"), ("critic", "follower")):
        body = {"user": user, "relationship": rel, "target": post}
        assert (
            await hub.client.post("/v1/relationships", json=body, headers=pub)
        ).status_code == 204

    async with (
        httpx.AsyncClient(timeout=10, verify=TEST_TLS) as client,
        client.stream(
            "GET",
            f"{hub.base_url}/v1/me/stream",
            headers=_auth(hub.tokens.mint_user_token("writer")),
        ) as writer_resp,
        client.stream(
            "GET", f"{hub.base_url}/v1/me/stream", headers=_auth(hub.tokens.mint_user_token("fan"))
        ) as fan_resp,
    ):
        writer, fan = EventReader(writer_resp), EventReader(fan_resp)
        await writer.next()
        await fan.next()
        event = {
            "rule": "user_comment_post",
            "actor": {"type": "user", "id": "critic"},
            "target": post,
            "data": {"text": "nice"},
        }
        fired = await hub.client.post("/v1/events", json=event, headers=pub)
        assert fired.status_code == 202
        assert fired.json()["notifications"] == 2
        assert fired.json()["recipients"] == 2  # the critic is a follower but the actor
        live, _ = await writer.until("notification")
        assert live.data["title"] == "critic commented on your post p1"
        assert live.data["body"] == "nice"
        counts = await fan.next()
        assert counts.event == "counts"  # pull: counts move, no live notification event
        assert counts.data["unread"] == 1
    fan_page = (
        await hub.client.get(
            "/v1/me/notifications", headers=_auth(hub.tokens.mint_user_token("fan"))
        )
    ).json()
    assert fan_page["items"][0]["title"] == "New comment on a post you follow (p1)"
    assert (await _counts(hub, hub.tokens.mint_user_token, "critic"))["total"] == 0


async def test_subscriptions_list_and_cancel(hub: Any, admin_key: str, publish_key: str) -> None:
    admin, pub = _auth(admin_key), _auth(publish_key)
    await _social_rule(hub, admin)
    post = {"type": "post", "id": "p9"}
    await hub.client.post(
        "/v1/relationships",
        json={"user": "sub", "relationship": "follower", "target": post},
        headers=pub,
    )
    me = _auth(hub.tokens.mint_user_token("sub"))
    listed = (await hub.client.get("/v1/me/subscriptions", headers=me)).json()["subscriptions"]
    assert listed == [
        {"rule": "user_comment_post", "target": post, "relationship": "follower", "obtain": "pull"}
    ]
    cancel = {"rule": "user_comment_post", "target": post}
    response = await hub.client.request("DELETE", "/v1/me/subscriptions", json=cancel, headers=me)
    assert response.status_code == 204
    assert (await hub.client.get("/v1/me/subscriptions", headers=me)).json()["subscriptions"] == []
    event = {"rule": "user_comment_post", "actor": {"type": "user", "id": "x"}, "target": post}
    fired = await hub.client.post("/v1/events", json=event, headers=pub)
    assert fired.json()["recipients"] == 0


async def test_bad_templates_and_unknown_rules(hub: Any, admin_key: str, publish_key: str) -> None:
    admin = _auth(admin_key)
    bad = {"target_type": "post", "recipients": [{"relationship": "author", "title": "{{ oops"}]}
    response = await hub.client.put("/v1/admin/rules/broken", json=bad, headers=admin)
    assert response.status_code == 422
    assert "title" in response.json()["detail"]
    event = {
        "rule": "no_such_rule",
        "actor": {"type": "user", "id": "a"},
        "target": {"type": "post", "id": "1"},
    }
    unknown = await hub.client.post("/v1/events", json=event, headers=_auth(publish_key))
    assert unknown.status_code == 422
    assert "no_such_rule" in unknown.json()["detail"]


async def test_render_error_skips_only_that_relationship(
    hub: Any, admin_key: str, publish_key: str
) -> None:
    admin, pub = _auth(admin_key), _auth(publish_key)
    rule = {
        "target_type": "doc",
        "recipients": [
            {"relationship": "owner", "title": "{{ data.missing.deeper }}"},
            {"relationship": "watcher", "title": "doc {{ target.id }} changed"},
        ],
    }
    await hub.client.put("/v1/admin/rules/user_edit_doc", json=rule, headers=admin)
    for user, rel in (("own", "owner"), ("watch", "watcher")):
        await hub.client.post(
            "/v1/relationships",
            json={"user": user, "relationship": rel, "target": {"type": "doc", "id": "d1"}},
            headers=pub,
        )
    event = {
        "rule": "user_edit_doc",
        "actor": {"type": "user", "id": "ed"},
        "target": {"type": "doc", "id": "d1"},
    }
    fired = await hub.client.post("/v1/events", json=event, headers=pub)
    assert fired.status_code == 202
    assert fired.json()["recipients"] == 1
    assert fired.json()["errors"][0].startswith("owner")


async def test_preferences_push_inbox_and_critical(hub: Any, publish_key: str) -> None:
    token = hub.tokens.mint_user_token("pref")
    me, pub = _auth(token), _auth(publish_key)
    prefs = {
        "categories": {
            "restock": {"inbox": True, "push": False, "email": True},
            "promo": {"inbox": False, "push": True, "email": False},
        }
    }
    stored = {**prefs, "locale": None}
    assert (await hub.client.put("/v1/me/preferences", json=prefs, headers=me)).json() == stored
    assert (await hub.client.get("/v1/me/preferences", headers=me)).json() == stored

    async def send(category: str, severity: str = "info") -> int:
        body = {
            "recipients": {"users": ["pref"]},
            "title": category,
            "category": category,
            "severity": severity,
        }
        return int(
            (await hub.client.post("/v1/notifications", json=body, headers=pub)).json()[
                "recipients"
            ]
        )

    async with (
        httpx.AsyncClient(timeout=10, verify=TEST_TLS) as client,
        client.stream("GET", f"{hub.base_url}/v1/me/stream", headers=me) as response,
    ):
        stream = EventReader(response)
        await stream.next()
        assert await send("promo") == 0  # inbox: false drops it
        assert await send("restock") == 1  # push: false keeps it quietly
        quiet = await stream.next()
        assert quiet.event == "counts"
        assert quiet.data["total"] == 1
        assert await send("promo", "critical") == 1  # critical bypasses inbox: false
        loud, _ = await stream.until("notification")
        assert loud.data["severity"] == "critical"
    titles = [
        i["title"]
        for i in (await hub.client.get("/v1/me/notifications", headers=me)).json()["items"]
    ]
    assert titles == ["promo", "restock"]


async def test_a_rule_threads_a_posts_comments(hub: Any, admin_key: str, publish_key: str) -> None:
    """The social comment case, threaded: every comment on one post is one item for its
    author, counting the comments and their commenters; another post is another thread.
    A thread key template rendering something that is no key is that relationship's error."""
    admin, pub = _auth(admin_key), _auth(publish_key)
    rule = {
        "target_type": "post",
        "recipients": [
            {
                "relationship": "author",
                "title": "{{ actor.name or actor.id }} commented on your post",
                "body": "{{ data.text }}",
                "thread_key": "{{ target.type }}:{{ target.id }}:comments",
            },
            {"relationship": "editor", "title": "t", "thread_key": "{{ data.text }}"},
        ],
    }
    put = await hub.client.put("/v1/admin/rules/threaded_comment", json=rule, headers=admin)
    assert put.status_code in (200, 201), put.text
    got = (await hub.client.get("/v1/admin/rules/threaded_comment", headers=admin)).json()
    assert got["recipients"][0]["thread_key"] == "{{ target.type }}:{{ target.id }}:comments"
    writer, editor = f"tw-{uuid.uuid4().hex[:6]}", f"te-{uuid.uuid4().hex[:6]}"
    # posts of its own: other tests count the recipients of p1's relationships
    p1, p2 = f"tp1-{writer}", f"tp2-{writer}"
    for post_id in (p1, p2):
        for user, rel in ((writer, "author"), (editor, "editor")):
            body = {"user": user, "relationship": rel, "target": {"type": "post", "id": post_id}}
            assert (
                await hub.client.post("/v1/relationships", json=body, headers=pub)
            ).status_code == 204
    for n, (who, post_id) in enumerate([("ana", p1), ("bo", p1), ("ana", p1), ("cy", p2)]):
        event = {
            "rule": "threaded_comment",
            "actor": {"id": who, "name": who.title()},
            "target": {"type": "post", "id": post_id},
            "data": {"text": f"comment {n} has spaces"},
        }
        fired = await hub.client.post("/v1/events", json=event, headers=pub)
        assert fired.status_code == 202
        assert fired.json()["errors"][0].startswith("editor: thread_key rendered")
    items = (
        await hub.client.get(
            "/v1/me/notifications", headers=_auth(hub.tokens.mint_user_token(writer))
        )
    ).json()["items"]
    assert [(i["thread"]["key"], i["thread"]["activity_count"]) for i in items] == [
        (f"post:{p2}:comments", 1),
        (f"post:{p1}:comments", 3),
    ]
    assert [a["id"] for a in items[1]["thread"]["actors"]] == ["ana", "bo"]
    assert items[1]["title"] == "Ana commented on your post"
