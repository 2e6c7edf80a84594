"""The commands of ``litehit``: each one's module of litehit.cli (which declares its flags with
``add_parser`` or ``add_parsers``) and its one-line help, declared once. ``litehit --help`` lists
them from here and ``litehit COMMAND`` imports only that command's module, so neither loads the
other commands' dependencies (tests/litehit/test_cli_startup.py holds the modules to this table)."""

from __future__ import annotations

from litehit.jobs.kinds import Kind

__all__ = ["COMMANDS", "COMMAND_HELP"]

KINDS = [k.value for k in Kind]

COMMANDS: dict[str, tuple[str, str]] = {
    "replay": ("replay", "replay a trace once and publish its facts (litehit_facts.csv)"),
    "query": ("query", "hit rates of published facts at any capacities"),
    "curve": ("analysis", "the exact hit-rate curve over all capacities, and the capacity for target hit rates"),
    "misses": ("analysis", "where the input tokens go: hit, evicted, cold, expired, incomplete tail"),
    "plot": ("analysis", "PNG and SVG plots: hit rate vs capacity, and miss attribution"),
    "policies": ("policies", "hit ratios of LRU, FIFO, LFU, GDFS and the workload-aware policy at fixed capacities"),
    "window": ("window", "size an eviction-attribution window (evicted vs no_match misses) from a replay"),
    "attribution": ("attribution", "live miss attribution without a server: replay an event log, record ZMQ KV events"),
    "profile": ("profile", "profile the workload: ideal hit ratio, skew, reuse times, lifespans, capacity needed"),
    "tiers": ("tiers", "hit rates per cache tier (HBM / DRAM / SSD), exactly, with prefill estimates"),
    "plan": ("tiers", "the cheapest cache tiers reaching a target, and the cost frontier"),
    "routes": (
        "routes",
        "hit rate and load balance of N replicas under round-robin, random, session, prefix-hash routing",
    ),
    "demo": ("demo", "replay the bundled Mooncake trace and query it (no servers needed)"),
    "jobs": (
        "jobs",
        "list past jobs of every kind: " + ", ".join(KINDS) + " (the embedded database, or LITEHIT_DATABASE_URL)",
    ),
    "migrate": ("migrate", "create or upgrade the database schema (the same as `alembic upgrade head` in a checkout)"),
    "models": ("models", "the --model presets: KV-cache shape and bytes per token"),
    "report": ("report", "one self-contained HTML page: curves, table, targets, miss attribution, provenance"),
}
"""command -> (its module in litehit.cli, its help), in the order ``litehit --help`` lists them."""

COMMAND_HELP = {name: text for name, (_, text) in COMMANDS.items()}
