"""Inbox views (tabs): the tenant's (an admin defines them for every user of the tenant)
and each user's own, in PostgreSQL; each user's Redis inbox holds a copy of the ones
that apply to them, which the inbox scripts count by (lua/views.lua, lua/common.lua).

A user's copy says which version of the tenant's views and of their own it follows.
Changing a user's own views syncs that user at once, inside the transaction (as
preferences do). Changing a tenant's views syncs its users in the background: a sweep
over the tenant's inboxes (`notifyhub_view_recompute_*` in /metrics); until it reaches
a user, that user's counts of the tenant's views are `exact: false`, and any read of
their counts or of a view's list syncs them first. A user Redis lost is synced again on
their next read.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Sequence
from dataclasses import replace

from sqlalchemy.ext.asyncio import AsyncSession

from notifyhub.db.repositories import views as repo
from notifyhub.db.unit import UnitOfWork, Units
from notifyhub.domain.auth import UserPrincipal
from notifyhub.domain.notification import Counts
from notifyhub.domain.views import VIEWS_PER_TENANT, VIEWS_PER_USER, View, ViewSet
from notifyhub.errors import Conflict, LimitReached, NotFound
from notifyhub.metrics import Metrics
from notifyhub.outages import outage_of
from notifyhub.store.codecs import ViewsArgs
from notifyhub.store.inbox import InboxStore, Position

log = logging.getLogger(__name__)

CACHE_S = 1.0
"""How long a process trusts its copy of a tenant's views (changes made through it are
seen at once; through another process, within this)."""

SWEEP_BATCH = 200
"""Users synced per pipelined round trip by a tenant's sweep."""

CATALOG_WAIT_S = 0.5
"""How long a read of counts waits for PostgreSQL to list views before going on without."""

KEEP = -2
"""A version below any a user can have: views.lua keeps what the user has."""


