"""The Celery side of LiteHit: the app, thin tasks, job stages and their state machine, recovery."""
