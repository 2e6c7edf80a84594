"""Every ``bash`` block of README.md runs as written, so the docs cannot rot (three service examples
once failed as written: a profile without fanout, an online batch going back in time, a lookup
made before its events arrived).

- Command-line blocks run from a scratch folder that sees the checkout's ``examples/`` and
  ``.venv/``; the JSON config shown beside them gives the facts of the shorthand it says it
  equals, and the policies table printed under its command is what that command prints.
- Service blocks (those that talk to ``http://localhost:...``) run against a real ``scripts/serve``
  stack on free ports: the README's ports are rewritten to the stack's, ``curl`` fails on an HTTP
  error (a cancel may find its job ended: 409), and every block must exit 0.
- Lines that start the stack itself (``docker compose``, ``scripts/serve``, ``uvicorn``) are
  what this test (and scripts/compose-test, for compose) does instead; the opening two commands
  are CI's own (``./scripts/test``) and ``litehit demo`` (tests/litehit/test_cli_jobs.py); the
  Development block's test selections are collected, not run (the one-test line runs).

Synopses with placeholders (TRACE, DIR, [--flag]) are ``text`` blocks, not examples.
"""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import httpx
import pytest
from service_fixtures import ROOT, RedisServer, free_port, wait_for

README = ROOT / "README.md"
STACK_COMMANDS = ("docker compose", "docker-compose", "scripts/serve", "uvicorn ", "celery ")
"""Lines that start a stack: the test runs scripts/serve itself (compose: scripts/compose-test)."""
OPENING = ("./scripts/demo", "./scripts/test")


@dataclass(frozen=True)
class Block:
    lang: str
    text: str
    line: int  # of the opening fence

    @property
    def service(self) -> bool:
        return "http://localhost:" in self.text

    @property
    def where(self) -> str:
        return f"README.md:{self.line}"


def blocks(lang: str | None = None) -> list[Block]:
    text = README.read_text()
    found = []
    for m in re.finditer(r"^```(\w*)\n(.*?)^```$", text, re.M | re.S):
        if lang is None or m[1] == lang:
            found.append(Block(m[1], m[2], text.count("\n", 0, m.start()) + 1))
    return found


def runnable(block: Block) -> str:
    """The block without the lines (and their continuations) that start a stack."""
    out: list[str] = []
    skipping = False
    for line in block.text.splitlines():
        if not skipping and line.lstrip().startswith(STACK_COMMANDS):
            skipping = True
        if not skipping:
            out.append(line)
        skipping = skipping and line.rstrip().endswith("\\")
    return "\n".join(out) + "\n"


def bash(script: str, cwd: Path, env: dict[str, str], where: str, timeout: float = 600) -> str:
    run = subprocess.run(
        ["bash", "-euo", "pipefail", "-c", script],
        cwd=cwd,
        env=env,
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
    )
    assert run.returncode == 0, (
        f"{where} failed ({run.returncode}):\n{script}\n--- stdout\n{run.stdout}\n--- stderr\n{run.stderr}"
    )
    return run.stdout


