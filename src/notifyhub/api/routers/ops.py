"""Liveness, readiness and Prometheus metrics."""

from __future__ import annotations

import asyncio
from typing import Any

from fastapi import APIRouter, Response
from fastapi.responses import JSONResponse, PlainTextResponse
from sqlalchemy import text

from notifyhub import __version__
from notifyhub.api.deps import AppState
from notifyhub.db.migrate import is_current

router = APIRouter(tags=["operations"])

CHECK_TIMEOUT_S = 2.0


@router.get("/healthz")
async def healthz() -> dict[str, str]:
    """Alive, and which release answers (pyproject's version, as installed)."""
    return {"status": "ok", "version": __version__}


async def _redis_ok(state: AppState) -> bool:
    return bool(await state["redis"].ping())


async def _postgres_ok(state: AppState) -> bool:
    async with state["engine"].connect() as connection:
        await connection.execute(text("SELECT 1"))
    return bool(await is_current(state["engine"]))


async def _check(probe: Any) -> bool:
    try:
        async with asyncio.timeout(CHECK_TIMEOUT_S):
            return bool(await probe)
    except Exception:
        return False


@router.get(
    "/readyz",
    responses={503: {"description": "Not ready", "content": {"application/json": {}}}},
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
