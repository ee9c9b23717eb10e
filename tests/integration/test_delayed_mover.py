"""The delayed mover plans its passes: a tick while messages move, the earliest due
instant otherwise (at most `delayed.mover_idle_s` away), and at once when this process
queues something due before its planned pass."""

from __future__ import annotations

import asyncio
import time
from typing import Any

import pytest
from sqlalchemy import update
from sqlalchemy.ext.asyncio import AsyncSession, async_sessionmaker

from notifyhub.db.models import DelayedMessage
from notifyhub.services.delayed import FINISHED
from notifyhub.settings import Settings


def _auth(key: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {key}"}


@pytest.fixture
async def consume_key(create_key: Any) -> str:
    return str(await create_key("mover-consume", "consume"))


@pytest.fixture
def count_passes(hub: Any, monkeypatch: pytest.MonkeyPatch) -> list[float]:
    """`time.monotonic()` of the end of every pass the hub's mover makes from now on
    (see `idle_mover` for a mover known to idle)."""
    delayed = hub.app_state["delayed"]
    move = delayed.move
    passes: list[float] = []

    async def counted(*args: Any, **kwargs: Any) -> Any:
        try:
            return await move(*args, **kwargs)
        finally:
            passes.append(time.monotonic())

    monkeypatch.setattr(delayed, "move", counted)
    return passes


@pytest.fixture
async def idle_mover(hub: Any, count_passes: list[float]) -> list[float]:
    """`count_passes` once a pass this fixture asked for is done: the mover now idles."""
    hub.app_state["runner"].loop("delayed-mover").wake()
    await _passes(count_passes, 1)
    seen = 0
    while len(count_passes) > seen:  # woken mid-pass (at start-up), it makes one more
        seen = len(count_passes)
        await asyncio.sleep(0.2)
    return count_passes


async def test_an_idle_mover_makes_a_few_passes_a_second(
    hub: Any, settings: Settings, count_passes: list[float]
) -> None:
    await asyncio.sleep(1.0)
    # At most one pass per mover_idle_s (0.25 s), where a pass per tick (0.02 s) made 50.
    assert 1 <= len(count_passes) <= 1.0 / settings.delayed.mover_idle_s + 2


class TestIdleForAMinute:
    @pytest.fixture
    async def settings(
        self, settings: Settings, sessionmaker: async_sessionmaker[AsyncSession]
    ) -> Settings:
        """A mover idling for a minute, and a queue with nothing else in it: the hub
        restores every unfinished message of the run's database into its fresh Redis
        prefix, so messages earlier tests left waiting are finished first."""
        async with sessionmaker.begin() as session:
            await session.execute(
                update(DelayedMessage)
                .where(DelayedMessage.status.not_in(FINISHED))
                .values(status="cancelled")
            )
        delayed = settings.delayed.model_copy(update={"mover_idle_s": 60.0})
        return settings.model_copy(update={"delayed": delayed})

    async def test_a_push_due_soon_wakes_the_mover_and_moves_when_due(
        self, hub: Any, publish_key: str, consume_key: str, idle_mover: list[float]
    ) -> None:
        """Without the wake the mover would sleep a minute; the message is ready once due."""
        before = len(idle_mover)
        body = {"queue": "soon", "body": 1, "delay_ms": 400}
        pushed = await hub.client.post("/v1/delayed", json=body, headers=_auth(publish_key))
        assert pushed.status_code == 201, pushed.text
        response = await hub.client.get(
            "/v1/queues/soon/messages", params={"wait": 20}, headers=_auth(consume_key)
        )
        [message] = response.json()["messages"]
        assert message["id"] == pushed.json()["id"]
        assert len(idle_mover) >= before + 2  # woken by the push, then at the due instant

    async def test_a_push_due_later_than_the_planned_pass_does_not_wake_it(
        self, hub: Any, publish_key: str, idle_mover: list[float]
    ) -> None:
        before = len(idle_mover)
        for n, delay_ms in enumerate((30_000, 50_000)):
            body = {"queue": "plan", "body": 1, "delay_ms": delay_ms}
            pushed = await hub.client.post("/v1/delayed", json=body, headers=_auth(publish_key))
            assert pushed.status_code == 201, pushed.text
            if n == 0:  # due before the planned pass, a minute away: a pass now
                await _passes(idle_mover, before + 1)
        await asyncio.sleep(0.3)
        # That pass planned the next at the first message's due instant, before the second's.
        assert len(idle_mover) == before + 1


async def _passes(passes: list[float], n: int) -> None:
    async with asyncio.timeout(10):
        while len(passes) < n:
            await asyncio.sleep(0.01)


async def test_a_hanging_pass_is_reported_stuck(
    hub: Any, settings: Settings, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Mid-pass nothing is planned: `/readyz`'s check still finds a pass that hangs."""
    delayed, runner = hub.app_state["delayed"], hub.app_state["runner"]
    entered, release = asyncio.Event(), asyncio.Event()

    async def hangs(*args: Any, **kwargs: Any) -> Any:
        entered.set()
        await release.wait()
        return []

    monkeypatch.setattr(delayed, "move", hangs)
    runner.loop("delayed-mover").wake()
    try:
        async with asyncio.timeout(10):
            await entered.wait()
        assert runner.loop("delayed-mover").pause_s() <= settings.delayed.mover_idle_s
        await asyncio.sleep(settings.delayed.mover_idle_s + 0.3)
        assert "delayed-mover" in runner.stuck(after_s=0.2)
    finally:
        release.set()
