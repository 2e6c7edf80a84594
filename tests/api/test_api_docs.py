"""The API docs (api/docs.py, api/examples.py): every field of every body is described; every
request body example of every app (the API, the online and the attribution owner) is accepted as
it stands; /docs, /redoc and /openapi.json need no token and load their assets from this machine
only; and in headless Chromium, with every host but this machine unreachable, Swagger UI renders
every operation and ReDoc renders the API. Runs on the embedded SQLite database: no servers."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from html.parser import HTMLParser
from pathlib import Path
from typing import Any

import httpx
import pytest
from browser import OFFLINE, chromium, headless
from fastapi import FastAPI
from fastapi.testclient import TestClient
from helpers import FACTS_HEADER
from service_fixtures import ROOT, free_port, wait_for

from api.attribution import create_attribution_app
from api.docs import ASSETS_URL
from api.examples import FACTS_FILE, TRACE_FILE
from api.forwarding import Forwarder
from api.main import create_app
from api.online import create_online_app
from litehit.db.migrate import upgrade
from litehit.jobs.registry import kinds
from litehit.settings import Settings

TOKEN = "s3cret"
FASTAPI_MODELS = {"HTTPValidationError", "ValidationError"}  # FastAPI's own 422 models, not ours
METHODS = {"get", "put", "post", "delete", "patch"}
APPS: dict[str, Callable[[Settings], FastAPI]] = {
    "api": lambda settings: create_app(settings, enqueue=lambda *a: None),
    "online owner": create_online_app,
    "attribution owner": create_attribution_app,
}
"""Every app of the service, each with its own docs."""
OURS = (*(f"/v1{kind.route}" for kind in kinds()), "/v1/online/")
"""Routes whose examples must succeed (2xx) on what the tests set up, not only be accepted."""


@pytest.fixture
def settings(tmp_path: Path) -> Settings:
    """A migrated embedded database and a storage root holding the examples' trace and facts."""
    settings = Settings(home=tmp_path / "home", sweep_interval_s=0, online_snapshot_s=3600)
    upgrade(settings.db_url)
    trace = settings.storage / TRACE_FILE
    trace.parent.mkdir(parents=True)
    shutil.copy(ROOT / "examples" / "data" / "conversation_trace.jsonl", trace)
    facts = settings.storage / FACTS_FILE
    facts.parent.mkdir(parents=True)
    facts.write_text(FACTS_HEADER + "\n")
    return settings


def operations(doc: dict[str, Any]) -> Iterator[tuple[str, str, dict[str, Any]]]:
    for path, item in doc["paths"].items():
        for method, operation in item.items():
            if method in METHODS:
                yield path, method, operation


def undescribed(doc: dict[str, Any]) -> list[str]:
    return [
        f"{name}.{field}"
        for name, schema in doc["components"]["schemas"].items()
        if name not in FASTAPI_MODELS
        for field, prop in schema.get("properties", {}).items()
        if not prop.get("description")
    ]


def body_examples(doc: dict[str, Any], operation: dict[str, Any]) -> list[tuple[str, Any]]:
    """The examples of an operation's JSON body: named (openapi_examples), of the media type, or
    of its schema."""
    content = operation["requestBody"]["content"].get("application/json", {})
    found = [(name, example["value"]) for name, example in content.get("examples", {}).items()]
    if "example" in content:
        found.append(("example", content["example"]))
    schema = content.get("schema", {})
    if "$ref" in schema:
        schema = doc["components"]["schemas"][schema["$ref"].rsplit("/", 1)[1]]
    found += [(f"schema example {i}", value) for i, value in enumerate(schema.get("examples", []))]
    return found


def parameter_example(parameter: dict[str, Any]) -> Any:
    named = parameter.get("examples") or {}
    if named:
        return next(iter(named.values()))["value"]
    schema = parameter.get("schema", {})
    if schema.get("examples"):
        return schema["examples"][0]
    return parameter.get("example", schema.get("default", "example"))


def not_configured(r: httpx.Response) -> bool:
    """A forwarding route of the API whose owners are not configured (503): no body was at fault."""
    return r.status_code == 503 and str(r.json()["error"]["code"]).endswith("_not_configured")


