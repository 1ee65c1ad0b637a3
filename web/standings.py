"""How a stored leaderboard reads on a page: who is ranked, who is tied, how many digits.

The score run stores rows, ranks and the paired tests; this module only decides how a reader
sees them, with rules a reader can check:
- scored rows are those with the headline number; the others are listed apart, without a rank,
  with the reason they have none;
- groups: a compact letter display of the paired Diebold-Mariano tests (Brier loss, Bonferroni
  level, computed by the score run): two ranked rows share a letter exactly when their test did
  not find them different, so rows sharing a letter are never significantly different from
  each other, whatever lies between them;
- digits: each column gets the fewest decimals (at least its default) that tell neighbouring
  rows apart and leave no non-zero interval end printed as a bare zero;
- provisional: the stored flag of every row (one rule for all), stated in words;
- the clock: live runs are "as of" a real time; replay and demo runs are on a simulated clock.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from datetime import datetime
from decimal import Decimal
from typing import Any

from django.db.models import QuerySet
from django.db.models.fields.json import KeyTransform

from core.methodology import CONSTANTS
from scoring import metrics
from scoring.models import LeaderboardRow, ScoreRun
from scoring.stored import CommonView, Coverage, DmPair, GroupCounts, Methodology, RunDetails

MAX_PLACES = 6
PROVISIONAL_DELTA = f"{CONSTANTS.provisional_brier_delta:g}"  # the Brier edge it is sized for
HEADLINES = {
    "brier_skill_vs_market": ("skill_vs_market", "skill vs market"),
    "return_pct": ("return_pct", "return"),
}


@dataclass
class Standing:
    row: LeaderboardRow
    rank: int | None = None  # shown rank: position among the scored rows
    letters: str = ""  # its groups in the compact letter display ("" without paired tests)
    differs_from: list[str] = field(default_factory=list)  # ranked rows it differs from
    reason: str = ""  # why an unscored row has no rank

    def __getattr__(self, name: str) -> Any:  # templates read row fields straight through
        return getattr(self.row, name)


@dataclass
class Clock:
    simulated: bool
    at: datetime | None
    computed_at: datetime | None


@dataclass
class Board:
    scored: list[Standing] = field(default_factory=list)
    unscored: list[Standing] = field(default_factory=list)
    headline: str = ""
    headline_label: str = ""
    places: dict[str, int] = field(default_factory=dict)
    grouped: bool = False  # whether the paired tests exist for this group
    n_groups: int = 0
    required_n: set[int] = field(default_factory=set)
    clock: Clock | None = None

    @property
    def provisional_rule(self) -> str:
        if len(self.required_n) == 1:
            (n,) = self.required_n
            return (
                f"Provisional: fewer than {n} resolved questions, the number the methodology "
                f"needs to detect a {PROVISIONAL_DELTA} difference in Brier score; the same rule "
                "for every row."
            )
        if self.required_n:
            return (
                "Provisional: fewer resolved questions than the methodology's sample size for "
                f"detecting a {PROVISIONAL_DELTA} Brier difference (this methodology version sizes "
                "it per competitor; the number needed is in each badge)."
            )
        return "Provisional: no resolved question yet."


def table_rows(rows: QuerySet[LeaderboardRow]) -> QuerySet[LeaderboardRow]:
    """Leaderboard rows as a standings table reads them: of `details` (calibration bins, tests,
    portfolios: kilobytes a row, parsed whole on access) only the methodology it shows, as
    `shown_methodology` (row_methodology reads it)."""
    return rows.defer("details").annotate(
        shown_methodology=KeyTransform("methodology", "details"),
        shown_coverage=KeyTransform("coverage", "details"),
        shown_common=KeyTransform("common", "details"),
    )


def row_coverage(row: LeaderboardRow) -> Coverage | None:
    """The row's coverage (questions scored of those asked), from table_rows' field or the
    row's details."""
    if "shown_coverage" in row.__dict__:
        return Coverage.from_json(row.shown_coverage)
    return row.stored_details.coverage


def row_common(row: LeaderboardRow) -> CommonView | None:
    if "shown_common" in row.__dict__:
        return CommonView.from_json(row.shown_common)
    return row.stored_details.common


