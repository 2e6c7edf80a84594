"""one table for the parts of every job kind: the claim columns once, the kind's plan, progress and
result as JSON (lane_runs, sweep_runs, window_lanes and profile_lanes carried over, then dropped)

Revision ID: 0008
Revises: 0007

The JSON shapes written here are those of the kinds' models at this revision (litehit.jobs: each
kind's PartPlan and part result); a migration states them itself so that it never changes when
the models do.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

import sqlalchemy as sa
from alembic import op

revision = "0008"
down_revision = "0007"
branch_labels = None
depends_on = None

CLAIMS = ("state", "attempts", "worker", "error", "heartbeat_at", "started_at", "finished_at")
PARTS = sa.table(
    "job_parts",
    *(sa.column(name) for name in ("job_id", "part", "label", *CLAIMS)),
    sa.column("plan", sa.JSON()),
    sa.column("progress", sa.JSON()),
    sa.column("result", sa.JSON()),
)


def _claim_columns() -> list[sa.Column[Any]]:
    return [
        sa.Column("state", sa.String(length=16), nullable=False),
        sa.Column("attempts", sa.Integer(), nullable=False),
        sa.Column("worker", sa.String(length=255), nullable=True),
        sa.Column("error", sa.Text(), nullable=True),
        sa.Column("heartbeat_at", sa.DateTime(timezone=True), nullable=True),
        sa.Column("started_at", sa.DateTime(timezone=True), nullable=True),
        sa.Column("finished_at", sa.DateTime(timezone=True), nullable=True),
    ]


def _old_tables() -> dict[str, list[sa.Column[Any]]]:
    """The four part tables as revisions 0001-0005 made them (their own columns, then the claims)."""
    big, floating = sa.BigInteger(), sa.Float()
    return {
        "lane_runs": [
            sa.Column("job_id", sa.String(length=32), nullable=False),
            sa.Column("lane", sa.Integer(), nullable=False),
            sa.Column("instance_id", sa.String(length=255), nullable=False),
            sa.Column("requests_total", big, nullable=False),
            sa.Column("blocks_total", big, nullable=False),
            sa.Column("requests", big, nullable=False),
            sa.Column("blocks", big, nullable=False),
            sa.Column("unique_blocks", big, nullable=True),
            sa.Column("memory_bytes", big, nullable=True),
            sa.Column("expired_blocks", big, nullable=True),
        ],
        "sweep_runs": [
            sa.Column("job_id", sa.String(length=32), nullable=False),
            sa.Column("run", sa.Integer(), nullable=False),
            sa.Column("lane", sa.Integer(), nullable=False),
            sa.Column("instance_id", sa.String(length=255), nullable=False),
            sa.Column("policy", sa.String(length=16), nullable=False),
            sa.Column("slot", sa.Integer(), nullable=False),
            sa.Column("capacity_gb", floating, nullable=False),
            sa.Column("capacity_blocks", big, nullable=False),
            sa.Column("requests", big, nullable=False),
            sa.Column("hit_blocks", big, nullable=False),
            sa.Column("hit_tokens", big, nullable=False),
            sa.Column("input_tokens", big, nullable=False),
            sa.Column("hit_ratio", floating, nullable=True),
            sa.Column("evictions", big, nullable=False),
            sa.Column("details", sa.JSON(), nullable=False),
        ],
        "window_lanes": [
            sa.Column("job_id", sa.String(length=32), nullable=False),
            sa.Column("lane", sa.Integer(), nullable=False),
            sa.Column("instance_id", sa.String(length=255), nullable=False),
            sa.Column("capacity_blocks", big, nullable=False),
            sa.Column("requests", big, nullable=False),
            sa.Column("evictions", big, nullable=False),
            sa.Column("evicted", big, nullable=False),
            sa.Column("no_match", big, nullable=False),
            sa.Column("delay_count", big, nullable=False),
            sa.Column("delay_p50", floating, nullable=True),
            sa.Column("delay_p90", floating, nullable=True),
            sa.Column("delay_p99", floating, nullable=True),
            sa.Column("delay_p999", floating, nullable=True),
            sa.Column("delay_max", floating, nullable=True),
            sa.Column("window_s", floating, nullable=True),
            sa.Column("peak_evictions_per_s", big, nullable=True),
            sa.Column("memory_bytes", floating, nullable=True),
            sa.Column("result", sa.JSON(), nullable=False),
        ],
        "profile_lanes": [
            sa.Column("job_id", sa.String(length=32), nullable=False),
            sa.Column("lane", sa.Integer(), nullable=False),
            sa.Column("instance_id", sa.String(length=255), nullable=False),
            sa.Column("requests", big, nullable=False),
            sa.Column("result", sa.JSON(), nullable=False),
        ],
    }


KEY = {"lane_runs": "lane", "sweep_runs": "run", "window_lanes": "lane", "profile_lanes": "lane"}


def _rows(table: str) -> Iterator[dict[str, Any]]:
    columns = [c.name for c in _old_tables()[table]] + list(CLAIMS)
    old = sa.table(table, *(sa.column(c, sa.JSON()) if c in ("details", "result") else sa.column(c) for c in columns))
    for row in op.get_bind().execute(sa.select(old)).mappings():
        yield dict(row)


def _plan(row: dict[str, Any], **extra: Any) -> dict[str, Any]:
    return {"lane": row["lane"], "instance_id": row["instance_id"], "requests_total": 0, "blocks_total": 0, **extra}


def _lane_run(row: dict[str, Any]) -> dict[str, Any]:
    done = row["state"] == "succeeded"
    stats = ("requests", "blocks", "unique_blocks", "memory_bytes", "expired_blocks")
    return {
        "label": row["instance_id"],
        "plan": {**_plan(row), "requests_total": row["requests_total"], "blocks_total": row["blocks_total"]},
        "progress": {"requests": row["requests"], "blocks": row["blocks"]},
        "result": {k: row[k] for k in stats} if done else None,
    }


def _sweep_run(row: dict[str, Any]) -> dict[str, Any]:
    done = row["state"] == "succeeded"
    sums = ("requests", "hit_blocks", "hit_tokens", "input_tokens", "hit_ratio", "evictions")
    plan = _plan(row, run=row["run"], policy=row["policy"], slot=row["slot"])
    return {
        "label": str(row["run"]),
        "plan": {**plan, "capacity_gb": row["capacity_gb"], "capacity_blocks": row["capacity_blocks"]},
        "progress": {"requests": row["requests"]},
        "result": {**{k: row[k] for k in sums}, "details": row["details"] or {}} if done else None,
    }


def _window_lane(row: dict[str, Any]) -> dict[str, Any]:
    done = row["state"] == "succeeded"
    return {
        "label": row["instance_id"],
        "plan": _plan(row, capacity_blocks=row["capacity_blocks"]),
        "progress": {"requests": row["requests"]},
        "result": row["result"] if done else None,
    }


def _profile_lane(row: dict[str, Any]) -> dict[str, Any]:
    done = row["state"] == "succeeded"
    return {
        "label": row["instance_id"],
        "plan": _plan(row),
        "progress": {"requests": row["requests"]},
        "result": row["result"] if done else None,
    }


CARRY: dict[str, Callable[[dict[str, Any]], dict[str, Any]]] = {
    "lane_runs": _lane_run,
    "sweep_runs": _sweep_run,
    "window_lanes": _window_lane,
    "profile_lanes": _profile_lane,
}


def upgrade() -> None:
    op.create_table(
        "job_parts",
        sa.Column("job_id", sa.String(length=32), nullable=False),
        sa.Column("part", sa.Integer(), nullable=False),
        sa.Column("label", sa.String(length=255), nullable=False),
        *_claim_columns(),
        sa.Column("plan", sa.JSON(), nullable=False),
        sa.Column("progress", sa.JSON(), nullable=False),
        sa.Column("result", sa.JSON(), nullable=True),
        sa.ForeignKeyConstraint(["job_id"], ["jobs.id"], ondelete="CASCADE"),
        sa.PrimaryKeyConstraint("job_id", "part"),
    )
    for table, carry in CARRY.items():
        rows = [
            {"job_id": row["job_id"], "part": row[KEY[table]], **{c: row[c] for c in CLAIMS}, **carry(row)}
            for row in _rows(table)
        ]
        if rows:
            op.bulk_insert(PARTS, rows)  # type: ignore[arg-type]
        op.drop_table(table)


KIND_TABLE = {"replay": "lane_runs", "policy_sweep": "sweep_runs", "window": "window_lanes", "profile": "profile_lanes"}


def _back(table: str, part: dict[str, Any]) -> dict[str, Any]:
    """A job_parts row as the row of the old table of its kind (the downgrade)."""
    plan, progress, result = part["plan"] or {}, part["progress"] or {}, part["result"] or {}
    row: dict[str, Any] = {"job_id": part["job_id"], **{c: part[c] for c in CLAIMS}}
    row[KEY[table]] = part["part"]
    row["instance_id"] = plan.get("instance_id", part["label"])
    requests = result.get("requests", progress.get("requests", 0))
    if table == "lane_runs":
        row.update(
            requests_total=plan.get("requests_total", 0),
            blocks_total=plan.get("blocks_total", 0),
            requests=requests,
            blocks=result.get("blocks", progress.get("blocks", 0)),
            **{k: result.get(k) for k in ("unique_blocks", "memory_bytes", "expired_blocks")},
        )
    elif table == "sweep_runs":
        row.update(
            lane=plan.get("lane", 0),
            policy=plan.get("policy", ""),
            slot=plan.get("slot", 0),
            capacity_gb=plan.get("capacity_gb", 0.0),
            capacity_blocks=plan.get("capacity_blocks", 0),
            requests=requests,
            hit_ratio=result.get("hit_ratio"),
            details=result.get("details", {}),
            **{k: result.get(k, 0) for k in ("hit_blocks", "hit_tokens", "input_tokens", "evictions")},
        )
    elif table == "window_lanes":
        outcomes, delays = result.get("outcomes", {}), result.get("delay_s", {})
        row.update(
            capacity_blocks=plan.get("capacity_blocks", 0),
            requests=requests,
            evictions=result.get("evictions", 0),
            evicted=outcomes.get("evicted", 0),
            no_match=outcomes.get("no_match", 0),
            delay_count=delays.get("count", 0),
            **{f"delay_{q}": delays.get(q) for q in ("p50", "p90", "p99", "p999", "max")},
            window_s=result.get("window_s"),
            peak_evictions_per_s=result.get("peak_evictions_per_s"),
            memory_bytes=result.get("memory_bytes"),
            result=result,
        )
    else:
        row.update(requests=requests, result=result)
    return row


def downgrade() -> None:
    tables = {}
    for table, columns in _old_tables().items():
        key = KEY[table]
        tables[table] = op.create_table(
            table,
            *columns,
            *_claim_columns(),
            sa.ForeignKeyConstraint(["job_id"], ["jobs.id"], ondelete="CASCADE"),
            sa.PrimaryKeyConstraint("job_id", key),
        )
    jobs = sa.table("jobs", sa.column("id"), sa.column("kind"))
    query = sa.select(PARTS, jobs.c.kind).join(jobs, jobs.c.id == PARTS.c.job_id)
    moved: dict[str, list[dict[str, Any]]] = {t: [] for t in tables}
    for part in op.get_bind().execute(query).mappings():
        table = KIND_TABLE.get(part["kind"])
        if table is not None:  # a kind this revision did not have: its parts cannot go back
            moved[table].append(_back(table, dict(part)))
    for table, rows in moved.items():
        if rows:
            op.bulk_insert(tables[table], rows)
    op.drop_table("job_parts")
