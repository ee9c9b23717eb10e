"""Revocation under load on two hub processes: every stream a revoked key or a user's
revoked tokens opened ends within 1 s, on both processes, and the credentials are refused.

Two `notifyhub serve` processes share the scenario's Valkey and PostgreSQL. Streams are
opened on both (admin tails with a key made for this; users' own streams), the key and
the users' tokens are revoked through the first process, and each stream must end within
`BOUND_S` of the answer. The rows count the streams: acknowledged = open when revoked,
delivered = ended in time, lost = still open past the bound.
"""

from __future__ import annotations

import asyncio
import contextlib
import secrets
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import AbstractAsyncContextManager
from pathlib import Path

import httpx
import pytest

from support.faultenv import FaultEnv
from support.history import Verdict
from support.processes import HubProcess
from support.sse import EventReader

pytestmark = pytest.mark.slow

BOUND_S = 1.0
STREAMS_PER_PROCESS = 5
SCENARIO = "revoked key / revoked user tokens (2 hub processes)"


def _auth(secret: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {secret}"}


@contextlib.asynccontextmanager
async def _second_hub(env: FaultEnv, tmp_path: Path) -> AsyncIterator[HubProcess]:
    hub = HubProcess(env.hub.env, tmp_path / "hub2.log")
    try:
        await hub.start()
        yield hub
    finally:
        await hub.stop()


async def _stream(
    stack: contextlib.AsyncExitStack, client: httpx.AsyncClient, url: str, secret: str
) -> EventReader:
    response = await stack.enter_async_context(client.stream("GET", url, headers=_auth(secret)))
    assert response.status_code == 200
    events = EventReader(response)
    assert (await events.next()).event == "counts"
    return events


async def _ended_in_time(events: EventReader) -> bool:
    try:
        await events.next(timeout=BOUND_S)
    except EOFError:
        return True
    except TimeoutError:
        return False
    return False  # it sent an event instead of ending


Revoke = Callable[[httpx.AsyncClient], Awaitable[httpx.Response]]


async def _revoked(
    bases: list[str], url_of: Callable[[int], str], secret: str, revoke: Revoke, probe: str
) -> tuple[int, int]:
    """Open streams on every process, revoke, and count (open, ended within the bound);
    then `probe` (a GET the secret could make before) is refused on every process."""
    async with contextlib.AsyncExitStack() as stack:
        clients = [
            await stack.enter_async_context(httpx.AsyncClient(base_url=b, timeout=10))
            for b in bases
        ]
        streams = [
            await _stream(stack, client, url_of(i), secret)
            for client in clients
            for i in range(STREAMS_PER_PROCESS)
        ]
        answer = await revoke(clients[0])
        assert answer.status_code in (200, 204), answer.text
        ended = await asyncio.gather(*(_ended_in_time(s) for s in streams))
        for client in clients:  # refused everywhere (the streams' end says Pub/Sub came)
            assert (await client.get(probe, headers=_auth(secret))).status_code == 401
    return len(streams), sum(ended)


def _verdict(workload: str, opened: int, ended: int) -> Verdict:
    return Verdict(SCENARIO, workload, opened, ended, 0, opened - ended)


async def test_revocations_end_streams_on_every_process(
    fault_env: Callable[..., AbstractAsyncContextManager[FaultEnv]],
    fault_report: list[Verdict],
    tmp_path: Path,
) -> None:
    async with fault_env() as env, _second_hub(env, tmp_path) as second:
        bases = [env.hub.base_url, second.base_url]
        name = f"tail-{secrets.token_hex(3)}"
        async with httpx.AsyncClient(base_url=bases[0], timeout=10) as admin:
            made = await admin.post(
                "/v1/admin/api-keys",
                json={"name": name, "scope": "admin"},
                headers=_auth(env.admin_key),
            )
        key = made.json()["key"]

        async def revoke_key(client: httpx.AsyncClient) -> httpx.Response:
            url = f"/v1/admin/api-keys/{name}"
            return await client.delete(url, headers=_auth(env.admin_key))

        tails = lambda i: f"/v1/admin/tail?user=w{i}"  # noqa: E731
        keys = await _revoked(bases, tails, key, revoke_key, "/v1/admin/api-keys")

        async def revoke_user(client: httpx.AsyncClient) -> httpx.Response:
            url = "/v1/admin/users/default/ann/revoke-tokens"
            return await client.post(url, headers=_auth(env.admin_key))

        token = env.user_token("ann")
        counts = "/v1/me/notifications/counts"
        users = await _revoked(bases, lambda _: "/v1/me/stream", token, revoke_user, counts)
    verdicts = [
        _verdict("admin tails of the revoked key", *keys),
        _verdict("user streams of the revoked tokens", *users),
    ]
    fault_report.extend(verdicts)
    assert all(v.lost == 0 and v.acknowledged == 2 * STREAMS_PER_PROCESS for v in verdicts)
