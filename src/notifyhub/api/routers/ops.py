"""Liveness, readiness and Prometheus metrics."""

from __future__ import annotations

import asyncio
from typing import Any, Literal

from fastapi import APIRouter, Response
from fastapi.responses import JSONResponse, PlainTextResponse
from pydantic import BaseModel

from notifyhub import __version__
from notifyhub.api.deps import AppState
from notifyhub.db.migrate import is_current

router = APIRouter(tags=["operations"])

CHECK_TIMEOUT_S = 2.0


class Health(BaseModel):
    status: Literal["ok"]
    version: str
    """Which release answers (pyproject's version, as installed)."""


class Checks(BaseModel):
    redis: bool
    postgres: bool
    """Reachable, and its schema migrated to this release's head."""
    pubsub: bool
    loops: bool
    """No background loop is stuck."""


class Readiness(BaseModel):
    status: Literal["ready", "unavailable"]
    checks: Checks
    stuck_loops: list[str]


@router.get("/healthz", response_model=Health)
async def healthz() -> Health:
    """Alive, and which release answers."""
    return Health(status="ok", version=__version__)


async def _redis_ok(state: AppState) -> bool:
    return bool(await state["redis"].ping())


async def _postgres_ok(state: AppState) -> bool:
    """Reachable and migrated: reading the schema's revision is the round trip."""
    return await is_current(state["engine"])


async def _check(probe: Any) -> bool:
    try:
        async with asyncio.timeout(CHECK_TIMEOUT_S):
            return bool(await probe)
    except Exception:
        return False


@router.get(
    "/readyz",
    response_model=Readiness,
    responses={503: {"model": Readiness, "description": "Not ready"}},
)
async def readyz(state: AppState) -> Response:
    redis_ok, postgres_ok = await asyncio.gather(
        _check(_redis_ok(state)), _check(_postgres_ok(state))
    )
    checks = {"redis": redis_ok, "postgres": postgres_ok, "pubsub": state["hub"].healthy}
    stuck = state["runner"].stuck(state["settings"].workers.stuck_after_s)
    checks["loops"] = not stuck
    ready = all(checks.values())
    body = {"status": "ready" if ready else "unavailable", "checks": checks, "stuck_loops": stuck}
    return JSONResponse(body, status_code=200 if ready else 503)


@router.get("/metrics", response_class=PlainTextResponse)
async def metrics(state: AppState) -> Response:
    body, content_type = state["metrics"].render()
    return Response(body, media_type=content_type)
