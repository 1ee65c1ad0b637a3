"""The stored results of a score run, typed: what LeaderboardRow.details and ScoreRun.details hold.

One dataclass per JSON object. `to_json` gives the exact keys, in the exact order, that the engine
stores (scoring/present.py and scoring/services.py write through it), so a stored row read with
`from_json` writes back byte for byte. `from_json` is the one reader pages and the API use: a key
an older run did not store reads as None (or empty), never as a KeyError, so readers test
attributes instead of chaining `.get()`.

Values are JSON values (numbers already finite or None); scoring/present.py's json_safe turns the
engine's numpy numbers into them before anything is stored.
"""

from __future__ import annotations

import functools
from collections.abc import Sequence
from dataclasses import dataclass, field, fields
from typing import Any, TypeVar

Json = dict[str, Any]
T = TypeVar("T")


def _obj(data: object) -> Json | None:
    return data if isinstance(data, dict) else None


def _list(data: object) -> list[Any]:
    return data if isinstance(data, list) else []


@functools.cache
def _names(cls: type) -> tuple[str, ...]:
    # dataclasses.fields() builds its answer on every call: a board reads hundreds of pairs.
    return tuple(f.name for f in fields(cls))


def _flat(cls: type[T], data: object) -> T | None:
    """A dataclass of scalars from a JSON object (None when there is no object)."""
    obj = _obj(data)
    if obj is None:
        return None
    return cls(**{name: obj.get(name) for name in _names(cls)})  # type: ignore[arg-type]


def _flat_json(obj: object) -> Json:
    return {f.name: getattr(obj, f.name) for f in fields(obj)}  # type: ignore[arg-type]


@dataclass(frozen=True)
class Interval:
    """A confidence interval; either end None when it cannot be computed."""

    lo: float | None
    hi: float | None


@dataclass(frozen=True)
class CalibrationBin:
    """One bin of the reliability table (metrics.calibration): an empty bin keeps its edges."""

    lo: float | None
    hi: float | None
    n: int | None
    mean_p: float | None
    freq: float | None
    freq_lo: float | None
    freq_hi: float | None


@dataclass(frozen=True)
class Murphy:
    """The Brier decomposition: brier = rel - res + unc + wbv - wbc (metrics.murphy)."""

    rel: float | None
    res: float | None
    unc: float | None
    wbv: float | None
    wbc: float | None
    brier: float | None
    n: int | None


@dataclass(frozen=True)
class Multiclass:
    """The summed Brier (1950) over markets with more than two outcomes, with its convention."""

    value: float | None
    n: int | None
    convention: str | None


@dataclass(frozen=True)
class Rps:
    """Mean ranked probability score over ordered multi-outcome markets."""

    rps: float | None
    n: int | None


@dataclass(frozen=True)
class Methodology:
    """The methodology version that scored a row, next to the versions its cohorts trade under."""

    version: str | None
    hash: str | None
    cohort_versions: list[str] = field(default_factory=list)

    @classmethod
    def from_json(cls, data: object) -> Methodology | None:
        obj = _obj(data)
        if obj is None:
            return None
        return cls(obj.get("version"), obj.get("hash"), _list(obj.get("cohort_versions")))


@dataclass(frozen=True)
class Clv:
    """Closing-line value of a competitor's BUY trades. Without a single closing line only n (0),
    label (None: n/a, which is not "no edge") and flag are stored."""

    n: int | None
    label: str | None
    flag: str | None
    mean_prob: float | None = None
    mean_logodds: float | None = None
    z: float | None = None
    z_p: float | None = None
    sharpe: float | None = None
    sharpe_bc: float | None = None
    block_length: float | None = None
    ci90: Sequence[float | None] | None = None
    ci95: Sequence[float | None] | None = None
    p: float | None = None  # one-sided bootstrap p of no positive edge
    p_se: float | None = None  # its Monte Carlo standard error
    p_holm: float | None = None  # Holm-adjusted across the group (methodology v3)
    borderline: bool | None = None  # the label is within edge_borderline_z MC errors of a level

    @classmethod
    def from_json(cls, data: object) -> Clv | None:
        obj = _obj(data)
        if obj is None:
            return None
        return cls(**{f.name: obj.get(f.name) for f in fields(cls)})

    def to_json(self) -> Json:
        if not self.n:
            return {"n": self.n, "label": self.label, "flag": self.flag}
        return {
            "n": self.n,
            "mean_prob": self.mean_prob,
            "mean_logodds": self.mean_logodds,
            "z": self.z,
            "z_p": self.z_p,
            "sharpe": self.sharpe,
            "sharpe_bc": self.sharpe_bc,
            "block_length": self.block_length,
            "ci90": self.ci90,
            "ci95": self.ci95,
            "p": self.p,
            "p_se": self.p_se,
            "p_holm": self.p_holm,
            "borderline": self.borderline,
            "label": self.label,
            "flag": self.flag,
        }


