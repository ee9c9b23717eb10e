"""`/docs` (Swagger UI) and `/redoc` from the hub's own files: they work with no network.

FastAPI's own pages load their scripts, styles and fonts from CDNs, so behind a firewall
they are blank. The files come from the `fastapi-offline` package (kept in step with the
Swagger UI and ReDoc releases), mounted under `/docs/assets`; nothing is vendored here.
ReDoc's bundle is served with one change (`/docs/redoc.js`): its side menu's "API docs by
Redocly" logo, an image from Redocly's CDN that no option turns off, is an empty inline
image instead, so the page asks nothing of any other host.
"""

from __future__ import annotations

import functools
from pathlib import Path

import fastapi_offline
from fastapi import FastAPI, Request, Response
from fastapi.openapi.docs import (
    get_redoc_html,
    get_swagger_ui_html,
    get_swagger_ui_oauth2_redirect_html,
)
from fastapi.responses import HTMLResponse
from starlette.staticfiles import StaticFiles

ASSETS_DIR = Path(fastapi_offline.__file__).resolve().parent / "static"
ASSETS_URL = "/docs/assets"
REDOC_URL = "/docs/redoc.js"
REDOC_CDN_LOGO = "https://cdn.redoc.ly/redoc/logo-mini.svg"
EMPTY_IMAGE = "data:image/svg+xml,%3Csvg xmlns='http://www.w3.org/2000/svg'/%3E"
SWAGGER_PARAMETERS = {
    "validatorUrl": None,  # Swagger UI would send the schema to validator.swagger.io
    "persistAuthorization": True,
}


@functools.cache
def redoc_script() -> bytes:
    """ReDoc's bundle, its CDN logo replaced by an empty inline image (read once)."""
    bundle = (ASSETS_DIR / "redoc.standalone.js").read_text(encoding="utf-8")
    return bundle.replace(REDOC_CDN_LOGO, EMPTY_IMAGE).encode()


def install_docs(app: FastAPI) -> None:
    """Serve `/docs`, its OAuth2 redirect and `/redoc` (create the app with both URLs None)."""
    app.mount(ASSETS_URL, StaticFiles(directory=ASSETS_DIR), name="docs-assets")
    openapi_url = app.openapi_url or "/openapi.json"
    redirect_url = app.swagger_ui_oauth2_redirect_url or "/docs/oauth2-redirect"

    @app.get("/docs", include_in_schema=False)
    async def swagger_ui(request: Request) -> HTMLResponse:
        root = request.scope.get("root_path", "").rstrip("/")
        return get_swagger_ui_html(
            openapi_url=f"{root}{openapi_url}",
            title=f"{app.title} - Swagger UI",
            oauth2_redirect_url=f"{root}{redirect_url}",
            swagger_js_url=f"{root}{ASSETS_URL}/swagger-ui-bundle.js",
            swagger_css_url=f"{root}{ASSETS_URL}/swagger-ui.css",
            swagger_favicon_url=f"{root}{ASSETS_URL}/favicon.png",
            swagger_ui_parameters={**SWAGGER_PARAMETERS, **(app.swagger_ui_parameters or {})},
        )

    @app.get(redirect_url, include_in_schema=False)
    async def swagger_ui_redirect() -> HTMLResponse:
        return get_swagger_ui_oauth2_redirect_html()

    @app.get(REDOC_URL, include_in_schema=False)
    async def redoc_js() -> Response:
        headers = {"Cache-Control": "public, max-age=3600"}
        return Response(redoc_script(), media_type="text/javascript", headers=headers)

    @app.get("/redoc", include_in_schema=False)
    async def redoc(request: Request) -> HTMLResponse:
        root = request.scope.get("root_path", "").rstrip("/")
        return get_redoc_html(
            openapi_url=f"{root}{openapi_url}",
            title=f"{app.title} - ReDoc",
            redoc_js_url=f"{root}{REDOC_URL}",
            redoc_favicon_url=f"{root}{ASSETS_URL}/favicon.png",
            with_google_fonts=False,
        )
