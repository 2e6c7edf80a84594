"""Scripts and tests bind free ports only: a developer may be running a stack on the usual ones.
Every `--port` option of a bench or script defaults to 0 (a free port), and nothing binds or
starts a server on a port number written into the code."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
PORT_OPTION = re.compile(r"""add_argument\(\s*["']--port["'][^)]*?default=(\d+)""", re.S)
FIXED = [
    re.compile(r"""\.bind\(\s*\(\s*["'][^"']*["']\s*,\s*([1-9]\d*)\s*\)"""),  # socket.bind((host, 8000))
    re.compile(r"""["']--port["']\s*,\s*["']([1-9]\d*)["']"""),  # [..., "--port", "8000"]
    re.compile(r"""\bport\s*=\s*([1-9]\d{3,4})\b"""),  # port=8000
]


def _sources() -> list[Path]:
    files = [*ROOT.glob("bench/*.py"), *ROOT.glob("scripts/*"), *ROOT.glob("tests/**/*.py")]
    return sorted(p for p in files if p.is_file() and p.resolve() != Path(__file__).resolve())


def test_no_script_or_test_binds_a_fixed_port() -> None:
    found = []
    for path in _sources():
        text = path.read_text(errors="replace")
        found += [
            f"{path.relative_to(ROOT)}: --port defaults to {m[1]}" for m in PORT_OPTION.finditer(text) if m[1] != "0"
        ]
        for pattern in FIXED:
            found += [f"{path.relative_to(ROOT)}: fixed port {m[1]}" for m in pattern.finditer(text)]
    assert found == []


def test_the_patterns_find_what_they_are_for() -> None:
    assert PORT_OPTION.search('parser.add_argument("--port", type=int, default=8765)')[1] == "8765"  # type: ignore[index]
    assert FIXED[0].search('s.bind(("127.0.0.1", 8000))') and not FIXED[0].search('s.bind(("127.0.0.1", 0))')
    assert FIXED[1].search('["uvicorn", "api.main:app", "--port", "8000"]')
    assert FIXED[2].search("uvicorn.run(app, port=8000)")
