"""The bounds of every request: names as wide as their SQL columns, lists as long as any real use
needs. The service (the API and the owners) and the CLI check the same ones, in milliseconds, so
that an absurd request is a 422 naming the field and the limit, never a stall or a 500. README
("Limits") lists them."""

from __future__ import annotations

__all__ = [
    "BATCH_MAX",
    "CAPACITIES_MAX",
    "GROUPS_MAX",
    "ISSUES_SHOWN",
    "LANES_MAX",
    "NAME_MAX",
    "SPECS_MAX",
    "TARGETS_MAX",
]

NAME_MAX = 255
"""Characters of a name or an id (an instance, a group, a worker): the width of their SQL columns."""
LANES_MAX = 1024
"""Lanes of one config: its instances, and the block sizes x TTLs of a shorthand."""
GROUPS_MAX = 1024
"""Instance groups of one config."""
SPECS_MAX = 256
"""Location specs and spec groups of one instance, spec names of one spec group."""
CAPACITIES_MAX = 256
"""Capacities of one query or online group (a policy sweep takes 64 at most)."""
TARGETS_MAX = 64
"""Target fractions of one query."""
BATCH_MAX = 10_000
"""Requests of one online batch, lookups of one attribution batch."""
ISSUES_SHOWN = 20
"""Config errors list this many issues at most (then how many more there are)."""
