"""Operational records: when each periodic job last ran and how it went."""

from django.db import models


class JobRun(models.Model):
    class Status(models.TextChoices):
        RUNNING = "running", "Running"
        OK = "ok", "OK"
        FAILED = "failed", "Failed"

    job = models.CharField(max_length=40, db_index=True)
    status = models.CharField(max_length=10, choices=Status.choices, default=Status.RUNNING)
    started_at = models.DateTimeField()
    finished_at = models.DateTimeField(null=True, blank=True)
    summary = models.JSONField(default=dict, blank=True)
    error = models.TextField(blank=True)
    # host:pid:start of the process running it, so a killed one is reaped (core/reaper.py); a
    # database default so rows written by older code or by hand still insert.
    owner = models.CharField(max_length=120, blank=True, default="", db_default="")

    class Meta:
        # The table keeps the name it had when the model lived in the `arena` app (moved here by
        # state-only migrations, so existing databases keep their rows).
        db_table = "arena_jobrun"
        indexes = [models.Index(fields=["job", "status", "-finished_at"], name="jobrun_latest_idx")]
        ordering = ["-started_at"]
