"""The command line never shows a traceback: a bad flag value, an unusable output path or a
malformed input ends with one line ``litehit: error: ...`` naming the flag or file and exit 1
(argparse usage errors exit 2). Named cases first, then hypothesis throwing random argv at
replay, query, curve, misses, plot and policies on small cuts of the bundled traces, in process
(litehit.cli.main), bounded to about 30 s."""

from __future__ import annotations

import json
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest
from helpers import instance
from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st

from litehit.cli import main


@dataclass
class Run:
    code: int
    out: str
    err: str


def run_cli(argv: list[str], capsys: pytest.CaptureFixture[str]) -> Run:
    """main() in process, as the ``litehit`` entry point runs it (SystemExit included)."""
    capsys.readouterr()
    try:
        code = main(argv)
    except SystemExit as exc:  # argparse, or a message given to SystemExit (printed, exit 1)
        if exc.code is None or isinstance(exc.code, int):
            code = exc.code or 0
        else:
            print(exc.code, file=sys.stderr)
            code = 1
    out, err = capsys.readouterr()
    return Run(code, out, err)


def assert_clean(run: Run, argv: list[str]) -> None:
    """Exit 0, 1 (one error line) or 2 (argparse usage); never a traceback."""
    assert run.code in (0, 1, 2), (argv, run)
    assert "Traceback" not in run.err, (argv, run.err)
    errors = [line for line in run.err.splitlines() if line.startswith("litehit: error:")]
    if run.code == 1:
        assert len(errors) == 1 and run.err.rstrip("\n").splitlines()[-1] == errors[0], (argv, run.err)
    elif run.code == 2:
        assert "usage:" in run.err and run.err.rstrip("\n").splitlines()[-1].startswith("litehit"), (argv, run.err)
    else:
        assert errors == [], (argv, run.err)


@dataclass(frozen=True)
class Inputs:
    root: Path
    mooncake: Path
    publisher: Path
    synthetic: Path
    config: Path
    facts: Path
    deep: Path
    deep_trace: Path
    empty: Path
    junk: Path
    existing: Path


def _cut(source: Path, target: Path, lines: int) -> Path:
    target.write_bytes(b"".join(source.read_bytes().splitlines(keepends=True)[:lines]))
    return target


@pytest.fixture(scope="module")
def inputs(tmp_path_factory: pytest.TempPathFactory, data_dir: Path) -> Inputs:
    root = tmp_path_factory.mktemp("cli-robustness")
    mooncake = _cut(data_dir / "conversation_trace.jsonl", root / "mooncake.jsonl", 150)
    out = root / "facts"
    assert main(["replay", str(mooncake), "-o", str(out), "--ttl-seconds", "0,60", "--extended"]) == 0
    config = root / "config.json"
    config.write_text(
        json.dumps(
            {
                "trace_file_path": str(mooncake),
                "output_result_path": str(root / "config-out"),
                "block_size": 512,
                "instance_groups": [{"name": "g"}],
                "instances": [instance("i", 512, group="g", sizes=(1 << 20,))],
            }
        )
    )
    (root / "deep.json").write_text("[" * 100_000 + "]" * 100_000)
    (root / "deep.jsonl").write_text(
        '{"timestamp": 1, "input_length": 600, "hash_ids": %s}\n' % ("[" * 5000 + "]" * 5000)
    )
    (root / "empty.jsonl").write_bytes(b"")
    (root / "junk.bin").write_bytes(bytes(range(256)) * 4)
    (root / "existing.txt").write_text("a file, not a directory\n")
    return Inputs(
        root=root,
        mooncake=mooncake,
        publisher=_cut(data_dir / "event_publisher.log", root / "publisher.log", 300),
        synthetic=_cut(data_dir / "synthetic_trace.jsonl", root / "synthetic.jsonl", 60),
        config=config,
        facts=out / "litehit_facts.csv",
        deep=root / "deep.json",
        deep_trace=root / "deep.jsonl",
        empty=root / "empty.jsonl",
        junk=root / "junk.bin",
        existing=root / "existing.txt",
    )


