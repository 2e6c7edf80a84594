"""The layers point one way, in code: core_c <- litehit <- worker <- api.

Every import statement of every module is read with ``ast`` (also imports inside functions and
under ``if TYPE_CHECKING:``, relative imports resolved, and ``importlib.import_module("...")``
with a literal name), and an import of a higher layer from a lower one is an error.
"""

from __future__ import annotations

import ast
import tomllib
from collections.abc import Iterator
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]

# Lowest first. migrations/ ships inside the domain package as litehit.migrations.
LAYERS = ("core_c", "litehit", "worker", "api")
SOURCE_DIRS = {
    "core_c": "core_c",
    "litehit": "litehit",
    "worker": "worker",
    "api": "api",
    "migrations": "litehit.migrations",
}
SKIPPED_DIRS = {"tests", "build", "__pycache__"}


def module_name(path: Path, directory: Path, package: str) -> str:
    """The dotted name of the module in `path` (a file under `directory`, which is `package`)."""
    parts = [*package.split("."), *path.relative_to(directory).with_suffix("").parts]
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def resolve(module: str, is_package: bool, level: int, target: str | None) -> str:
    """The absolute name of ``from <level dots><target> import ...`` written in `module`."""
    if level == 0:
        return target or ""
    base = module.split(".") if is_package else module.split(".")[:-1]
    base = base[: len(base) - (level - 1)] if level > 1 else base
    return ".".join([*base, target] if target else base)


def imports(source: str, module: str, is_package: bool) -> Iterator[tuple[int, str]]:
    """(line, absolute module name) of every import in the source, wherever it stands."""
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            for alias in node.names:
                yield node.lineno, alias.name
        elif isinstance(node, ast.ImportFrom):
            base = resolve(module, is_package, node.level, node.module)
            if node.module is None:  # from . import name: each name may be a module
                for alias in node.names:
                    yield node.lineno, f"{base}.{alias.name}"
            else:
                yield node.lineno, base
        elif (
            isinstance(node, ast.Call)
            and isinstance(node.func, ast.Attribute | ast.Name)
            and (node.func.attr if isinstance(node.func, ast.Attribute) else node.func.id) == "import_module"
            and node.args
            and isinstance(node.args[0], ast.Constant)
            and isinstance(node.args[0].value, str)
        ):
            yield node.lineno, node.args[0].value


def layer_of(module: str) -> str | None:
    top = module.split(".", 1)[0]
    return top if top in LAYERS else None


def layer_violations(root: Path) -> list[str]:
    """``file:line: <module> imports <name> (<layer> must not import <higher layer>)`` for every
    import against the direction, in the source folders of `root`."""
    found = []
    for folder, package in SOURCE_DIRS.items():
        directory = root / folder
        for path in sorted(directory.rglob("*.py")):
            if SKIPPED_DIRS & set(path.relative_to(directory).parts[:-1]):
                continue
            module = module_name(path, directory, package)
            own = LAYERS.index(module.split(".", 1)[0])
            for line, name in imports(path.read_text(encoding="utf-8"), module, path.name == "__init__.py"):
                target = layer_of(name)
                if target is not None and LAYERS.index(target) > own:
                    rel = path.relative_to(root)
                    found.append(f"{rel}:{line}: {module} imports {name} ({LAYERS[own]} must not import {target})")
    return found


def test_no_layer_imports_a_layer_above_it() -> None:
    violations = layer_violations(ROOT)
    assert violations == [], "imports against the layer direction core_c <- litehit <- worker <- api:\n" + "\n".join(
        violations
    )


