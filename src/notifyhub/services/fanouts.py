"""Deferred fan-outs placed after their 202, in paced batches, resumed by any process.

A publish to `limits.defer_fanout_at` users or more answers once its recipient index is
written and its recipients' open streams are told (store/inbox/announcing.py
`announce_deferred`): a 100,000-user group's POST then costs its members' read and its
index, not its 100,000 pending copies. The copies are written here, after the answer:
`limits.defer_batch` users at a time, each batch's users rung once it is written (their
streams read the copy). Between two batches the loop runs whatever waited meanwhile, and
when something did, the placement pauses `limits.defer_pause_ms` too: a big broadcast
takes turns with everyone else's requests instead of holding Redis and the hub's loop
for the whole of it, and goes at full speed on a hub with nothing else to do
(docs/scaling.md, "Big fan-outs take turns").

Each fan-out has a placement record in Redis (store/fanouts.py), moved on by every batch
in the same script as its writes. A process that dies, or loses Redis, halfway stops
renewing the record's lease; every process looks for such records every
RESUME_INTERVAL_S (`resume_once`) and carries on from the batch after the last one written.
Until a user's batch is written, a read of their inbox does not show the notification yet
(their open stream already did, if it was caught up); the copies a batch writes are
created then, as a scheduled notification's are at its delivery: they sort by the batch's
time and show it as their `created_at`.
"""

from __future__ import annotations

import asyncio
import logging

from redis.exceptions import RedisError, ResponseError

from notifyhub.domain.notification import Notification
from notifyhub.metrics import Metrics
from notifyhub.services.views import Views
from notifyhub.settings import Limits
from notifyhub.store.fanouts import Fanout, FanoutRecords, Progress, lost
from notifyhub.store.inbox import InboxStore, TenantUsers, arrival_ms, arriving_now
from notifyhub.store.traces import RoutingTraces
from notifyhub.turns import Turns

log = logging.getLogger(__name__)

LEASE_MS = 5_000
"""How long a fan-out's holder keeps it without writing a batch (each batch renews it):
past it, another process may take it over."""
RESUME_INTERVAL_S = 1.0
"""How often each process looks for fan-outs whose holder's lease ran out."""
DONE = "done"
"""The record's cursor once its last batch is written (SSCAN's last cursor is its first,
"0": a holder dying before it deletes the record must not start again)."""


class _Taken(Exception):
    """The fan-out's record is another holder's now, or was recalled."""


