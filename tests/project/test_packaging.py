"""pyproject.toml lists the packages instead of discovering them; these tests keep that list whole.

A package left off the list, or a migration not covered by package-data, is missing from the
wheel although every test of the checkout passes (scripts/wheel-check catches it end to end).
The SCHEMA_HEAD constant is compared with the migrations in test_service_robustness.py.
"""

from __future__ import annotations

import tomllib
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]
SOURCE_DIRS = ("core_c", "litehit", "worker", "api", "migrations")
SKIPPED_DIRS = {"tests", "build", "dist", "__pycache__"}


def setuptools_config(root: Path) -> dict[str, Any]:
    config: dict[str, Any] = tomllib.loads((root / "pyproject.toml").read_text())["tool"]["setuptools"]
    return config


def package_dir(package: str, mapping: dict[str, str]) -> str:
    """The folder of a package, relative to the project root, as setuptools finds it: the
    longest mapped parent package, else the dotted path."""
    parts = package.split(".")
    for n in range(len(parts), 0, -1):
        prefix = ".".join(parts[:n])
        if prefix in mapping:
            return "/".join([mapping[prefix], *parts[n:]])
    return "/".join(parts)


def package_folders(root: Path) -> set[str]:
    """Every folder with an __init__.py in the source folders (not tests, not build output)."""
    found = set()
    for top in SOURCE_DIRS:
        for init in (root / top).rglob("__init__.py"):
            folder = init.parent.relative_to(root)
            if not SKIPPED_DIRS & set(folder.parts) and not any(p.endswith(".egg-info") for p in folder.parts):
                found.add(folder.as_posix())
    return found


def test_every_package_folder_is_listed_and_every_listed_package_exists() -> None:
    config = setuptools_config(ROOT)
    mapping = config.get("package-dir", {})
    listed = {package_dir(p, mapping): p for p in config["packages"]}
    assert len(listed) == len(config["packages"]), "a package is listed twice"
    unlisted = sorted(package_folders(ROOT) - listed.keys())
    assert unlisted == [], f"folders with an __init__.py missing from [tool.setuptools] packages: {unlisted}"
    data_only = set(config["package-data"]) - {p for d, p in listed.items() if (ROOT / d / "__init__.py").is_file()}
    missing = sorted(
        f"{p} ({d})" for d, p in listed.items() if not (ROOT / d / "__init__.py").is_file() and p not in data_only
    )
    assert missing == [], f"listed packages without an __init__.py (nor data of their own): {missing}"


def test_migrations_ship_inside_the_domain_package() -> None:
    config = setuptools_config(ROOT)
    assert config["package-dir"] == {"litehit.migrations": "migrations"}
    data = config["package-data"]
    shipped = {f for pattern in data["litehit.migrations"] for f in (ROOT / "migrations").glob(pattern)}
    shipped |= {
        f for pattern in data["litehit.migrations.versions"] for f in (ROOT / "migrations/versions").glob(pattern)
    }
    versions = sorted((ROOT / "migrations" / "versions").glob("*.py"))
    assert versions, "no migrations found"
    assert [v.name for v in versions if v not in shipped] == []
    assert ROOT / "migrations" / "script.py.mako" in shipped


def test_every_package_data_pattern_matches_a_file() -> None:
    """A pattern that matches nothing is a file that moved or was renamed: it would silently not ship."""
    config = setuptools_config(ROOT)
    mapping = config.get("package-dir", {})
    empty = [
        f"{package}: {pattern}"
        for package, patterns in config["package-data"].items()
        for pattern in patterns
        if not any((ROOT / package_dir(package, mapping)).glob(pattern))
    ]
    assert empty == []


def test_package_dir_follows_the_setuptools_mapping() -> None:
    mapping = {"litehit.migrations": "migrations"}
    assert package_dir("litehit.migrations", mapping) == "migrations"
    assert package_dir("litehit.migrations.versions", mapping) == "migrations/versions"
    assert package_dir("litehit.db", mapping) == "litehit/db"
    assert package_dir("api", mapping) == "api"


def test_an_unlisted_package_folder_is_found(tmp_path: Path) -> None:
    for folder in ["litehit", "litehit/new", "litehit/tests", "worker/build/lib", "migrations"]:
        (tmp_path / folder).mkdir(parents=True)
        (tmp_path / folder / "__init__.py").write_text("")
    assert package_folders(tmp_path) == {"litehit", "litehit/new", "migrations"}


def test_the_installed_version_is_the_one_the_package_states() -> None:
    """`litehit --version` and the report print litehit.__version__ without importlib.metadata;
    pyproject.toml's dynamic version reads the same attribute, so an install cannot disagree."""
    from importlib.metadata import version

    import litehit

    project = tomllib.loads((ROOT / "pyproject.toml").read_text())
    assert "version" not in project["project"] and project["project"]["dynamic"] == ["version"]
    assert project["tool"]["setuptools"]["dynamic"]["version"] == {"attr": "litehit.__version__"}
    assert litehit.package_version() == litehit.__version__ == version("litehit")