def test_the_checker_finds_every_kind_of_upward_import(tmp_path: Path) -> None:
    files = {
        "core_c/__init__.py": "",
        "core_c/engine.py": "import numpy\n\ndef f():\n    from litehit import spec\n",
        "litehit/__init__.py": "",
        "litehit/db/__init__.py": "from . import models\n",
        "litehit/db/models.py": "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    import api.main\n",
        "litehit/cli/__init__.py": "import importlib\nimportlib.import_module('worker.tasks')\nfrom ..db import models\n",
        "worker/__init__.py": "from api.routes import replays\nimport core_c, litehit.spec\n",
        "worker/jobs/tests/test_x.py": "import api\n",  # tests are not part of the layers
        "api/__init__.py": "import worker, litehit, core_c\n",
        "migrations/env.py": "from litehit.db.models import Base\nimport worker.celery_app\n",
    }
    for name, text in files.items():
        (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / name).write_text(text)
    assert layer_violations(tmp_path) == [
        "core_c/engine.py:4: core_c.engine imports litehit (core_c must not import litehit)",
        "litehit/cli/__init__.py:2: litehit.cli imports worker.tasks (litehit must not import worker)",
        "litehit/db/models.py:3: litehit.db.models imports api.main (litehit must not import api)",
        "worker/__init__.py:1: worker imports api.routes (worker must not import api)",
        "migrations/env.py:2: litehit.migrations.env imports worker.celery_app (litehit must not import worker)",
    ]


def test_relative_imports_resolve_against_the_importing_module() -> None:
    assert resolve("litehit.cli.replay", False, 1, "query") == "litehit.cli.query"
    assert resolve("litehit.cli.replay", False, 2, "db.models") == "litehit.db.models"
    assert resolve("litehit.cli", True, 1, "replay") == "litehit.cli.replay"
    assert resolve("litehit.cli", True, 2, None) == "litehit"
    assert resolve("worker.jobs.state", False, 0, "api.main") == "api.main"


def test_the_console_script_is_the_domain_cli() -> None:
    scripts = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["scripts"]
    assert scripts == {"litehit": "litehit.cli:main"}
    from litehit.cli import main

    assert callable(main)


def cli_imports_from_the_domain(root: Path) -> list[str]:
    """``file:line: <module> imports <name>`` for every import of litehit.cli by a domain module
    outside litehit.cli (the domain never depends on its command line)."""
    found = []
    directory = root / "litehit"
    for path in sorted(directory.rglob("*.py")):
        module = module_name(path, directory, "litehit")
        if module == "litehit.cli" or module.startswith("litehit.cli."):
            continue
        for line, name in imports(path.read_text(encoding="utf-8"), module, path.name == "__init__.py"):
            if name == "litehit.cli" or name.startswith("litehit.cli."):
                found.append(f"{path.relative_to(root)}:{line}: {module} imports {name}")
    return found


def test_the_domain_never_imports_its_cli(tmp_path: Path) -> None:
    assert cli_imports_from_the_domain(ROOT) == []
    (tmp_path / "litehit" / "cli").mkdir(parents=True)
    (tmp_path / "litehit" / "report.py").write_text("from litehit.cli.lane_summary import x\n")
    (tmp_path / "litehit" / "cli" / "replay.py").write_text("from litehit.cli import progress\n")
    assert cli_imports_from_the_domain(tmp_path) == [
        "litehit/report.py:1: litehit.report imports litehit.cli.lane_summary"
    ]


HEAVY = ("core_c", "numpy", "matplotlib")


def test_the_api_process_loads_no_engine_numpy_or_matplotlib(tmp_path: Path) -> None:
    """A fresh interpreter imports api.main, builds the app with every route of every job kind and
    its OpenAPI document: the C engine, numpy and matplotlib stay unloaded (only workers run
    jobs, draw plots and build report pages)."""
    import subprocess
    import sys

    script = (
        "import sys\n"
        "import api.main\n"
        "from litehit.settings import Settings\n"
        f"app = api.main.create_app(Settings(home={str(tmp_path)!r}), enqueue=lambda *a: None)\n"
        "app.openapi()\n"
        f"print(sorted(m for m in sys.modules if m.split('.')[0] in {HEAVY!r}))\n"
    )
    run = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, cwd=ROOT, check=False)
    assert run.returncode == 0, run.stderr
    assert run.stdout.strip() == "[]"


def test_worker_is_the_celery_adapter_only() -> None:
    """worker/ holds the Celery app and its signals, the tasks made from the registry and the
    worker's metrics: no job logic (submission, stages, state, recovery live in litehit.jobs)."""
    modules = sorted(p.name for p in (ROOT / "worker").glob("*.py"))
    assert modules == ["__init__.py", "celery_app.py", "metrics.py", "tasks.py"]
    assert not [p for p in (ROOT / "worker").iterdir() if p.is_dir() and p.name != "__pycache__"]
