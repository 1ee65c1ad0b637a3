"""Who competes: competitors, with the endpoint and key policy they are called under, and the
releases of their model (the exact model, endpoint and settings an entry is pinned to).

What they decide in a cohort (Decision, LLMCall, Forecast) belongs to the game, in cohorts."""

from __future__ import annotations

import base64
import binascii
from typing import Any

from django.core.exceptions import ValidationError
from django.db import IntegrityError, models, transaction

from agents.simulated import is_loopback_url
from core import clock

# What a release is: the model fields of a competitor that decide what is called and how. A
# change of any of them is a new release; a release an entry used never changes.
RELEASE_FIELDS = (
    "model_id",
    "provider",
    "base_url",
    "api_key_env",
    "params",
    "context_tokens",
    "structured_output",
    "price_in_per_m",
    "price_out_per_m",
    "knowledge_cutoff",
    "agent_version",
)


class Competitor(models.Model):
    class Kind(models.TextChoices):
        LLM = "llm", "Language model"
        BASELINE = "baseline", "Baseline strategy"
        # An outside team's agent: it calls the arena's agent API with a token; the arena never
        # calls it, so it has no endpoint (cohorts/decisions/submissions.py).
        OUTSIDE = "outside", "Outside agent"

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
    # The prompt budget (agents/budget.py): blank = the server's context size (llama.cpp's
    # /props), or none known until a context refusal names it.
    context_tokens = models.PositiveIntegerField(
        null=True,
        blank=True,
        help_text="Context size in tokens (prompt + answer). Blank: ask the server; a prompt "
        "that would not fit shows fewer markets (the forecast sample always among them)",
    )
    structured_output = models.BooleanField(
        default=False,
        help_text="Send a json_schema (response_format) that requires a forecast for exactly the "
        "sample's markets, with bounded lists and reasoning: for servers that support it "
        "(llama.cpp, vLLM, OpenAI) and small models",
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
    # An outside agent's identity (kind OUTSIDE). The contact is for staff only and never
    # published; the rest is shown with the agent.
    team = models.CharField(max_length=120, blank=True, help_text="Outside agent: the team")
    contact = models.CharField(
        max_length=200, blank=True, help_text="Outside agent: how staff reach the team (not published)"
    )
    link = models.URLField(
        max_length=300, blank=True, help_text="Outside agent: its code or a description of it"
    )
    agent_version = models.CharField(
        max_length=60,
        blank=True,
        help_text="Outside agent: the version the team declares; a change is a new release",
    )
    public_key = models.CharField(
        max_length=64,
        blank=True,
        help_text="Outside agent: an Ed25519 public key (32 raw bytes, base64). With one, every "
        "submission must carry a valid signature",
    )
    notes = models.TextField(blank=True)
    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        ordering = ["kind", "display_name"]

    def __str__(self) -> str:
        return self.display_name

    def save(self, *args: Any, **kwargs: Any) -> None:
        # A change of the model is a new release at once (the admin's and code's saves alike),
        # so the next cohort opened runs it while the open cohorts keep theirs.
        with transaction.atomic():
            super().save(*args, **kwargs)
            Release.current(self)

    @property
    def is_llm(self) -> bool:
        return self.kind == self.Kind.LLM

    @property
    def is_outside(self) -> bool:
        return self.kind == self.Kind.OUTSIDE

    def clean(self) -> None:
        errors: dict[str, str] = {}
        key_problem = public_key_problem(self.public_key) if self.public_key else None
        if key_problem:
            errors["public_key"] = key_problem
        if self.kind == self.Kind.OUTSIDE:
            # The arena never calls an outside agent: nothing to call it with may be set.
            if self.base_url or self.api_key_env:
                errors["base_url"] = "An outside agent has no endpoint: the arena never calls it."
            if self.simulated:
                errors["simulated"] = "An outside agent is a real team's agent, never simulated."
            if self.strategy:
                errors["strategy"] = "An outside agent has no baseline strategy."
        elif self.public_key:
            errors["public_key"] = "Only an outside agent signs its submissions."
        if not self.simulated:
            if errors:
                raise ValidationError(errors)
            return
        if self.kind != self.Kind.LLM:
            errors["kind"] = "A simulated competitor answers through the model path: kind LLM."
        if self.api_key_env:
            errors["api_key_env"] = "A simulated competitor never gets an API key."
        if self.base_url and not is_loopback_url(self.base_url):
            errors["base_url"] = "A simulated competitor only calls a loopback endpoint."
        if errors:
            raise ValidationError(errors)


def public_key_problem(text: str) -> str | None:
    """Why `text` is not an Ed25519 public key as the admin takes it (32 raw bytes, base64)."""
    try:
        raw = base64.b64decode(text.strip(), validate=True)
    except (binascii.Error, ValueError):
        return "Not base64: paste the 32 raw bytes of the Ed25519 public key, base64-encoded."
    if len(raw) != 32:
        return f"An Ed25519 public key is 32 bytes; this is {len(raw)}."
    return None


class ReleaseInUse(ValueError):
    """A release an entry has used was about to change."""


class Release(models.Model):
    """One exact model of a competitor: numbered 1, 2, ... per competitor, never changed once an
    entry has used it (the model refuses, the admin shows it read-only and the database refuses
    an UPDATE of a used row). An entry is pinned to the release current when its cohort opened,
    and every decision of that entry calls this release, whatever the competitor says now."""

    competitor = models.ForeignKey(Competitor, on_delete=models.CASCADE, related_name="releases")
    number = models.PositiveIntegerField(help_text="1, 2, ... per competitor")
    provider = models.CharField(max_length=60, blank=True)
    model_id = models.CharField(max_length=200, blank=True)
    base_url = models.URLField(max_length=300, blank=True, help_text="blank: the default endpoint")
    api_key_env = models.CharField(max_length=100, blank=True)
    params = models.JSONField(default=dict, blank=True)
    context_tokens = models.PositiveIntegerField(null=True, blank=True)
    structured_output = models.BooleanField(default=False)
    price_in_per_m = models.DecimalField(max_digits=12, decimal_places=6, null=True, blank=True)
    price_out_per_m = models.DecimalField(max_digits=12, decimal_places=6, null=True, blank=True)
    knowledge_cutoff = models.DateField(null=True, blank=True)
    agent_version = models.CharField(
        max_length=60, blank=True, help_text="An outside agent's declared version"
    )
    created_at = models.DateTimeField()

    class Meta:
        constraints = [
            models.UniqueConstraint(
                fields=["competitor", "number"], name="release_competitor_number_uniq"
            )
        ]
        ordering = ["competitor", "number"]

    def __str__(self) -> str:
        return f"{self.competitor_id} release {self.number}: {self.model_id or 'builtin'}"

    def save(self, *args: Any, **kwargs: Any) -> None:
        if self.created_at is None:
            self.created_at = clock.now()
        if self.pk is not None and not self._state.adding:
            stored = Release.objects.filter(pk=self.pk).first()
            if stored is not None and stored.is_used:
                changed = [
                    k
                    for k in ("competitor_id", "number", *RELEASE_FIELDS)
                    if getattr(stored, k) != getattr(self, k)
                ]
                if not changed:
                    return  # nothing to write (and the database refuses any UPDATE of it)
                raise ReleaseInUse(
                    f"release {stored.number} of competitor {stored.competitor_id} is used by an "
                    f"entry and never changes ({', '.join(changed)}): change the competitor, "
                    "which makes a new release for cohorts opened after it"
                )
        super().save(*args, **kwargs)

    @property
    def is_used(self) -> bool:
        # The reverse accessor of cohorts' Entry.release: no import of a higher floor.
        return self.pk is not None and self.entries.exists()

    def identity(self) -> dict[str, Any]:
        return {name: getattr(self, name) for name in RELEASE_FIELDS}

    @classmethod
    def current(cls, competitor: Competitor) -> Release:
        """The competitor's latest release, or a new one when its model fields differ from it
        (an edit by the admin, the ORM or a queryset update all end here)."""
        wanted = {name: getattr(competitor, name) for name in RELEASE_FIELDS}
        latest = cls.objects.filter(competitor=competitor).order_by("-number").first()
        if latest is not None and _same(latest.identity(), wanted):
            return latest
        number = (latest.number + 1) if latest is not None else 1
        try:
            with transaction.atomic():
                return cls.objects.create(competitor=competitor, number=number, **wanted)
        except IntegrityError:  # another process made this number first: take the newest
            newest = cls.objects.filter(competitor=competitor).order_by("-number").first()
            if newest is not None and _same(newest.identity(), wanted):
                return newest
            raise


def _same(a: dict[str, Any], b: dict[str, Any]) -> bool:
    # Compared as the columns hold them: a price typed "1.25" is the stored Decimal("1.250000"),
    # a cutoff typed "2025-06-30" the stored date.
    for name in RELEASE_FIELDS:
        field = Release._meta.get_field(name)
        assert isinstance(field, models.Field)  # a column, not a relation
        if field.to_python(a[name]) != field.to_python(b[name]):
            return False
    return True


class AgentToken(models.Model):
    """An outside agent's API token (agents/tokens.py issues and checks them). Only its SHA-256
    is stored: the token itself is shown once, when staff issue it, and never again."""

    competitor = models.ForeignKey(Competitor, on_delete=models.CASCADE, related_name="tokens")
    label = models.CharField(max_length=120, blank=True, help_text="What it is for, for staff")
    # The token's visible start (arena_<8 chars>), to tell tokens apart in the admin and on the
    # audit record; it identifies a token, it does not authenticate one.
    prefix = models.CharField(max_length=20, unique=True)
    digest = models.CharField(max_length=64, unique=True, help_text="SHA-256 hex of the token")
    created_at = models.DateTimeField()
    expires_at = models.DateTimeField(
        null=True, blank=True, help_text="Blank: valid until revoked"
    )
    last_used_at = models.DateTimeField(null=True, blank=True)
    revoked_at = models.DateTimeField(null=True, blank=True)
    rate_per_minute = models.PositiveSmallIntegerField(
        default=30, help_text="Requests a minute this token may make; more get a 429"
    )

    class Meta:
        ordering = ["-created_at", "-id"]

    def __str__(self) -> str:
        return f"{self.prefix}… ({self.competitor_id})"


class LineupReview(models.Model):
    """One weekly review of the configured model catalogs. The row claims its week: a second
    run of the job (two beats, a retried task) finds it and does nothing."""

    week_start = models.DateField(unique=True, help_text="the Sunday of the week reviewed")
    started_at = models.DateTimeField()
    finished_at = models.DateTimeField(null=True, blank=True)
    summary = models.JSONField(default=dict, blank=True)

    class Meta:
        ordering = ["-week_start"]

    def __str__(self) -> str:
        return f"lineup review of the week of {self.week_start}"


class CatalogModel(models.Model):
    """A model as a provider's catalog last listed it: what the next review compares with, to
    tell a new model from one already seen and to notice one that left the catalog."""

    catalog = models.CharField(max_length=60, help_text="the configured provider's name")
    model_id = models.CharField(max_length=200)
    name = models.CharField(max_length=200, blank=True)
    context_length = models.PositiveIntegerField(null=True, blank=True)
    price_in_per_m = models.DecimalField(max_digits=12, decimal_places=6, null=True, blank=True)
    price_out_per_m = models.DecimalField(max_digits=12, decimal_places=6, null=True, blank=True)
    created = models.DateTimeField(null=True, blank=True, help_text="the catalog's own date")
    first_seen = models.DateTimeField()
    last_seen = models.DateTimeField()
    gone_since = models.DateTimeField(null=True, blank=True)

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["catalog", "model_id"], name="catalog_model_uniq")
        ]
        ordering = ["catalog", "model_id"]

    def __str__(self) -> str:
        return f"{self.catalog}: {self.model_id}"