class Fanouts:
    """Places deferred fan-outs after their 202 (see the module's text)."""

    def __init__(
        self,
        store: InboxStore,
        records: FanoutRecords,
        limits: Limits,
        metrics: Metrics,
        views: Views | None = None,
        traces: RoutingTraces | None = None,
    ) -> None:
        self._store = store
        self._records = records
        self._limits = limits
        self._metrics = metrics
        self._views = views
        self._traces = traces
        """Where each batch notes the users its preferences dropped (None: traces off)."""
        self._placing: dict[str, asyncio.Task[None]] = {}
        """This process's fan-outs being placed, by notification id."""

    async def start(
        self,
        notification: Notification,
        users: int,
        *,
        pull: bool,
        trace: bytes | None,
    ) -> None:
        """Place a deferred fan-out whose recipient index is written (`announce_deferred`):
        its record made, its batches written from now on in the background."""
        fanout = await self._records.create(notification, users, pull=pull, trace=trace)
        self._spawn(fanout)

    async def resume_once(self) -> int:
        """Take over every fan-out whose holder's lease ran out, each placed from then on
        in the background (`drain` waits for them); returns how many."""
        resumed = 0
        for nid in await self._records.listed():
            if nid in self._placing:
                continue
            fanout = await self._records.claim(nid)
            if fanout is None:
                continue
            log.warning("fan-out %s resumed at cursor %s: its holder stopped", nid, fanout.cursor)
            self._metrics.fanouts_resumed_total.inc()
            self._spawn(fanout)
            resumed += 1
        return resumed

    async def progress(self, notification_id: str) -> Progress | None:
        """How far a fan-out's placement has come; None once placed."""
        return await self._records.progress(notification_id)

    async def cancel(self, notification_id: str) -> None:
        """A recall: no batch of the fan-out is written after this returns (on one Redis:
        a batch checks the record in its own script; on a Cluster, only this process's
        batches are waited for, so another process's batch under way may still land)."""
        await self._records.cancel(notification_id)
        task = self._placing.get(notification_id)
        if task is not None:
            await asyncio.wait([task])

    async def drain(self) -> None:
        """Wait until this process's fan-outs are placed (tests, benchmarks)."""
        while self._placing:
            await asyncio.wait(list(self._placing.values()))

    async def close(self) -> None:
        """Stop placing (shutdown): the records stay, for whichever process resumes them."""
        for task in self._placing.values():
            task.cancel()
        await asyncio.gather(*self._placing.values(), return_exceptions=True)

    def _spawn(self, fanout: Fanout) -> asyncio.Task[None]:
        nid = fanout.notification.id
        task = asyncio.create_task(self._place(fanout), name=f"fanout-{nid}")
        self._placing[nid] = task
        task.add_done_callback(lambda _: self._placing.pop(nid, None))
        return task

    async def _place(self, fanout: Fanout) -> None:
        """Every batch from the record's cursor on, then the record goes. A store error
        stops it here: the lease then runs out and a `resume_once` carries on."""
        nid = fanout.notification.id
        pause_s = self._limits.defer_pause_ms / 1000
        turns = Turns(0, pause_s)  # a turn after every batch, resting when others wait
        try:
            await asyncio.sleep(pause_s)  # the 202 on its way first
            while fanout.cursor != DONE:
                await self._batch(fanout)
                await turns.take()
            await self._records.finish(fanout)
        except _Taken:
            log.info("fan-out %s: recalled or taken over; this process stops placing it", nid)
        except RedisError as exc:
            log.warning("fan-out %s stopped at cursor %s: %s", nid, fanout.cursor, exc)
            self._metrics.fanouts_stopped_total.inc()
        except Exception:
            log.exception("fan-out %s stopped at cursor %s", nid, fanout.cursor)
            self._metrics.fanouts_stopped_total.inc()

    async def _batch(self, fanout: Fanout) -> None:
        """The next batch: its users' pending copies and the record's cursor in one script
        (on a Cluster, or for a batch of no users, the record right after), then their
        doorbells. The copies are created now (`arriving_now`): they sort by this batch's
        time and show it as their `created_at`, so a `since` poller that moved past the
        notification's time before its batch was written still gets it, once."""
        n = fanout.notification
        after, members = await self._records.scan(n.id, fanout.cursor, self._limits.defer_batch)
        step = self._records.step(fanout, DONE if after == "0" else after)
        in_script = bool(members) and not self._store.cluster
        if members:
            views = self._views.known(n.tenant) if self._views is not None else None
            try:
                arriving = arriving_now(n)
                placed = await self._store.placement(
                    arriving,
                    TenantUsers.of_members(n.tenant, members),
                    pull=fanout.pull,
                    defer=True,
                    trace=fanout.trace,
                    views=views,
                    step=step if in_script else None,
                    arrived_ms=arrival_ms(arriving),
                )
            except ResponseError as exc:
                if lost(exc):
                    raise _Taken from exc
                raise
            seqs = placed.seqs
            self._metrics.notification_copies_total.inc(len(seqs) - seqs.count(-1))
        if not in_script and not await self._records.advance(step, len(members)):
            raise _Taken
        fanout.cursor = step.end
        if members:
            await self._store.ring_deferred(members, fanout.trace)
            await self._trace_dropped(n, members, seqs)

    async def _trace_dropped(self, n: Notification, members: list[str], seqs: list[int]) -> None:
        """The batch's users whose preferences dropped the notification (-1), in its
        routing trace as such: it said `pending` for everyone at the 202. A failure is
        logged, never the fan-out's (a trace explains deliveries, it is not one)."""
        if self._traces is None or -1 not in seqs:
            return
        users = TenantUsers.of_members(n.tenant, members)
        dropped = [user for user, seq in zip(users.ids, seqs, strict=True) if seq == -1]
        try:
            await self._traces.dropped(n.id, dropped)
        except RedisError as exc:
            log.warning("routing trace of %s: its dropped users not noted: %s", n.id, exc)
