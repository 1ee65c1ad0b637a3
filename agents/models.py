"""Competitors and the audit trail of every decision they make."""

from django.core.exceptions import ValidationError
from django.db import models

from agents.simulated import is_loopback_url


class Competitor(models.Model):
    class Kind(models.TextChoices):
        LLM = "llm", "Language model"
        BASELINE = "baseline", "Baseline strategy"

    class Strategy(models.TextChoices):
        MARKET = "market", "Market (states the price, never bets)"
        CASH = "cash", "Cash (never bets)"
        RANDOM = "random", "Random (seeded)"
        FAVORITE = "favorite", "Favorite (backs the side above 0.5)"
        LONGSHOT_FADER = "longshot-fader", "Longshot fader"

    slug = models.SlugField(max_length=80, unique=True)
    display_name = models.CharField(max_length=120)
    kind = models.CharField(max_length=10, choices=Kind.choices)
    family = models.CharField(max_length=40, blank=True, help_text="GPT, Gemini, Grok, Claude, ...")
    provider = models.CharField(
        max_length=60, blank=True, help_text="openrouter, vllm, ollama, ..."
    )
    model_id = models.CharField(max_length=200, blank=True)
    strategy = models.CharField(max_length=20, choices=Strategy.choices, blank=True)
    params = models.JSONField(
        default=dict, blank=True, help_text="temperature, max_tokens, reasoning, ..."
    )
    # Endpoint override: blank means settings.ARENA_LLM_BASE_URL / the default key.
    base_url = models.URLField(max_length=300, blank=True)
    api_key_env = models.CharField(
        max_length=100, blank=True, help_text="Name of the env var holding the key (never the key)"
    )
    price_in_per_m = models.DecimalField(max_digits=12, decimal_places=6, null=True, blank=True)
    price_out_per_m = models.DecimalField(max_digits=12, decimal_places=6, null=True, blank=True)
    knowledge_cutoff = models.DateField(null=True, blank=True)
    replicates = models.PositiveSmallIntegerField(default=1)
    active = models.BooleanField(default=True)
    # Answered by the project's simulated endpoint, never by a real model: labelled "simulated"
    # on every page, API row and export; never sent an API key (agents/simulated.py).
    simulated = models.BooleanField(
        default=False,
        help_text="Answered by the built-in simulated endpoint (arena demo, arena simulated-llm), "
        "not a real model",
    )
    notes = models.TextField(blank=True)
    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        ordering = ["kind", "display_name"]

    def __str__(self) -> str:
        return self.display_name

    @property
    def is_llm(self) -> bool:
        return self.kind == self.Kind.LLM

    def clean(self) -> None:
        if not self.simulated:
            return
        errors = {}
        if self.kind != self.Kind.LLM:
            errors["kind"] = "A simulated competitor answers through the model path: kind LLM."
        if self.api_key_env:
            errors["api_key_env"] = "A simulated competitor never gets an API key."
        if self.base_url and not is_loopback_url(self.base_url):
            errors["base_url"] = "A simulated competitor only calls a loopback endpoint."
        if errors:
            raise ValidationError(errors)


class Decision(models.Model):
    """One entry's decision for one cohort week. The row is the claim: UNIQUE(entry, week)."""

    class Status(models.TextChoices):
        CLAIMED = "claimed", "Claimed (running)"
        DONE = "done", "Done"
        SKIPPED = "skipped", "Skipped"
        FAILED = "failed", "Failed"
        # A transient error (database) interrupted the run; the next attempt reclaims it at once.
        RETRYABLE = "retryable", "Retryable"

    class Action(models.TextChoices):
        BET = "BET", "Bet"
        SELL = "SELL", "Sell"
        HOLD = "HOLD", "Hold"

    entry = models.ForeignKey("cohorts.Entry", on_delete=models.CASCADE, related_name="decisions")
    week = models.PositiveSmallIntegerField(help_text="1-based week of the cohort")
    status = models.CharField(max_length=10, choices=Status.choices, default=Status.CLAIMED)
    claim_token = models.CharField(max_length=40, blank=True)
    claimed_at = models.DateTimeField()
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

    universe = models.ForeignKey(
        "cohorts.Universe",
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

    tokens_in = models.PositiveIntegerField(default=0)
    tokens_out = models.PositiveIntegerField(default=0)
    # Ten places: providers bill in fractions of a millionth (0.00000735 was stored as 0.000007).
    cost_usd = models.DecimalField(max_digits=16, decimal_places=10, default=0)
    latency_ms = models.PositiveIntegerField(default=0)

    class Meta:
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
        constraints = [
            models.UniqueConstraint(
                fields=["decision", "attempt"], name="llmcall_decision_attempt_uniq"
            )
        ]
        ordering = ["decision", "attempt"]


class Forecast(models.Model):
    """A stated probability for one outcome, with the market price the competitor saw."""

    class Source(models.TextChoices):
        BET = "bet", "With a bet"
        SAMPLE = "sample", "Forecast sample"
        OTHER = "other", "Volunteered"

    decision = models.ForeignKey(Decision, on_delete=models.CASCADE, related_name="forecasts")
    entry = models.ForeignKey("cohorts.Entry", on_delete=models.CASCADE, related_name="forecasts")
    market = models.ForeignKey("markets.Market", on_delete=models.PROTECT, related_name="forecasts")
    outcome = models.CharField(max_length=200)
    probability = models.FloatField()
    market_price = models.FloatField(
        null=True, blank=True, help_text="Price shown at decision time"
    )
    source = models.CharField(max_length=10, choices=Source.choices, default=Source.SAMPLE)
    created_at = models.DateTimeField()

    class Meta:
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
