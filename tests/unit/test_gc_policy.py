"""The hub's garbage collector policy (process/gc.py) and its settings group. The policy's
cases each run in a fresh interpreter: it changes process-wide collector state, which
must not leak into the test run."""

from __future__ import annotations

import subprocess
import sys
import textwrap

import pytest
from pydantic import ValidationError

from notifyhub.process.gc import CollectorPolicy
from notifyhub.settings import Settings

PRELUDE = """
import asyncio, gc, weakref
from notifyhub.process.gc import CollectorPolicy

class Node:
    pass

def cycle():
    a, b = Node(), Node()
    a.other, b.other = b, a
    return a

def tracked(obj):
    return any(o is obj for o in gc.get_objects())  # frozen objects are in no generation
"""


def run(body: str) -> None:
    code = PRELUDE + textwrap.dedent(body)
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert result.returncode == 0, result.stderr


def test_survivors_of_an_older_collection_are_frozen_and_a_thaw_reclaims_their_cycles() -> None:
    run(
        """
        CollectorPolicy(10_000, freeze_survivors=True, thaw_interval_s=0).install()
        node = cycle()
        assert tracked(node)
        gc.collect(0)
        assert tracked(node), "a young collection freezes nothing"
        gc.collect(1)
        assert not tracked(node), "survivors of an older collection are frozen"

        gone = weakref.ref(node)
        del node
        assert gc.collect() == 0 and gone() is not None, "full collections skip frozen cycles"
        from notifyhub.process.gc import thaw
        assert thaw() >= 2 and gone() is None
        assert gc.get_freeze_count() > 0, "what survives a thaw is frozen again"
        """
    )


def test_every_pause_is_timed_and_the_frozen_count_exported() -> None:
    run(
        """
        from notifyhub.metrics import Metrics
        registry = Metrics().registry
        def pauses(generation):
            labels = {"generation": generation}
            return registry.get_sample_value("notifyhub_gc_pause_seconds_count", labels)

        assert pauses("1") is None, "nothing is timed before the policy is installed"
        CollectorPolicy(10_000, freeze_survivors=True, thaw_interval_s=0).install()
        gc.collect(1)
        gc.collect(1)
        gc.collect()
        assert (pauses("1"), pauses("2")) == (2, 1)
        assert registry.get_sample_value("notifyhub_gc_frozen_objects") >= gc.get_freeze_count() > 0
        """
    )


def test_the_frozen_count_is_kept_as_objects_freeze_and_never_walked_at_a_scrape() -> None:
    """Python counts frozen objects by walking every one of them: a scrape must not."""
    run(
        """
        from notifyhub.metrics import Metrics
        from notifyhub.process.gc import thaw
        registry = Metrics().registry
        def frozen():
            return registry.get_sample_value("notifyhub_gc_frozen_objects")

        CollectorPolicy(10_000, freeze_survivors=True, thaw_interval_s=0).install()
        at_start = frozen()  # (a frozen object or two may be freed by now: never fewer)
        assert at_start >= gc.get_freeze_count() > 0
        kept = [cycle() for _ in range(1_000)]  # two tracked objects each
        gc.collect(1)
        grown = frozen()
        assert grown - at_start >= 2_000 and grown >= gc.get_freeze_count()

        walked = gc.get_freeze_count
        def walk():
            raise AssertionError("a scrape walked the frozen objects")
        gc.get_freeze_count = walk
        Metrics().render()
        gc.get_freeze_count = walked

        del kept  # frozen cycles: nothing frees them until a thaw, which counts again
        assert frozen() == grown
        assert thaw() >= 2_000
        assert grown - 1_000 > frozen() >= gc.get_freeze_count()  # the 2,000 freed, gone
        """
    )


def test_without_freezing_survivors_a_full_collection_reclaims_old_cycles() -> None:
    run(
        """
        CollectorPolicy(10_000, freeze_survivors=False, thaw_interval_s=0).install()
        assert gc.get_threshold()[0] == 10_000
        node = cycle()
        gc.collect(1)
        assert tracked(node), "start-up objects alone are frozen"
        gone = weakref.ref(node)
        del node
        assert gc.collect() >= 2 and gone() is None
        """
    )


def test_thaws_run_every_interval() -> None:
    run(
        """
        policy = CollectorPolicy(10_000, freeze_survivors=True, thaw_interval_s=0.05)
        policy.install()
        node = cycle()
        gc.collect(1)
        gone = weakref.ref(node)
        del node

        async def main():
            thaws = asyncio.create_task(policy.thaw_every())
            await asyncio.sleep(0)  # the task is in its first interval's wait
            assert gone() is not None, "no thaw before the first interval"
            async with asyncio.timeout(5):  # a condition wait: until a thaw reclaims it
                while gone() is not None:
                    await asyncio.sleep(0.01)
            thaws.cancel()

        asyncio.run(main())
        """
    )


def test_the_gc_settings_have_their_own_group(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("NOTIFYHUB_GC__THAW_INTERVAL_S", "60")
    settings = Settings(dev_mode=True, _env_file=None)  # type: ignore[call-arg]
    assert CollectorPolicy.of(settings.gc).thaw_interval_s == 60
    monkeypatch.setenv("NOTIFYHUB_STREAM__GC_THAW_INTERVAL_S", "60")
    with pytest.raises(ValidationError, match="NOTIFYHUB_GC__THAW_INTERVAL_S"):
        Settings(dev_mode=True, _env_file=None)  # type: ignore[call-arg]
