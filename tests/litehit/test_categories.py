"""Request categories (litehit/categories.py) against a naive per-row reading of the JSON."""

from __future__ import annotations

import json
import random

import numpy as np

from core_c.scan import TraceScanner
from litehit.categories import CategoryTable, turn_bucket
from litehit.spec import TraceFormat


def naive_category(fmt: TraceFormat, row: dict[str, object]) -> str:
    if fmt is TraceFormat.QWEN_BAILIAN:
        kind = row.get("type")
        turn = row.get("turn")
        bucket = "1" if not isinstance(turn, int) or turn <= 1 else "2" if turn == 2 else "3+"
        return f"{kind if isinstance(kind, str) else 'untyped'}-{bucket}"
    if fmt is TraceFormat.STANDARD:
        category = row.get("category")
        return category if isinstance(category, str) else "all"
    return "all"


def categories_of(fmt: TraceFormat, lines: list[str], chunk_rows: int) -> list[str]:
    """Scans the lines in chunks (fresh label tables per chunk) and names every row's category."""
    table = CategoryTable()
    scanner = TraceScanner()
    names: list[str] = []
    for start in range(0, len(lines), chunk_rows):
        text = "".join(lines[start : start + chunk_rows]).encode()
        rows = scanner.scan(fmt.value, text, start + 1, 16)
        assert rows.error == ""
        names += [table.names[i] for i in table.ids_for(rows, fmt)]
    # ids follow the order of first appearance
    firsts = list(dict.fromkeys(names))
    assert table.names == firsts
    return names


def test_turn_buckets() -> None:
    assert [turn_bucket(t) for t in [0, 1, 2, 3, 4, 99]] == ["1", "1", "2", "3+", "3+", "3+"]


def test_qwen_categories_match_a_naive_reading() -> None:
    rng = random.Random(7)
    lines, rows = [], []
    for i in range(500):
        row: dict[str, object] = {"chat_id": i, "timestamp": i * 0.5, "input_length": 32, "hash_ids": [1, 2]}
        kind = rng.choice(["text", "image", "file", None])
        if kind is not None:
            row["type"] = kind
        turn = rng.choice([None, 1, 2, 3, 7])
        if turn is not None:
            row["turn"] = turn
        rows.append(row)
        lines.append(json.dumps(row) + "\n")
    want = [naive_category(TraceFormat.QWEN_BAILIAN, row) for row in rows]
    for chunk_rows in (1, 7, 500):
        assert categories_of(TraceFormat.QWEN_BAILIAN, lines, chunk_rows) == want


def test_mooncake_rows_are_all_one_category() -> None:
    lines = [json.dumps({"timestamp": i, "input_length": 16, "hash_ids": [i]}) + "\n" for i in range(20)]
    assert categories_of(TraceFormat.MOONCAKE, lines, 6) == ["all"] * 20


def test_a_table_restored_from_names_keeps_the_ids() -> None:
    table = CategoryTable(["text-1", "image-2"])
    assert table.id_of("image-2") == 1
    assert table.id_of("text-3+") == 2
    assert np.array_equal(table.names, ["text-1", "image-2", "text-3+"])


def test_standard_categories_match_a_naive_reading() -> None:
    rng = random.Random(11)
    lines, rows = [], []
    for i in range(300):
        row: dict[str, object] = {
            "type": rng.choice(["get", "request", "write"]),
            "instance_id": "i1",
            "timestamp_ns": i + 1,
            "keys": [i],
            "input_len": 16,
        }
        category = rng.choice(["chat", "agent", "search", None, "absent"])
        if category != "absent":
            row["category"] = category
        rows.append(row)
        lines.append(json.dumps(row) + "\n")
    want = [naive_category(TraceFormat.STANDARD, row) for row in rows]
    for chunk_rows in (1, 13, 300):
        assert categories_of(TraceFormat.STANDARD, lines, chunk_rows) == want


def test_a_non_string_standard_category_is_a_row_error() -> None:
    text = b'{"type":"get","instance_id":"i","timestamp_ns":5,"keys":[1],"input_len":16,"category":3}\n'
    rows = TraceScanner().scan("standard", text, 1, 16)
    assert rows.error_line == 1
    assert "category must be a string" in rows.error