class Views:
    """Tenants' and users' views. Redis-only inbox reads look views up (cached) in units
    of their own: a read takes no request unit, and a cache hit no PostgreSQL at all."""

    def __init__(
        self,
        store: InboxStore,
        units: Units,
        metrics: Metrics,
    ) -> None:
        self._store = store
        self._units = units
        self._metrics = metrics
        self._cache: dict[str, tuple[float, ViewSet]] = {}
        self._sweeps: dict[str, asyncio.Task[int]] = {}
        self._again: set[str] = set()
        self._loading: set[str] = set()
        self._tasks: set[asyncio.Task[None]] = set()

    # ---- the tenant's views -------------------------------------------------------

    async def tenant_set(self, tenant: str) -> ViewSet:
        """The tenant's views as this process knows them (at most CACHE_S old)."""
        cached = self._cache.get(tenant)
        if cached is not None and time.monotonic() - cached[0] < CACHE_S:
            return cached[1]
        async with self._units() as unit:
            session = unit.session
            found = await repo.view_set(session, tenant, repo.TENANT)
        self._cache[tenant] = (time.monotonic(), found)
        return found

    def known(self, tenant: str) -> ViewSet | None:
        """The tenant's views as last loaded, without waiting (a fan-out's hint: with it
        the scripts take the tenant's views' bits from the fan-out instead of evaluating
        them per user; a stale or missing one costs only that); reloads in the background
        once older than CACHE_S."""
        cached = self._cache.get(tenant)
        if (cached is None or time.monotonic() - cached[0] >= CACHE_S) and (
            tenant not in self._loading
        ):
            self._loading.add(tenant)
            task = asyncio.create_task(self._load(tenant))
            self._tasks.add(task)
            task.add_done_callback(self._tasks.discard)
        return cached[1] if cached is not None else None

    async def _load(self, tenant: str) -> None:
        try:
            await self.tenant_set(tenant)
        except Exception as exc:  # the next `known` tries again; fan-outs go on without
            log.debug("loading the views of tenant %s failed: %s", tenant, exc)
        finally:
            self._loading.discard(tenant)

    async def list_tenant(self, session: AsyncSession, tenant: str) -> ViewSet:
        return await repo.view_set(session, tenant, repo.TENANT)

    async def put_tenant(self, unit: UnitOfWork, tenant: str, view: View) -> bool:
        """Create or replace a tenant view (at most VIEWS_PER_TENANT); True when new. Its
        users are synced in the background once the change commits."""
        session = unit.session
        await repo.lock(session, tenant, repo.TENANT)
        current = await repo.view_set(session, tenant, repo.TENANT)
        _check_room(current, view.name, VIEWS_PER_TENANT, "the tenant has")
        created = await repo.put(session, tenant, repo.TENANT, view)
        unit.after_commit(lambda: self._tenant_changed(tenant))
        return created

    async def delete_tenant(self, unit: UnitOfWork, tenant: str, name: str) -> None:
        session = unit.session
        await repo.lock(session, tenant, repo.TENANT)
        if not await repo.remove(session, tenant, repo.TENANT, name):
            raise NotFound(f"no view {name} in tenant {tenant}")
        unit.after_commit(lambda: self._tenant_changed(tenant))

    async def _tenant_changed(self, tenant: str) -> None:
        self._cache.pop(tenant, None)
        self.start_sweep(tenant)

    # ---- a user's own views -------------------------------------------------------

    async def of_user(self, session: AsyncSession, me: UserPrincipal) -> list[View]:
        """The views the user has: the tenant's, then their own (one named like a
        tenant view is hidden by it)."""
        tenant = await repo.view_set(session, me.tenant, repo.TENANT)
        own = await repo.view_set(session, me.tenant, me.user)
        names = tenant.names()
        return [*tenant.views, *(v for v in own.views if v.name not in names)]

    async def put_own(self, unit: UnitOfWork, me: UserPrincipal, view: View) -> bool:
        """Create or replace one of the user's views (at most VIEWS_PER_USER); the user's
        inbox is recounted before the change commits (a Redis failure rolls it back)."""
        session = unit.session
        await repo.lock(session, me.tenant, me.user)
        tenant = await repo.view_set(session, me.tenant, repo.TENANT)
        if view.name in tenant.names():
            raise Conflict(f"view {view.name}: the tenant has a view of that name")
        own = await repo.view_set(session, me.tenant, me.user)
        _check_room(own, view.name, VIEWS_PER_USER, "you have")
        created = await repo.put(session, me.tenant, me.user, view)
        await self._sync_from(session, me, tenant)
        return created

    async def delete_own(self, unit: UnitOfWork, me: UserPrincipal, name: str) -> None:
        session = unit.session
        await repo.lock(session, me.tenant, me.user)
        if not await repo.remove(session, me.tenant, me.user, name):
            raise NotFound(f"no view {name} of yours")
        await self._sync_from(session, me, await repo.view_set(session, me.tenant, repo.TENANT))

    async def _sync_from(self, session: AsyncSession, me: UserPrincipal, tenant: ViewSet) -> None:
        own = await repo.view_set(session, me.tenant, me.user)
        await self._store.sync_views(me.tenant, me.user, _args(self._store, tenant, own))

    # ---- users' copies ------------------------------------------------------------

    async def position(self, me: UserPrincipal) -> Position:
        """The user's counts (with every view's), synced first when their copy of the
        views is older than the tenant's or missing (a new user, or lost by Redis).

        A read of counts needs Redis only: PostgreSQL is asked for the views for at most
        CATALOG_WAIT_S; when it does not answer, the counts are the user's copy's, their
        tenant views `exact: false` unless the last known views say they are current."""
        return await self.position_of(me.tenant, me.user)

    async def position_of(self, tenant_id: str, user: str) -> Position:
        """`position` by the user's tenant and id (a stream's opening: realtime/sse.py)."""
        tenant = await self._catalog(tenant_id)
        position = await self._store.position(tenant_id, user)
        if tenant is None:
            return _inexact(position, set(position.counts.views))
        if position.tenant_views < tenant.version or position.personal_views < 0:
            own = ViewSet(KEEP)
            if position.personal_views < 0:
                own = await self._own(tenant_id, user) or own
            await self._store.sync_views(tenant_id, user, _args(self._store, tenant, own))
            position = await self._store.position(tenant_id, user)
        if position.tenant_views < tenant.version:  # a newer sync by another process raced
            return _inexact(position, tenant.names())
        return position

    async def _catalog(self, tenant: str) -> ViewSet | None:
        """The tenant's views for a read: fresh if PostgreSQL answers within
        CATALOG_WAIT_S, else the last loaded (None: never loaded here)."""
        try:
            return await asyncio.wait_for(self.tenant_set(tenant), CATALOG_WAIT_S)
        except Exception as exc:
            if not (isinstance(exc, TimeoutError) or outage_of(exc) == "postgres"):
                raise
            log.warning("the views of tenant %s: PostgreSQL did not answer (%s)", tenant, exc)
            cached = self._cache.get(tenant)
            return cached[1] if cached is not None else None

    async def _own(self, tenant: str, user: str) -> ViewSet | None:
        """The user's own views, if PostgreSQL answers within CATALOG_WAIT_S."""

        async def load() -> ViewSet:
            async with self._units() as unit:
                return await repo.view_set(unit.session, tenant, user)

        try:
            return await asyncio.wait_for(load(), CATALOG_WAIT_S)
        except Exception as exc:
            if not (isinstance(exc, TimeoutError) or outage_of(exc) == "postgres"):
                raise
            return None  # the next read tries again

    async def counts(self, me: UserPrincipal) -> Counts:
        return (await self.position(me)).counts

    # ---- the background sweep -----------------------------------------------------

    def start_sweep(self, tenant: str) -> None:
        """Sync every user of the tenant holding notifications (others sync on their
        first read); a change during a sweep runs it once more after."""
        running = self._sweeps.get(tenant)
        if running is not None and not running.done():
            self._again.add(tenant)
            return
        self._sweeps[tenant] = asyncio.create_task(self._sweep_loop(tenant))

    async def close(self) -> None:
        """Stop the sweeps (the users they did not reach sync on their next read)."""
        running = [*self._sweeps.values(), *self._tasks]
        for task in running:
            task.cancel()
        await asyncio.gather(*running, return_exceptions=True)

    async def settled(self) -> None:
        """Wait for the sweeps running now (tests; shutdown)."""
        while running := [t for t in self._sweeps.values() if not t.done()]:
            await asyncio.gather(*running, return_exceptions=True)

    async def _sweep_loop(self, tenant: str) -> int:
        synced = 0
        while True:
            self._again.discard(tenant)
            try:
                synced += await self.sweep(tenant)
            except Exception:  # the users left sync on their next read
                log.exception("recounting the views of tenant %s stopped", tenant)
                self._metrics.view_recompute_errors_total.inc()
                return synced
            if tenant not in self._again:
                return synced

    async def sweep(self, tenant: str) -> int:
        """Sync every user of `tenant` with notifications to the tenant's views now;
        returns how many. Progress: `notifyhub_view_recompute_users_total` (done) and
        `notifyhub_view_recompute_pending_users` (found, not yet done)."""
        self._cache.pop(tenant, None)
        views = await self.tenant_set(tenant)
        args = _args(self._store, views, ViewSet(KEEP))
        pending, done = self._metrics.view_recompute_pending_users, 0
        batch: list[str] = []
        async for user in self._store.users_of(tenant):
            batch.append(user)
            pending.inc()
            if len(batch) == SWEEP_BATCH:
                done += await self._sync_batch(tenant, batch, args)
                batch = []
        if batch:
            done += await self._sync_batch(tenant, batch, args)
        return done

    async def _sync_batch(self, tenant: str, users: Sequence[str], args: ViewsArgs) -> int:
        try:
            await self._store.sync_views_many(tenant, users, args)
        finally:
            self._metrics.view_recompute_pending_users.dec(len(users))
        self._metrics.view_recompute_users_total.inc(len(users))
        return len(users)


def _inexact(position: Position, names: set[str]) -> Position:
    """`position` with the counts of the views `names` marked `exact: false`."""
    views = {
        name: c.model_copy(update={"exact": False}) if name in names else c
        for name, c in position.counts.views.items()
    }
    return replace(position, counts=position.counts.model_copy(update={"views": views}))


def _check_room(current: ViewSet, name: str, limit: int, who_has: str) -> None:
    if name not in current.names() and len(current.views) >= limit:
        raise LimitReached(
            f"view {name}: {who_has} {limit} views, the most allowed; delete one first",
            limit=limit,
        )


def _args(store: InboxStore, tenant: ViewSet, own: ViewSet) -> ViewsArgs:
    return ViewsArgs(
        store.limits.change_log_max, tenant.version, tenant.lines(), own.version, own.lines()
    )
