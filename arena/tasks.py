"""Site-wide periodic jobs that belong to no single app."""

from celery import shared_task

from core.jobs import job_run


@shared_task(name="arena.tasks.retention")
def retention() -> int:
    from cohorts.retention import rollup_snapshots
    from scoring.services import prune_runs

    with job_run("retention") as summary:
        summary["deleted"] = rollup_snapshots()
        summary["score_runs_deleted"] = prune_runs()
        return summary["deleted"]


@shared_task(name="arena.tasks.heartbeat", ignore_result=True)
def heartbeat() -> None:
    """Every minute from beat: proves to /healthz that a worker consumes the queue."""
    from arena.health import record_heartbeat

    record_heartbeat()
