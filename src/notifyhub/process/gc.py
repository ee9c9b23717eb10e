"""The cyclic garbage collector's policy for a hub process (`notifyhub serve`).

Each open stream keeps dozens of objects the collector tracks (its two tasks and their
coroutines, the transport, the HTTP parser, events and their waiters). With Python's
defaults:

- the young generation is collected every 700 new objects, and every collection scans
  the streams opened since the last one again, so streams opening cost collector time
  that grows with the streams already open;
- a full collection scans every tracked object while no stream is served. It runs
  whenever the long-lived objects have grown by a quarter, as after many streams
  (re)connect, and can land in the middle of a broadcast. Yet it finds almost nothing:
  streams free themselves by reference counting.

The measurements are in docs/scaling.md, "Design notes".

So (`CollectorPolicy.install`):

- what start-up built is frozen: never scanned again;
- the young generation is collected every `young_threshold` new objects;
- what survives a collection of the middle generation is frozen as well
  (`freeze_survivors`): long-lived objects (open streams, caches, pools) are never
  scanned again, and a full collection finds only what came since the last freeze;
- every `thaw_interval_s` (`thaw_every`) the frozen objects are thawed, collected once
  and frozen again. That reclaims reference cycles among long-lived objects, which the
  collector no longer sees, at the cost of one full collection's pause per interval.

Every pause is timed into the `notifyhub_gc_pause_seconds` histogram (by generation), and
`notifyhub_gc_frozen_objects` says how many objects are frozen (`GET /metrics`). That
count is kept as objects are frozen, never taken at a scrape: Python counts its frozen
objects by walking them all (`gc.get_freeze_count`), which holds the event loop for as
long as open streams make it (docs/scaling.md, "Design notes"). It is exact after
start-up and each thaw; frozen objects freed in between (streams that closed) leave it
at the next thaw.
"""

from __future__ import annotations

import asyncio
import gc
import logging
import time
from dataclasses import dataclass
from typing import Any

from notifyhub.metrics import GC_FROZEN, GC_PAUSES
from notifyhub.settings import GcSettings

log = logging.getLogger(__name__)

MIDDLE_THRESHOLD = 2
"""With `freeze_survivors`: collect the middle generation after this many young
collections (Python: 10). Each of its objects is scanned once before it is frozen
either way, so this only bounds its pause (shorter, more frequent pauses)."""


@dataclass(frozen=True, slots=True)
class CollectorPolicy:
    young_threshold: int
    """Collect the young generation after this many new objects (0: Python's 700)."""
    freeze_survivors: bool
    thaw_interval_s: float
    """0: never thaw."""

    @classmethod
    def of(cls, settings: GcSettings) -> CollectorPolicy:
        return cls(settings.young_threshold, settings.freeze_survivors, settings.thaw_interval_s)

    def install(self) -> None:
        """Apply the policy to this process (`HubServer` does, once the app is built)."""
        gc.collect()  # start-up's own garbage, before the rest is frozen for good
        gc.freeze()
        GC_FROZEN.set(gc.get_freeze_count())
        young, middle, old = gc.get_threshold()
        if self.young_threshold:
            young = self.young_threshold
        if self.freeze_survivors:
            middle = MIDDLE_THRESHOLD
            if freeze_survivors not in gc.callbacks:
                gc.callbacks.append(freeze_survivors)
        gc.set_threshold(young, middle, old)
        if time_collections not in gc.callbacks:
            gc.callbacks.insert(0, time_collections)

    async def thaw_every(self) -> None:
        """Thaw and collect the frozen objects every `thaw_interval_s` (runs until cancelled)."""
        if not (self.freeze_survivors and self.thaw_interval_s):
            return
        while True:
            await asyncio.sleep(self.thaw_interval_s)
            thaw()


_started = [0.0]


def time_collections(phase: str, info: dict[str, Any]) -> None:
    """A `gc.callbacks` hook: every collection's pause, into `notifyhub_gc_pause_seconds`."""
    if phase == "start":
        _started[0] = time.perf_counter()
    else:
        elapsed = time.perf_counter() - _started[0]
        GC_PAUSES.labels(generation=str(info["generation"])).observe(elapsed)


def freeze_survivors(phase: str, info: dict[str, Any]) -> None:
    """A `gc.callbacks` hook: after a collection of an older generation, freeze what survived.

    Freezing only splices the collector's lists, so it costs next to nothing here; what
    it freezes is counted from those lists, which hold only what came since the last
    freeze (the collection just scanned all of it)."""
    if phase == "stop" and info["generation"] >= 1:
        GC_FROZEN.inc(sum(len(gc.get_objects(generation)) for generation in range(3)))
        gc.freeze()


def thaw() -> int:
    """Collect every object once, frozen ones included, then freeze the survivors again;
    returns how many unreachable objects were found."""
    frozen, started = gc.get_freeze_count(), time.perf_counter()
    gc.unfreeze()
    try:
        collected = gc.collect()
    finally:
        gc.freeze()
        GC_FROZEN.set(gc.get_freeze_count())
    elapsed_ms = (time.perf_counter() - started) * 1000
    log.info("collector thawed %d objects: %d unreachable, %.0f ms", frozen, collected, elapsed_ms)
    return collected
