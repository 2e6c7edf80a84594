"""The Celery application. Importing it does not import the C engine: the API enqueues by task
name through a client app (``make_sender``), and only worker processes load worker.tasks."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from celery import Celery
from celery.signals import celeryd_init, worker_process_init, worker_shutdown

from litehit.db.session import dispose_engine
from litehit.settings import Settings, get_settings
from worker.metrics import serve_worker_metrics

__all__ = ["app", "enqueue", "make_celery", "make_sender"]


def make_celery(settings: Settings, *, include: list[str] | None = None) -> Celery:
    celery = Celery("litehit", broker=settings.broker_url, backend=settings.result_backend, include=include or [])
    celery.conf.update(
        task_serializer="json",
        result_serializer="json",
        accept_content=["json"],
        task_default_queue=settings.queue,
        task_acks_late=True,  # tasks are idempotent: a redelivery after a crash is harmless
        task_reject_on_worker_lost=True,  # a killed child's message is requeued (attempts are bounded in SQL)
        worker_prefetch_multiplier=1,
        task_track_started=True,
        task_soft_time_limit=settings.task_soft_time_limit_s,
        task_time_limit=settings.task_soft_time_limit_s + 600,
        broker_transport_options={"visibility_timeout": settings.visibility_timeout_s},
        result_backend_transport_options={"visibility_timeout": settings.visibility_timeout_s},
        result_expires=24 * 3600,
        broker_connection_retry_on_startup=True,
        broker_connection_max_retries=None,  # a restarted broker is waited for, not fatal
        worker_max_tasks_per_child=500,  # recycle children now and then: a cheap guard against leaks
        worker_hijack_root_logger=False,
        worker_cancel_long_running_tasks_on_connection_loss=False,
    )
    return celery


def make_sender(settings: Settings) -> Callable[..., None]:
    """enqueue(task_name, *args) for a process that only sends (the API, the sweep)."""
    client = make_celery(settings)

    def enqueue(task: str, *args: Any) -> None:
        client.send_task(task, args=list(args), queue=settings.queue)

    return enqueue


app = make_celery(get_settings(), include=["worker.tasks"])


@worker_process_init.connect
def _fresh_engine(**_: Any) -> None:
    """Database connections are never shared across fork."""
    dispose_engine()


@celeryd_init.connect
def _serve_metrics(**_: Any) -> None:
    """The worker's Prometheus metrics (worker/metrics.py) when LITEHIT_WORKER_METRICS_PORT is set:
    set up in the main process before the pool forks its children."""
    settings = get_settings()
    if settings.worker_metrics_port:
        server = serve_worker_metrics(settings)
        worker_shutdown.connect(lambda **_: server.close(), weak=False)


def enqueue(task: str, *args: Any) -> None:
    """Sends a task by name to the LiteHit queue (commit the job row first)."""
    app.send_task(task, args=list(args), queue=get_settings().queue)
