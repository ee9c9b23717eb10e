"""Concurrent replacements of one object: every one answers 2xx, and what is left is
exactly one of the writes (never a 500 from a unique violation, never a mix)."""

from __future__ import annotations

import asyncio
import secrets
from typing import Any

from redis.asyncio import Redis

from notifyhub.settings import Settings
from notifyhub.store.keys import Keys


def _text(value: bytes | str) -> str:
    return value.decode() if isinstance(value, bytes) else value


def _auth(token: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {token}"}


async def _put_all(hub: Any, path: str, bodies: list[Any], headers: dict[str, str]) -> list[int]:
    responses = await asyncio.gather(
        *(hub.client.put(path, json=body, headers=headers) for body in bodies)
    )
    for response in responses:
        assert response.is_success, response.text
    return [r.status_code for r in responses]


async def test_concurrent_preference_puts(
    hub: Any, make_token: Any, redis: Redis, settings: Settings
) -> None:
    user = f"prefs-{secrets.token_hex(3)}"
    me = _auth(make_token(user))
    # Overlapping category sets, so that a mix of two writes would show.
    bodies = [
        {
            "categories": {
                f"c{i}": {"inbox": True, "push": False, "email": True},
                f"c{i + 1}": {"inbox": False, "push": True, "email": False},
                "shared": {"inbox": i % 2 == 0, "push": i % 3 == 0, "email": i % 5 == 0},
            },
            "locale": ["pt-BR", "de", "fr-CA", "en"][i % 4],  # from the same PUT as them
        }
        for i in range(20)
    ]
    await _put_all(hub, "/v1/me/preferences", bodies, me)

    final = (await hub.client.get("/v1/me/preferences", headers=me)).json()
    assert final in bodies
    # The copy the place script reads says the same (written in commit order).
    cached = await redis.hgetall(Keys(settings.redis_prefix).inbox("default", user).prefs)
    flags = {
        c: f"{int(p['inbox'])}{int(p['push'])}{int(p['email'])}"
        for c, p in final["categories"].items()
    }
    assert {_text(k): _text(v) for k, v in cached.items()} == flags


async def test_concurrent_rule_puts(hub: Any, admin_key: str) -> None:
    admin = _auth(admin_key)
    path = f"/v1/admin/rules/race_{secrets.token_hex(3)}"
    bodies = [
        {
            "target_type": f"doc{i}",
            "recipients": [
                {"relationship": "author", "obtain": "push", "title": f"author {i}"},
                {"relationship": f"watcher{i}", "obtain": "pull", "title": f"watcher {i}"},
            ],
        }
        for i in range(10)
    ]
    statuses = await _put_all(hub, path, bodies, admin)
    assert sorted(statuses) == [200] * 9 + [201]  # created exactly once

    final = (await hub.client.get(path, headers=admin)).json()
    written = {k: final[k] for k in ("target_type", "recipients")}
    for recipient in written["recipients"]:
        for unset in ("body", "thread_key", "locales"):  # defaults the bodies leave out
            recipient.pop(unset, None)
    assert written in bodies


async def test_concurrent_topic_and_group_puts(hub: Any, admin_key: str) -> None:
    admin = _auth(admin_key)
    name = f"race-{secrets.token_hex(3)}"
    bodies = [{"users": [f"u{i}", f"u{i + 1}", "shared"]} for i in range(10)]
    statuses = await _put_all(hub, f"/v1/admin/topics/{name}", bodies, admin)
    assert sorted(statuses) == [200] * 9 + [201]
    final = (await hub.client.get(f"/v1/admin/topics/{name}", headers=admin)).json()
    assert {"users": final["users"]} in [{"users": sorted(b["users"])} for b in bodies]

    statuses = await _put_all(hub, f"/v1/admin/groups/{name}", [None] * 10, admin)
    assert sorted(statuses) == [200] * 9 + [201]
