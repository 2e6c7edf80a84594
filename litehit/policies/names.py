"""The eviction policies' names: the one list the CLI, the API and every help text read (light: no
pydantic, no engine, so a command can declare its flags without loading either)."""

from __future__ import annotations

from typing import Literal, get_args

__all__ = ["POLICY_CHOICES", "POLICY_NAMES", "PolicyName"]

PolicyName = Literal["lru", "fifo", "lfu", "gdfs", "wa"]
POLICY_NAMES: tuple[PolicyName, ...] = get_args(PolicyName)
"""The eviction policies, in the order the CLI and the API list them. The C simulator's codes
(LH_POLICY_* in core_c/include/lh_policy.h, core_c.policy.POLICIES) are held equal to these by
tests/project/test_declarations.py."""
POLICY_CHOICES = ", ".join(POLICY_NAMES[:-1]) + " or " + POLICY_NAMES[-1]
