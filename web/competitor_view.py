"""What the competitor page shows beside its metrics table: the other stored measures as
labelled figures with a one-line explanation each, and the competitor's row of the paired
Diebold-Mariano tests under the other competitors' names.
"""

from __future__ import annotations

from dataclasses import dataclass

from agents.models import Competitor
from scoring import selectors as scoring_selectors
from scoring.models import ScoreRun
from scoring.stored import RowDetails


@dataclass(frozen=True)
class Measure:
    label: str
    value: str  # already formatted; "n/a" with the reason in `explain` when there is none
    explain: str


def _number(v: object, digits: int = 4) -> str:
    if isinstance(v, bool):
        return "yes" if v else "no"
    if isinstance(v, float):
        return f"{v:.{digits}g}"
    if isinstance(v, int):
        return f"{v:,}"
    return "n/a" if v is None else str(v)


def _share(v: object) -> str:
    return f"{100 * v:.1f}%" if isinstance(v, int | float) else "n/a"


# Measures the page draws in their own sections; every other stored scalar is listed after the
# described ones under its own name, so a new stored measure is never hidden.
DRAWN = {
    "calibration", "murphy", "clv", "edge_label", "tournament", "slug", "display_name",
    "champions_clothes", "methodology", "brier_multiclass", "bss_vs_base_rate", "money_source",
    "information_test",
}  # fmt: skip


def measures(details: RowDetails) -> list[Measure]:
    """The other measures of a leaderboard row, each with its label and what it means."""
    d = details
    out = [
        Measure(
            "Bets won / lost",
            f"{_number(d.bets_won)} / {_number(d.bets_lost)}",
            "Counted per bet: every BUY on a market resolved by the score time (void markets "
            "left out), whether its outcome won. The win rate is bets won over both.",
        ),
        Measure(
            "Positions won / lost",
            f"{_number(d.settled_won)} / {_number(d.settled_lost)}",
            "Counted per settled position: several bets on one outcome of one market average "
            "into one position, which settles once, so there are fewer positions than bets.",
        ),
        Measure(
            "Expected calibration error (ECE)",
            _number(d.ece),
            "Mean gap between stated probability and observed frequency over the calibration "
            "bins, weighted by forecasts per bin; 0 is perfectly calibrated.",
        ),
        Measure(
            "Brier skill score vs market",
            _number(d.bss_vs_market),
            "1 - (mean Brier) / (market's mean Brier) on the same questions: the headline's "
            "comparison as a ratio, same sign, other scale.",
        ),
        Measure(
            "Base rate of YES",
            _share(d.base_rate),
            f"Share of YES among the {_number(d.n_binary)} resolved binary questions: the "
            "constant forecast the base-rate skill score compares with.",
        ),
        Measure(
            "Questions with a market price",
            _number(d.n_with_price),
            "Resolved questions where every stated outcome had a shown price: the questions "
            "skill vs market is computed on.",
        ),
        Measure(
            "Ranked probability score",
            _number(d.rps.rps) if d.rps and d.rps.rps is not None else "n/a",
            f"Over {_number(d.rps.n)} markets with ordered outcomes; lower is better."
            if d.rps and d.rps.n
            else "Only markets with ordered outcomes (e.g. ranges) get one; none resolved yet.",
        ),
        Measure(
            "Bets in the implied-confidence diagnostic",
            _number(d.implied_confidence_n),
            "Bets whose stake share of the allowed maximum is read as a confidence.",
        ),
        Measure(
            "Entries",
            _number(d.entries),
            "Weekly entries (and replicates) pooled into this row.",
        ),
    ]
    described = {
        "bets_won", "bets_lost", "settled_won", "settled_lost", "ece", "bss_vs_market",
        "base_rate", "n_binary", "n_with_price", "rps", "implied_confidence_n", "entries",
        "brier_convention",
    }  # fmt: skip
    for key, value in sorted(d.to_json().items()):
        if key in DRAWN or key in described or isinstance(value, dict | list):
            continue
        out.append(Measure(key.replace("_", " ").capitalize(), _number(value), ""))
    return out


@dataclass(frozen=True)
class DmCell:
    """One pair of the Diebold-Mariano matrix, seen from the page's competitor: a negative
    statistic or mean difference favours it."""

    other: str  # slug, for the link
    other_name: str
    n: int | None
    mean_diff: float | None
    stat: float | None
    p: float | None
    level: float | None
    verdict: str  # "better", "worse" or "no difference"


def dm_row(run: ScoreRun | None, competitor: Competitor) -> list[DmCell]:
    """This competitor's row of the run's all-cohorts Diebold-Mariano matrix (Brier loss)."""
    if run is None:
        return []
    tests = scoring_selectors.group_details(run, "all").dm_for("all")
    pairs = [p for p in tests.brier if competitor.slug in (p.a, p.b)]
    others = {(p.b if p.a == competitor.slug else p.a) or "" for p in pairs}
    names = dict(Competitor.objects.filter(slug__in=others).values_list("slug", "display_name"))
    out = []
    for pair in pairs:
        mine_first = pair.a == competitor.slug
        sign = 1 if mine_first else -1
        winner = {"a_better": pair.a, "b_better": pair.b}.get(pair.verdict or "")
        if winner is None:
            verdict = "no difference"
        else:
            verdict = "better" if winner == competitor.slug else "worse"
        other = (pair.b if mine_first else pair.a) or ""
        out.append(
            DmCell(
                other=other,
                other_name=names.get(other, other),
                n=pair.n,
                mean_diff=_signed(pair.mean_diff, sign),
                stat=_signed(pair.stat, sign),
                p=pair.p,
                level=pair.level,
                verdict=verdict,
            )
        )
    return sorted(out, key=lambda r: r.other_name.lower())


def _signed(value: float | None, sign: int) -> float | None:
    return value * sign if isinstance(value, int | float) else None
