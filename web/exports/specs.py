"""What each export emits: its rows (a queryset builder), its date field and its columns, in the
order they are published (web/exports/files.py streams them; docs/verification.md names the hashes).
A column added after an export was published goes in `appended`, so every existing column keeps
its place in CSV and JSON."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from django.db.models import OuterRef, QuerySet, Subquery

from cohorts.models import Decision, Forecast, Position, Snapshot, Trade, Universe
from cohorts.seals.models import DecisionDigest, WeekSeal
from scoring.models import LeaderboardRow, ScoreRun

CHUNK = 2_000  # rows per database fetch for small rows


@dataclass(frozen=True)
class Spec:
    """One export: its rows (queryset builder), its date field, and the columns it emits.

    `date_field` is the lookup of one of the emitted columns: dates filter what is shown.
    """

    title: str
    description: str
    base: Callable[[], QuerySet]
    date_field: str
    cohort_field: str
    kind_field: str
    columns: tuple[tuple[str, str], ...]  # (output column, queryset lookup)
    # Rows that do not come from one decision carry their cohort's root (seals.cohort_root).
    cohort_root: bool = False
    # Forecast rows also carry what their universe showed for the market's outcomes
    # (multi-outcome markets only: the prices the unstated outcomes are completed with).
    shown_prices: bool = False
    # Leaderboard rows are ranked as the pages rank them: an unscored row has no rank, and
    # `unranked_reason` says why (web/standings.py, the one place that decides it).
    page_ranks: bool = False
    chunk: int = CHUNK  # rows per fetch: small for wide rows, so memory stays bounded
    # Queried columns added after the export was published: emitted after every other column,
    # computed ones included, so each existing column keeps its place in CSV and JSON.
    appended: tuple[tuple[str, str], ...] = ()
    # Leaderboard rows also carry the page's group letters, after the appended columns.
    page_letters: bool = False
    # Universe rows also carry their forecast sample's markets (outcomes, shown prices and
    # resolution): the questions a week asked (coverage, the common-question view).
    sample_markets: bool = False

    @property
    def header(self) -> list[str]:
        """Every column a row carries, in order: the queried ones, then the computed ones."""
        return (
            [c for c, _ in self.columns]
            + (["cohort_root"] if self.cohort_root else [])
            + (["shown_prices"] if self.shown_prices else [])
            + (["unranked_reason"] if self.page_ranks else [])
            + [c for c, _ in self.appended]
            + (["group_letters"] if self.page_letters else [])
            + (["sample"] if self.sample_markets else [])
        )

    @property
    def date_column(self) -> str:
        return next(name for name, lookup in self.columns if lookup == self.date_field)


def _decision_hash(decision_ref: str):
    """The record hash of the decision's latest digest (its amendment, if any)."""
    latest = DecisionDigest.objects.filter(decision_id=OuterRef(decision_ref)).order_by("-seq")
    return Subquery(latest.values("record_hash")[:1])


def _week_root():
    latest = WeekSeal.objects.filter(
        cohort_id=OuterRef("entry__cohort_id"), week=OuterRef("week")
    ).order_by("-seq")
    return Subquery(latest.values("root")[:1])


def _entry_cols(prefix: str) -> tuple[tuple[str, str], ...]:
    return (
        ("cohort_id", f"{prefix}cohort_id"),
        ("cohort_kind", f"{prefix}cohort__kind"),
        ("competitor", f"{prefix}competitor__slug"),
        ("competitor_simulated", f"{prefix}competitor__simulated"),
        ("replicate", f"{prefix}replicate"),
    )