@dataclass(frozen=True)
class Champions:
    """Champion's clothes: the stated probabilities through the standard trading layer, beside
    the real money."""

    paper_pnl: float | None
    paper_return_pct: float | None
    paper_bets: int | None
    paper_clv_mean: float | None
    real_pnl: Any  # a Decimal while computing, a float once stored
    real_clv_mean: float | None


@dataclass(frozen=True)
class Coverage:
    """Questions the scope asked a competitor that resolved, and how many of them it scored
    (frozen question_coverage)."""

    asked: int | None
    scored: int | None

    @classmethod
    def from_json(cls, data: object) -> Coverage | None:
        return _flat(cls, data)


@dataclass(frozen=True)
class CommonView:
    """A competitor on the group's common questions, missing forecasts imputed by the price
    shown (frozen common_set_imputation): it never ranks (ranking_view)."""

    questions: int | None
    own: int | None  # of them, questions it forecast itself
    brier: float | None
    skill: float | None
    skill_lo: float | None
    skill_hi: float | None

    @classmethod
    def from_json(cls, data: object) -> CommonView | None:
        return _flat(cls, data)


@dataclass(frozen=True)
class TournamentTake:
    """One competitor's line of a group's tournament table."""

    competitor: str | None
    questions: int | None
    score: float | None
    coverage: float | None
    take: float | None
    prize_share: float | None


@dataclass
class RowDetails:
    """Everything a leaderboard row stores beyond its columns (LeaderboardRow.details)."""

    slug: str | None = None
    display_name: str | None = None
    entries: int | None = None
    n_with_price: int | None = None
    bss_vs_market: float | None = None
    bss_vs_base_rate: float | None = None
    base_rate: float | None = None
    n_binary: int | None = None
    brier_convention: str | None = None
    brier_multiclass: Multiclass | None = None
    rps: Rps | None = None
    calibration: list[CalibrationBin] = field(default_factory=list)
    murphy: Murphy | None = None
    ece: float | None = None
    money_source: list[str] = field(default_factory=list)
    settled_won: int | None = None
    settled_lost: int | None = None
    bets_won: int | None = None
    bets_lost: int | None = None
    methodology: Methodology | None = None
    implied_confidence_n: int | None = None
    # metrics.market_information_test per reference ("closing", "opening"), as the test returns it.
    information_test: Json | None = None
    clv: Clv | None = None
    edge_label: str | None = None
    champions_clothes: Champions | None = None
    tournament: TournamentTake | None = None
    coverage: Coverage | None = None
    common: CommonView | None = None

    @classmethod
    def from_json(cls, data: object) -> RowDetails:
        obj = _obj(data) or {}
        scalars = {
            f.name: obj.get(f.name)
            for f in fields(cls)
            if f.name not in _NESTED and f.name not in ("calibration", "money_source")
        }
        calibration = [_flat(CalibrationBin, b) for b in _list(obj.get("calibration"))]
        return cls(
            **scalars,
            brier_multiclass=_flat(Multiclass, obj.get("brier_multiclass")),
            rps=_flat(Rps, obj.get("rps")),
            calibration=[b for b in calibration if b is not None],
            murphy=_flat(Murphy, obj.get("murphy")),
            money_source=_list(obj.get("money_source")),
            methodology=Methodology.from_json(obj.get("methodology")),
            information_test=_obj(obj.get("information_test")),
            clv=Clv.from_json(obj.get("clv")),
            champions_clothes=_flat(Champions, obj.get("champions_clothes")),
            tournament=_flat(TournamentTake, obj.get("tournament")),
            coverage=_flat(Coverage, obj.get("coverage")),
            common=_flat(CommonView, obj.get("common")),
        )

    def to_json(self) -> Json:
        out: Json = {}
        for f in fields(self):
            value = getattr(self, f.name)
            if f.name == "calibration":
                value = [_flat_json(b) for b in value]
            elif f.name == "methodology" and value is not None:
                value = {
                    "version": value.version,
                    "hash": value.hash,
                    "cohort_versions": value.cohort_versions,
                }
            elif f.name == "clv" and value is not None:
                value = value.to_json()
            elif f.name in _NESTED and value is not None and f.name != "information_test":
                value = _flat_json(value)
            out[f.name] = value
        return out


_NESTED = {
    "brier_multiclass",
    "rps",
    "murphy",
    "methodology",
    "information_test",
    "clv",
    "champions_clothes",
    "tournament",
    "coverage",
    "common",
}


@dataclass(frozen=True)
class DmPair:
    """One pair of metrics.dm_matrix: a's loss minus b's on their common questions."""

    a: str | None
    b: str | None
    n: int | None
    mean_diff: float | None
    stat: float | None
    p: float | None
    level: float | None
    verdict: str | None


