"""Markets we track (live Polymarket, ForecastBench replays, synthetic demo) and their prices."""

from urllib.parse import urlsplit

from django.conf import settings
from django.db import models

from core import clock


def http_url(text: str | None) -> str:
    """`text` if it is an http(s) URL with a host, else "": upstream and replay data may carry
    `javascript:` or `data:` URLs, which must never become a link (or reach an API client)."""
    value = (text or "").strip()
    try:
        parts = urlsplit(value)
    except ValueError:
        return ""
    return value if parts.scheme.lower() in ("http", "https") and parts.hostname else ""


class MarketQuerySet(models.QuerySet):
    def open(self):
        return self.filter(status=Market.Status.OPEN)

    def live(self):
        """The markets this deployment's live path syncs, prices and resolves (see
        live_path_source): Polymarket's, or the rehearsal stand-in's under ARENA_SCOPE=rehearsal."""
        return self.filter(source=live_path_source())

    def top_by_volume(self, n: int):
        return self.open().order_by("-volume", "id")[:n]


def live_path_source() -> str:
    """The market source the live path (sync, back-fill, upstream resolution) reads and writes.
    A rehearsal runs that same path against a Polymarket stand-in; its markets get their own
    source so they can never be mistaken for, or mixed with, real Polymarket ones."""
    if settings.ARENA_SCOPE == "rehearsal":
        return Market.Source.REHEARSAL
    return Market.Source.POLYMARKET


class Market(models.Model):
    class Source(models.TextChoices):
        POLYMARKET = "polymarket", "Polymarket"
        FORECASTBENCH = "forecastbench", "ForecastBench replay"
        DEMO = "demo", "Synthetic demo"
        REHEARSAL = "rehearsal", "Rehearsal stand-in"

    class Kind(models.TextChoices):
        BINARY = "binary", "Binary"
        MULTI = "multi", "Multi-outcome"

    class Status(models.TextChoices):
        OPEN = "open", "Open"
        CLOSED = "closed", "Closed, awaiting resolution"
        RESOLVED = "resolved", "Resolved"
        VOID = "void", "Void (50-50)"

    class ResolvedBy(models.TextChoices):
        UPSTREAM = "upstream", "Upstream (Polymarket)"
        ADMIN = "admin", "Staff"
        REPLAY = "replay", "Replay data"
        DEMO = "demo", "Demo generator"

    source = models.CharField(max_length=20, choices=Source.choices, default=Source.POLYMARKET)
    # Gamma market id for Polymarket, question id for ForecastBench, generated id for the demo.
    external_id = models.CharField(max_length=120)
    # For ForecastBench replays: the platform the question came from (polymarket, manifold, ...).
    platform = models.CharField(max_length=40, blank=True)
    condition_id = models.CharField(max_length=100, blank=True, db_index=True)
    slug = models.CharField(max_length=300, blank=True)
    event_slug = models.CharField(max_length=300, blank=True)
    event_title = models.CharField(max_length=500, blank=True)
    url = models.URLField(max_length=500, blank=True)
    question = models.TextField()
    description = models.TextField(blank=True, help_text="Resolution rules as given upstream")
    resolution_source = models.CharField(max_length=500, blank=True)
    category = models.CharField(max_length=120, blank=True)
    tags = models.JSONField(default=list, blank=True)

    kind = models.CharField(max_length=10, choices=Kind.choices, default=Kind.BINARY)
    outcomes = models.JSONField(default=list, help_text="Outcome names in upstream order")
    token_ids = models.JSONField(default=list, blank=True)
    # True only when outcomes are ordered bands of one quantity (RPS applies).
    ordered_outcomes = models.BooleanField(default=False)
    neg_risk = models.BooleanField(default=False)
    neg_risk_market_id = models.CharField(max_length=100, blank=True, db_index=True)
    group_item_title = models.CharField(max_length=200, blank=True)
    group_item_threshold = models.IntegerField(null=True, blank=True)

    open_time = models.DateTimeField(null=True, blank=True)
    close_time = models.DateTimeField(null=True, blank=True, help_text="Scheduled end")
    closed_time = models.DateTimeField(null=True, blank=True, help_text="When trading closed")
    volume = models.DecimalField(max_digits=20, decimal_places=2, default=0)
    liquidity = models.DecimalField(max_digits=20, decimal_places=2, default=0)

    status = models.CharField(max_length=10, choices=Status.choices, default=Status.OPEN)
    # Latest quote per outcome, {"Yes": "0.62", ...}: denormalised so snapshots and prompts
    # read prices for thousands of markets in one query.
    last_prices = models.JSONField(default=dict, blank=True)
    last_priced_at = models.DateTimeField(null=True, blank=True)
    uma_status = models.CharField(max_length=30, blank=True)
    resolved_outcome = models.CharField(max_length=200, blank=True)
    # When the resolution happened, as its source dates it (upstream: Polymarket's time).
    resolved_at = models.DateTimeField(null=True, blank=True)
    # When the arena recorded the market's current resolution state (markets.resolution), on the
    # clock of record: a score run can only have read a resolution recorded by its as_of,
    # whatever resolved_at says (scoring.load.known_at). Null for a market never recorded.
    resolution_recorded_at = models.DateTimeField(null=True, blank=True)
    resolved_by = models.CharField(max_length=10, choices=ResolvedBy.choices, blank=True)
    settled_at = models.DateTimeField(null=True, blank=True)

    # Kept in sync after leaving the top N while any position might still hold it.
    tracked = models.BooleanField(default=True)
    in_top = models.BooleanField(default=False)
    needs_attention = models.BooleanField(default=False)
    attention_reason = models.CharField(max_length=300, blank=True)
    upstream_missing = models.BooleanField(default=False)

    raw = models.JSONField(default=dict, blank=True, help_text="Last upstream payload")
    last_synced_at = models.DateTimeField(null=True, blank=True)
    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)

    objects = MarketQuerySet.as_manager()

    class Meta:
        constraints = [
            models.UniqueConstraint(
                fields=["source", "external_id"], name="market_source_external_uniq"
            )
        ]
        indexes = [
            models.Index(fields=["status", "-volume"], name="market_status_volume_idx"),
            models.Index(fields=["source", "status"], name="market_source_status_idx"),
        ]

    def __str__(self) -> str:
        return self.question[:80]

    @property
    def link(self) -> str:
        """The source page, only when it is http(s) (what templates and the API may show)."""
        return http_url(self.url)

    @property
    def is_replay(self) -> bool:
        return self.source == self.Source.FORECASTBENCH

    @property
    def is_demo(self) -> bool:
        return self.source == self.Source.DEMO


