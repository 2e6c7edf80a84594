"""LiteHit jobs: trace readers, the replay runner, facts I/O, queries, storage and Celery tasks."""
