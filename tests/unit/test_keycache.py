"""The API key cache: fresh for its TTL, then checked again; stale only while PostgreSQL
is unavailable, and only within its window; a refused key is forgotten at once."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable

import pytest
from sqlalchemy.exc import OperationalError

from notifyhub.domain.auth import Scope, ServicePrincipal
from notifyhub.errors import AuthenticationError
from notifyhub.services import keycache
from notifyhub.services.keycache import KeyCache

KEY = "nh_0123456789ab_secret"
PRINCIPAL = ServicePrincipal(key_id="k1", name="publisher", scope=Scope.PUBLISH, tenant=None)


class Clock:
    """The cache's injected clock: a test moves it past a TTL instead of sleeping."""

    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now

    def advance(self, seconds: float) -> None:
        self.now += seconds


class Postgres:
    """A stand-in for `apikeys.authenticate` against a PostgreSQL that can go away."""

    def __init__(self) -> None:
        self.calls = 0
        self.down = False
        self.hung = False
        self.revoked = False

    def check(self) -> Callable[[], Awaitable[ServicePrincipal]]:
        async def check() -> ServicePrincipal:
            self.calls += 1
            if self.hung:
                await asyncio.sleep(60)
            if self.down:
                raise OperationalError("SELECT", {}, ConnectionRefusedError())
            if self.revoked:
                raise AuthenticationError("invalid API key")
            return PRINCIPAL

        return check


async def test_fresh_entries_spare_postgres() -> None:
    cache, pg = KeyCache(ttl_s=60), Postgres()
    for _ in range(5):
        assert await cache.verify(KEY, pg.check()) == PRINCIPAL
    assert pg.calls == 1


async def test_revocation_takes_effect_after_the_ttl_while_postgres_is_up() -> None:
    clock, pg = Clock(), Postgres()
    cache = KeyCache(ttl_s=30, clock=clock)
    await cache.verify(KEY, pg.check())
    pg.revoked = True
    clock.advance(29.9)
    assert await cache.verify(KEY, pg.check()) == PRINCIPAL  # within the TTL
    clock.advance(0.1)
    with pytest.raises(AuthenticationError):
        await cache.verify(KEY, pg.check())
    pg.down = True  # forgotten: an outage now cannot bring it back
    with pytest.raises(OperationalError):
        await cache.verify(KEY, pg.check())


async def test_known_keys_are_served_stale_through_an_outage() -> None:
    clock, pg = Clock(), Postgres()
    cache = KeyCache(ttl_s=30, stale_s=60, clock=clock)
    await cache.verify(KEY, pg.check())
    pg.down = True
    clock.advance(30)
    for _ in range(10):
        assert await cache.verify(KEY, pg.check()) == PRINCIPAL
    assert pg.calls == 2  # asked once, then not again before RECHECK_S
    clock.advance(keycache.RECHECK_S)
    assert await cache.verify(KEY, pg.check()) == PRINCIPAL
    assert pg.calls == 3  # RECHECK_S later: asked again, still served stale
    with pytest.raises(OperationalError):  # a key it never saw: no principal to serve
        await cache.verify("nh_ba9876543210_other", pg.check())


async def test_a_hung_check_is_cut_short(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(keycache, "CHECK_BUDGET_S", 0.05)
    clock, pg = Clock(), Postgres()
    cache = KeyCache(ttl_s=30, stale_s=60, clock=clock)
    await cache.verify(KEY, pg.check())
    pg.hung = True
    clock.advance(30)
    async with asyncio.timeout(1):
        assert await cache.verify(KEY, pg.check()) == PRINCIPAL


async def test_the_stale_window_is_bounded() -> None:
    clock, pg = Clock(), Postgres()
    cache = KeyCache(ttl_s=30, stale_s=60, clock=clock)
    await cache.verify(KEY, pg.check())
    pg.down = True
    clock.advance(30 + 59.5)
    assert await cache.verify(KEY, pg.check()) == PRINCIPAL  # within the window
    clock.advance(keycache.RECHECK_S)  # asked again, now past it
    with pytest.raises(OperationalError):
        await cache.verify(KEY, pg.check())


def test_forget_drops_every_entry_of_the_key_only() -> None:
    cache = KeyCache(ttl_s=30)
    other = ServicePrincipal(key_id="k2", name="publisher", scope=Scope.CONSUME, tenant="acme")
    cache.put(KEY, PRINCIPAL)
    cache.put("nh_ffffffffffff_other", other)  # the same name in a tenant: another key
    cache.forget("k1")
    assert cache.get(KEY) is None
    assert cache.get("nh_ffffffffffff_other") == other


async def test_a_check_begun_before_the_revocation_does_not_cache_the_key() -> None:
    cache, pg = KeyCache(ttl_s=30), Postgres()
    started, revoked = asyncio.Event(), asyncio.Event()

    async def slow_check() -> ServicePrincipal:
        started.set()
        await revoked.wait()  # PostgreSQL answered before the revocation committed
        return PRINCIPAL

    verifying = asyncio.create_task(cache.verify(KEY, slow_check))
    await started.wait()
    cache.forget(PRINCIPAL.key_id)
    revoked.set()
    assert await verifying == PRINCIPAL  # this request began before the revocation
    assert cache.get(KEY) is None and cache.revoked(PRINCIPAL.key_id)
    pg.revoked = True
    with pytest.raises(AuthenticationError):
        await cache.verify(KEY, pg.check())


async def test_expire_all_checks_again_but_keeps_the_stale_entry() -> None:
    cache, pg = KeyCache(ttl_s=30), Postgres()
    await cache.verify(KEY, pg.check())
    cache.expire_all()
    assert cache.get(KEY) is None
    pg.down = True  # a missed revocation is looked for, yet an outage still serves stale
    assert await cache.verify(KEY, pg.check()) == PRINCIPAL
    assert pg.calls == 2


def test_an_entry_is_fresh_until_its_ttl_on_the_cache_clock() -> None:
    now = [100.0]
    cache = KeyCache(ttl_s=30, clock=lambda: now[0])
    cache.put(KEY, PRINCIPAL)
    now[0] += 29.9
    assert cache.get(KEY) == PRINCIPAL
    now[0] += 0.1
    assert cache.get(KEY) is None