@pytest.fixture(scope="module")
def scratch(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A folder that sees the checkout's examples and environment, as the README's paths expect."""
    folder = tmp_path_factory.mktemp("readme")
    for name in ("examples", ".venv"):
        (folder / name).symlink_to(ROOT / name)
    return folder


def cli_env(home: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("LITEHIT_")}
    return {**env, "LITEHIT_HOME": str(home)}


def test_every_bash_block_is_run_by_this_test() -> None:
    """Each block is a command-line block, a service block or one of the named exceptions."""
    for block in blocks("bash"):
        lines = [line for line in block.text.splitlines() if line.strip() and not line.startswith("#")]
        if all(line.startswith(OPENING) for line in lines):
            continue
        assert runnable(block).strip() or all(line.lstrip().startswith(STACK_COMMANDS) for line in lines), block.where
    assert not [b.where for b in blocks("sh") + blocks("shell") + blocks("console")], "use bash or text fences"


def cli_blocks() -> list[Block]:
    return [
        b
        for b in blocks("bash")
        if not b.service
        and runnable(b).strip()
        and not all(line.startswith(OPENING) for line in b.text.splitlines() if line.strip())
    ]


def test_the_command_line_examples_run_as_written(scratch: Path, tmp_path: Path) -> None:
    env = cli_env(tmp_path / "home")
    for block in cli_blocks():
        script = runnable(block)
        if ".venv/bin/pytest" in script:  # the Development block: select, do not run the suite again
            lines = script.strip().splitlines()
            script = (
                lines[0]
                + "\n"
                + "".join(
                    re.sub(
                        r"^(\S*pytest|\./scripts/test)\b(.*?)(\s+#.*)?$", r".venv/bin/pytest --collect-only -q\2", line
                    )
                    + "\n"
                    for line in lines[1:]
                )
            )
            bash(script, ROOT, {**env, "PATH": os.environ["PATH"]}, block.where, timeout=900)
            continue
        out = bash(script, scratch, env, block.where)
        if "litehit policies" in script or "litehit routes" in script or "hybrid.json" in script:
            _check_printed_table(out, block)


def _check_printed_table(out: str, block: Block) -> None:
    """The untagged (or text) block right after the command is its output, line for line (a line
    ``...`` stands for lines left out)."""
    after = next(b for b in blocks() if b.line > block.line)
    assert after.lang in ("", "text"), f"the output of {block.where} follows it"
    printed = out.splitlines()
    for line in after.text.splitlines():
        if line == "...":
            continue
        assert line in printed, f"{after.where}: {line!r} is not what {block.where} prints:\n{out}"


def test_the_config_shown_gives_the_facts_of_its_shorthand(scratch: Path, tmp_path: Path) -> None:
    (config_block,) = [b for b in blocks("json") if '"instance_groups"' in b.text and '"model"' in b.text]
    config = json.loads(config_block.text)
    config["output_result_path"] = "config-out"
    (scratch / "readme-config.json").write_text(json.dumps(config))
    env = cli_env(tmp_path / "home")
    bash(".venv/bin/litehit replay readme-config.json", scratch, env, config_block.where)
    bash(
        ".venv/bin/litehit replay examples/data/conversation_trace.jsonl --block-sizes 512,1024 "
        "--model Llama-3.1-8B -o shorthand-out",
        scratch,
        env,
        config_block.where,
    )
    facts = "litehit_facts.csv"
    assert (scratch / "config-out" / facts).read_bytes() == (scratch / "shorthand-out" / facts).read_bytes()


CURL = r"""
curl() {  # as written, but an HTTP error fails the example (a cancel may find its job ended: 409)
  if [[ " $* " == *" -X DELETE "* ]]; then
    local code
    code=$(command curl -sS -o /dev/null -w '%{http_code}' "$@")
    [[ $code == 200 || $code == 409 ]] || { echo "curl $*: HTTP $code" >&2; return 22; }
  else
    command curl --fail-with-body -sS "$@"
  fi
}
"""


@pytest.fixture(scope="module")
def stack(tmp_path_factory: pytest.TempPathFactory, redis_server: RedisServer) -> Iterator[dict[str, int]]:
    """scripts/serve on free ports with a private home (the README's own way to run the service)."""
    tmp = tmp_path_factory.mktemp("readme-stack")
    ports = {"8000": free_port(), "8001": free_port(), "8002": free_port()}
    env = {k: v for k, v in os.environ.items() if not k.startswith("LITEHIT_")}
    env.update(
        LITEHIT_HOME=str(tmp / "home"),
        LITEHIT_BROKER_URL=f"{redis_server.url}/0",
        LITEHIT_RESULT_BACKEND=f"{redis_server.url}/1",
        LITEHIT_QUEUE=f"readme-{os.getpid()}",
        LITEHIT_SERVE_API_PORT=str(ports["8000"]),
        LITEHIT_SERVE_ONLINE_PORT=str(ports["8001"]),
        LITEHIT_SERVE_ATTRIBUTION_PORT=str(ports["8002"]),
    )
    log = tmp / "serve.log"
    with log.open("wb") as sink:
        serve = subprocess.Popen(
            [str(ROOT / "scripts" / "serve")],
            cwd=tmp,
            env=env,
            stdout=sink,
            stderr=sink,
            start_new_session=True,
            preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL),
        )
    try:

        def ready() -> bool:
            assert serve.poll() is None, log.read_text()
            try:
                return httpx.get(f"http://127.0.0.1:{ports['8000']}/readyz", timeout=2).status_code == 200
            except httpx.HTTPError:
                return False

        wait_for(ready, 120, "scripts/serve", interval=0.3)
        yield ports
    finally:
        serve.send_signal(signal.SIGINT)
        try:
            serve.wait(timeout=90)
        except subprocess.TimeoutExpired:
            os.killpg(serve.pid, signal.SIGKILL)


@pytest.mark.service
def test_the_service_examples_run_as_written(stack: dict[str, int], scratch: Path, tmp_path: Path) -> None:
    env = cli_env(tmp_path / "home")
    ran = 0
    for block in [b for b in blocks("bash") if b.service]:
        script = runnable(block)
        for port, real in stack.items():
            script = script.replace(f"localhost:{port}", f"127.0.0.1:{real}")
        out = bash(CURL + script, scratch, env, block.where, timeout=900)
        for expected in re.findall(r'#\s*(\{"outcome":"\w+")', block.text):  # an answer the README shows
            assert expected in out.replace(" ", ""), f"{block.where}: no {expected} in\n{out}"
        ran += 1
    assert ran >= 4  # the job API, online mode, live attribution, metrics
