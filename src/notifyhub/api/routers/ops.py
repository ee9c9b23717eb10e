"""Liveness, readiness and Prometheus metrics."""

from __future__ import annotations

import asyncio
from typing import Any, Literal

from fastapi import APIRouter, Response
from fastapi.responses import JSONResponse, PlainTextResponse
from pydantic import BaseModel, ConfigDict

from notifyhub import __version__
from notifyhub.api.deps import AppState
from notifyhub.db.migrate import is_current

router = APIRouter(tags=["operations"])

CHECK_TIMEOUT_S = 2.0


class Health(BaseModel):
    """The process is alive."""

    model_config = ConfigDict(
        use_attribute_docstrings=True,
        json_schema_extra={"examples": [{"status": "ok", "version": "1.4.0"}]},
    )

    status: Literal["ok"]
    """Always `ok`."""
    version: str
    """Which release answers (pyproject's version, as installed)."""


class Checks(BaseModel):
    """Each dependency's check."""

    model_config = ConfigDict(
        use_attribute_docstrings=True,
        json_schema_extra={
            "examples": [
                {
                    "redis": True,
                    "redis_data": True,
                    "postgres": True,
                    "pubsub": True,
                    "loops": True,
                }
            ]
        },
    )

    redis: bool
    """Redis answers."""
    redis_data: bool
    """Redis holds its data: false after it lost it (a FLUSHALL, a restart without
    persistence) until the rebuild from PostgreSQL finished, while lists may lack what
    the rebuild has not replayed yet."""
    postgres: bool
    """Reachable, and its schema migrated to this release's head."""
    pubsub: bool
    """The live-event subscription is connected."""
    loops: bool
    """No background loop is stuck."""


class Readiness(BaseModel):
    """Whether the hub can serve requests: 200 when ready, 503 otherwise."""

    model_config = ConfigDict(
        use_attribute_docstrings=True,
        json_schema_extra={
            "examples": [
                {
                    "status": "ready",
                    "checks": {
                        "redis": True,
                        "redis_data": True,
                        "postgres": True,
                        "pubsub": True,
                        "loops": True,
                    },
                    "stuck_loops": [],
                }
            ]
        },
    )

    status: Literal["ready", "unavailable"]
    """`ready` when every check passed."""
    checks: Checks
    """Each check's result."""
    stuck_loops: list[str]
    """Background loops that stopped making progress."""


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
    """Ready to serve: Redis and PostgreSQL reachable, Redis holding its data (not
    waiting for a rebuild), migrations current, no loop stuck (503 with the same body
    otherwise)."""
    redis_ok, redis_data, postgres_ok = await asyncio.gather(
        _check(_redis_ok(state)),
        _check(state["epoch"].holds_data()),
        _check(_postgres_ok(state)),
    )
    checks = {"redis": redis_ok, "redis_data": redis_data, "postgres": postgres_ok}
    checks["pubsub"] = state["hub"].healthy
    stuck = state["runner"].stuck(state["settings"].workers.stuck_after_s)
    checks["loops"] = not stuck
    ready = all(checks.values())
    body = {"status": "ready" if ready else "unavailable", "checks": checks, "stuck_loops": stuck}
    return JSONResponse(body, status_code=200 if ready else 503)


@router.get("/metrics", response_class=PlainTextResponse)
async def metrics(state: AppState) -> Response:
    """Prometheus metrics, in the text exposition format."""
    body, content_type = state["metrics"].render()
    return Response(body, media_type=content_type)