def post_every_example(client: TestClient) -> dict[str, int]:
    """Sends every body example of the app's operations; the status of each, by where it went."""
    doc = client.get("/openapi.json").json()
    statuses: dict[str, int] = {}
    for path, method, operation in operations(doc):
        if "requestBody" not in operation:
            continue
        examples = body_examples(doc, operation)
        assert examples, f"{method.upper()} {path} takes a body but shows no example"
        url, query = path, {}
        for parameter in operation.get("parameters", []):
            if parameter["in"] == "path":
                url = url.replace(f"{{{parameter['name']}}}", str(parameter_example(parameter)))
            elif parameter["in"] == "query" and parameter.get("required"):
                query[parameter["name"]] = parameter_example(parameter)
        for name, body in examples:
            r = client.request(method, url, params=query, json=body)
            where = f"{method.upper()} {url} example {name!r}"
            assert (r.status_code != 422 and r.status_code < 500) or not_configured(r), (where, r.status_code, r.text)
            statuses[where] = r.status_code
    return statuses


@pytest.mark.parametrize("which", APPS)
def test_every_field_of_every_body_is_described(settings: Settings, which: str) -> None:
    assert undescribed(APPS[which](settings).openapi()) == []


def test_every_example_is_accepted_by_the_api_and_the_online_owner(settings: Settings) -> None:
    """The API forwards /v1/online/* to a real owner app (in process): its online examples run
    end to end. Then the owner's own routes get their examples (registrations already exist: 409)."""
    enqueued: list[tuple[Any, ...]] = []
    owner_app = create_online_app(settings)
    api_settings = settings.model_copy(update={"online_urls": "http://owner"})
    api_app = create_app(api_settings, enqueue=lambda *args: enqueued.append(args))
    with TestClient(owner_app) as owner, TestClient(api_app) as api:
        assert api.portal is not None
        api.portal.call(api_app.state.forwarder.aclose)
        api_app.state.forwarder = Forwarder(api_settings, transport=httpx.ASGITransport(app=owner_app))
        statuses = post_every_example(api)
        ours = {where: status for where, status in statuses.items() if where.split()[1].startswith(OURS)}
        assert len(ours) >= 13 and all(200 <= s < 300 for s in ours.values()), ours
        assert len(enqueued) == sum("/v1/online/" not in where for where in ours)  # every job was queued

        owner_statuses = post_every_example(owner)
        assert len(owner_statuses) == 5, owner_statuses
        for where, status in owner_statuses.items():  # the API registered the same group and instances
            assert status == (
                409
                if where.endswith(
                    ("/groups example 'ttl'", "/instances example 'instance'", "/instances example 'hybrid'")
                )
                else 200
            )
        assert api.get("/v1/online/instances/qwen-next-1").json()["linear_step"] == 256
        r = api.get("/v1/online/instances/node-7")
        assert r.status_code == 200 and r.json()["total_queries"] == 3 * 2, r.text  # each query example twice


def local_urls(html: str) -> list[str]:
    """The src and href of a page's elements; every one must be on this server."""

    class Links(HTMLParser):
        def __init__(self) -> None:
            super().__init__()
            self.found: list[str] = []

        def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
            self.found += [value or "" for name, value in attrs if name in ("src", "href")]

    parser = Links()
    parser.feed(html)
    assert "http://" not in html and "https://" not in html, html
    assert parser.found and all(url.startswith(f"{ASSETS_URL}/") for url in parser.found), parser.found
    return parser.found


def test_every_example_of_the_attribution_owner_is_accepted(settings: Settings) -> None:
    with TestClient(create_attribution_app(settings)) as owner:
        assert post_every_example(owner)


