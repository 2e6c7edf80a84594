"""``litehit report``: one self-contained offline HTML page about a facts file. Facts come from a
real ``litehit replay`` (subprocess) of the bundled conversation trace's first 3,000 requests; the
page's numbers are compared with the query and curve modules, and the page is rendered in
headless Chromium."""

from __future__ import annotations

import hashlib
import json
import os
import re
import shutil
import subprocess
import sys
import time
from dataclasses import dataclass
from html.parser import HTMLParser
from pathlib import Path
from typing import Any

import pytest
from browser import chromium, headless
from helpers import instance

from litehit.capacity import parse_capacities
from litehit.curve import exact_curves
from litehit.lane_summary import format_bytes
from litehit.query import query_facts
from litehit.report import default_capacities, package_version

LITEHIT = str(Path(sys.executable).with_name("litehit"))
SCRIPT_ID = '<script>alert("x&y")</script>'
LANES = ["b512", "b1024", SCRIPT_ID]
CAPACITIES = ["0.5", "1", "2", "-1"]
CONFIG: dict[str, Any] = {  # the replay config without its trace and output (the service test's too)
    "block_size": 512,
    "fanout_all_instances": True,
    "facts_format": "extended",
    "instance_groups": [{"name": "g"}, {"name": "t60", "ttl_seconds": 60}],
    "instances": [
        instance("b512", 512, group="g", sizes=(1 << 20,)),
        instance("b1024", 1024, group="g", sizes=(1 << 21,)),
        instance(SCRIPT_ID, 512, group="t60", sizes=(1 << 20,)),
    ],
}


@dataclass
class Replayed:
    root: Path
    env: dict[str, str]
    facts: Path
    job_id: str


