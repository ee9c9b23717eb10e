"""The delayed mover plans its passes: a tick while messages move, the earliest due
instant otherwise (at most `delayed.mover_idle_s` away), and at once when this process
queues something due before its planned pass."""

from __future__ import annotations

import asyncio
import time
from typing import Any

import pytest

from notifyhub.settings import Settings


def _auth(key: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {key}"}


@pytest.fixture
async def consume_key(create_key: Any) -> str:
    return str(await create_key("mover-consume", "consume"))


@pytest.fixture
def count_passes(hub: Any, monkeypatch: pytest.MonkeyPatch) -> list[float]:
    """`time.monotonic()` of every pass the hub's mover makes from now on."""
    delayed = hub.app_state["delayed"]
    move = delayed.move
    passes: list[float] = []

    async def counted(*args: Any, **kwargs: Any) -> Any:
        passes.append(time.monotonic())
        return await move(*args, **kwargs)

    monkeypatch.setattr(delayed, "move", counted)
    return passes


async def test_an_idle_mover_makes_a_few_passes_a_second(
    hub: Any, settings: Settings, count_passes: list[float]
) -> None:
    await asyncio.sleep(1.0)
    # At most one pass per mover_idle_s (0.25 s), where a pass per tick (0.02 s) made 50.
    assert 1 <= len(count_passes) <= 1.0 / settings.delayed.mover_idle_s + 2


class TestIdleForAMinute:
    @pytest.fixture
    def settings(self, settings: Settings) -> Settings:
        delayed = settings.delayed.model_copy(update={"mover_idle_s": 60.0})
        return settings.model_copy(update={"delayed": delayed})

    async def test_a_push_due_soon_wakes_the_mover_and_moves_when_due(
        self, hub: Any, publish_key: str, consume_key: str, count_passes: list[float]
    ) -> None:
        """Without the wake the mover would sleep a minute; the message is ready once due."""
        await asyncio.sleep(0.2)  # the mover's first pass is done: it now idles
        body = {"topic": "soon", "body": 1, "delay_ms": 400}
        pushed = await hub.client.post("/v1/delayed", json=body, headers=_auth(publish_key))
        assert pushed.status_code == 201, pushed.text
        response = await hub.client.get(
            "/v1/topics/soon/messages", params={"wait": 20}, headers=_auth(consume_key)
        )
        [message] = response.json()["messages"]
        assert message["id"] == pushed.json()["id"]
        assert len(count_passes) >= 2  # woken by the push, then again at the due instant

    async def test_a_push_due_later_than_the_planned_pass_does_not_wake_it(
        self, hub: Any, publish_key: str, count_passes: list[float]
    ) -> None:
        await asyncio.sleep(0.2)  # the mover's first pass is done: it now idles
        passes = [len(count_passes)]
        for delay_ms in (30_000, 50_000):
            body = {"topic": "plan", "body": 1, "delay_ms": delay_ms}
            pushed = await hub.client.post("/v1/delayed", json=body, headers=_auth(publish_key))
            assert pushed.status_code == 201, pushed.text
            await asyncio.sleep(0.3)
            passes.append(len(count_passes))
        # The first push wakes it (due before its planned pass, a minute away); it then
        # plans its next pass at that message's due instant, before the second's.
        assert passes[1] == passes[0] + 1 and passes[2] == passes[1]
