"""Computing: every competitor's statistics in one group (a cohort, or all of a scope's cohorts),
as numpy over the whole scope, handed to scoring/present.py as one CompetitorStats each.

Owns the paired market bootstrap (cluster_bootstrap_ratio_ci), forecast scores per competitor
(Brier, log, skill vs the market, the three Brier skill scores, calibration, RPS), money and
bets per competitor, the implied-confidence diagnostic, and the assembly of a competitor's
numbers (competitor_stats). Questions come from scoring/questions.py, the edge statistics from
scoring/edge.py, formulas from scoring.metrics, constants from the frozen methodology.

Rules a reader should know about (also stored in run.details["notes"], see scoring/present.py):
- Replicates of one competitor are pooled (their forecasts together; money summed; the return
  interval resamples the markets its entries traded, see market_return_ci).
- The scored unit is the question (scoring/questions.py).
- Performance: bincount, one counts matrix for the paired bootstrap; Python loops run over
  markets, decisions and competitors, never over forecasts.

It never touches the ORM: input is a ScopeData from scoring/load.py. Model classes are imported
only for their choice constants (Market.Status, Trade.Side).
"""

from __future__ import annotations

import math
from collections import defaultdict
from dataclasses import dataclass, field
from decimal import Decimal

import numpy as np

from cohorts.models import Trade
from core.methodology import CONSTANTS as C
from core.methodology import seed as methodology_seed
from markets.models import Market
from scoring import metrics
from scoring.coverage import CommonSet, Coverage, common_set, coverage
from scoring.edge import EntryComp, TradeClv, clv_summary, information_tests
from scoring.load import ScopeData
from scoring.paper import PaperEntry
from scoring.questions import BoolArray, FloatArray, IntArray, Questions
from scoring.stored import CalibrationBin, Clv, CommonView, Interval, Murphy, Rps

_CHUNK_CELLS = 4_000_000  # bound memory: resample blocks of at most this many cells


