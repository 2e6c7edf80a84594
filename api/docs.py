"""The interactive API docs, offline: Swagger UI at /docs and ReDoc at /redoc, their script, style
and icon served from the installed fastapi-offline package under /docs-assets (no CDN, no web
fonts), so both pages render on a machine without internet. Like /openapi.json they need no
token: they describe the API and hold no data."""

from __future__ import annotations

from importlib.resources import files
from pathlib import Path

from fastapi import FastAPI, Request
from fastapi.openapi.docs import get_redoc_html, get_swagger_ui_html
from fastapi.responses import HTMLResponse
from fastapi.staticfiles import StaticFiles

__all__ = ["ASSETS_URL", "assets_dir", "install_docs"]

ASSETS_URL = "/docs-assets"
SWAGGER_JS, SWAGGER_CSS, REDOC_JS, FAVICON = (
    "swagger-ui-bundle.js",
    "swagger-ui.css",
    "redoc.standalone.js",
    "favicon.png",
)


def assets_dir() -> Path:
    """The folder of the Swagger UI and ReDoc bundles inside the installed fastapi-offline."""
    return Path(str(files("fastapi_offline") / "static"))


def install_docs(app: FastAPI) -> None:
    """Adds /docs, /redoc and their assets to an app created with docs_url=None, redoc_url=None."""
    app.mount(ASSETS_URL, StaticFiles(directory=assets_dir()), name="docs-assets")
    openapi_url = app.openapi_url or "/openapi.json"

    def base(request: Request) -> str:  # behind a proxy that strips a prefix (uvicorn --root-path)
        return str(request.scope.get("root_path", "")).rstrip("/")

    @app.get("/docs", include_in_schema=False)
    async def swagger_ui(request: Request) -> HTMLResponse:
        root = base(request)
        return get_swagger_ui_html(
            openapi_url=root + openapi_url,
            title=f"{app.title} - Swagger UI",
            swagger_js_url=f"{root}{ASSETS_URL}/{SWAGGER_JS}",
            swagger_css_url=f"{root}{ASSETS_URL}/{SWAGGER_CSS}",
            swagger_favicon_url=f"{root}{ASSETS_URL}/{FAVICON}",
            oauth2_redirect_url=None,
        )

    @app.get("/redoc", include_in_schema=False)
    async def redoc(request: Request) -> HTMLResponse:
        root = base(request)
        return get_redoc_html(
            openapi_url=root + openapi_url,
            title=f"{app.title} - ReDoc",
            redoc_js_url=f"{root}{ASSETS_URL}/{REDOC_JS}",
            redoc_favicon_url=f"{root}{ASSETS_URL}/{FAVICON}",
            with_google_fonts=False,
        )