def coverage_text(c: Coverage | None) -> tuple[str, str]:
    """("383 / 467", a sentence) of a row's coverage; ("", "") before coverage was stored."""
    if c is None or c.asked is None or c.scored is None:
        return "", ""
    share = f" ({100 * c.scored / c.asked:.0f}%)" if c.asked else ""
    return (
        f"{c.scored} / {c.asked}",
        f"Scored {c.scored} of the {c.asked} resolved questions the forecast samples asked it"
        f"{share}",
    )


def row_methodology(row: LeaderboardRow) -> Methodology | None:
    """The methodology a row was scored with, from the one field a table reads
    (table_rows) or else from the row's whole details."""
    if "shown_methodology" in row.__dict__:
        return Methodology.from_json(row.shown_methodology)
    return row.stored_details.methodology


def unscored_reason(row: LeaderboardRow, headline_field: str) -> str | None:
    """Why a row has no rank, or None when it is scored."""
    if row.n_forecasts == 0 and not row.tokens and not _nonzero(row.pnl):
        return "no forecast made yet"
    if getattr(row, headline_field, None) is None:
        if row.n_resolved == 0:
            return "none of its forecasts has resolved"
        return "no resolved forecast with a market price"
    return None


def _nonzero(value) -> bool:
    try:
        return Decimal(str(value)) != 0
    except Exception:  # noqa: BLE001 - a non-number is simply not a non-zero amount
        return False


def build(
    run: ScoreRun | None,
    rows: list[LeaderboardRow],
    group: str = "all",
    ranked_order: list[LeaderboardRow] | None = None,
    *,
    details: RunDetails,
) -> Board:
    """The board of one group ("all" or a cohort id) of a run. `rows` is the display order
    (any sort); ranks and letters always follow the run's own rank order. `details`: the
    group's (its BoardSlice, scoring.selectors.group_details) or the run's. Required, so no
    page falls back to reading a run's whole details (140 kB) without saying so."""
    headline = details.headline(group)
    headline = headline if headline in HEADLINES else "brier_skill_vs_market"
    field_name, label = HEADLINES[headline]
    board = Board(headline=headline, headline_label=label)
    standing = {r.pk: Standing(row=r) for r in rows}
    order = sorted(ranked_order or rows, key=lambda r: (r.rank is None, r.rank or 0, r.pk))
    scored_order = []
    for r in order:
        s = standing.get(r.pk) or Standing(row=r)
        reason = unscored_reason(r, field_name)
        if reason:
            s.reason = reason
        else:
            scored_order.append(s)
    for i, s in enumerate(scored_order, start=1):
        s.rank = i
    pairs = _pairs(details, group)
    board.grouped = bool(pairs) and headline == "brier_skill_vs_market"
    if board.grouped:
        group_letters(scored_order, pairs)
        board.n_groups = len({ch for s in scored_order for ch in _letter_set(s.letters)})
    board.scored = [standing[r.pk] for r in rows if r.pk in standing and not standing[r.pk].reason]
    board.unscored = [standing[r.pk] for r in order if r.pk in standing and standing[r.pk].reason]
    board.required_n = {r.required_n for r in rows if r.required_n}
    board.places = column_places([s.row for s in scored_order])
    board.clock = clock(run)
    return board


def _pairs(details: RunDetails, group: str) -> dict[frozenset[str], DmPair]:
    return {frozenset((p.a or "", p.b or "")): p for p in details.dm_for(group).brier}


def group_letters(ranked: list[Standing], pairs: dict[frozenset[str], DmPair]) -> None:
    """Set each ranked standing's letters (compact letter display, top row "a") and the rows it
    differs from significantly. A pair without a test (too few common questions) is not a
    difference."""
    slug = {s.row.competitor.slug: s for s in ranked}
    different = [
        (p.a, p.b)
        for p in pairs.values()
        if p.verdict in ("a_better", "b_better") and p.a in slug and p.b in slug
    ]
    letters = metrics.compact_letters([s.row.competitor.slug for s in ranked], different)
    for s in ranked:
        s.letters = letters[s.row.competitor.slug]
        s.differs_from = []
    for a, b in different:
        slug[a].differs_from.append(slug[b].row.competitor.display_name)
        slug[b].differs_from.append(slug[a].row.competitor.display_name)