@pytest.mark.parametrize("which", APPS)
def test_docs_need_no_token_and_load_only_local_assets(settings: Settings, which: str) -> None:
    settings = settings.model_copy(update={"api_token": TOKEN})
    with TestClient(APPS[which](settings)) as client:
        for page in ("/docs", "/redoc"):
            r = client.get(page)
            assert r.status_code == 200 and r.headers["content-type"].startswith("text/html"), (page, r.text)
            assert "'/openapi.json'" in r.text or '"/openapi.json"' in r.text, r.text
            for url in local_urls(r.text):
                asset = client.get(url)
                assert asset.status_code == 200 and len(asset.content) > 1000, url
        doc = client.get("/openapi.json").json()
        assert doc["components"]["securitySchemes"]["bearer"] == {
            "type": "http",
            "scheme": "bearer",
            "description": "LITEHIT_API_TOKEN: needed by every /v1 route when the server sets it",
        }
        v1 = [op.get("security") for path, _, op in operations(doc) if path.startswith("/v1/")]
        assert v1 and all(security == [{"bearer": []}] for security in v1)  # the Authorize button applies
        listing = next(
            p for p, method, _ in operations(doc) if p.startswith("/v1/") and method == "get" and "{" not in p
        )
        unauthorized = client.get(listing)
        assert unauthorized.status_code == 401 and unauthorized.headers["www-authenticate"] == "Bearer"
        assert unauthorized.json() == {
            "error": {"code": "unauthorized", "message": "a valid bearer token is required", "details": []}
        }
        assert client.get(listing, headers={"Authorization": f"Basic {TOKEN}"}).status_code == 401
        assert client.get(listing, headers={"Authorization": f"Bearer {TOKEN}x"}).status_code == 401
        assert client.get(listing, headers={"Authorization": f"Bearer {TOKEN}"}).status_code == 200


# -- rendering in a real browser -------------------------------------------------------------


class Dom(HTMLParser):
    """The classes and the text of a page as the browser left it."""

    def __init__(self, html: str) -> None:
        super().__init__()
        self.classes: list[list[str]] = []
        self.texts: list[str] = []
        self.feed(html)

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.classes.append(next((v or "" for k, v in attrs if k == "class"), "").split())

    def handle_data(self, data: str) -> None:
        self.texts.append(data)

    def count(self, css_class: str) -> int:
        return sum(css_class in c for c in self.classes)

    @property
    def text(self) -> str:
        return " ".join(" ".join(self.texts).split())


@dataclass
class Server:
    base: str
    doc: dict[str, Any]


@pytest.fixture
def server(tmp_path: Path) -> Iterator[Server]:
    """``uvicorn api.main:app`` on a free port, with a token set and nothing but a private home."""
    port = free_port()
    env = {k: v for k, v in os.environ.items() if not k.startswith("LITEHIT_")}
    env.update(LITEHIT_HOME=str(tmp_path / "home"), LITEHIT_SWEEP_INTERVAL_S="0", LITEHIT_API_TOKEN=TOKEN)
    log = tmp_path / "uvicorn.log"
    with log.open("wb") as sink:
        proc = subprocess.Popen(
            [sys.executable, "-m", "uvicorn", "api.main:app", "--host", "127.0.0.1", "--port", str(port)],
            cwd=tmp_path,  # no .env of the repository
            env=env,
            stdout=sink,
            stderr=sink,
        )
    base = f"http://127.0.0.1:{port}"

    def up() -> httpx.Response | None:
        assert proc.poll() is None, log.read_text()
        try:
            r = httpx.get(f"{base}/openapi.json", timeout=2)
        except httpx.HTTPError:
            return None
        return r if r.status_code == 200 else None

    try:
        yield Server(base, wait_for(up, 60, "the API to answer").json())
    finally:
        proc.terminate()
        proc.wait(timeout=30)


def render(browser: str, profile: Path, url: str) -> Dom:
    r = headless(browser, profile, OFFLINE, "--virtual-time-budget=30000", "--dump-dom", url)
    assert r.returncode == 0, r.stderr[-2000:]
    return Dom(r.stdout)


def test_swagger_ui_and_redoc_render_offline_in_headless_chromium(server: Server, tmp_path: Path) -> None:
    browser = chromium()
    summaries = [op["summary"] for _, _, op in operations(server.doc)]

    swagger = render(browser, tmp_path / "profile", f"{server.base}/docs")
    assert swagger.count("opblock") == len(summaries) > 30, swagger.count("opblock")
    assert swagger.count("authorize") >= 1  # the bearer token's Authorize button
    missing = [s for s in summaries if s not in swagger.text]
    assert missing == [], missing

    redoc = render(browser, tmp_path / "profile", f"{server.base}/redoc")
    assert "LiteHit" in redoc.text and server.doc["info"]["summary"] in redoc.text
    missing = [s for s in summaries if s not in redoc.text]
    assert missing == [], missing
