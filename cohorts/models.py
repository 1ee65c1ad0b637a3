"""Weekly cohorts and the money: entries, positions, trades, the cash ledger, snapshots, settlements.

Invariants (checked by `arena doctor`): an entry's cash equals the sum of its ledger rows;
cash is never negative; at most one open position per entry/market/outcome; a position is
settled at most once at a time (a staff re-resolution reverses the old settlement first).
"""

from decimal import Decimal

from django.db import models

INITIAL_BALANCE = Decimal("10000.00")


class Cohort(models.Model):
    class Kind(models.TextChoices):
        LIVE = "live", "Live"
        REPLAY = "replay", "Replay"
        DEMO = "demo", "Demo"

    class Status(models.TextChoices):
        ACTIVE = "active", "Deciding weekly"
        TRACKING = "tracking", "Tracking until positions settle"
        COMPLETED = "completed", "Completed"

    kind = models.CharField(max_length=10, choices=Kind.choices, default=Kind.LIVE)
    week_start = models.DateTimeField(help_text="Sunday 00:00 UTC")
    status = models.CharField(max_length=10, choices=Status.choices, default=Status.ACTIVE)
    decision_weeks = models.PositiveSmallIntegerField(default=5)
    initial_balance = models.DecimalField(max_digits=14, decimal_places=2, default=INITIAL_BALANCE)
    methodology_version = models.CharField(max_length=20, blank=True)
    methodology_hash = models.CharField(max_length=64, blank=True)
    label = models.CharField(max_length=200, blank=True, help_text="e.g. the replayed question set")
    notes = models.TextField(blank=True)
    created_at = models.DateTimeField(auto_now_add=True)
    completed_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["kind", "week_start"], name="cohort_kind_week_uniq")
        ]
        ordering = ["-week_start", "kind"]

    def __str__(self) -> str:
        prefix = "" if self.kind == self.Kind.LIVE else f"[{self.get_kind_display()}] "
        return f"{prefix}Cohort {self.week_start:%Y-%m-%d}"


class Universe(models.Model):
    """The frozen list of markets and prices every entry of a cohort sees in one week."""

    cohort = models.ForeignKey(Cohort, on_delete=models.CASCADE, related_name="universes")
    week = models.PositiveSmallIntegerField()
    frozen_at = models.DateTimeField()
    content_hash = models.CharField(max_length=64)
    # [{"market_id", "question", "outcomes": [...], "prices": {...}, "volume", "close_time", ...}]
    markets = models.JSONField(default=list)
    forecast_sample = models.JSONField(
        default=list, help_text="Market ids every entry must forecast"
    )

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["cohort", "week"], name="universe_cohort_week_uniq")
        ]


class Entry(models.Model):
    """A competitor's portfolio in a cohort (replicate k of n)."""

    cohort = models.ForeignKey(Cohort, on_delete=models.CASCADE, related_name="entries")
    competitor = models.ForeignKey(
        "agents.Competitor", on_delete=models.PROTECT, related_name="entries"
    )
    replicate = models.PositiveSmallIntegerField(default=1)
    cash = models.DecimalField(max_digits=14, decimal_places=2)
    initial_balance = models.DecimalField(max_digits=14, decimal_places=2, default=INITIAL_BALANCE)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        constraints = [
            models.UniqueConstraint(
                fields=["cohort", "competitor", "replicate"],
                name="entry_cohort_competitor_rep_uniq",
            ),
            models.CheckConstraint(condition=models.Q(cash__gte=0), name="entry_cash_nonnegative"),
        ]
        verbose_name_plural = "entries"

    def __str__(self) -> str:
        rep = f" #{self.replicate}" if self.replicate > 1 else ""
        return f"{self.competitor_id}{rep} in cohort {self.cohort_id}"


class Position(models.Model):
    class Status(models.TextChoices):
        OPEN = "open", "Open"
        EXITED = "exited", "Exited (sold)"
        SETTLED = "settled", "Settled"

    entry = models.ForeignKey(Entry, on_delete=models.CASCADE, related_name="positions")
    market = models.ForeignKey("markets.Market", on_delete=models.PROTECT, related_name="positions")
    outcome = models.CharField(max_length=200)
    shares = models.DecimalField(max_digits=20, decimal_places=6, default=0)
    cost_basis = models.DecimalField(max_digits=14, decimal_places=2, default=0)
    realized_pnl = models.DecimalField(max_digits=14, decimal_places=2, default=0)
    status = models.CharField(max_length=10, choices=Status.choices, default=Status.OPEN)
    opened_at = models.DateTimeField()
    closed_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        constraints = [
            models.UniqueConstraint(
                fields=["entry", "market", "outcome"],
                condition=models.Q(status="open"),
                name="position_one_open_per_side",
            ),
            models.CheckConstraint(
                condition=models.Q(shares__gte=0), name="position_shares_nonneg"
            ),
        ]
        indexes = [models.Index(fields=["status", "market"], name="position_status_market_idx")]


class Trade(models.Model):
    class Side(models.TextChoices):
        BUY = "BUY", "Buy"
        SELL = "SELL", "Sell"

    entry = models.ForeignKey(Entry, on_delete=models.CASCADE, related_name="trades")
    decision = models.ForeignKey(
        "agents.Decision", null=True, blank=True, on_delete=models.PROTECT, related_name="trades"
    )
    position = models.ForeignKey(Position, on_delete=models.PROTECT, related_name="trades")
    side = models.CharField(max_length=4, choices=Side.choices)
    amount = models.DecimalField(max_digits=14, decimal_places=2, help_text="Cash paid or received")
    shares = models.DecimalField(max_digits=20, decimal_places=6)
    price = models.DecimalField(max_digits=10, decimal_places=6)
    quote = models.JSONField(default=dict, blank=True, help_text="The quote the price came from")
    realized_pnl = models.DecimalField(max_digits=14, decimal_places=2, default=0)
    executed_at = models.DateTimeField()

    class Meta:
        ordering = ["-executed_at", "-id"]


