"""The trace formats of the C scanner's table (core_c/src/lh_trace_format.c), in plain Python.

Processes that load no C engine (the API) still detect a trace's format, know its default trace
block and whether its rows carry instance ids: they read this table. The C table stays the one
declaration; tests/litehit/test_format_table.py holds this copy equal to it field by field
(through core_c.scan.TRACE_FORMATS), so the two cannot drift.
"""

from __future__ import annotations

from collections.abc import Collection
from dataclasses import dataclass

__all__ = ["DEFAULT_TRACE_BLOCK", "FORMATS", "INSTANCELESS", "FormatEntry", "format_of_keys"]


@dataclass(frozen=True, slots=True)
class FormatEntry:
    name: str  # "standard", "mooncake", "qwen_bailian", "publisher_log"
    default_trace_block: int  # the trace's tokens per block when the user gives none
    instanceless: bool  # rows carry no instance id
    detect_keys: tuple[str, ...]  # a row of this format has all these top-level keys
    detect_priority: int  # detection tries formats in ascending priority


FORMATS: tuple[FormatEntry, ...] = (
    FormatEntry("qwen_bailian", 16, True, ("hash_ids", "chat_id"), 1),
    FormatEntry("mooncake", 512, True, ("hash_ids",), 2),
    FormatEntry("publisher_log", 16, False, ("trigger_time_us", "source"), 3),
    FormatEntry("standard", 256, False, ("type", "instance_id"), 4),
)
"""Every format, in detection order (ascending detect_priority)."""

DEFAULT_TRACE_BLOCK = {f.name: f.default_trace_block for f in FORMATS}
INSTANCELESS = frozenset(f.name for f in FORMATS if f.instanceless)


def format_of_keys(keys: Collection[str]) -> str | None:
    """The name of the first format (in detection order) whose detect_keys are all among the
    top-level keys of a parsed row, or None when no format matches."""
    for fmt in FORMATS:
        if all(key in keys for key in fmt.detect_keys):
            return fmt.name
    return None
