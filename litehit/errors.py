"""Errors of LiteHit jobs, as a tree::

    LiteHitError                  base; str() is a one-line, user-facing reason
    +-- ConfigError               a replay/query spec is invalid: .issues = [(path, value, message)]
    +-- TraceError                a trace row is malformed: .path, .line, .message
    +-- ReplayError               a replay failed (fail-fast reasons of the original runner)
    |   +-- ReplayCancelled       its caller cancelled it
    +-- PublishError              the facts file could not be published atomically
    +-- FactsError                a facts file is malformed: .path, .line, .message
    +-- QueryError                a capacity query cannot be answered
    +-- StorageError              a user path escapes the storage root or is unusable
    +-- KVEventDecodeError        an engine's KV-event message (vLLM/SGLang ZMQ) is malformed
    +-- OnlineError               an online shard owner cannot serve a request
        +-- NotShardOwner         this process does not (or no longer) own the shard
        +-- WrongShard            the instance belongs to another shard
        +-- UnknownInstance       no online instance has this id
        +-- AlreadyRegistered     an online group or instance of this name exists

C core failures surface as core_c.CoreError (status + C message) and are wrapped where a job
reports them.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from litehit.limits import ISSUES_SHOWN

__all__ = [
    "ConfigError",
    "ConfigIssue",
    "FactsError",
    "KVEventDecodeError",
    "LiteHitError",
    "PublishError",
    "QueryError",
    "ReplayCancelled",
    "ReplayError",
    "StorageError",
    "TraceError",
]


class LiteHitError(Exception):
    """Base of every error a LiteHit job reports to its user."""


@dataclass(frozen=True, slots=True)
class ConfigIssue:
    path: str  # e.g. "instances[1].block_size"
    value: Any
    message: str

    def __str__(self) -> str:
        where = f"{self.path}: " if self.path else ""
        return f"{where}{self.message} (got {self.value!r})"


class ConfigError(LiteHitError):
    """A spec is invalid; every issue names the field path and the bad value."""

    def __init__(self, issues: list[ConfigIssue]) -> None:
        self.issues = issues[:ISSUES_SHOWN]  # a 100,000-element list of bad values is not 100,000 issues
        text = "; ".join(str(i) for i in self.issues)
        if len(issues) > ISSUES_SHOWN:
            text += f"; and {len(issues) - ISSUES_SHOWN} more issues"
        super().__init__(text)


class TraceError(LiteHitError):
    """A trace row cannot be read: names the file, the 1-based line (0 = the whole file) and
    the reason."""

    def __init__(self, path: str, line: int, message: str) -> None:
        self.path, self.line, self.message = path, line, message
        super().__init__(f"{path}:{line}: {message}" if line > 0 else f"{path}: {message}")


class ReplayError(LiteHitError):
    """A replay failed fast; nothing was published. Row-level reasons name the file and line in
    the text; ``path`` and ``line`` carry them for programs."""

    def __init__(self, reason: str, *, path: str | None = None, line: int | None = None) -> None:
        self.reason, self.path, self.line = reason, path, line
        super().__init__(reason)


class ReplayCancelled(ReplayError):
    """The replay was cancelled by its caller; nothing was published."""


class PublishError(LiteHitError):
    """The facts file could not be written or renamed into place; an older one is untouched."""


class FactsError(LiteHitError):
    """A facts file is malformed: names the file, the 1-based line (header = 1) and the reason."""

    def __init__(self, path: str, line: int, message: str) -> None:
        self.path, self.line, self.message = path, line, message
        where = f"{path}: " if path else ""
        super().__init__(f"{where}facts line {line}: {message}" if line else f"{where}{message}")


class QueryError(LiteHitError):
    """A capacity query cannot be answered (bad capacities, unreadable output...)."""


class StorageError(LiteHitError):
    """A user-supplied path is unusable or leaves the storage root."""


class KVEventDecodeError(LiteHitError):
    """A KV-event message from an engine (vLLM/SGLang ZMQ stream or replay) cannot be decoded;
    ``reason`` says what is wrong with it. The subscriber counts it and skips that batch."""

    def __init__(self, reason: str) -> None:
        self.reason = reason
        super().__init__(f"malformed KV-event message: {reason}")


class OnlineError(LiteHitError):
    """An online request that the owner of a shard cannot serve."""


class NotShardOwner(OnlineError):
    """This process does not own the shard (it lost its lease): it serves nothing until restarted."""


class WrongShard(OnlineError):
    """The instance belongs to another shard, so to another owner."""


class UnknownInstance(OnlineError):
    """No online instance is registered with this id."""


class AlreadyRegistered(OnlineError):
    """An online instance group or instance of this name exists already."""