def error_line(run: Run) -> str:
    assert run.code == 1 and "Traceback" not in run.err, run
    return run.err.rstrip("\n").splitlines()[-1]


@pytest.mark.parametrize(
    ("flags", "message"),
    [
        (["--block-sizes", "abc"], "--block-sizes: expected comma separated positive integers (got 'abc')"),
        (["--block-sizes", "512,,1024"], "--block-sizes: expected comma separated positive integers"),
        (["--block-sizes", "0"], "--block-sizes: expected comma separated positive integers (got '0')"),
        (["--ttl-seconds", "x"], "--ttl-seconds: expected comma separated integers >= 0 (got 'x')"),
        (["--ttl-seconds", "-1"], "--ttl-seconds: expected comma separated integers >= 0 (got '-1')"),
        (["--block-size", "0"], "--block-size: must be a positive integer (got 0)"),
        (["--block-size", "-512"], "--block-size: must be a positive integer (got -512)"),
        (["--block-bytes", "0"], "--block-bytes: must be a positive integer (got 0)"),
    ],
)
@pytest.mark.parametrize("command", ["replay", "policies", "profile"])
def test_bad_shorthand_values_name_the_flag(
    inputs: Inputs, capsys: pytest.CaptureFixture[str], command: str, flags: list[str], message: str
) -> None:
    extra = ["--capacity-gb", "1"] if command == "policies" else []
    out = inputs.root / "never-written"
    line = error_line(run_cli([command, str(inputs.mooncake), *flags, *extra, "-o", str(out)], capsys))
    assert line.startswith("litehit: error: " + message), line
    assert not out.exists()


def test_unusable_output_directories(inputs: Inputs, capsys: pytest.CaptureFixture[str]) -> None:
    for argv, message in [
        (
            ["replay", str(inputs.mooncake), "-o", "/proc/litehit-x"],
            "cannot create the output directory /proc/litehit-x",
        ),
        (
            ["replay", str(inputs.mooncake), "-o", str(inputs.existing)],
            f"cannot create the output directory {inputs.existing}: a file of that name exists",
        ),
        (["plot", str(inputs.facts), "-o", "/proc/litehit-x"], "cannot create the output directory /proc/litehit-x"),
        (
            ["plot", str(inputs.facts), "-o", str(inputs.existing)],
            f"cannot create the output directory {inputs.existing}: a file of that name exists",
        ),
    ]:
        line = error_line(run_cli(argv, capsys))
        assert line.startswith("litehit: error: " + message), (argv, line)
    assert inputs.existing.read_text() == "a file, not a directory\n"


def test_deeply_nested_json_in_a_trace_or_config(inputs: Inputs, capsys: pytest.CaptureFixture[str]) -> None:
    line = error_line(run_cli(["replay", str(inputs.deep), "-o", str(inputs.root / "x")], capsys))
    assert line == f"litehit: error: {inputs.deep}:1: cannot detect the trace format: invalid JSON (nesting too deep)"
    line = error_line(run_cli(["replay", str(inputs.deep_trace), "-o", str(inputs.root / "x")], capsys))
    assert line.startswith(f"litehit: error: {inputs.deep_trace}:1: ") and "nesting too deep" in line
    config = inputs.root / "deep-config.json"
    config.write_text(inputs.config.read_text()[:-1] + ', "x": ' + "[" * 900 + "]" * 900 + "}")
    line = error_line(run_cli(["replay", str(config)], capsys))
    assert line == "litehit: error: x: unknown field nests deeper than 32 levels (got '<nested deeper than 32 levels>')"


# Random command lines

