"""Record each periodic job's run so /healthz and staff can see when it last succeeded."""

from contextlib import contextmanager
from datetime import timedelta

from core import clock
from core.models import JobRun
from core.reaper import owner_token, reap

# No periodic job runs this long; a row still "running" after it belongs to a dead process.
JOB_MAX_AGE = timedelta(hours=12)


@contextmanager
def job_run(job: str):
    """Yield a dict the job fills with its summary; the row ends ok, or failed with the error.
    Runs of killed processes are reaped first (marked failed, not "running" for ever)."""
    reap_stale_jobs()
    run = JobRun.objects.create(job=job, started_at=clock.now(), owner=owner_token())
    summary: dict = {}
    try:
        yield summary
    except Exception as exc:
        JobRun.objects.filter(pk=run.pk).update(
            status=JobRun.Status.FAILED,
            finished_at=clock.now(),
            summary=summary,
            error=f"{type(exc).__name__}: {exc}"[:2000],
        )
        raise
    JobRun.objects.filter(pk=run.pk).update(
        status=JobRun.Status.OK, finished_at=clock.now(), summary=summary
    )


def reap_stale_jobs() -> int:
    running = JobRun.objects.filter(status=JobRun.Status.RUNNING)
    return reap(running, failed_status=JobRun.Status.FAILED, max_age=JOB_MAX_AGE, what="job run")
