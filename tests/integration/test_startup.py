"""Start-up on one exit stack: a start-up that fails releases every part built before
the failure (no task, Redis or PostgreSQL connection left), and a test can assemble only
the features it needs from the builders."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from contextlib import AsyncExitStack
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import psutil
import pytest

from integration.test_inbox_store import make_notification
from notifyhub import features
from notifyhub.api.app import create_app
from notifyhub.errors import InvalidInput
from notifyhub.metrics import Metrics
from notifyhub.services.delayed import TransitionLog
from notifyhub.services.durable import DurableInbox
from notifyhub.services.epoch import EpochWatch
from notifyhub.settings import Settings

Connection = tuple[Any, Any]


def _connections(settings: Settings) -> set[Connection]:
    """This process's open TCP connections to the test Redis and PostgreSQL."""
    assert settings.redis_url is not None and settings.database_url is not None
    ports = {
        urlsplit(settings.redis_url).port or 6379,
        urlsplit(settings.database_url).port or 5432,
    }
    return {
        (c.laddr, c.raddr)
        for c in psutil.Process().net_connections(kind="tcp")
        if c.raddr and c.raddr.port in ports and c.status == psutil.CONN_ESTABLISHED
    }


def _tasks() -> set[asyncio.Task[Any]]:
    return {task for task in asyncio.all_tasks() if not task.done()}


@pytest.fixture
def warm_spy(monkeypatch: pytest.MonkeyPatch, settings: Settings) -> list[set[Connection]]:
    """The connections open right after the epoch watch warmed up (so a test can show the
    start-up it made fail had opened some)."""
    seen: list[set[Connection]] = []
    warm = EpochWatch.warm

    async def spy(self: EpochWatch) -> None:
        await warm(self)
        seen.append(_connections(settings))

    monkeypatch.setattr(EpochWatch, "warm", spy)
    return seen


async def _fails_cleanly(
    settings: Settings, error: type[BaseException] | tuple[type[BaseException], ...]
) -> None:
    connections, tasks = _connections(settings), _tasks()
    app = create_app(settings)
    with pytest.raises(error):
        async with app.router.lifespan_context(app):
            pytest.fail("the start-up should have failed")
    assert app.running is None
    assert _tasks() - tasks == set()
    assert _connections(settings) - connections == set()


@pytest.mark.parametrize(
    ("content", "error"),
    [(None, InvalidInput), ("producers: [unclosed", InvalidInput)],
    ids=["missing", "invalid-yaml"],
)
async def test_a_bad_producers_file_leaves_nothing_behind(
    settings: Settings,
    tmp_path: Path,
    warm_spy: list[set[Connection]],
    content: str | None,
    error: type[BaseException],
) -> None:
    path = tmp_path / "producers.yaml"
    if content is not None:
        path.write_text(content)
    before = _connections(settings)
    await _fails_cleanly(settings.model_copy(update={"producers_file": path}), error)
    assert warm_spy and warm_spy[0] - before, "the start-up had opened connections"


async def test_a_builder_failing_midway_releases_those_before_it(
    settings: Settings, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The epoch watch fails after using both stores: the clients, durable mode and the
    delayed queue built before it are released (their logs flushed), nothing after it
    is built."""
    released: list[str] = []
    built: set[int] = set()
    """The objects this start-up built: a hub of an earlier test may still be flushing
    its own logs while this one runs (seen once in CI: a second TransitionLog.flush)."""

    def spy(cls: type[Any], name: str) -> None:
        original: Callable[..., Any] = getattr(cls, name)
        init: Callable[..., None] = cls.__init__

        def built_here(self: Any, *args: Any, **kwargs: Any) -> None:
            built.add(id(self))
            init(self, *args, **kwargs)

        async def wrapper(self: Any) -> None:
            if id(self) in built:
                released.append(f"{cls.__name__}.{name}")
            await original(self)

        monkeypatch.setattr(cls, "__init__", built_here)
        monkeypatch.setattr(cls, name, wrapper)

    async def warm(self: EpochWatch) -> None:
        await self._rebuild_topics()  # PostgreSQL and Redis both answer
        raise RuntimeError("warm-up failed")

    spy(TransitionLog, "flush")
    spy(DurableInbox, "flush_changes")
    monkeypatch.setattr(EpochWatch, "warm", warm)
    durable = settings.model_copy(update={"inbox_durability": "postgres"})
    await _fails_cleanly(durable, RuntimeError)
    assert released == ["TransitionLog.flush", "DurableInbox.flush_changes"]


async def test_only_redis_and_the_inbox(settings: Settings) -> None:
    """Streams need only the Redis clients and the inbox: no PostgreSQL, no loops."""
    tasks = _tasks()
    async with AsyncExitStack() as stack:
        clients = await features.redis_clients(stack, settings)
        inbox = features.inbox(settings, clients, Metrics())
        await features.open_streams(stack, inbox)
        assert inbox.hub.healthy
        note = make_notification(title="only the inbox")
        await inbox.store.place(note, [("default", "solo")])
        changes = await inbox.reader.changes("default", "solo", 0, 10)
        assert [change.entry.id for change in changes.entries] == [note.id]
    assert not inbox.hub.healthy
    assert _tasks() - tasks == set()
