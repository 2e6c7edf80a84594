"""LiteHit: exact LRU prefix-hit analysis of KV-cache block traces, the domain library and the CLI.

The layers point one way: ``core_c`` (C engine) <- ``litehit`` (this package: spec, traces, replay,
facts, query, curve, misses, plots, storage, online engine, database, CLI) <- ``worker`` (Celery)
<- ``api`` (HTTP). Nothing here imports ``worker`` or ``api``.
"""

__all__ = ["package_version"]


def package_version() -> str:
    """The installed litehit version (`litehit --version`, the report's provenance)."""
    from importlib.metadata import PackageNotFoundError, version  # about 20 ms: only when asked

    try:
        return version("litehit")
    except PackageNotFoundError:
        return "unknown"