@dataclass(frozen=True)
class DmTables:
    """A group's pairwise Diebold-Mariano tests, Brier and log loss."""

    brier: list[DmPair]
    log: list[DmPair]
    n_keys: int

    @classmethod
    def from_json(cls, data: object) -> DmTables:
        obj = _obj(data) or {}

        def pairs(name: str) -> list[DmPair]:
            parsed = [_flat(DmPair, p) for p in _list(obj.get(name))]
            return [p for p in parsed if p is not None and p.a and p.b]

        return cls(pairs("brier"), pairs("log"), int(obj.get("n_keys") or 0))

    def to_json(self) -> Json:
        return {
            "brier": [_flat_json(p) for p in self.brier],
            "log": [_flat_json(p) for p in self.log],
            "n_keys": self.n_keys,
        }


@dataclass(frozen=True)
class TournamentTable:
    """A group's tournament: the number of questions and one take per competitor."""

    questions: int
    rows: list[TournamentTake]

    @classmethod
    def from_json(cls, data: object) -> TournamentTable:
        obj = _obj(data) or {}
        rows = [_flat(TournamentTake, r) for r in _list(obj.get("rows"))]
        return cls(int(obj.get("questions") or 0), [r for r in rows if r is not None])

    def to_json(self) -> Json:
        return {"questions": self.questions, "rows": [_flat_json(r) for r in self.rows]}


@dataclass(frozen=True)
class CohortRef:
    """A cohort the run scored, with the methodology version its rules were frozen under."""

    id: int | None
    week_start: str | None
    label: str | None
    methodology_version: str | None


@dataclass(frozen=True)
class GroupCounts:
    """A group's size in plain words: its cohorts, the markets its weeks showed, forecast or
    traded (and how many resolved by the score time), its competitors, its forecasts (a
    forecast is one decision's probabilities for one market: the scored question) and the
    common questions (resolved questions of the forecast samples)."""

    cohorts: int | None
    markets: int | None
    markets_resolved: int | None
    competitors: int | None
    forecasts: int | None
    forecasts_resolved: int | None
    common_questions: int | None


@dataclass
class RunDetails:
    """Run-wide results (ScoreRun.details), keyed by group: a cohort id as text, or "all"."""

    headline_rule: str | None = None
    headline_by_cohort: dict[str, str] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)
    dm: dict[str, DmTables] = field(default_factory=dict)
    tournament: dict[str, TournamentTable] = field(default_factory=dict)
    cohorts: list[CohortRef] = field(default_factory=list)
    methodology: Methodology | None = None
    # Per group: what the scope's header counts in words (scoring/services.py group_counts).
    counts: dict[str, GroupCounts] = field(default_factory=dict)

    def headline(self, group: object) -> str | None:
        return self.headline_by_cohort.get(str(group))

    def dm_for(self, group: object) -> DmTables:
        return self.dm.get(str(group)) or DmTables([], [], 0)

    def board_slice(self, group: str) -> RunDetails:
        """What one group's board reads (scoring.models.BoardSlice): the headline rule, the
        group's headline and its paired tests in Brier loss, what its letters are made from."""
        dm = self.dm.get(group)
        return RunDetails(
            headline_rule=self.headline_rule,
            headline_by_cohort={group: self.headline_by_cohort[group]}
            if group in self.headline_by_cohort
            else {},
            dm={group: DmTables(dm.brier, [], dm.n_keys)} if dm is not None else {},
            counts={group: self.counts[group]} if group in self.counts else {},
        )

    def groups(self) -> list[str]:
        """Every group the run has a headline or tests for."""
        return sorted(set(self.headline_by_cohort) | set(self.dm))

    @classmethod
    def from_json(cls, data: object) -> RunDetails:
        obj = _obj(data) or {}
        headline = _obj(obj.get("headline")) or {}
        cohorts = [_flat(CohortRef, c) for c in _list(obj.get("cohorts"))]
        return cls(
            headline_rule=headline.get("rule"),
            headline_by_cohort=dict(_obj(headline.get("by_cohort")) or {}),
            notes=_list(obj.get("notes")),
            dm={k: DmTables.from_json(v) for k, v in (_obj(obj.get("dm")) or {}).items()},
            tournament={
                k: TournamentTable.from_json(v)
                for k, v in (_obj(obj.get("tournament")) or {}).items()
            },
            cohorts=[c for c in cohorts if c is not None],
            methodology=Methodology.from_json(obj.get("methodology")),
            counts={
                k: c
                for k, v in (_obj(obj.get("counts")) or {}).items()
                if (c := _flat(GroupCounts, v)) is not None
            },
        )

    def to_json(self) -> Json:
        methodology = self.methodology
        return {
            "headline": {"rule": self.headline_rule, "by_cohort": self.headline_by_cohort},
            "notes": self.notes,
            "dm": {k: v.to_json() for k, v in self.dm.items()},
            "tournament": {k: v.to_json() for k, v in self.tournament.items()},
            "cohorts": [_flat_json(c) for c in self.cohorts],
            "methodology": {"version": methodology.version, "hash": methodology.hash}
            if methodology
            else None,
            "counts": {k: _flat_json(v) for k, v in self.counts.items()},
        }