def run(env: dict[str, str], *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([LITEHIT, *args], capture_output=True, text=True, check=False, env=env)


@pytest.fixture(scope="module")
def replayed(tmp_path_factory: pytest.TempPathFactory, data_dir: Path) -> Replayed:
    root = tmp_path_factory.mktemp("report")
    lines = (data_dir / "conversation_trace.jsonl").read_text().splitlines(keepends=True)[:3000]
    trace = root / "trace.jsonl"
    trace.write_text("".join(lines))
    config = {**CONFIG, "trace_file_path": str(trace), "output_result_path": str(root / "out")}
    (root / "config.json").write_text(json.dumps(config))
    env = {**os.environ, "LITEHIT_HOME": str(root / "home")}
    env.pop("LITEHIT_DATABASE_URL", None)
    r = run(env, "replay", str(root / "config.json"))
    assert r.returncode == 0, r.stderr
    job_id = re.search(r"^job: (\w+)", r.stdout, re.MULTILINE)
    assert job_id is not None, r.stdout
    return Replayed(root, env, root / "out" / "litehit_facts.csv", job_id.group(1))


class Page(HTMLParser):
    """The elements of a page, with their attributes (values unescaped by the parser)."""

    def __init__(self, text: str) -> None:
        super().__init__()
        self.elements: list[tuple[str, dict[str, str]]] = []
        self.text: list[str] = []
        self.feed(text)

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.elements.append((tag, {k: v or "" for k, v in attrs}))

    def handle_data(self, data: str) -> None:
        self.text.append(data)

    def having(self, tag: str, cls: str | None = None) -> list[dict[str, str]]:
        return [a for t, a in self.elements if t == tag and (cls is None or cls in a.get("class", "").split())]


def report(replayed: Replayed, out: Path, *args: str) -> str:
    r = run(replayed.env, "report", str(replayed.facts), "-o", str(out), *args)
    assert r.returncode == 0, r.stderr
    assert r.stdout == f"report written to {out}\n"
    return out.read_text()


@pytest.fixture(scope="module")
def page_file(replayed: Replayed) -> Path:
    out = replayed.root / "pages" / "report.html"
    out.parent.mkdir()
    report(replayed, out, "--capacity-gb", *CAPACITIES, "--target-hit-rate", "0.05,0.9")
    return out


def test_the_page_is_one_file_that_loads_nothing(page_file: Path) -> None:
    text = page_file.read_text()
    assert sorted(p.name for p in page_file.parent.iterdir()) == ["report.html"]  # nothing beside it
    assert text.startswith("<!DOCTYPE html>")
    assert "http://" not in text and "https://" not in text
    page = Page(text)
    tags = {t for t, _ in page.elements}
    assert not tags & {"script", "link", "img", "iframe", "object", "embed", "base"}
    assert not [a for _, a in page.elements if "src" in a or "href" in a]
    assert "@import" not in text and "url(" not in text


def test_one_chart_per_lane_and_one_for_all(page_file: Path) -> None:
    page = Page(page_file.read_text())
    charts = page.having("svg", "lane-curve")
    assert sorted(c["data-instance"] for c in charts) == sorted(LANES)
    assert len(page.having("svg", "overview")) == 1
    curves = page.having("path", "curve")
    assert len(curves) == 2 * len(LANES)  # each lane in the overview and in its own chart
    assert all(len(c["d"]) > 20 for c in curves)
    # 50/90/99% of the plateau on every lane chart; the hit rate 5% is reachable everywhere, 90% nowhere
    assert [a["data-fraction"] for a in page.having("g", "target") if "data-fraction" in a] == [
        "0.5",
        "0.9",
        "0.99",
    ] * 3
    assert [a["data-hit-rate"] for a in page.having("g", "target") if "data-hit-rate" in a] == ["0.05"] * 3
    assert "".join(page.text).count("hit rate 90.00%: not reachable") == 3


def test_the_table_holds_the_numbers_of_litehit_query(replayed: Replayed, page_file: Path) -> None:
    page = Page(page_file.read_text())
    cells = {(c["data-instance"], int(c["data-slot"])): c for c in page.having("td", "rate")}
    slots = parse_capacities(CAPACITIES)
    result = query_facts(replayed.facts, slots)
    assert len(cells) == len(LANES) * len(slots)
    for summary in result.instances:
        name = (summary.instance_id or b"").decode()
        for k, slot in enumerate(slots):
            cell = cells[(name, k)]
            assert float(cell["data-hit-rate"]) == summary.hit_rates[k]  # exactly: repr round-trips
            assert int(cell["data-hit-tokens"]) == summary.total_hit_tokens[k]
            assert float(cell["data-capacity-gb"]) == slot.recorded_gb
    # ... and of `litehit query -o` (the original JSONL summaries)
    jsonl = replayed.root / "q.jsonl"
    assert (
        run(replayed.env, "query", str(replayed.facts), "--capacity-gb", *CAPACITIES, "-o", str(jsonl)).returncode == 0
    )
    for line in jsonl.read_text().splitlines():
        row = json.loads(line)
        if row.get("summary") and "instance_id" in row:
            got = [float(cells[(row["instance_id"], k)]["data-hit-rate"]) for k in range(len(slots))]
            assert [float(f"{v:g}") for v in got] == row["hit_rates"]


def test_plateau_targets_are_the_exact_curve_s(replayed: Replayed, page_file: Path) -> None:
    text = "".join(Page(page_file.read_text()).text)
    curves = exact_curves(replayed.facts, (0.5, 0.9, 0.99))
    assert len(curves) == len(LANES)
    for curve in curves:
        for p in [curve.plateau, *(curve.point(i) for i in curve.targets.values())]:
            cell = f"{p.hit_rate:.2%} from {format_bytes(p.capacity_bytes)} ({p.capacity_blocks:,} blocks)"
            assert cell in text, (curve.instance_id, cell)
        i = curve.index_reaching_hit_rate(0.05)
        assert i is not None
        p = curve.point(i)
        assert f"hit rate 5.00%: from {format_bytes(p.capacity_bytes)}" in text  # the chart's legend


def test_instance_ids_and_config_strings_are_escaped(page_file: Path) -> None:
    text = page_file.read_text()
    assert "<script" not in text
    assert "&lt;script&gt;alert(&quot;x&amp;y&quot;)&lt;/script&gt;" in text
    page = Page(text)
    assert not [t for t, _ in page.elements if t == "script"]
    assert SCRIPT_ID in "".join(page.text)  # shown as text, in the charts' legends and the tables


def test_provenance_names_the_file_the_replay_and_the_version(replayed: Replayed, page_file: Path) -> None:
    text = "".join(Page(page_file.read_text()).text)
    data = replayed.facts.read_bytes()
    assert hashlib.sha256(data).hexdigest() in text
    assert f"{len(data):,} bytes" in text
    assert str(replayed.facts) in text
    assert "rows9,000" in text and "instances3: " in text  # 3,000 requests x 3 lanes (fanout)
    assert f"litehit version{package_version()}" in text
    assert f"replay job{replayed.job_id}" in text
    assert f"trace path{replayed.root / 'trace.jsonl'}" in text and "trace formatmooncake" in text
    assert '"ttl_seconds": 60' in text  # the replay config
    assert "60 s" in text and "1,024 tokens/block, 2 MiB/block, no TTL" in text  # lane setups from it


def test_a_copied_facts_file_has_no_known_replay(replayed: Replayed) -> None:
    copy = replayed.root / "copy" / "facts.csv"
    copy.parent.mkdir()
    time.sleep(0.01)
    shutil.copy(replayed.facts, copy)
    r = run(replayed.env, "report", str(copy), "-o", str(copy.parent / "r.html"))
    assert r.returncode == 0, r.stderr
    text = "".join(Page((copy.parent / "r.html").read_text()).text)
    assert "replayunknown: no record of the replay that wrote this file" in text
    assert replayed.job_id not in text


def test_capacities_with_units_are_the_query_s_and_show_the_lane_s_blocks(replayed: Replayed) -> None:
    caps = ["512MiB", "2048blocks", "1Mtokens", "inf"]
    page = Page(report(replayed, replayed.root / "units.html", "--capacity", *caps))
    slots = parse_capacities(caps)
    result = query_facts(replayed.facts, slots)
    cells = {(c["data-instance"], int(c["data-slot"])): c for c in page.having("td", "rate")}
    for summary in result.instances:
        name = (summary.instance_id or b"").decode()
        assert [float(cells[(name, k)]["data-hit-rate"]) for k in range(len(slots))] == summary.hit_rates
    assert [cells[("b512", k)]["data-capacity-gb"] for k in range(len(slots))] == [
        "536870912B",
        "2048blocks",
        "1000000tokens",
        "-1.0",
    ]
    rows = table_rows((replayed.root / "units.html").read_text())
    # capacity, asked as, then hit rate and blocks per lane (<script> lane, b1024, b512: bytes order)
    assert rows[1][:2] == ["2,048 blocks", "2,048 blocks"] and rows[1][3::2] == ["2,048", "2,048", "2,048"]
    assert rows[2][:2] == ["1,000,000 tokens", "1,000,000 tokens"] and rows[2][3::2] == ["1,953", "976", "1,953"]
    assert rows[0][:2] == ["512 MiB", "512 MiB"] and rows[0][3::2] == ["512", "256", "512"]


def table_rows(text: str) -> list[list[str]]:
    """The body rows of the capacities table, as the texts of their cells."""
    body = text.split('<table class="capacities">', 1)[1].split("<tbody>", 1)[1].split("</tbody>", 1)[0]
    return [
        [re.sub(r"<[^>]+>", "", cell) for cell in re.findall(r"<t[hd][^>]*>(.*?)</t[hd]>", row)]
        for row in body.split("</tr>")
        if row.strip()
    ]


def test_without_capacities_the_table_is_a_ladder_of_powers_of_two(replayed: Replayed) -> None:
    out = replayed.root / "ladder.html"
    page = Page(report(replayed, out))
    slots = default_capacities(exact_curves(replayed.facts))
    result = query_facts(replayed.facts, slots)
    cells = {(c["data-instance"], int(c["data-slot"])): float(c["data-hit-rate"]) for c in page.having("td", "rate")}
    assert len(cells) == len(LANES) * len(slots)
    assert slots[-1].infinite and all(s.capacity_bytes & (s.capacity_bytes - 1) == 0 for s in slots[:-1])
    for summary in result.instances:
        name = (summary.instance_id or b"").decode()
        assert [cells[(name, k)] for k in range(len(slots))] == summary.hit_rates
    assert not page.having("line", "asked")  # the ladder is not "asked"


def test_bad_arguments_say_what_is_wrong(replayed: Replayed) -> None:
    r = run(replayed.env, "report", str(replayed.facts), "-o", str(replayed.root / "r.txt"))
    assert r.returncode == 1 and "must end in .html" in r.stderr
    r = run(replayed.env, "report", str(replayed.root / "trace.jsonl"), "-o", str(replayed.root / "r.html"))
    assert r.returncode == 1 and "run `litehit replay` first" in r.stderr
    r = run(replayed.env, "report", str(replayed.facts), "-o", str(replayed.root / "r.html"), "--targets", "1.5")
    assert r.returncode == 1 and "--targets must be" in r.stderr
    r = run(replayed.env, "report", str(replayed.facts), "-o", str(replayed.root / "r.html"), "--targets", "0,0.5")
    assert r.returncode == 1 and "--targets must be fractions of the plateau in (0, 1], got 0,0.5" in r.stderr
    assert not (replayed.root / "r.html").exists()


# -- rendering in a real browser -------------------------------------------------------------


def test_the_charts_render_in_headless_chromium(page_file: Path, tmp_path: Path) -> None:
    from PIL import Image

    browser = chromium()
    url = page_file.resolve().as_uri()
    r = headless(browser, tmp_path / "profile", "--dump-dom", url)
    assert r.returncode == 0, r.stderr[-2000:]
    dom = Page(r.stdout)
    assert len(dom.having("svg", "lane-curve")) == len(LANES)
    assert len(dom.having("path", "curve")) == 2 * len(LANES)

    shot = tmp_path / "page.png"
    r = headless(browser, tmp_path / "profile", "--window-size=1200,1400", f"--screenshot={shot}", url)
    assert r.returncode == 0 and shot.is_file(), r.stderr[-2000:]
    image = Image.open(shot).convert("RGB")
    assert image.size == (1200, 1400)
    top = image.crop((0, 0, 1200, 600))  # the title and the chart of all lanes, nothing else
    colours: dict[Any, int] = {c: n for n, c in top.getcolors(top.width * top.height) or []}
    assert colours.get((255, 255, 255), 0) < 0.97 * top.width * top.height  # not blank
    # the lanes' colours (Okabe-Ito blue, vermillion, green) are painted: the curves rendered
    for lane_colour in ((0x00, 0x72, 0xB2), (0xD5, 0x5E, 0x00), (0x00, 0x9E, 0x73)):
        assert colours.get(lane_colour, 0) >= 20, lane_colour
