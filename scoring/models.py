"""Materialised scores: a ScoreRun and its leaderboard rows. Pages read these, never raw math."""

from functools import cached_property

from django.db import models

from scoring.stored import RowDetails, RunDetails


class ScoreRun(models.Model):
    class Scope(models.TextChoices):
        LIVE = "live", "Live"
        REPLAY = "replay", "Replay"
        DEMO = "demo", "Demo"
        REHEARSAL = "rehearsal", "Rehearsal"

    class Status(models.TextChoices):
        RUNNING = "running", "Running"
        DONE = "done", "Done"
        FAILED = "failed", "Failed"

    scope = models.CharField(max_length=10, choices=Scope.choices)
    status = models.CharField(max_length=10, choices=Status.choices, default=Status.RUNNING)
    as_of = models.DateTimeField()
    started_at = models.DateTimeField()
    finished_at = models.DateTimeField(null=True, blank=True)
    methodology_version = models.CharField(max_length=20)
    methodology_hash = models.CharField(max_length=64)
    engine_version = models.CharField(max_length=20)
    n_forecasts = models.PositiveIntegerField(default=0)
    n_resolved = models.PositiveIntegerField(default=0)
    # Run-wide results the pages draw: DM matrices, tournament tables, ... keyed by cohort id or "all".
    details = models.JSONField(default=dict, blank=True)
    error = models.TextField(blank=True)
    # host:pid:start of the process computing it, so a killed run is reaped (core/reaper.py).
    owner = models.CharField(max_length=120, blank=True, default="", db_default="")

    class Meta:
        indexes = [
            models.Index(fields=["scope", "status", "-finished_at"], name="scorerun_latest_idx")
        ]

    @cached_property
    def stored_details(self) -> RunDetails:
        """`details` read through its one typed reader."""
        return RunDetails.from_json(self.details)


class LeaderboardRow(models.Model):
    run = models.ForeignKey(ScoreRun, on_delete=models.CASCADE, related_name="rows")
    cohort = models.ForeignKey(
        "cohorts.Cohort",
        null=True,
        blank=True,
        on_delete=models.CASCADE,
        help_text="Null: all cohorts",
    )
    competitor = models.ForeignKey("agents.Competitor", on_delete=models.CASCADE)
    rank = models.PositiveIntegerField(null=True, blank=True)
    n_forecasts = models.PositiveIntegerField(default=0)
    n_resolved = models.PositiveIntegerField(default=0)
    brier = models.FloatField(null=True, blank=True)
    brier_lo = models.FloatField(null=True, blank=True)
    brier_hi = models.FloatField(null=True, blank=True)
    log_score = models.FloatField(null=True, blank=True)
    skill_vs_market = models.FloatField(null=True, blank=True)
    skill_lo = models.FloatField(null=True, blank=True)
    skill_hi = models.FloatField(null=True, blank=True)
    bss_vs_half = models.FloatField(null=True, blank=True)
    return_pct = models.FloatField(null=True, blank=True)
    return_lo = models.FloatField(null=True, blank=True)
    return_hi = models.FloatField(null=True, blank=True)
    pnl = models.DecimalField(max_digits=14, decimal_places=2, default=0)
    realized_pnl = models.DecimalField(max_digits=14, decimal_places=2, default=0)
    unrealized_pnl = models.DecimalField(max_digits=14, decimal_places=2, default=0)
    win_rate = models.FloatField(null=True, blank=True)
    implied_confidence_brier = models.FloatField(null=True, blank=True)
    tokens = models.PositiveBigIntegerField(default=0)
    cost_usd = models.DecimalField(max_digits=12, decimal_places=4, default=0)
    cost_per_resolved = models.FloatField(null=True, blank=True)
    provisional = models.BooleanField(default=True)
    required_n = models.PositiveIntegerField(null=True, blank=True)
    # Everything else the competitor page draws: calibration bins, Murphy terms, CLV, edge label,
    # information test, champion's-clothes portfolio, tournament take.
    details = models.JSONField(default=dict, blank=True)

    class Meta:
        indexes = [models.Index(fields=["run", "cohort", "rank"], name="lbrow_run_cohort_idx")]

    @cached_property
    def stored_details(self) -> RowDetails:
        """`details` read through its one typed reader."""
        return RowDetails.from_json(self.details)


class BoardSlice(models.Model):
    """What one group's leaderboard reads of its run's details (RunDetails.board_slice: the
    headline and the group's paired Brier tests), stored beside them when the run is scored.
    The details hold every group's tests and tournament, hundreds of kilobytes read whole from
    disk even to take a path out of them; a board reads its own ten or so."""

    run = models.ForeignKey(ScoreRun, on_delete=models.CASCADE, related_name="board_slices")
    cohort = models.ForeignKey(
        "cohorts.Cohort", null=True, blank=True, on_delete=models.CASCADE, help_text="Null: all"
    )
    details = models.JSONField(default=dict, blank=True)

    class Meta:
        constraints = [
            models.UniqueConstraint(
                fields=["run", "cohort"],
                condition=models.Q(cohort__isnull=False),
                name="boardslice_one_per_cohort",
            ),
            models.UniqueConstraint(
                fields=["run"], condition=models.Q(cohort__isnull=True), name="boardslice_one_all"
            ),
        ]

    @cached_property
    def stored_details(self) -> RunDetails:
        return RunDetails.from_json(self.details)


class TradeCLV(models.Model):
    """Closing-line value of one BUY: how the price moved from entry to the market's close.

    Probability form c - q and log-odds form logit(c) - logit(q), with c the closing
    price (last price point before the close, de-vigged when quotes sum above 1). Rewritten by
    every score run, so a corrected price history corrects it too.
    """

    trade = models.OneToOneField("cohorts.Trade", on_delete=models.CASCADE, related_name="clv")
    close_price = models.FloatField()
    clv_prob = models.FloatField()
    clv_logodds = models.FloatField()
    computed_at = models.DateTimeField(auto_now=True)
