"""LiteHit: exact LRU prefix-hit analysis of KV-cache block traces, the domain library and the CLI.

The layers point one way: ``core_c`` (C engine) <- ``litehit`` (this package: spec, traces, replay,
facts, query, curve, misses, plots, storage, online engine, database, CLI) <- ``worker`` (Celery)
<- ``api`` (HTTP). Nothing here imports ``worker`` or ``api``.
"""

__all__ = ["__version__", "package_version"]

__version__ = "0.1.0"
"""The one place the version is written: pyproject.toml's dynamic version reads it, so the
installed distribution's version is this (tests/project/test_packaging.py)."""


def package_version() -> str:
    """The litehit version (`litehit --version`, the report's provenance), without asking
    importlib.metadata (50 ms of `litehit --version`)."""
    return __version__
