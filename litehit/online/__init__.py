"""Online mode: live per-instance hit rates at configured capacities (the seed's Online path).

One owner process per shard holds the LiteHit cores of its instances; see api/online.py.
"""
