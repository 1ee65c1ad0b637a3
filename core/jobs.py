"""Record each periodic job's run so /healthz and staff can see when it last succeeded."""

from contextlib import contextmanager

from django.utils import timezone

from core.models import JobRun


@contextmanager
def job_run(job: str):
    """Yield a dict the job fills with its summary; the row ends ok, or failed with the error."""
    run = JobRun.objects.create(job=job, started_at=timezone.now())
    summary: dict = {}
    try:
        yield summary
    except Exception as exc:
        JobRun.objects.filter(pk=run.pk).update(
            status=JobRun.Status.FAILED,
            finished_at=timezone.now(),
            summary=summary,
            error=f"{type(exc).__name__}: {exc}"[:2000],
        )
        raise
    JobRun.objects.filter(pk=run.pk).update(
        status=JobRun.Status.OK, finished_at=timezone.now(), summary=summary
    )
