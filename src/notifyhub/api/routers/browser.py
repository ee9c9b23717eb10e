"""The browser side: `/static` (notifyhub.js, its types, its SharedWorker, the demo assets) and
`/demo`."""

from __future__ import annotations

import os
from pathlib import Path

from fastapi import APIRouter
from fastapi.responses import FileResponse
from starlette.responses import Response
from starlette.staticfiles import StaticFiles
from starlette.types import Scope

router = APIRouter(tags=["browser"])

STATIC_DIR = Path(__file__).resolve().parents[2] / "static"
# The demo loads only its own files: no inline script, no CDN, no framing.
DEMO_CSP = (
    "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; "
    "connect-src 'self'; worker-src 'self'; base-uri 'none'; form-action 'none'; "
    "frame-ancestors 'none'"
)


class Assets(StaticFiles):
    """Package files, revalidated on every use so a page and its worker never drift apart."""

    def file_response(
        self,
        full_path: str | os.PathLike[str],
        stat_result: os.stat_result,
        scope: Scope,
        status_code: int = 200,
    ) -> Response:
        response = super().file_response(full_path, stat_result, scope, status_code)
        if str(full_path).endswith(".d.ts"):
            # The system's mime.types maps .ts to MPEG video or Qt Linguist; IANA has no TypeScript
            # type, and plain text opens in a browser (nosniff keeps it from running).
            response.headers["content-type"] = "text/plain; charset=utf-8"
        response.headers["cache-control"] = "no-cache"
        response.headers["x-content-type-options"] = "nosniff"
        return response


router.mount("/static", Assets(directory=STATIC_DIR, check_dir=False), name="static")


@router.get("/demo", include_in_schema=False)
async def demo() -> FileResponse:
    """The demo inbox; it reads the user token from `#token=...` or a paste box."""
    return FileResponse(
        STATIC_DIR / "demo.html",
        media_type="text/html; charset=utf-8",
        headers={
            "cache-control": "no-cache",
            "content-security-policy": DEMO_CSP,
            "referrer-policy": "no-referrer",
            "x-content-type-options": "nosniff",
        },
    )
