"""Hostile clients against a hub process: stuck streams never hold back a healthy one,
and an oversized request head is answered 431 problem+json and closed gracefully.

Rows of the fault table (docs/reliability.md): the ids a healthy stream was sent by a
burst, delivered when they came within twice the time the same burst took with no stuck
stream (the control, on the same hub just before); the oversized requests sent,
delivered when the client read the whole 431 problem and then the end of the connection
(never a reset).
"""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import Callable
from contextlib import AbstractAsyncContextManager
from typing import Any

import httpx
import jwt
import pytest

from notifyhub.api.protocol import MAX_HEAD_BYTES
from support.faultenv import FaultEnv
from support.history import History, Verdict
from support.rawhttp import exchange, request_head, stuck_stream
from support.workloads import follow_stream

pytestmark = pytest.mark.slow

STUCK = 200
BURST = 500
NOTE = "n" * 4000
STUCK_SCENARIO = f"{STUCK} stuck sockets (2 KB receive buffers) + 1 healthy"
BURST_WORKLOAD = f"healthy stream: {BURST} x 4 KB burst within 2x control"
HEAD_SCENARIO = "oversized request heads (a signed token padded to 200 KB; 64 KiB + 1 byte)"
HEAD_WORKLOAD = "431 problem+json read, then a clean close"
TIMEOUT_60_S = {"NOTIFYHUB_STREAM__SEND_TIMEOUT_S": "60"}
"""The send timeout here: ending the stuck streams cannot be what lets the burst through."""
HELD_EVENTS = (2 * 64 + 64 + 2 * 32) * 1024 // len(NOTE)
"""What a stuck stream may be sent, in events: its kernel send buffer (64 KiB, doubled),
the transport's 64 KiB and a write of about two log reads (32 KiB each)."""


def _auth(token: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {token}"}


async def _burst(env: FaultEnv, users: list[str]) -> tuple[list[str], dict[str, float]]:
    """Publish BURST notes to `users` and "healthy" while its stream is read (resumed
    after any end, as a browser would): the ids, and when (seconds after the burst
    began) each came on the healthy stream."""
    arrived: dict[str, float] = {}
    started = time.perf_counter()

    async def on_event(kind: str, data: Any) -> None:
        if kind == "notification":
            arrived.setdefault(data["id"], time.perf_counter() - started)

    auth, opened = _auth(env.user_token("healthy")), asyncio.Event()
    async with httpx.AsyncClient(base_url=env.hub.base_url, timeout=60) as client:
        reader = asyncio.create_task(follow_stream(client, auth, opened, on_event))
        try:
            async with asyncio.timeout(120):
                await opened.wait()
                started = time.perf_counter()
                ids = await _publish(client, env.publish_key, [*users, "healthy"])
                while not set(ids) <= arrived.keys():
                    await asyncio.sleep(0.05)
        finally:
            reader.cancel()
    return ids, arrived


async def _notifications_sent(env: FaultEnv) -> float:
    """The hub's count of `notification` events written to streams (/metrics)."""
    async with httpx.AsyncClient(base_url=env.hub.base_url, timeout=10) as client:
        text = (await client.get("/metrics")).text
    for line in text.splitlines():
        if line.startswith('notifyhub_stream_events_sent_total{type="notification"}'):
            return float(line.rpartition(" ")[2])
    return 0.0


async def _publish(client: httpx.AsyncClient, key: str, users: list[str]) -> list[str]:
    body = {"recipients": {"users": users}, "title": "burst", "body": NOTE}
    gate = asyncio.Semaphore(8)

    async def one() -> str:
        async with gate:
            response = await client.post("/v1/notifications", json=body, headers=_auth(key))
        assert response.status_code == 202, response.text
        return str(response.json()["id"])

    return await asyncio.gather(*(one() for _ in range(BURST)))


async def test_stuck_streams_never_hold_back_a_healthy_one(
    fault_env: Callable[..., AbstractAsyncContextManager[FaultEnv]], fault_report: list[Verdict]
) -> None:
    """Each stuck stream is sent no more than its bounded buffers hold; the healthy one
    gets the burst within twice the control's time."""
    users = [f"stuck-{n}" for n in range(STUCK)]
    async with fault_env(appendonly=False, extra_env=TIMEOUT_60_S) as env:
        _, control = await _burst(env, users)
        socks = [await stuck_stream(env.hub.base_url, env.user_token(u), 2048) for u in users]
        try:
            before = await _notifications_sent(env)
            ids, arrived = await _burst(env, users)
            to_stuck = await _notifications_sent(env) - before - BURST
        finally:
            for sock in socks:
                sock.close()
    bound_s = 2 * max(control.values())
    history = History(BURST_WORKLOAD)
    for nid in ids:
        history.ack(nid)
        if arrived[nid] <= bound_s:
            history.arrived(nid)
    print(
        f"\ncontrol {bound_s / 2:.2f} s, with {STUCK} stuck {max(arrived.values()):.2f} s;"
        f" {to_stuck:.0f} events to stuck streams"
    )
    verdict = history.verdict(STUCK_SCENARIO)
    fault_report.append(verdict)
    assert verdict.lost == 0, (bound_s, max(arrived.values()))
    assert to_stuck <= STUCK * HELD_EVENTS, to_stuck


def _padded_token(env: FaultEnv, size: int) -> str:
    """A validly signed user token padded (by a claim) to a little less than `size`."""
    claims = jwt.decode(env.user_token("padded"), options={"verify_signature": False})
    claims["pad"] = "p" * (size * 3 // 4 - 400)
    assert env.settings.jwt_secret is not None
    return jwt.encode(claims, env.settings.jwt_secret.get_secret_value(), algorithm="HS256")


def _is_431_problem(answer: bytes) -> bool:
    head, _, body = answer.partition(b"\r\n\r\n")
    if not head.startswith(b"HTTP/1.1 431 Request Header Fields Too Large\r\n"):
        return False
    return b"content-type: application/problem+json" in head and json.loads(body)["status"] == 431


async def test_oversized_heads_are_answered_431_and_closed_gracefully(
    fault_env: Callable[..., AbstractAsyncContextManager[FaultEnv]], fault_report: list[Verdict]
) -> None:
    history = History(HEAD_WORKLOAD)
    async with fault_env() as env:
        for n, size in enumerate([200 * 1024, MAX_HEAD_BYTES + 1] * 10):
            head = request_head("/v1/me/notifications", _padded_token(env, size), size)
            history.ack(f"{n}")
            try:
                answer = await exchange(env.hub.base_url, head)
            except (ConnectionResetError, BrokenPipeError):
                continue
            if _is_431_problem(answer):
                history.arrived(f"{n}")
    verdict = history.verdict(HEAD_SCENARIO)
    fault_report.append(verdict)
    assert verdict.lost == 0, verdict
