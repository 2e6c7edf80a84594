"""Cache tiers (issue 21): the exact split of every request's hits across HBM / DRAM / SSD-like
tiers from the facts alone, the prefill-time model, and the planner.

Under LRU a block's tier is its depth in the one recency order, so the projector's hit counts at
cumulative capacities give every tier's hits (decision 8 in DECISIONS.md); nothing is replayed.

- ``config``: capacities, ranges, tier names and assignments as the CLI and the API spell them.
- ``hardware``: GPU and link presets, the spare HBM of a model on a GPU.
- ``lanes``: the facts of every lane, loaded once.
- ``split``: per-request blocks served by each tier, through the projector (lh_tiers.c).
- ``prefill``: the documented prefill-time model and its statistics.
- ``document``: tiers.json, one document per split.
- ``planner``: the cheapest tiers reaching a target, and the cost frontier (plan.json).
- ``categories``, ``plots``: the trace's request categories, the figures.
"""
