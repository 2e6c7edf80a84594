"""core_c: the LiteHit C engine behind a small typed Python API.

- ``Lane``: the capacity-independent lane core (exact LRU order, prefix hits, optional TTL);
  ``LaneViews``: one lane replayed for several TTLs at once.
- ``prefix_hash`` / ``prefix_hash_next`` / ``normalize`` / ``normalize_batch``: preprocessing.
- ``project_blocks`` / ``project_bytes`` / ``project_infinite``: the only capacity -> hits code.
- ``PolicySim``: a fixed-capacity cache under an eviction policy (what-if; not a facts producer).
- ``ProfileRecorder``: what a workload profile is computed from, recorded alongside a lane.
- ``EvidenceSet``: one worker's eviction evidence for live miss attribution (no capacity: events).
- ``CoreError`` and subclasses: one per C status code.
"""

from core_c.errors import (
    STATUS_ERRORS,
    CoreError,
    CoreInvalidArgument,
    CoreMemoryError,
    CoreParseError,
    CoreRangeError,
)
from core_c.evidence import EvidenceSet, EvidenceStats
from core_c.lane import CUT_COLD, CUT_EXPIRED, CUT_NONE, MAX_VIEWS, BatchFacts, HitCurve, Lane, LaneStats, LaneViews
from core_c.policy import POLICIES, PolicySim, PolicySimStats
from core_c.preprocess import (
    NormalizedBatch,
    NormalizedRequest,
    normalize,
    normalize_batch,
    prefix_hash,
    prefix_hash_next,
)
from core_c.profile import ProfileArrays, ProfileRecorder, ProfileStats
from core_c.project import project_batch, project_blocks, project_bytes, project_infinite

__all__ = [
    "CUT_COLD",
    "CUT_EXPIRED",
    "CUT_NONE",
    "MAX_VIEWS",
    "POLICIES",
    "STATUS_ERRORS",
    "BatchFacts",
    "CoreError",
    "CoreInvalidArgument",
    "CoreMemoryError",
    "CoreParseError",
    "CoreRangeError",
    "EvidenceSet",
    "EvidenceStats",
    "HitCurve",
    "Lane",
    "LaneStats",
    "LaneViews",
    "NormalizedBatch",
    "NormalizedRequest",
    "PolicySim",
    "PolicySimStats",
    "ProfileArrays",
    "ProfileRecorder",
    "ProfileStats",
    "normalize",
    "normalize_batch",
    "prefix_hash",
    "prefix_hash_next",
    "project_batch",
    "project_blocks",
    "project_bytes",
    "project_infinite",
]
