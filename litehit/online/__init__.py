"""Online mode: live per-instance hit rates at configured capacities (the seed's Online path).

One owner process per shard holds the LiteHit cores of its instances: its logic is
litehit/online/owner.py (ShardOwner); api/online.py is the thin HTTP app around it.
"""