class PricePoint(models.Model):
    """One quote for one outcome at one time (mid, plus bid/ask where upstream gave them)."""

    market = models.ForeignKey(Market, on_delete=models.CASCADE, related_name="prices")
    outcome = models.CharField(max_length=200)
    ts = models.DateTimeField()
    price = models.DecimalField(max_digits=10, decimal_places=6)
    bid = models.DecimalField(max_digits=10, decimal_places=6, null=True, blank=True)
    ask = models.DecimalField(max_digits=10, decimal_places=6, null=True, blank=True)

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["market", "outcome", "ts"], name="pricepoint_uniq")
        ]
        indexes = [models.Index(fields=["market", "ts"], name="pricepoint_market_ts_idx")]


def staff_pseudonym(user_id: int | None) -> str:
    return f"staff {user_id}" if user_id is not None else ""


class ResolutionChange(models.Model):
    """Audit row for every change of a market's resolution (upstream or staff)."""

    market = models.ForeignKey(Market, on_delete=models.CASCADE, related_name="resolution_changes")
    changed_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL
    )
    source = models.CharField(max_length=10, choices=Market.ResolvedBy.choices)
    # The clock of record's time, so a change made in a replay or the demo carries its scope's
    # simulated time (the event log orders and stamps entries by it).
    changed_at = models.DateTimeField(
        "applies at (scope's clock)", default=clock.now, editable=False
    )
    # The wall clock when the change was made. For a live market it equals changed_at; for a
    # replay or the demo, changed_at is the scope's simulated time the change applies at, and
    # staff and visitors read both. Blank on rows written before this was kept.
    made_at = models.DateTimeField("made at (wall clock)", null=True, blank=True, editable=False)
    from_status = models.CharField(max_length=10)
    from_outcome = models.CharField(max_length=200, blank=True)
    to_status = models.CharField(max_length=10)
    to_outcome = models.CharField(max_length=200, blank=True)
    reason = models.TextField()

    class Meta:
        ordering = ["-changed_at", "-id"]

    def __str__(self) -> str:
        # Read in admin inlines and logs: what changed and when, without a query for the market.
        def side(status: str, outcome: str) -> str:
            return f"{status} {outcome}".strip() or "new"

        when = self.changed_at.strftime("%Y-%m-%d %H:%M") if self.changed_at else "?"
        return (
            f"Market {self.market_id}: {side(self.from_status, self.from_outcome)} → "
            f"{side(self.to_status, self.to_outcome)} ({self.source}, {when} UTC)"
        )

    @property
    def staff_name(self) -> str:
        """Who changed it, as public pages, the API and the seal name staff: a stable pseudonym
        the admin resolves (the user's id), never the username."""
        return staff_pseudonym(self.changed_by_id)
