"""Revocation takes effect in every hub process at once: a revoked API key is refused and
its tails end, a user's revoked tokens are refused and their streams end, within 1 s on
two hubs sharing Redis and PostgreSQL; a tenant-bound key revokes only in its tenant."""

from __future__ import annotations

import asyncio
import contextlib
import os
import secrets
import sys
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from pathlib import Path
from typing import Any

import httpx
import pytest

from notifyhub.services import apikeys
from notifyhub.settings import Settings
from notifyhub.store.keys import Keys
from support.sse import EventReader

CreateKey = Callable[..., Awaitable[str]]
BOUND_S = 1.0
"""How soon every process must act on a revocation."""


def _auth(secret: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {secret}"}


def _tenant(label: str) -> str:
    return f"{label}-{secrets.token_hex(3)}"


@contextlib.asynccontextmanager
async def _open(
    client: httpx.AsyncClient, url: str, headers: dict[str, str]
) -> AsyncIterator[EventReader]:
    """An event stream (a user's stream or an admin tail), past its first `counts`."""
    async with client.stream("GET", url, headers=headers) as response:
        assert response.status_code == 200, await response.aread()
        events = EventReader(response)
        assert (await events.next()).event == "counts"
        yield events


async def _ends_within(events: EventReader, timeout_s: float) -> None:
    """The stream ends (the server closes it) within `timeout_s`, sending nothing more."""
    with pytest.raises(EOFError):
        await events.next(timeout=timeout_s)


async def _answers(
    call: Callable[[], Awaitable[httpx.Response]], status: int, within_s: float
) -> httpx.Response:
    """The first answer of `call` with `status`, asked again until `within_s` has passed."""
    async with asyncio.timeout(within_s):
        while (response := await call()).status_code != status:
            await asyncio.sleep(0.02)
    return response


async def _key(hub: Any, admin: str, tenant: str | None, scope: str = "admin") -> tuple[str, str]:
    """A new key's (name, secret), made through the admin API."""
    name = f"rk-{secrets.token_hex(4)}"
    body = {"name": name, "scope": scope, "tenant": tenant}
    made = await hub.client.post("/v1/admin/api-keys", json=body, headers=_auth(admin))
    assert made.status_code == 201, made.text
    return name, str(made.json()["key"])


async def test_a_revoked_key_is_refused_and_its_tail_ends_in_every_process(
    hub: Any, settings: Settings, start_hub: Any, admin_key: str, publish_key: str
) -> None:
    tenant = _tenant("rev")
    name, secret = await _key(hub, admin_key, tenant)
    keys_url = f"/v1/admin/api-keys?tenant={tenant}"
    tail = f"/v1/admin/tail?user=watched&tenant={tenant}"
    async with start_hub(settings) as other:
        assert (await other.client.get(keys_url, headers=_auth(secret))).status_code == 200
        async with (
            _open(hub.client, tail, _auth(secret)) as here,
            _open(other.client, tail, _auth(secret)) as there,
        ):
            url = f"/v1/admin/api-keys/{name}?tenant={tenant}"
            assert (await hub.client.delete(url, headers=_auth(admin_key))).status_code == 204
            await asyncio.gather(_ends_within(here, BOUND_S), _ends_within(there, BOUND_S))
        refused = await _answers(
            lambda: other.client.get(keys_url, headers=_auth(secret)), 401, BOUND_S
        )
        assert refused.headers["content-type"] == "application/problem+json"
        assert (await hub.client.get(keys_url, headers=_auth(secret))).status_code == 401
        # the user's own stream, which no key opened, is not the key's business
        note = {"tenant": tenant, "recipients": {"users": ["watched"]}, "title": "after"}
        sent = await hub.client.post("/v1/notifications", json=note, headers=_auth(publish_key))
        assert sent.status_code == 202


async def test_revoked_user_tokens_are_refused_and_their_streams_end_everywhere(
    hub: Any, settings: Settings, start_hub: Any, admin_key: str
) -> None:
    a, b = _tenant("ua"), _tenant("ub")
    old_a = hub.tokens.mint_user_token("alice", a)
    old_b = hub.tokens.mint_user_token("alice", b)  # the same user id in another tenant
    stream, admin = "/v1/me/stream", _auth(admin_key)
    async with start_hub(settings) as other:
        made = await other.client.post("/v1/me/stream-tokens", headers=_auth(old_a))
        stream_token = made.json()["token"]
        async with (
            _open(hub.client, stream, _auth(old_a)) as here,
            _open(other.client, f"{stream}?access_token={stream_token}", {}) as there,
            _open(other.client, stream, _auth(old_b)) as tenant_b,
            _open(other.client, f"/v1/admin/tail?user=alice&tenant={a}", admin) as tail,
        ):
            url = f"/v1/admin/users/{a}/alice/revoke-tokens"
            revoked = await hub.client.post(url, headers=_auth(admin_key))
            assert revoked.status_code == 200, revoked.text
            assert revoked.json()["tenant"] == a and revoked.json()["user"] == "alice"
            await asyncio.gather(_ends_within(here, BOUND_S), _ends_within(there, BOUND_S))
            # tenant B's alice and the admin's tail stay open and are told of changes
            note = {"tenant": b, "recipients": {"users": ["alice"]}, "title": "b"}
            assert (await _publish(hub, admin_key, note)).status_code == 202
            assert (await tenant_b.until("notification"))[0].data["title"] == "b"
            note = {"tenant": a, "recipients": {"users": ["alice"]}, "title": "a"}
            assert (await _publish(hub, admin_key, note)).status_code == 202
            assert (await tail.until("notification"))[0].data["title"] == "a"
        counts = "/v1/me/notifications/counts"
        for client in (hub.client, other.client):
            refused = await client.get(counts, headers=_auth(old_a))
            assert refused.status_code == 401, refused.text
            assert refused.headers["content-type"] == "application/problem+json"
            assert "revoked" in refused.json()["detail"]
            refused = await client.get(f"{stream}?access_token={stream_token}")
            assert refused.status_code == 401
            assert (await client.get(counts, headers=_auth(old_b))).status_code == 200

        # a token issued after the revocation's second works (wait for the clock to pass it)
        def fresh_token() -> dict[str, str]:
            return _auth(hub.tokens.mint_user_token("alice", a))

        fresh = await _answers(lambda: hub.client.get(counts, headers=fresh_token()), 200, 2.5)
        assert fresh.json()["total"] == 1


async def _publish(hub: Any, admin_key: str, note: dict[str, Any]) -> httpx.Response:
    return await hub.client.post("/v1/notifications", json=note, headers=_auth(admin_key))


async def test_another_tenant_can_revoke_neither_a_key_nor_a_users_tokens(
    hub: Any, admin_key: str, create_key: CreateKey
) -> None:
    a, b = _tenant("va"), _tenant("vb")
    name, secret = await _key(hub, admin_key, a, scope="consume")
    attacker = _auth(await create_key(f"adm-{b}", "admin", b))
    keys = "/v1/admin/api-keys"
    missing = await hub.client.delete(f"{keys}/{name}", headers=attacker)
    assert missing.status_code == 404 and name in missing.json()["detail"]
    named = await hub.client.delete(f"{keys}/{name}?tenant={a}", headers=attacker)
    assert named.status_code == 403
    revoke = await hub.client.post(f"/v1/admin/users/{a}/alice/revoke-tokens", headers=attacker)
    assert revoke.status_code == 403
    assert revoke.headers["content-type"] == "application/problem+json"
    token = hub.tokens.mint_user_token("alice", a)
    counts = await hub.client.get("/v1/me/notifications/counts", headers=_auth(token))
    assert counts.status_code == 200
    consume = f"/v1/queues/q/messages?tenant={a}"
    assert (await hub.client.get(consume, headers=_auth(secret))).status_code == 200


async def test_a_users_revocation_is_audited_and_never_moves_back(
    hub: Any, admin_key: str, create_key: CreateKey
) -> None:
    tenant = _tenant("au")
    bound = _auth(await create_key(f"adm-{tenant}", "admin", tenant))
    url = f"/v1/admin/users/{tenant}/bob/revoke-tokens"
    first = (await hub.client.post(url, headers=bound)).json()["not_before"]
    second = (await hub.client.post(url, headers=bound)).json()["not_before"]
    assert second >= first
    entries = (await hub.client.get("/v1/admin/audit", headers=bound)).json()["entries"]
    mine = [e for e in entries if e["route"].endswith("/revoke-tokens")]
    assert [(e["tenant"], e["method"], e["status"]) for e in mine] == [(tenant, "POST", 200)] * 2


async def test_revocations_missed_in_a_pubsub_gap_are_caught_up(
    hub: Any, settings: Settings, admin_key: str, redis: Any, sessionmaker: Any
) -> None:
    """A revocation published while a process's Pub/Sub connection was down never reaches
    it: once it subscribes again it reads the "not before" times and the keys of its
    tails again, and ends what was revoked."""
    tenant = _tenant("gap")
    name, secret = await _key(hub, admin_key, tenant)
    token = hub.tokens.mint_user_token("carol", tenant)
    tail_url = f"/v1/admin/tail?user=dan&tenant={tenant}"
    async with (
        _open(hub.client, tail_url, _auth(secret)) as tail,
        _open(hub.client, "/v1/me/stream", _auth(token)) as mine,
    ):
        # revoked in the stores, as if the Pub/Sub message had been lost
        async with sessionmaker() as session, session.begin():
            assert await apikeys.revoke_key(session, name, tenant) is not None
        nbf = Keys(settings.redis_prefix).token_nbf
        await redis.hset(nbf, f"{tenant}/carol", str(int(time.time() * 1000)))
        for info in await redis.client_list(_type="pubsub"):
            if info.get("name") == hub.app_state["hub"].client_name:
                await redis.client_kill_filter(_id=info["id"])
        await asyncio.gather(_ends_within(tail, 5.0), _ends_within(mine, 5.0))
    counts = await hub.client.get("/v1/me/notifications/counts", headers=_auth(token))
    assert counts.status_code == 401


async def test_a_users_revocation_outlives_redis_losing_it(
    hub: Any, settings: Settings, start_hub: Any, admin_key: str, redis: Any
) -> None:
    """PostgreSQL keeps the "not before": a hub starting after Redis lost its data (here:
    the hash and the epoch marker gone) writes it back and refuses the old token."""
    tenant = _tenant("loss")
    token = hub.tokens.mint_user_token("erin", tenant)
    url = f"/v1/admin/users/{tenant}/erin/revoke-tokens"
    assert (await hub.client.post(url, headers=_auth(admin_key))).status_code == 200
    keys = Keys(settings.redis_prefix)
    await redis.delete(keys.token_nbf, keys.epoch)
    async with start_hub(settings) as fresh:  # never heard the revocation on Pub/Sub
        counts = await fresh.client.get("/v1/me/notifications/counts", headers=_auth(token))
        assert counts.status_code == 401
    assert await redis.hget(keys.token_nbf, f"{tenant}/erin") is not None


@pytest.mark.slow  # runs the CLI as a process
async def test_the_cli_revoke_tells_running_hubs_too(
    hub: Any, settings: Settings, admin_key: str
) -> None:
    tenant = _tenant("cli")
    name, secret = await _key(hub, admin_key, tenant)
    env = {
        **os.environ,
        "NOTIFYHUB_REDIS_URL": str(settings.redis_url),
        "NOTIFYHUB_DATABASE_URL": str(settings.database_url),
        "NOTIFYHUB_REDIS_PREFIX": settings.redis_prefix,
        "NOTIFYHUB_JWT_SECRET": settings.jwt_secret.get_secret_value(),  # type: ignore[union-attr]
    }
    cli = Path(sys.executable).parent / "notifyhub"
    async with _open(hub.client, f"/v1/admin/tail?user=u&tenant={tenant}", _auth(secret)) as tail:
        revoke = await asyncio.create_subprocess_exec(
            cli, "apikey", "revoke", name, "--tenant", tenant, env=env,
            stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.STDOUT,
        )  # fmt: skip
        said, _ = await revoke.communicate()
        assert revoke.returncode == 0 and said.decode().splitlines()[-1] == f"revoked {name}"
        await _ends_within(tail, BOUND_S)