class LineupProposal(models.Model):
    """What a review proposes to staff. Nothing changes until a staff member approves it: a new
    competitor, or a new release of a competitor for the cohorts opened after it."""

    class Kind(models.TextChoices):
        NEW_MODEL = "new_model", "New model"
        CHANGED = "changed", "Price or context changed"
        DISAPPEARED = "disappeared", "Left the catalog"
        UNREADABLE = "unreadable", "Catalog could not be read"

    class Status(models.TextChoices):
        PENDING = "pending", "Pending"
        APPROVED = "approved", "Approved"
        DISMISSED = "dismissed", "Dismissed"

    review = models.ForeignKey(LineupReview, on_delete=models.CASCADE, related_name="proposals")
    kind = models.CharField(max_length=12, choices=Kind.choices)
    catalog = models.CharField(max_length=60)
    model_id = models.CharField(max_length=200, blank=True)
    name = models.CharField(max_length=200, blank=True)
    context_length = models.PositiveIntegerField(null=True, blank=True)
    price_in_per_m = models.DecimalField(max_digits=12, decimal_places=6, null=True, blank=True)
    price_out_per_m = models.DecimalField(max_digits=12, decimal_places=6, null=True, blank=True)
    created = models.DateTimeField(null=True, blank=True)
    competitor = models.ForeignKey(
        Competitor, null=True, blank=True, on_delete=models.CASCADE, related_name="proposals"
    )
    detail = models.TextField(blank=True, help_text="what changed, or why the catalog failed")
    status = models.CharField(max_length=10, choices=Status.choices, default=Status.PENDING)
    proposed_at = models.DateTimeField()
    decided_at = models.DateTimeField(null=True, blank=True)
    decided_by = models.CharField(max_length=150, blank=True)
    outcome = models.CharField(max_length=300, blank=True, help_text="what the approval made")

    class Meta:
        constraints = [
            # A proposal still waiting for staff is not made again by the next review (or by a
            # second review running at once), once per model and, for a change, per competitor.
            models.UniqueConstraint(
                fields=["kind", "catalog", "model_id"],
                condition=models.Q(status="pending", competitor__isnull=True),
                name="lineup_proposal_pending_uniq",
            ),
            models.UniqueConstraint(
                fields=["kind", "catalog", "model_id", "competitor"],
                condition=models.Q(status="pending", competitor__isnull=False),
                name="lineup_proposal_pending_competitor_uniq",
            ),
        ]
        ordering = ["-proposed_at", "pk"]

    def __str__(self) -> str:
        return f"{self.get_kind_display()}: {self.model_id or self.catalog}"

    def prices_label(self) -> str:
        """USD per million tokens, prompt / completion, "?" where the catalog gave none."""
        return " / ".join(
            "?" if p is None else f"${p.normalize():f}"
            for p in (self.price_in_per_m, self.price_out_per_m)
        )