SPECS: dict[str, Spec] = {
    "decisions": Spec(
        title="Decisions",
        description="every weekly decision with its prompts, parsed answer, tokens and cost",
        base=lambda: Decision.objects.annotate(
            sealed_hash=_decision_hash("pk"), sealed_root=_week_root()
        ),
        date_field="decided_at",
        cohort_field="entry__cohort_id",
        kind_field="entry__cohort__kind",
        columns=(
            ("decision_id", "id"),
            *_entry_cols("entry__"),
            ("week", "week"),
            ("status", "status"),
            ("action", "action"),
            ("decided_at", "decided_at"),
            ("reasoning", "reasoning"),
            ("parsed", "parsed"),
            ("validation_errors", "validation_errors"),
            ("hold_reason", "hold_reason"),
            ("error", "error"),
            ("prompt_version", "prompt_version"),
            ("prompt_sha256", "prompt_sha256"),
            ("universe_hash", "universe_hash"),
            ("system_prompt", "system_prompt"),
            ("user_prompt", "user_prompt"),
            ("tokens_in", "tokens_in"),
            ("tokens_out", "tokens_out"),
            ("cost_usd", "cost_usd"),
            ("latency_ms", "latency_ms"),
            ("record_hash", "sealed_hash"),
            ("week_root", "sealed_root"),
            # The release the decision called (sealed with it since record format /2).
            ("release_number", "release__number"),
            ("release_model_id", "release__model_id"),
            ("release_provider", "release__provider"),
            ("release_endpoint", "release__base_url"),
        ),
        chunk=16,  # each row holds both prompts (up to ~1 MB): 16 rows is ~16 MB at worst
        # When a decision that never finished was claimed: a score run reads a decision made
        # (or, unfinished, claimed) by its as_of, and counts its forecast sample as asked.
        appended=(("claimed_at", "claimed_at"),),
    ),
    "trades": Spec(
        title="Trades",
        description="every paper buy and sell with its price, shares and realized P/L",
        base=lambda: Trade.objects.annotate(decision_hash=_decision_hash("decision_id")),
        date_field="executed_at",
        cohort_field="entry__cohort_id",
        kind_field="entry__cohort__kind",
        columns=(
            ("trade_id", "id"),
            *_entry_cols("entry__"),
            ("decision_id", "decision_id"),
            ("market_id", "position__market_id"),
            ("question", "position__market__question"),
            ("outcome", "position__outcome"),
            ("side", "side"),
            ("amount", "amount"),
            ("shares", "shares"),
            ("price", "price"),
            ("realized_pnl", "realized_pnl"),
            ("executed_at", "executed_at"),
            ("decision_hash", "decision_hash"),
            # The market's resolution, for the win rate `arena verify --scores` recomputes.
            ("market_status", "position__market__status"),
            ("resolved_outcome", "position__market__resolved_outcome"),
            ("resolved_at", "position__market__resolved_at"),
        ),
        appended=(
            ("resolution_recorded_at", "position__market__resolution_recorded_at"),
            # The closing line the latest score run used for a BUY (null: none later than the
            # trade), from which its closing-line value is close_price - price.
            ("close_price", "clv__close_price"),
        ),
    ),
    "snapshots": Spec(
        title="Snapshots",
        description="each entry's cash and positions marked to market, every 10 minutes",
        base=lambda: Snapshot.objects.all(),
        date_field="ts",
        cohort_field="entry__cohort_id",
        kind_field="entry__cohort__kind",
        columns=(
            ("entry_id", "entry_id"),
            *_entry_cols("entry__"),
            ("ts", "ts"),
            ("cash", "cash"),
            ("positions_value", "positions_value"),
            ("total", "total"),
            ("realized_pnl", "realized_pnl"),
            ("unrealized_pnl", "unrealized_pnl"),
            # The entry's starting cash: P/L and return are measured from it.
            ("initial_balance", "entry__initial_balance"),
        ),
        cohort_root=True,
    ),
    "forecasts": Spec(
        title="Forecasts",
        description="every stated probability next to the market price seen, with the outcome",
        base=lambda: Forecast.objects.annotate(decision_hash=_decision_hash("decision_id")),
        date_field="created_at",
        cohort_field="entry__cohort_id",
        kind_field="entry__cohort__kind",
        columns=(
            ("forecast_id", "id"),
            *_entry_cols("entry__"),
            ("decision_id", "decision_id"),
            ("week", "decision__week"),
            ("market_id", "market_id"),
            ("outcome", "outcome"),
            ("probability", "probability"),
            ("market_price", "market_price"),
            ("source", "source"),
            ("created_at", "created_at"),
            ("market_status", "market__status"),
            ("resolved_outcome", "market__resolved_outcome"),
            ("decision_hash", "decision_hash"),
            # What `arena verify --scores` needs to score the row as the run did: the market's
            # outcomes in order (a forecast's place in the vector) and when it resolved (a
            # resolution after the run's as_of was not known to it).
            ("market_outcomes", "market__outcomes"),
            ("resolved_at", "market__resolved_at"),
        ),
        shown_prices=True,
        # When the arena recorded the resolution: what a run could have read (load.known_at).
        appended=(("resolution_recorded_at", "market__resolution_recorded_at"),),
    ),
    "scores": Spec(
        title="Scores",
        description="leaderboard rows of every finished score run, with intervals",
        base=lambda: LeaderboardRow.objects.filter(run__status=ScoreRun.Status.DONE),
        date_field="run__as_of",
        cohort_field="cohort_id",
        kind_field="run__scope",
        columns=(
            ("run_id", "run_id"),
            # The run's scope is the kind of every cohort it covers.
            ("cohort_kind", "run__scope"),
            ("as_of", "run__as_of"),
            ("methodology_hash", "run__methodology_hash"),
            ("cohort_id", "cohort_id"),
            ("competitor", "competitor__slug"),
            ("competitor_simulated", "competitor__simulated"),
            ("rank", "rank"),
            ("n_forecasts", "n_forecasts"),
            ("n_resolved", "n_resolved"),
            ("brier", "brier"),
            ("brier_lo", "brier_lo"),
            ("brier_hi", "brier_hi"),
            ("log_score", "log_score"),
            ("skill_vs_market", "skill_vs_market"),
            ("skill_lo", "skill_lo"),
            ("skill_hi", "skill_hi"),
            ("return_pct", "return_pct"),
            ("return_lo", "return_lo"),
            ("return_hi", "return_hi"),
            ("pnl", "pnl"),
            ("win_rate", "win_rate"),
            ("cost_usd", "cost_usd"),
            ("provisional", "provisional"),
        ),
        cohort_root=True,
        page_ranks=True,
        appended=(
            ("methodology_version", "run__methodology_version"),
            ("bss_vs_uniform", "bss_vs_half"),
            ("questions_asked", "details__coverage__asked"),
            ("questions_scored", "details__coverage__scored"),
            ("common_questions", "details__common__questions"),
            ("common_own", "details__common__own"),
            ("common_brier", "details__common__brier"),
            ("common_skill", "details__common__skill"),
            ("common_skill_lo", "details__common__skill_lo"),
            ("common_skill_hi", "details__common__skill_hi"),
            ("clv_trades", "details__clv__n"),
            ("edge_label", "details__edge_label"),
            ("edge_p_holm", "details__clv__p_holm"),
            ("edge_borderline", "details__clv__borderline"),
        ),
        page_letters=True,
    ),
    "positions": Spec(
        title="Positions",
        description="every position with its cost, realized P/L and its market's last price",
        base=lambda: Position.objects.all(),
        date_field="opened_at",
        cohort_field="entry__cohort_id",
        kind_field="entry__cohort__kind",
        columns=(
            ("position_id", "id"),
            *_entry_cols("entry__"),
            ("market_id", "market_id"),
            ("outcome", "outcome"),
            ("shares", "shares"),
            ("cost_basis", "cost_basis"),
            ("realized_pnl", "realized_pnl"),
            ("status", "status"),
            ("opened_at", "opened_at"),
            ("closed_at", "closed_at"),
            ("market_status", "market__status"),
            ("resolved_outcome", "market__resolved_outcome"),
            ("resolved_at", "market__resolved_at"),
            ("resolution_recorded_at", "market__resolution_recorded_at"),
            ("market_outcomes", "market__outcomes"),
            # The price an open position is marked at (the market's latest, as a score run reads
            # it now): positions export and latest run agree while no price has moved since.
            ("last_prices", "market__last_prices"),
        ),
    ),
    "universes": Spec(
        title="Universes",
        description="each cohort-week's frozen market list: its forecast sample with the prices shown",
        base=lambda: Universe.objects.all(),
        date_field="frozen_at",
        cohort_field="cohort_id",
        kind_field="cohort__kind",
        columns=(
            ("cohort_id", "cohort_id"),
            ("cohort_kind", "cohort__kind"),
            ("week", "week"),
            ("frozen_at", "frozen_at"),
            ("content_hash", "content_hash"),
            ("forecast_sample", "forecast_sample"),
        ),
        sample_markets=True,
        chunk=50,
    ),
}
# The sealed records themselves (JSON only): what `arena verify --export` checks.
