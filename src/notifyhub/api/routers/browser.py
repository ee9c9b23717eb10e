"""The browser side: `/static` (notifyhub.js, its types, its SharedWorker, the demo and
console assets), `/demo` and `/console`."""

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
# The demo and the console load only their own files: no inline script, no CDN, no framing.
PAGE_CSP = (
    "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; "
    "connect-src 'self'; worker-src 'self'; base-uri 'none'; form-action 'none'; "
    "frame-ancestors 'none'"
)
# The demo also shows actors' avatars, https images from anywhere (passive content, sent
# no referrer); the console keeps to its own.
DEMO_CSP = PAGE_CSP.replace("img-src 'self' data:", "img-src 'self' data: https:")


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


def _page(name: str, csp: str = PAGE_CSP) -> FileResponse:
    return FileResponse(
        STATIC_DIR / name,
        media_type="text/html; charset=utf-8",
        headers={
            "cache-control": "no-cache",
            "content-security-policy": csp,
            "referrer-policy": "no-referrer",
            "x-content-type-options": "nosniff",
        },
    )


@router.get("/demo", include_in_schema=False)
async def demo() -> FileResponse:
    """The demo inbox; it reads the user token from `#token=...` or a paste box."""
    return _page("demo.html", DEMO_CSP)


@router.get("/console", include_in_schema=False)
async def console() -> FileResponse:
    """The operator console (static/console.js): it calls the admin API with the key the
    operator logs in with, kept in the tab's sessionStorage and sent only in headers."""
    return _page("console.html")