def cluster_bootstrap_ratio_ci(
    row: IntArray,
    cluster: IntArray,
    values: list[tuple[FloatArray, FloatArray]],
    n_rows: int,
    n_boot: int | None = None,
    level: float | None = None,
    seed: int | None = None,
) -> list[tuple[FloatArray, FloatArray]]:
    """Percentile CIs of sum(v*w)/sum(w) per row, resampling clusters (markets) with replacement.

    One resample draws every cluster index once for all rows (competitors) and all statistics,
    so intervals are paired: the same markets for everybody. Implemented as counts matrix W
    (resamples x clusters) times per-cluster sums, which keeps 2,000 resamples over thousands
    of markets and a dozen competitors well under a second. Returns (lo, hi) arrays per value.
    metrics.bootstrap_ci does the same for one array at a time; this is its matrix form.
    """
    n_boot = C.bootstrap_resamples if n_boot is None else n_boot
    level = C.ci_level if level is None else level
    seed = methodology_seed() if seed is None else seed
    nan = np.full(n_rows, math.nan)
    if row.size == 0:
        return [(nan, nan) for _ in values]
    clusters, code = np.unique(cluster, return_inverse=True)
    n_cl = clusters.size
    flat = row * n_cl + code
    mats = []
    for v, w in values:
        ok = np.isfinite(v) & (w > 0)
        vv = np.where(ok, v, 0.0) * np.where(ok, w, 0.0)
        ww = np.where(ok, w, 0.0)
        mats.append(np.bincount(flat, weights=vv, minlength=n_rows * n_cl).reshape(n_rows, n_cl))
        mats.append(np.bincount(flat, weights=ww, minlength=n_rows * n_cl).reshape(n_rows, n_cl))
    A = np.vstack(mats).T  # clusters x (2 * len(values) * n_rows)
    rng = np.random.default_rng(seed)
    out = np.empty((n_boot, A.shape[1]))
    step = max(1, _CHUNK_CELLS // n_cl)
    for start in range(0, n_boot, step):
        b = min(step, n_boot - start)
        draws = rng.integers(0, n_cl, size=(b, n_cl)) + (np.arange(b) * n_cl)[:, None]
        W = np.bincount(draws.ravel(), minlength=b * n_cl).reshape(b, n_cl).astype(float)
        out[start : start + b] = W @ A
    result = []
    q = [50.0 * (1.0 - level), 50.0 * (1.0 + level)]
    for k in range(len(values)):
        num = out[:, (2 * k) * n_rows : (2 * k + 1) * n_rows]
        den = out[:, (2 * k + 1) * n_rows : (2 * k + 2) * n_rows]
        with np.errstate(invalid="ignore", divide="ignore"):
            ratio = np.where(den > 0, num / den, np.nan)
        lo, hi = nan.copy(), nan.copy()
        for r in range(n_rows):
            col = ratio[:, r]
            col = col[np.isfinite(col)]
            if col.size:
                lo[r], hi[r] = np.percentile(col, q)
        result.append((lo, hi))
    return result


@dataclass
class ForecastScores:
    """Forecast scores of one group, one array element per competitor index."""

    n_forecasts: IntArray
    n_resolved: IntArray
    n_with_price: FloatArray
    brier: FloatArray
    brier_ci: tuple[FloatArray, FloatArray]
    log: FloatArray
    skill: FloatArray
    skill_ci: tuple[FloatArray, FloatArray]
    bss_half: FloatArray
    bss_market: FloatArray
    bss_base: FloatArray
    base_rate: FloatArray
    n_binary: FloatArray
    brier_multi: FloatArray
    n_multi: FloatArray
    # The binary questions behind calibration and Murphy: competitor, P(first outcome), outcome.
    binary_comp: IntArray
    binary_p: FloatArray
    binary_o: FloatArray


def forecast_scores(q: Questions, sel: BoolArray, n_comp: int) -> ForecastScores:
    """Per competitor: question counts, Brier, log, skill vs the market, the three Brier skill
    scores (vs the market, vs the uniform forecast, vs the base rate), the multiclass Brier of
    markets with more than two outcomes, and bootstrap CIs.

    Skill vs the market is mean(m_brier - brier) over the questions with a market reference;
    BSS vs the market is 1 - sum(brier) / sum(m_brier) over the same questions. BSS vs the base
    rate (frozen bss_base_rate_reference) uses the binary questions only: reference Brier
    b (1 - b) with b the competitor's observed YES frequency there.
    """
    comp = q.comp[sel]
    n_forecasts = np.bincount(comp, minlength=n_comp)
    s = sel & q.scored
    c = q.comp[s]
    n_resolved = np.bincount(c, minlength=n_comp)
    brier_l, log_l, m_brier = q.brier[s], q.log[s], q.m_brier[s]
    has_m = q.has_m[s]
    skill_l = np.where(has_m, m_brier - brier_l, np.nan)
    binary = q.binary[s]

    def total(weights: FloatArray) -> FloatArray:
        return np.bincount(c, weights=weights, minlength=n_comp).astype(float)

    with np.errstate(invalid="ignore", divide="ignore"):
        brier = total(brier_l) / n_resolved
        log = total(log_l) / n_resolved
        n_m = total(has_m.astype(float))
        skill = total(np.where(has_m, skill_l, 0.0)) / n_m
        bm = total(np.where(has_m, brier_l, 0.0))
        mm = total(np.where(has_m, m_brier, 0.0))
        bss_market = 1.0 - bm / mm
        bss_uniform = 1.0 - total(brier_l) / total(q.uniform_brier[s])
        n_bin = total(binary.astype(float))
        base = total(np.where(binary, q.o_yes[s], 0.0)) / n_bin
        brier_bin = total(np.where(binary, brier_l, 0.0)) / n_bin
        ref = base * (1.0 - base)
        bss_base = np.where(ref > 0, 1.0 - brier_bin / ref, np.nan)
        multi = np.isfinite(q.brier_multi[s])
        n_multi = total(multi.astype(float))
        brier_multi = total(np.where(multi, q.brier_multi[s], 0.0)) / n_multi
    ones = np.ones(c.size)
    brier_ci, skill_ci = cluster_bootstrap_ratio_ci(
        c, q.market[s], [(brier_l, ones), (skill_l, has_m.astype(float))], n_comp
    )
    return ForecastScores(
        n_forecasts=n_forecasts,
        n_resolved=n_resolved,
        n_with_price=n_m,
        brier=brier,
        brier_ci=brier_ci,
        log=log,
        skill=np.where(n_m > 0, skill, np.nan),
        skill_ci=skill_ci,
        bss_half=bss_uniform,
        bss_market=bss_market,
        bss_base=bss_base,
        base_rate=base,
        n_binary=n_bin,
        brier_multi=brier_multi,
        n_multi=n_multi,
        binary_comp=c[binary],
        binary_p=q.p_yes[s][binary],
        binary_o=q.o_yes[s][binary],
    )


@dataclass(frozen=True)
class Calibration:
    """Reliability table, Murphy decomposition and ECE of a competitor's binary questions."""

    table: list[CalibrationBin]
    murphy: Murphy | None
    ece: float | None


def calibration(s: ForecastScores, ci: int) -> Calibration:
    """Over the competitor's binary questions (P of the first outcome); multi-outcome markets
    have no single YES to bin."""
    mask = s.binary_comp == ci
    p, o = s.binary_p[mask], s.binary_o[mask]
    if p.size == 0:
        return Calibration([], None, None)
    m = metrics.murphy(p, o)
    return Calibration(
        table=[CalibrationBin(**b) for b in metrics.calibration(p, o)],
        murphy=Murphy(m["rel"], m["res"], m["unc"], m["wbv"], m["wbc"], m["brier"], int(m["n"])),
        ece=metrics.ece(p, o),
    )


def bets_won_lost(
    data: ScopeData, cohort_ids: set[int], entry_comp: EntryComp
) -> dict[int, list[int]]:
    """Per competitor [won, lost] over its BUY trades on markets resolved by as_of (void left
    out): one bet counts once, whatever position it averaged into (frozen win_rate_unit)."""
    out: dict[int, list[int]] = defaultdict(lambda: [0, 0])
    for entry_id, _d, side, _amount, _price, _at, market_id, outcome, _pk in data.trades:
        cohort, ci = entry_comp.get(entry_id, (None, None))
        if side != Trade.Side.BUY or cohort not in cohort_ids or ci is None:
            continue
        info = data.markets.get(market_id)
        if info is None or info.status != Market.Status.RESOLVED:
            continue
        out[ci][0 if outcome == info.resolved_outcome else 1] += 1
    return dict(out)


def rps_by_comp(q: Questions, sel: BoolArray) -> dict[int, Rps]:
    """Mean RPS per competitor over its resolved questions on ordered multi-outcome markets
    (from the completed probability vector)."""
    idx = np.flatnonzero(sel & np.isfinite(q.rps))
    out = {}
    for ci in np.unique(q.comp[idx]).tolist():
        values = q.rps[idx[q.comp[idx] == ci]]
        out[int(ci)] = Rps(rps=float(values.mean()), n=int(values.size))
    return out


def common_scores(cs: CommonSet, n_comp: int) -> dict[int, CommonView]:
    """Per competitor present: the common-question view (frozen common_set_imputation): its
    mean Brier and skill over the group's common questions, the questions it forecast itself,
    and the skill's market-bootstrap interval (a fresh generator from the seed)."""
    if cs.n_questions == 0:
        return {}
    skill_l = cs.m_brier - cs.brier
    ones = np.ones(cs.comp.size)
    ((lo, hi),) = cluster_bootstrap_ratio_ci(cs.comp, cs.market, [(skill_l, ones)], n_comp)
    n = np.bincount(cs.comp, minlength=n_comp).astype(float)
    own = np.bincount(cs.comp, weights=cs.own, minlength=n_comp)
    with np.errstate(invalid="ignore", divide="ignore"):
        brier = np.bincount(cs.comp, weights=cs.brier, minlength=n_comp) / n
        skill = np.bincount(cs.comp, weights=skill_l, minlength=n_comp) / n
    return {
        ci: CommonView(
            questions=cs.n_questions,
            own=int(own[ci]),
            brier=float(brier[ci]),
            skill=float(skill[ci]),
            skill_lo=float(lo[ci]),
            skill_hi=float(hi[ci]),
        )
        for ci in np.unique(cs.comp).tolist()
    }


@dataclass
class GroupMoney:
    """Money of one group, one element per competitor index (replicates summed)."""

    initial: FloatArray
    pnl: list[Decimal]
    realized: list[Decimal]
    unrealized: list[Decimal]
    returns: list[list[float]]  # per entry, percent
    won: FloatArray  # settled positions
    lost: FloatArray
    tokens: IntArray
    cost: list[Decimal]
    entries: IntArray
    sources: list[set[str]]
    market_pnl: list[dict[int, float]]  # per competitor: market id -> P/L over its entries


def money_by_comp(data: ScopeData, entry_sel: BoolArray, n_comp: int) -> GroupMoney:
    e = data.entries
    ids, comps, initial = e["id"][entry_sel], e["comp"][entry_sel], e["initial"][entry_sel]
    out = GroupMoney(
        initial=np.zeros(n_comp),
        pnl=[Decimal(0)] * n_comp,
        realized=[Decimal(0)] * n_comp,
        unrealized=[Decimal(0)] * n_comp,
        returns=[[] for _ in range(n_comp)],
        won=np.zeros(n_comp),
        lost=np.zeros(n_comp),
        tokens=np.zeros(n_comp, dtype=np.int64),
        cost=[Decimal(0)] * n_comp,
        entries=np.zeros(n_comp, dtype=np.int64),
        sources=[set() for _ in range(n_comp)],
        market_pnl=[defaultdict(float) for _ in range(n_comp)],
    )
    for entry_id, ci, init in zip(ids.tolist(), comps.tolist(), initial.tolist()):
        money = data.money[entry_id]
        pnl = money.total - Decimal(str(init))
        out.initial[ci] += init
        out.pnl[ci] += pnl
        out.realized[ci] += money.realized
        out.unrealized[ci] += money.unrealized
        out.returns[ci].append(100.0 * float(pnl) / init if init else math.nan)
        won, lost = data.settlements.get(entry_id, (0, 0))
        out.won[ci] += won
        out.lost[ci] += lost
        tokens, cost = data.usage.get(entry_id, (0, Decimal(0)))
        out.tokens[ci] += tokens
        out.cost[ci] += cost
        out.entries[ci] += 1
        out.sources[ci].add(money.source)
        for market_id, value in data.market_pnl.get(entry_id, {}).items():
            out.market_pnl[ci][market_id] += value
    return out


def market_return_ci(
    money: GroupMoney,
    n_boot: int | None = None,
    level: float | None = None,
    seed: int | None = None,
) -> dict[int, tuple[float, float]]:
    """Percentile interval of each competitor's return, resampling markets (frozen
    return_interval_unit): a resample draws the group's traded markets with replacement, the
    same draws for every competitor, and its return is the drawn markets' P/L (each as often
    as drawn) plus the P/L outside them, over the starting cash. Entries of one competitor in
    overlapping cohorts hold the same markets, so their returns are not independent draws and
    resampling entries understated the uncertainty."""
    n_boot = C.bootstrap_resamples if n_boot is None else n_boot
    level = C.ci_level if level is None else level
    seed = methodology_seed() if seed is None else seed
    comps = [ci for ci in range(len(money.market_pnl)) if money.initial[ci] > 0]
    markets = sorted({m for ci in comps for m in money.market_pnl[ci]})
    if not comps or not markets:
        return {}
    col = {m: j for j, m in enumerate(markets)}
    pnl = np.zeros((len(comps), len(markets)))
    for r, ci in enumerate(comps):
        for m, value in money.market_pnl[ci].items():
            pnl[r, col[m]] = value
    outside = np.asarray([float(money.pnl[ci]) for ci in comps]) - pnl.sum(axis=1)
    initial = money.initial[comps]
    rng = np.random.default_rng(seed)
    n_cl = len(markets)
    totals = np.empty((n_boot, len(comps)))
    step = max(1, _CHUNK_CELLS // n_cl)
    for start in range(0, n_boot, step):
        b = min(step, n_boot - start)
        draws = rng.integers(0, n_cl, size=(b, n_cl)) + (np.arange(b) * n_cl)[:, None]
        counts = np.bincount(draws.ravel(), minlength=b * n_cl).reshape(b, n_cl)
        totals[start : start + b] = counts @ pnl.T
    returns = 100.0 * (totals + outside) / initial
    lo, hi = np.percentile(returns, [50.0 * (1.0 - level), 50.0 * (1.0 + level)], axis=0)
    return {ci: (float(lo[r]), float(hi[r])) for r, ci in enumerate(comps)}


def implied_confidence(
    data: ScopeData, cohort_ids: set[int], entry_comp: EntryComp
) -> dict[int, tuple[float, int]]:
    """Forecaster Arena v1 implied-confidence Brier per competitor, from BUY trades on resolved
    markets. The bought outcome is the "YES" side, so binary and multi-outcome read the same."""
    acc: dict[int, tuple[list[float], list[float], list[float]]] = defaultdict(lambda: ([], [], []))
    for entry_id, decision_id, side, amount, _price, _at, market_id, outcome, _pk in data.trades:
        cohort, ci = entry_comp.get(entry_id, (None, None))
        if side != Trade.Side.BUY or cohort not in cohort_ids or ci is None:
            continue
        info = data.markets.get(market_id)
        decision = None if decision_id is None else data.decisions.get(decision_id)
        if info is None or info.status != Market.Status.RESOLVED or decision is None:
            continue
        if decision.cash_before is None:
            continue
        a, cash, o = acc[ci]
        a.append(float(amount))
        cash.append(decision.cash_before)
        o.append(1.0 if outcome == info.resolved_outcome else 0.0)
    return {
        ci: (metrics.implied_confidence_brier(a, cash, np.ones(len(a), dtype=bool), o), len(a))
        for ci, (a, cash, o) in acc.items()
    }


@dataclass(frozen=True)
class CompetitorMoney:
    """A competitor's money in a group, replicates summed."""

    initial: float
    pnl: Decimal
    realized: Decimal
    unrealized: Decimal
    return_ci: Interval  # resampling markets (market_return_ci), None ends without a traded market
    settled_won: int
    settled_lost: int
    bets_won: int
    bets_lost: int
    tokens: int
    cost: Decimal
    entries: int
    sources: list[str]


@dataclass(frozen=True)
class PaperTake:
    """Champion's clothes of a competitor's entries in a group."""

    pnl: float
    bets: int
    clv_mean: float | None


@dataclass(frozen=True)
class CompetitorStats:
    """Every number one leaderboard row shows or stores, for one competitor in one group."""

    group: int | str  # a cohort id, or "all"
    competitor_id: int
    slug: str
    display_name: str
    n_forecasts: int
    n_resolved: int
    n_with_price: int
    brier: float
    brier_ci: Interval
    log: float
    skill: float
    skill_ci: Interval
    bss_half: float
    bss_market: float
    bss_base: float
    base_rate: float
    n_binary: int
    brier_multi: float
    n_multi: int
    rps: Rps | None
    calibration: Calibration
    money: CompetitorMoney
    cohort_versions: list[str]
    implied: tuple[float, int] | None  # (Brier, bets)
    information_test: dict[str, dict] | None
    clv: Clv
    paper: PaperTake
    asked: int = 0  # questions asked that resolved (coverage.coverage)
    covered: int = 0  # of them, scored
    common: CommonView | None = None


@dataclass
class GroupInputs:
    """What competitor_stats needs from one group, computed once per group."""

    group: int | str
    cohort_ids: set[int]
    entry_sel: BoolArray
    scores: ForecastScores
    money: GroupMoney
    bets: dict[int, list[int]]
    cohort_versions: list[str]
    rps: dict[int, Rps]
    implied: dict[int, tuple[float, int]]
    information: dict[int, dict[str, dict]]
    clv: list[TradeClv]
    paper: dict[int, PaperEntry] = field(default_factory=dict)
    return_ci: dict[int, tuple[float, float]] = field(default_factory=dict)
    coverage: Coverage | None = None
    common: dict[int, CommonView] = field(default_factory=dict)


def group_inputs(
    data: ScopeData,
    q: Questions,
    group: int | str,
    cohort_ids: set[int],
    entry_comp: EntryComp,
    clv: list[TradeClv],
    paper: dict[int, PaperEntry],
) -> GroupInputs:
    n_comp = len(data.competitors)
    f_sel = np.isin(q.cohort, list(cohort_ids))
    e_sel = np.isin(data.entries["cohort"], list(cohort_ids))
    money = money_by_comp(data, e_sel, n_comp)
    present = sorted(set(data.entries["comp"][e_sel].tolist()))
    return GroupInputs(
        group=group,
        cohort_ids=cohort_ids,
        entry_sel=e_sel,
        scores=forecast_scores(q, f_sel, n_comp),
        money=money,
        bets=bets_won_lost(data, cohort_ids, entry_comp),
        cohort_versions=sorted(
            {str(data.cohorts[c]["methodology_version"] or "?") for c in cohort_ids}
        ),
        rps=rps_by_comp(q, f_sel),
        implied=implied_confidence(data, cohort_ids, entry_comp),
        information=information_tests(q, f_sel, data),
        clv=[r for r in clv if r.cohort in cohort_ids],
        paper=paper,
        return_ci=market_return_ci(money),
        coverage=coverage(data, q, cohort_ids, n_comp),
        common=common_scores(common_set(data, q, cohort_ids, present), n_comp),
    )


def competitor_stats(data: ScopeData, g: GroupInputs, ci: int) -> CompetitorStats:
    """One competitor's numbers in a group: the group's arrays read at its index, plus what is
    computed per competitor (CLV summary, paper take)."""
    s, money = g.scores, g.money
    lo, hi = g.return_ci.get(ci, (None, None))
    bets_won, bets_lost = g.bets.get(ci, (0, 0))
    comp_entries = set(data.entries["id"][g.entry_sel & (data.entries["comp"] == ci)].tolist())
    paper = g.paper
    # Summed in the set's order and averaged over the sorted (time, CLV) pairs: the stored
    # numbers depend on the order of the float sums.
    paper_pnl = sum(paper[e].pnl for e in comp_entries if e in paper)
    paper_clv = sorted(c for e in comp_entries if e in paper for c in paper[e].clv)
    competitor_id, slug, display_name = data.competitors[ci]
    return CompetitorStats(
        group=g.group,
        competitor_id=competitor_id,
        slug=slug,
        display_name=display_name,
        n_forecasts=int(s.n_forecasts[ci]),
        n_resolved=int(s.n_resolved[ci]),
        n_with_price=int(s.n_with_price[ci]),
        brier=float(s.brier[ci]),
        brier_ci=Interval(float(s.brier_ci[0][ci]), float(s.brier_ci[1][ci])),
        log=float(s.log[ci]),
        skill=float(s.skill[ci]),
        skill_ci=Interval(float(s.skill_ci[0][ci]), float(s.skill_ci[1][ci])),
        bss_half=float(s.bss_half[ci]),
        bss_market=float(s.bss_market[ci]),
        bss_base=float(s.bss_base[ci]),
        base_rate=float(s.base_rate[ci]),
        n_binary=int(s.n_binary[ci]),
        brier_multi=float(s.brier_multi[ci]),
        n_multi=int(s.n_multi[ci]),
        rps=g.rps.get(ci),
        calibration=calibration(s, ci),
        money=CompetitorMoney(
            initial=float(money.initial[ci]),
            pnl=money.pnl[ci],
            realized=money.realized[ci],
            unrealized=money.unrealized[ci],
            return_ci=Interval(lo, hi),
            settled_won=int(money.won[ci]),
            settled_lost=int(money.lost[ci]),
            bets_won=int(bets_won),
            bets_lost=int(bets_lost),
            tokens=int(money.tokens[ci]),
            cost=money.cost[ci],
            entries=int(money.entries[ci]),
            sources=sorted(money.sources[ci]),
        ),
        cohort_versions=g.cohort_versions,
        implied=g.implied.get(ci),
        information_test=g.information.get(ci),
        clv=clv_summary([r for r in g.clv if r.comp == ci]),
        paper=PaperTake(
            pnl=paper_pnl,
            bets=sum(paper[e].n_bets for e in comp_entries if e in paper),
            clv_mean=float(np.mean([c[1] for c in paper_clv])) if paper_clv else None,
        ),
        asked=int(g.coverage.asked[ci]) if g.coverage else 0,
        covered=int(g.coverage.scored[ci]) if g.coverage else 0,
        common=g.common.get(ci),
    )