class Settlement(models.Model):
    """How one position was paid out. A reversal (staff changed the outcome) keeps the row."""

    class Kind(models.TextChoices):
        WON = "won", "Won"
        LOST = "lost", "Lost"
        VOID = "void", "Void (refund)"

    position = models.ForeignKey(Position, on_delete=models.PROTECT, related_name="settlements")
    market = models.ForeignKey(
        "markets.Market", on_delete=models.PROTECT, related_name="settlements"
    )
    kind = models.CharField(max_length=5, choices=Kind.choices)
    outcome = models.CharField(
        max_length=200, blank=True, help_text="Winning outcome (blank: void)"
    )
    shares = models.DecimalField(max_digits=20, decimal_places=6)
    cost_basis = models.DecimalField(max_digits=14, decimal_places=2)
    payout = models.DecimalField(max_digits=14, decimal_places=2)
    settled_at = models.DateTimeField()
    reversed_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        constraints = [
            models.UniqueConstraint(
                fields=["position"],
                condition=models.Q(reversed_at__isnull=True),
                name="settlement_one_live_per_position",
            )
        ]


class LedgerEntry(models.Model):
    """Every cash movement. Entry.cash == sum(amount) over the entry's rows, always."""

    class Kind(models.TextChoices):
        DEPOSIT = "deposit", "Initial balance"
        BUY = "buy", "Buy"
        SELL = "sell", "Sell"
        PAYOUT = "payout", "Payout"
        REFUND = "refund", "Void refund"
        REVERSAL = "reversal", "Settlement reversal"

    entry = models.ForeignKey(Entry, on_delete=models.CASCADE, related_name="ledger")
    kind = models.CharField(max_length=10, choices=Kind.choices)
    amount = models.DecimalField(max_digits=14, decimal_places=2, help_text="Signed: + in, - out")
    trade = models.ForeignKey(Trade, null=True, blank=True, on_delete=models.PROTECT)
    settlement = models.ForeignKey(Settlement, null=True, blank=True, on_delete=models.PROTECT)
    memo = models.CharField(max_length=300, blank=True)
    created_at = models.DateTimeField()

    class Meta:
        indexes = [models.Index(fields=["entry", "created_at"], name="ledger_entry_idx")]
        verbose_name_plural = "ledger entries"


class Snapshot(models.Model):
    """An entry's value in one 10-minute bucket (a rerun in the same bucket updates it)."""

    entry = models.ForeignKey(Entry, on_delete=models.CASCADE, related_name="snapshots")
    ts = models.DateTimeField(
        help_text="Bucket start, floored to 10 minutes (or 1 hour once rolled up)"
    )
    cash = models.DecimalField(max_digits=14, decimal_places=2)
    positions_value = models.DecimalField(max_digits=14, decimal_places=2)
    total = models.DecimalField(max_digits=14, decimal_places=2)
    realized_pnl = models.DecimalField(max_digits=14, decimal_places=2)
    unrealized_pnl = models.DecimalField(max_digits=14, decimal_places=2)

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["entry", "ts"], name="snapshot_entry_ts_uniq")
        ]


# --- chart series (cohorts/series.py keeps them; pages only read them) ----------------------


class SeriesHead(models.Model):
    """How far an entry's chart series have absorbed its snapshots: first and latest, with the
    latest total. Its row is also the lock that serialises writers of the entry's series."""

    entry = models.OneToOneField(
        Entry, on_delete=models.CASCADE, primary_key=True, related_name="series_head"
    )
    first_ts = models.DateTimeField(null=True, blank=True)
    last_ts = models.DateTimeField(null=True, blank=True)
    last_total = models.DecimalField(max_digits=14, decimal_places=2, null=True, blank=True)


class SeriesChunk(models.Model):
    """An entry's value at CHUNK consecutive points of one grid (multiples of `step` seconds
    since the epoch), packed little-endian float64, NaN where the entry has no value."""

    entry = models.ForeignKey(Entry, on_delete=models.CASCADE, related_name="+")
    step = models.PositiveIntegerField()
    chunk = models.IntegerField(help_text="grid index // CHUNK")
    values = models.BinaryField()

    class Meta:
        constraints = [
            models.UniqueConstraint(
                fields=["entry", "step", "chunk"], name="series_chunk_entry_step_uniq"
            )
        ]


class ScopeSeriesHead(models.Model):
    """First and latest snapshot of a scope (live / replay / demo); the lock of its overview."""

    scope = models.CharField(max_length=10, primary_key=True, choices=Cohort.Kind.choices)
    first_ts = models.DateTimeField(null=True, blank=True)
    last_ts = models.DateTimeField(null=True, blank=True)


class ScopeSeriesChunk(models.Model):
    """A competitor's mean return (%) over its entries of a scope alive at each grid point,
    packed like SeriesChunk: the home page's overview chart."""

    scope = models.CharField(max_length=10, choices=Cohort.Kind.choices)
    competitor = models.ForeignKey("agents.Competitor", on_delete=models.CASCADE, related_name="+")
    step = models.PositiveIntegerField()
    chunk = models.IntegerField()
    values = models.BinaryField()

    class Meta:
        constraints = [
            models.UniqueConstraint(
                fields=["scope", "step", "chunk", "competitor"],
                name="scope_series_chunk_uniq",
            )
        ]


# The append-only sealing records live in their own module (cohorts/seal_models.py).
from cohorts.seal_models import (  # noqa: E402, F401
    DecisionDigest,
    EventLogEntry,
    SealPublication,
    WeekSeal,
)