SOURCES = ["mooncake", "publisher", "synthetic", "config", "facts", "deep", "deep_trace", "empty", "junk", "missing"]
NUMBERS = st.one_of(
    st.integers(-3, 70_000).map(str),
    st.sampled_from(["0", "-1", "1e3", "abc", "", " 7", "9" * 30, "0x10", "512,1024", "nan", "inf"]),
)
LISTS = st.one_of(
    st.lists(st.integers(-2, 4096), min_size=1, max_size=3).map(lambda v: ",".join(map(str, v))),
    st.text(alphabet="0123456789,- ax", max_size=8),
)
CAPACITY = st.one_of(
    st.floats(min_value=-2, max_value=1e6, allow_nan=False).map(repr),
    st.sampled_from(["0", "-1", "inf", "-inf", "nan", "abc", "", "1e-300", "0x1", "1,2"]),
)
TARGETS = st.one_of(st.sampled_from(["0.9,0.99", "0", "1.5", "abc", "", ",", "nan", "1e-300"]), LISTS)


@st.composite
def command_lines(draw: st.DrawFn) -> tuple[str, list[str], str | None, str]:
    """(command, arguments, the source name or None, the -o kind)."""
    command = draw(st.sampled_from(["replay", "policies", "profile", "query", "curve", "misses", "plot"]))
    if command in ("replay", "policies", "profile"):
        source = draw(st.sampled_from(SOURCES))
    else:
        source = draw(st.sampled_from(["facts", "facts", "facts", "mooncake", "empty", "junk", "missing", "deep"]))
    args: list[str] = []

    def maybe(flag: str, values: st.SearchStrategy[str]) -> None:
        if draw(st.booleans()):
            args.extend([flag, draw(values)])

    if command in ("replay", "policies", "profile"):
        maybe("--format", st.sampled_from(["mooncake", "standard", "qwen_bailian", "publisher_log", "bogus"]))
        maybe("--block-size", NUMBERS)
        maybe("--block-sizes", LISTS)
        maybe("--ttl-seconds", LISTS)
        maybe("--block-bytes", NUMBERS)
        maybe("--workers", NUMBERS)
        if draw(st.booleans()):
            args.append(draw(st.sampled_from(["--prefix-hash", "--no-prefix-hash"])))
    if command == "replay" and draw(st.booleans()):
        args.append("--extended")
    if command == "policies":
        args += ["--capacity-gb", *draw(st.lists(CAPACITY, min_size=1, max_size=3))]
        maybe("--policies", st.sampled_from(["lru", "lru,fifo", "wa", "gdfs,lfu", "bogus", "", ","]))
        maybe("--wa-life-seconds", NUMBERS)
        maybe("--wa-refit-seconds", NUMBERS)
    if command in ("query", "misses") or (command == "plot" and draw(st.booleans())):
        args += ["--capacity-gb", *draw(st.lists(CAPACITY, min_size=1, max_size=3))]
    if command == "misses" and draw(st.booleans()):
        args.append("--json")
    if command == "curve":
        maybe("--targets", TARGETS)
    output = draw(st.sampled_from(["none", "new", "new.csv", "existing", "proc", "directory"]))
    if command == "plot" and output in ("none", "new.csv"):
        output = "new"
    return command, args, None if source == "missing" else source, output


def _output(kind: str, inputs: Inputs, n: int) -> list[str]:
    paths = {
        "new": str(inputs.root / f"out{n}"),
        "new.csv": str(inputs.root / f"out{n}.csv"),
        "existing": str(inputs.existing),
        "proc": "/proc/litehit-fuzz",
        "directory": str(inputs.root),
    }
    return [] if kind == "none" else ["-o", paths[kind]]


@settings(
    max_examples=300,
    deadline=None,
    derandomize=True,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(line=command_lines(), n=st.integers(0, 5))
def test_random_command_lines_never_show_a_traceback(
    inputs: Inputs,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
    line: tuple[str, list[str], str | None, str],
    n: int,
) -> None:
    monkeypatch.chdir(inputs.root)  # replay without -o writes ./litehit-out
    command, args, source, output = line
    path = str(getattr(inputs, source)) if source else str(inputs.root / "missing.jsonl")
    inputs.existing.write_text("a file, not a directory\n")  # a file output may have replaced it
    argv = [command, path, *args, *_output(output, inputs, n)]
    run = run_cli(argv, capsys)
    event(f"{command} exit {run.code}")
    assert_clean(run, argv)
