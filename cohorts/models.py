"""Weekly cohorts and the money: entries, positions, trades, the cash ledger, snapshots, settlements.

Invariants (checked by `arena doctor`): an entry's cash equals the sum of its ledger rows;
cash is never negative; at most one open position per entry/market/outcome; a position is
settled at most once at a time (a staff re-resolution reverses the old settlement first).
"""

from decimal import Decimal

from django.core.exceptions import ValidationError
from django.db import models

INITIAL_BALANCE = Decimal("10000.00")


class Cohort(models.Model):
    class Kind(models.TextChoices):
        LIVE = "live", "Live"
        REPLAY = "replay", "Replay"
        DEMO = "demo", "Demo"
        # The live path run end to end on an accelerated clock against stand-ins (`arena rehearse`).
        REHEARSAL = "rehearsal", "Rehearsal"

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
    # The exact model this entry runs (the competitor's current release when the cohort
    # opened): every decision of the entry calls it. Null only for an entry made outside
    # open_cohort, which its first decision pins (cohorts/decisions/run.py).
    release = models.ForeignKey(
        "agents.Release",
        null=True,
        blank=True,
        on_delete=models.PROTECT,
        related_name="entries",
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

    def save(self, *args, **kwargs):
        fields = kwargs.get("update_fields")
        if not self._state.adding and (fields is None or "release" in fields):
            self._refuse_repointing()
        return super().save(*args, **kwargs)

    def _refuse_repointing(self) -> None:
        """An entry's release is what its decisions called and what the seal records: once its
        cohort has begun (a frozen universe or a decision), it never changes."""
        pinned = Entry.objects.filter(pk=self.pk).values_list("release_id", flat=True).first()
        if pinned is None or pinned == self.release_id:
            return
        begun = (
            Universe.objects.filter(cohort_id=self.cohort_id).exists()
            or Decision.objects.filter(entry__cohort_id=self.cohort_id).exists()
        )
        if begun:
            raise ValidationError(
                f"entry {self.pk} runs release {pinned}: a running entry's release never "
                "changes (a new release is for cohorts opened after it)"
            )


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

    # Admin inlines and select boxes name rows by these, without a query per row.
    def __str__(self) -> str:
        return f"Position {self.pk}: entry {self.entry_id}, market {self.market_id} {self.outcome}"


class Trade(models.Model):
    class Side(models.TextChoices):
        BUY = "BUY", "Buy"
        SELL = "SELL", "Sell"

    entry = models.ForeignKey(Entry, on_delete=models.CASCADE, related_name="trades")
    decision = models.ForeignKey(
        "Decision", null=True, blank=True, on_delete=models.PROTECT, related_name="trades"
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

    def __str__(self) -> str:
        return f"Trade {self.pk}: {self.side} ${self.amount} ({self.shares} shares at {self.price})"


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

    def __str__(self) -> str:
        reversed_ = ", reversed" if self.reversed_at else ""
        return f"Settlement {self.pk}: {self.kind} ${self.payout} on position {self.position_id}{reversed_}"


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

    def __str__(self) -> str:
        return f"Ledger {self.pk}: {self.kind} {self.amount:+} (entry {self.entry_id})"


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


# --- chart series (cohorts/series/write.py keeps them; pages only read them) ----------------------


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
    """First and latest snapshot of a scope (live / replay / demo); the lock of its overview;
    and the home page's default chart of the scope, computed by every series write under that
    lock (cohorts/series/chart.py), so a visitor's first look reads it instead of computing it."""

    scope = models.CharField(max_length=10, primary_key=True, choices=Cohort.Kind.choices)
    first_ts = models.DateTimeField(null=True, blank=True)
    last_ts = models.DateTimeField(null=True, blank=True)
    home_chart = models.JSONField(null=True, blank=True, editable=False)


class ScopeSeriesChunk(models.Model):
    """A competitor's mean growth over its entries of a scope from each grid point to the next
    (cohorts/series/overview.py), packed like SeriesChunk: what the home chart compounds."""

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


# A decision, its model calls and its forecasts: the game's audit trail.
class Decision(models.Model):
    """One entry's decision for one cohort week. The row is the claim: UNIQUE(entry, week)."""

    class Status(models.TextChoices):
        CLAIMED = "claimed", "Claimed (running)"
        DONE = "done", "Done"
        SKIPPED = "skipped", "Skipped"
        FAILED = "failed", "Failed"
        # A transient error interrupted the run: a database error (reclaimed at once), or a
        # provider outage (reclaimed from retry_after on; cohorts/decisions/retry.py).
        RETRYABLE = "retryable", "Retryable"

    class Action(models.TextChoices):
        BET = "BET", "Bet"
        SELL = "SELL", "Sell"
        HOLD = "HOLD", "Hold"

    entry = models.ForeignKey("Entry", on_delete=models.CASCADE, related_name="decisions")
    # The release called (its entry's): sealed with the decision's record.
    release = models.ForeignKey(
        "agents.Release",
        null=True,
        blank=True,
        on_delete=models.PROTECT,
        related_name="decisions",
    )
    week = models.PositiveSmallIntegerField(help_text="1-based week of the cohort")
    status = models.CharField(max_length=10, choices=Status.choices, default=Status.CLAIMED)
    claim_token = models.CharField(max_length=40, blank=True)
    claimed_at = models.DateTimeField()
    # Who holds the claim (a worker's name and pid), and every take-over of a claim whose
    # runner died: [{"at", "from", "to", "lost_calls"}] (cohorts/decisions/claims.py).
    claimed_by = models.CharField(max_length=200, blank=True)
    takeovers = models.JSONField(default=list, blank=True)
    finished_at = models.DateTimeField(null=True, blank=True)
    decided_at = models.DateTimeField(null=True, blank=True, help_text="Clock time of the decision")

    action = models.CharField(max_length=4, choices=Action.choices, blank=True)
    reasoning = models.TextField(blank=True)
    parsed = models.JSONField(null=True, blank=True)
    validation_errors = models.JSONField(default=list, blank=True)
    hold_reason = models.TextField(
        blank=True, help_text="Why the decision ended as HOLD, if forced"
    )
    error = models.TextField(blank=True)
    # Rounds lost to a provider outage (cohorts/decisions/retry.py): 0 when none was.
    retry_rounds = models.PositiveSmallIntegerField(
        default=0, help_text="Rounds whose model calls all failed for a transient provider reason"
    )
    retry_after = models.DateTimeField(
        null=True, blank=True, help_text="A retryable decision's next round, not before this time"
    )

    universe = models.ForeignKey(
        "Universe",
        null=True,
        blank=True,
        on_delete=models.PROTECT,
        related_name="decisions",
    )
    universe_hash = models.CharField(max_length=64, blank=True)
    prompt_version = models.CharField(max_length=20, blank=True)
    prompt_sha256 = models.CharField(max_length=64, blank=True)
    system_prompt = models.TextField(blank=True)
    user_prompt = models.TextField(blank=True)
    forecast_sample = models.JSONField(default=list, blank=True)
    cash_before = models.DecimalField(max_digits=14, decimal_places=2, null=True, blank=True)
    # What the competitor's context allowed (agents/budget.py): its size and where it came from,
    # the tokens of the prompt as sent, the markets shown and the ids cut. {} = no budget applied.
    prompt_budget = models.JSONField(default=dict, blank=True)

    tokens_in = models.PositiveIntegerField(default=0)
    tokens_out = models.PositiveIntegerField(default=0)
    # Ten places: providers bill in fractions of a millionth (0.00000735 was stored as 0.000007).
    cost_usd = models.DecimalField(max_digits=16, decimal_places=10, default=0)
    latency_ms = models.PositiveIntegerField(default=0)

    class Meta:
        # Created by the agents app; the table kept its name when the model moved here.
        db_table = "agents_decision"
        constraints = [
            models.UniqueConstraint(fields=["entry", "week"], name="decision_entry_week_uniq")
        ]
        indexes = [models.Index(fields=["status", "claimed_at"], name="decision_status_idx")]
        ordering = ["-claimed_at", "-id"]

    def __str__(self) -> str:
        return f"Decision {self.pk} ({self.entry_id} w{self.week})"


class LLMCall(models.Model):
    """One HTTP attempt to a model: request and raw response kept byte for byte."""

    decision = models.ForeignKey(Decision, on_delete=models.CASCADE, related_name="llm_calls")
    attempt = models.PositiveSmallIntegerField()
    phase = models.CharField(max_length=10, default="initial", help_text="initial or repair")
    url = models.CharField(max_length=300, blank=True)
    request = models.JSONField(default=dict)
    raw_response = models.TextField(blank=True)
    http_status = models.PositiveSmallIntegerField(null=True, blank=True)
    error = models.TextField(blank=True)
    error_kind = models.CharField(max_length=20, blank=True)
    prompt_tokens = models.PositiveIntegerField(null=True, blank=True)
    completion_tokens = models.PositiveIntegerField(null=True, blank=True)
    reasoning_tokens = models.PositiveIntegerField(null=True, blank=True)
    cost_usd = models.DecimalField(max_digits=16, decimal_places=10, null=True, blank=True)
    cost_source = models.CharField(max_length=20, blank=True)
    latency_ms = models.PositiveIntegerField(default=0)
    served_model = models.CharField(max_length=200, blank=True)
    generation_id = models.CharField(max_length=200, blank=True)
    finish_reason = models.CharField(max_length=40, blank=True)
    started_at = models.DateTimeField()

    class Meta:
        # Created by the agents app; the table kept its name when the model moved here.
        db_table = "agents_llmcall"
        constraints = [
            models.UniqueConstraint(
                fields=["decision", "attempt"], name="llmcall_decision_attempt_uniq"
            )
        ]
        ordering = ["decision", "attempt"]

    def __str__(self) -> str:
        status = self.error_kind or (f"HTTP {self.http_status}" if self.http_status else "no reply")
        return f"Call {self.attempt} ({self.phase}) of decision {self.decision_id}: {status}"


class AgentSubmission(models.Model):
    """One request an outside agent made to submit a decision (cohorts/decisions/submissions.py),
    valid or not, kept like a model call: the body byte for byte, when the server received it,
    the token's prefix (never the token), the signature and whether it verified, and what the
    arena answered. The sealed decision record carries the decision's submissions."""

    class Outcome(models.TextChoices):
        ACCEPTED = "accepted", "Accepted (the decision)"
        INVALID = "invalid", "Invalid answer (one more try allowed)"
        FINAL_INVALID = "final-invalid", "Invalid again: held"
        REFUSED = "refused", "Refused"
        RECEIVED = "received", "Received (being processed)"

    competitor = models.ForeignKey(
        "agents.Competitor", on_delete=models.PROTECT, related_name="submissions"
    )
    entry = models.ForeignKey(
        "Entry", null=True, blank=True, on_delete=models.PROTECT, related_name="submissions"
    )
    week = models.PositiveSmallIntegerField(null=True, blank=True)
    decision = models.ForeignKey(
        Decision, null=True, blank=True, on_delete=models.PROTECT, related_name="submissions"
    )
    received_at = models.DateTimeField(help_text="The server's clock: it decides the deadline")
    token_prefix = models.CharField(max_length=20)
    content_type = models.CharField(max_length=200, blank=True)
    idempotency_key = models.CharField(max_length=200, blank=True)
    body = models.BinaryField(help_text="The request body as received, byte for byte")
    body_bytes = models.PositiveIntegerField(help_text="The body's size as announced or read")
    signature = models.CharField(max_length=200, blank=True)
    public_key = models.CharField(max_length=64, blank=True, help_text="The key it was checked with")
    # None: the agent registered no key, so nothing was checked.
    signature_verified = models.BooleanField(null=True, blank=True)
    outcome = models.CharField(max_length=14, choices=Outcome.choices, default=Outcome.RECEIVED)
    http_status = models.PositiveSmallIntegerField(null=True, blank=True)
    problems = models.JSONField(default=list, blank=True)
    response = models.JSONField(null=True, blank=True, help_text="The JSON the agent was sent")

    class Meta:
        ordering = ["received_at", "id"]
        indexes = [
            models.Index(fields=["entry", "week"], name="submission_entry_week_idx"),
            models.Index(fields=["competitor", "idempotency_key"], name="submission_idem_idx"),
        ]

    def __str__(self) -> str:
        return f"Submission {self.pk} by {self.competitor_id}: {self.outcome}"


class Forecast(models.Model):
    """A stated probability for one outcome, with the market price the competitor saw."""

    class Source(models.TextChoices):
        BET = "bet", "With a bet"
        SAMPLE = "sample", "Forecast sample"
        OTHER = "other", "Volunteered"

    decision = models.ForeignKey(Decision, on_delete=models.CASCADE, related_name="forecasts")
    entry = models.ForeignKey("Entry", on_delete=models.CASCADE, related_name="forecasts")
    market = models.ForeignKey("markets.Market", on_delete=models.PROTECT, related_name="forecasts")
    outcome = models.CharField(max_length=200)
    probability = models.FloatField()
    market_price = models.FloatField(
        null=True, blank=True, help_text="Price shown at decision time"
    )
    source = models.CharField(max_length=10, choices=Source.choices, default=Source.SAMPLE)
    created_at = models.DateTimeField()

    class Meta:
        # Created by the agents app; the table kept its name when the model moved here.
        db_table = "agents_forecast"
        constraints = [
            models.UniqueConstraint(
                fields=["decision", "market", "outcome"],
                name="forecast_decision_market_outcome_uniq",
            ),
            models.CheckConstraint(
                condition=models.Q(probability__gte=0) & models.Q(probability__lte=1),
                name="forecast_probability_range",
            ),
        ]
        indexes = [models.Index(fields=["market", "created_at"], name="forecast_market_idx")]

    def __str__(self) -> str:
        return f"Forecast {self.pk}: market {self.market_id} {self.outcome} {self.probability:.3f}"


# The append-only sealing records live in their own module (cohorts/seals/models.py).
from cohorts.seals.models import (  # noqa: E402, F401
    Checkpoint,
    DecisionDigest,
    EventLogEntry,
    SealPublication,
    SigningKey,
    StateRecord,
    WeekSeal,
)