def _letter_set(letters: str) -> list[str]:
    """The letters of a display string ("ab" -> a, b; long tables use "a2"-style letters)."""
    out: list[str] = []
    for ch in letters:
        if ch.isdigit() and out:
            out[-1] += ch
        else:
            out.append(ch)
    return out


def share_a_letter(a: Standing, b: Standing) -> bool:
    return bool(set(_letter_set(a.letters)) & set(_letter_set(b.letters)))


def counts_text(counts: GroupCounts | None) -> str:
    """A group's header in plain words: how many markets and forecasts, and what a forecast is.
    Empty for a run stored before the counts were."""
    if counts is None or counts.markets is None:
        return ""

    def n(value: int | None, one: str, many: str) -> str:
        value = value or 0
        return f"{value:,} {one if value == 1 else many}"

    return (
        f"{n(counts.cohorts, 'cohort', 'cohorts')} · {n(counts.markets, 'market', 'markets')} asked, forecast or traded, "
        f"{counts.markets_resolved or 0:,} resolved · "
        f"{n(counts.competitors, 'competitor', 'competitors')} · "
        f"{n(counts.forecasts, 'forecast', 'forecasts')} (one competitor's probabilities for one "
        f"market at one decision), {counts.forecasts_resolved or 0:,} of them on resolved markets"
        f" · {n(counts.common_questions, 'common question', 'common questions')}"
    )


@dataclass
class CommonLine:
    standing: Standing
    view: CommonView


def common_lines(board: Board) -> list[CommonLine]:
    """The common-question view of a board's rows (frozen common_set_imputation): every row
    with one, best skill first. It does not rank (ranking_view): no rank is printed."""
    lines = [
        CommonLine(s, view)
        for s in board.scored + board.unscored
        if (view := row_common(s.row)) is not None and view.questions
    ]
    return sorted(
        lines,
        key=lambda c: (c.view.skill is None, -(c.view.skill or 0.0), c.standing.row.competitor_id),
    )


# --- digits ------------------------------------------------------------------------------

COLUMNS = {
    # column: (value field, interval fields, default places)
    "brier": ("brier", ("brier_lo", "brier_hi"), 3),
    "skill": ("skill_vs_market", ("skill_lo", "skill_hi"), 3),
    "log_score": ("log_score", (), 3),
    "return": ("return_pct", ("return_lo", "return_hi"), 1),
}


def column_places(rows: list[LeaderboardRow]) -> dict[str, int]:
    """Decimals per column: see the module docstring."""
    out = {}
    for col, (value_field, ci_fields, default) in COLUMNS.items():
        values = [_float(getattr(r, value_field)) for r in rows]
        ends = [_float(getattr(r, f)) for r in rows for f in ci_fields]
        out[col] = places_to_separate(values, ends, default)
    return out


def places_to_separate(values: list, ends: list, default: int, cap: int = MAX_PLACES) -> int:
    """Fewest decimals >= default at which neighbouring distinct values print differently and
    no non-zero value or interval end prints as zero (up to `cap`)."""
    for places in range(default, cap + 1):
        if _separates(values, places) and _no_false_zero(values + ends, places):
            return places
    return cap


def _separates(values: list, places: int) -> bool:
    shown = [v for v in values if v is not None]
    for a, b in zip(shown, shown[1:], strict=False):
        if a != b and round(a, places) == round(b, places):
            return False
    return True


def _no_false_zero(values: list, places: int) -> bool:
    return all(v is None or v == 0 or round(abs(v), places) != 0 for v in values)


def _float(v) -> float | None:
    if v is None:
        return None
    f = float(v)
    return f if math.isfinite(f) else None


# --- the clock ---------------------------------------------------------------------------


def clock(run: ScoreRun | None) -> Clock | None:
    if run is None:
        return None
    return Clock(
        simulated=run.scope != ScoreRun.Scope.LIVE, at=run.as_of, computed_at=run.finished_at
    )
