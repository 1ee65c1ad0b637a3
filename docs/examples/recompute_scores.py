#!/usr/bin/env python3
"""Recompute every published figure of a scope's latest score run from the arena's exports.

    python3 recompute_scores.py EXPORT_DIR [--scope demo|replay|live|rehearsal]

EXPORT_DIR holds the JSON exports of one scope (`/exports/<what>.json?scope=demo&limit=100000`
or `arena export --what <what> --format json --scope demo --limit 100000`; for the live scope
add a `since` before its first cohort, §1.1): scores, forecasts, trades, snapshots, positions,
universes and decisions. Prints "ok: ..." and exits 0 when every
figure of every row of the latest run matches, else prints each difference and exits 1.

Written from docs/scoring-spec.md alone: the Python standard library and numpy, nothing of the
arena's code. Section numbers (§) are the specification's. Floating-point figures are compared
to 1e-9 relative (numpy's sums may take other SIMD paths on other CPUs); counts, labels and
letters exactly.
"""

from __future__ import annotations

import argparse
import json
import math
import statistics
import sys
from collections import defaultdict
from datetime import datetime
from decimal import ROUND_HALF_EVEN, Decimal
from pathlib import Path

import numpy as np

CHUNK_CELLS = 4_000_000  # §2: the largest resample block, in cells (rows x markets)
TOLERANCE = 1e-9
EXPORTS = ("scores", "forecasts", "trades", "snapshots", "positions", "universes", "decisions")
# Columns of the scores export that name a row rather than state a figure; every other column is
# recomputed and compared.
IDENTITY = frozenset({"run_id", "cohort_kind", "as_of", "methodology_hash", "methodology_version",
                      "cohort_id", "competitor", "competitor_simulated", "cohort_root"})  # fmt: skip


# --- reading (§1) -------------------------------------------------------------------------------


def when(text):
    return None if text in (None, "") else datetime.fromisoformat(text)


def known(row, as_of):
    """§1.3: a resolution is known at as_of when recorded (else resolved) by then."""
    stamp = when(row.get("resolution_recorded_at")) or when(row.get("resolved_at"))
    return stamp is None or stamp <= as_of


def status_at(row, as_of):
    status, outcome = row["market_status"], row.get("resolved_outcome")
    if status == "resolved" and not (known(row, as_of) and outcome):
        return "closed"
    if status == "void" and not known(row, as_of):
        return "closed"
    return status


class Market:
    def __init__(self, row, as_of):
        self.outcomes = [str(o) for o in row.get("market_outcomes") or []]
        self.status = status_at(row, as_of)
        self.resolved = row.get("resolved_outcome") or ""
        self.last_prices = row.get("last_prices") or {}

    def outcome_index(self):
        if self.status != "resolved" or self.resolved not in self.outcomes:
            return -1
        return self.outcomes.index(self.resolved)


# --- the numbers (§2, §3) -----------------------------------------------------------------------


def complete(stated, shown):
    """§3.2 forecast completion, rows of an (n, K) matrix, NaN where not stated."""
    P = np.array(stated, dtype=float, ndmin=2)
    missing = np.isnan(P)
    w = np.clip(np.nan_to_num(np.array(shown, dtype=float, ndmin=2), nan=0.0), 0.0, None)
    w = np.where(missing, w, 0.0)
    total_w = w.sum(axis=1, keepdims=True)
    even = np.where(missing, 1.0, 0.0) / np.maximum(missing.sum(axis=1, keepdims=True), 1)
    with np.errstate(invalid="ignore", divide="ignore"):
        share = np.where(total_w > 0, w / np.where(total_w > 0, total_w, 1.0), even)
    rest = np.clip(1.0 - np.nansum(P, axis=1, keepdims=True), 0.0, None)
    P = np.where(missing, rest * share, np.clip(P, 0.0, 1.0))
    total = P.sum(axis=1, keepdims=True)
    with np.errstate(invalid="ignore", divide="ignore"):
        return np.where(total > 0, P / np.where(total > 0, total, 1.0), 1.0 / P.shape[1])


def question_brier(P, o):
    """§3.3: half the Brier (1950) sum."""
    return 0.5 * (np.einsum("ij,ij->i", P, P) - 2.0 * P[np.arange(len(o)), o] + 1.0)


def percentile_interval(values):
    """§2.4: numpy's default (linear) percentiles at 2.5 and 97.5."""
    return np.percentile(values, [2.5, 97.5], axis=0)


def market_bootstrap(row, cluster, values, n_rows, seed, n_boot=2000):
    """§2.2: per row, percentile interval of sum(v w) / sum(w) over resampled markets."""
    nan = np.full(n_rows, math.nan)
    if row.size == 0:
        return [(nan, nan) for _ in values]
    clusters, code = np.unique(cluster, return_inverse=True)
    n_cl = clusters.size
    flat = row * n_cl + code.reshape(-1)
    mats = []
    for v, w in values:
        ok = np.isfinite(v) & (w > 0)
        vw = np.where(ok, v, 0.0) * np.where(ok, w, 0.0)
        ww = np.where(ok, w, 0.0)
        mats.append(np.bincount(flat, weights=vw, minlength=n_rows * n_cl).reshape(n_rows, n_cl))
        mats.append(np.bincount(flat, weights=ww, minlength=n_rows * n_cl).reshape(n_rows, n_cl))
    A = np.vstack(mats).T
    rng = np.random.default_rng(seed)
    out = np.empty((n_boot, A.shape[1]))
    step = max(1, CHUNK_CELLS // n_cl)
    for start in range(0, n_boot, step):
        b = min(step, n_boot - start)
        draws = rng.integers(0, n_cl, size=(b, n_cl)) + (np.arange(b) * n_cl)[:, None]
        W = np.bincount(draws.ravel(), minlength=b * n_cl).reshape(b, n_cl).astype(float)
        out[start : start + b] = W @ A
    result = []
    for k in range(len(values)):
        num = out[:, 2 * k * n_rows : (2 * k + 1) * n_rows]
        den = out[:, (2 * k + 1) * n_rows : (2 * k + 2) * n_rows]
        with np.errstate(invalid="ignore", divide="ignore"):
            ratio = np.where(den > 0, num / den, np.nan)
        lo, hi = nan.copy(), nan.copy()
        for r in range(n_rows):
            col = ratio[:, r][np.isfinite(ratio[:, r])]
            if col.size:
                lo[r], hi[r] = percentile_interval(col)
        result.append((lo, hi))
    return result


# --- closing-line value (§5) --------------------------------------------------------------------


def block_length(x):
    """§5.3: Politis and White (2004) with Patton, Politis and White (2009)."""
    n = x.size
    if n < 8:
        return 1.0
    xc = x - x.mean()
    k_n = max(5, math.ceil(math.sqrt(math.log10(n))))
    m_max = min(math.ceil(math.sqrt(n)) + k_n, n - 1)
    b_max = math.ceil(min(3.0 * math.sqrt(n), n / 3.0))
    gamma = np.array([xc[k:] @ xc[: n - k] for k in range(m_max + 1)]) / n
    if not gamma[0] > 0:
        return 1.0
    rho = np.abs(gamma[1:] / gamma[0])
    inside = rho < 2.0 * math.sqrt(math.log10(n) / n)
    m_hat = None
    for lag in range(1, m_max - k_n + 2):
        if inside[lag - 1 : lag - 1 + k_n].all():
            m_hat = lag
            break
    if m_hat is None:
        significant = np.flatnonzero(~inside)
        m_hat = int(significant[-1]) + 1 if significant.size else 1
    big_m = min(2 * m_hat, m_max)
    lags = np.arange(1, big_m + 1)
    t = np.abs(lags / big_m)
    weights = np.where(t <= 0.5, 1.0, np.where(t <= 1.0, 2.0 * (1.0 - t), 0.0))
    big_g = 2.0 * np.sum(weights * lags * gamma[1 : big_m + 1])
    g = gamma[0] + 2.0 * np.sum(weights * gamma[1 : big_m + 1])
    if g == 0.0:
        return 1.0
    b = (2.0 * big_g * big_g / (2.0 * g * g)) ** (1.0 / 3.0) * n ** (1.0 / 3.0)
    return float(min(max(b, 1.0), b_max))


def edge_p(series, seed, n_boot=20000):
    """§5.4: (p, Monte Carlo standard error, flag) of the stationary bootstrap of the Sharpe
    ratio; p None when the series is not tested."""
    n = series.size
    if n < 10:
        return None, None, "too_few"
    sd = float(series.std(ddof=1))
    if not sd > 1e-9:
        return None, None, "zero_variance"
    sharpe = float(series.mean() / sd)
    b_len = block_length(series)
    rng = np.random.default_rng(seed)
    mean = float(series.mean())
    centred = series - mean
    reps = np.empty(n_boot)
    rows = max(1, CHUNK_CELLS // n)
    pos = np.arange(n)
    for start in range(0, n_boot, rows):
        b = min(n_boot, start + rows) - start
        starts = rng.integers(0, n, size=(b, n))
        if b_len <= 1.0:
            idx = starts
        else:
            new = rng.random((b, n), dtype=np.float32) < np.float32(1.0 / b_len)
            new[:, 0] = True
            begin = np.maximum.accumulate(np.where(new, pos, 0), axis=1)
            idx = np.take_along_axis(starts, begin, axis=1)
            idx += pos - begin
            idx[idx >= n] -= n
        draw = centred[idx]
        row_mean = draw.sum(axis=1) / n
        sum_sq = np.einsum("ij,ij->i", draw, draw)
        var = np.maximum(sum_sq - n * row_mean * row_mean, 0.0) / (n - 1)
        with np.errstate(divide="ignore", invalid="ignore"):
            reps[start : start + b] = np.where(var > 0, (row_mean + mean) / np.sqrt(var), np.nan)
    finite = reps[np.isfinite(reps)]
    bias = float(finite.mean() - sharpe) if finite.size else 0.0
    p = float((np.count_nonzero(finite - bias <= 0.0) + 1) / (finite.size + 1))
    return p, math.sqrt(p * (1.0 - p) / max(finite.size, 1)), None


def holm(p):
    p = np.asarray(p, dtype=float)
    out = np.full(p.shape, np.nan)
    m = p.size
    order = np.argsort(p, kind="stable")
    out[order] = np.minimum(np.maximum.accumulate(p[order] * (m - np.arange(m))), 1.0)
    return out


def label(p):
    return "GENUINE_EDGE" if p <= 0.025 else "WEAK_EDGE" if p <= 0.05 else "NO_EDGE"


# --- Diebold-Mariano and group letters (§6) -----------------------------------------------------


def betacf(a, b, x):
    """Continued fraction of the incomplete beta function (modified Lentz)."""
    tiny, qab, qap, qam = 1e-300, a + b, a + 1.0, a - 1.0
    c, d = 1.0, 1.0 - qab * x / qap
    d = 1.0 / (d if abs(d) > tiny else tiny)
    h = d
    for m in range(1, 10_000):
        m2 = 2 * m
        for aa in (m * (b - m) * x / ((qam + m2) * (a + m2)),
                   -(a + m) * (qab + m) * x / ((a + m2) * (qap + m2))):  # fmt: skip
            d = 1.0 + aa * d
            d = 1.0 / (d if abs(d) > tiny else tiny)
            c = 1.0 + aa / c
            c = c if abs(c) > tiny else tiny
            h *= d * c
        if abs(d * c - 1.0) < 1e-16:
            break
    return h


def t_two_sided(t, df):
    """P(|T| > |t|) for Student's t with df degrees of freedom."""
    x = df / (df + t * t)
    a, b = df / 2.0, 0.5
    front = math.exp(math.lgamma(a + b) - math.lgamma(a) - math.lgamma(b)
                     + a * math.log(x) + b * math.log1p(-x))  # fmt: skip
    if x < (a + 1.0) / (a + b + 2.0):
        return front * betacf(a, b, x) / a
    return 1.0 - front * betacf(b, a, 1.0 - x) / b


def dm_verdict(la, lb, level):
    """§6.2: 'a', 'b' (the better) or None, on the questions both have."""
    both = np.isfinite(la) & np.isfinite(lb)
    d = la[both] - lb[both]
    n = d.size
    if n < 3:
        return None
    lags = int(math.floor(4.0 * (n / 100.0) ** (2.0 / 9.0)))
    dc = d - d.mean()
    lrv = float(dc @ dc) / n
    for k in range(1, min(lags, n - 1) + 1):
        lrv += 2.0 * (1.0 - k / (lags + 1.0)) * float(dc[k:] @ dc[:-k]) / n
    if not lrv > 1e-14 * max(float(np.mean(d * d)), 1e-300):
        return None
    stat = math.sqrt((n - 1) / n) * float(d.mean()) / math.sqrt(lrv / n)
    if not t_two_sided(abs(stat), n - 1) < level:
        return None
    return "a" if stat < 0 else "b"


def letters(ranked, different):
    """§6.3: compact letter display by insert and absorb."""
    index = {s: i for i, s in enumerate(ranked)}
    groups = [frozenset(range(len(ranked)))] if ranked else []
    for a, b in different:
        i, j = index[a], index[b]
        split = []
        for g in groups:
            split += [g - {j}, g - {i}] if i in g and j in g else [g]
        kept = []
        for g in sorted(set(split), key=lambda g: (-len(g), sorted(g))):
            if not any(g <= k for k in kept):
                kept.append(g)
        groups = kept
    groups.sort(key=sorted)
    names = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ"
    out = {s: "" for s in ranked}
    for k, g in enumerate(groups):
        name = names[k % 52] + (str(k // 52 + 1) if k >= 52 else "")
        for i in sorted(g):
            out[ranked[i]] += name
    return out


# --- one scope ---------------------------------------------------------------------------------


def load(directory):
    out = {}
    for what in EXPORTS:
        doc = json.loads((Path(directory) / f"{what}.json").read_text())
        if doc.get("row_cap_reached"):
            raise SystemExit(f"{what}.json reached its row cap: export it with a larger limit")
        out[what] = doc["rows"]
    return out


class Scope:
    """Everything §1 reads, as the latest run of the scope saw it at its as_of."""

    def __init__(self, ex, scope):
        runs = defaultdict(list)
        for r in ex["scores"]:
            if r["cohort_kind"] == scope:
                runs[int(r["run_id"])].append(r)
        if not runs:
            raise SystemExit(f"no {scope} score run in scores.json")
        self.run = max(runs)
        self.rows = runs[self.run]
        self.as_of = when(self.rows[0]["as_of"])
        digest = self.rows[0]["methodology_hash"]
        self.seed = int(digest[:16], 16)  # §2.1
        as_of = self.as_of
        mine = {
            w: [r for r in ex[w] if r["cohort_kind"] == scope] for w in EXPORTS if w != "scores"
        }
        self.markets = {}
        for u in mine["universes"]:
            for r in u["sample"]:
                self.markets.setdefault(int(r["market_id"]), Market(r, as_of))
        # Trades name no outcomes: a market only traded is read from its positions.
        for r in mine["positions"] + mine["forecasts"] + mine["trades"]:
            self.markets.setdefault(int(r["market_id"]), Market(r, as_of))
        for r in mine["positions"]:  # the marks (§4.2) are the positions export's
            self.markets[int(r["market_id"])].last_prices = r.get("last_prices") or {}
        # §1.2 decisions made (or, unfinished, claimed) by as_of; their time orders questions.
        self.decisions = {}
        self.usage = defaultdict(lambda: [0, Decimal(0)])  # entry -> [tokens, cost] (§4.4)
        for r in mine["decisions"]:
            t = when(r["decided_at"]) or (
                None if r.get("decided_at") else when(r.get("claimed_at"))
            )
            if t is not None and t <= as_of:
                entry = (int(r["cohort_id"]), r["competitor"], int(r["replicate"]))
                self.decisions[int(r["decision_id"])] = (entry, int(r["week"]), t.timestamp())
                self.usage[entry][0] += int(r["tokens_in"] or 0) + int(r["tokens_out"] or 0)
                self.usage[entry][1] += Decimal(r["cost_usd"] or "0")
        self.forecasts = sorted(
            (r for r in mine["forecasts"]
             if when(r["created_at"]) <= as_of and int(r["decision_id"]) in self.decisions),
            key=lambda r: (int(r["decision_id"]), int(r["forecast_id"])),
        )  # fmt: skip
        self.trades = sorted(
            (r for r in mine["trades"] if when(r["executed_at"]) <= as_of),
            key=lambda r: (when(r["executed_at"]), int(r["trade_id"])),
        )
        self.positions = [r for r in mine["positions"] if when(r["opened_at"]) <= as_of]
        self.snapshots = mine["snapshots"]
        self.samples = {}  # §1.4 (cohort, week) -> [(market, outcomes, shown prices)]
        for u in mine["universes"]:
            if when(u["frozen_at"]) > as_of:
                continue
            items = []
            for s in u["sample"]:
                items.append((int(s["market_id"]), s.get("shown_prices") or {}))
            self.samples[(int(u["cohort_id"]), int(u["week"]))] = items
        entries = {d[0] for d in self.decisions.values()}
        entries |= {(int(r["cohort_id"]), r["competitor"], int(r["replicate"]))
                    for r in self.snapshots}  # fmt: skip
        self.entries = sorted(entries)
        self.cohorts = sorted({e[0] for e in self.entries})
        self.names = sorted({e[1] for e in self.entries} | {r["competitor"] for r in self.rows})
        self.comp = {s: i for i, s in enumerate(self.names)}
        self.questions = self._questions()

    def _questions(self):
        """§3.1: one question per (decision, market), scored once."""
        rows = defaultdict(list)
        for r in self.forecasts:
            rows[(int(r["decision_id"]), int(r["market_id"]))].append(r)
        q = []
        for (d, m), group in sorted(rows.items()):
            entry, week, t = self.decisions[d]
            info = self.markets[m]
            k = len(info.outcomes)
            stated = np.full(k, np.nan)
            shown = np.full(k, np.nan)
            named = False
            for r in group:
                if r["outcome"] in info.outcomes:
                    j = info.outcomes.index(r["outcome"])
                    stated[j] = float(r["probability"])
                    price = r["market_price"]
                    shown[j] = math.nan if price in (None, "") else float(price)
                    named = True
            weights = shown.copy()
            if k > 2 and group[0].get("shown_prices"):
                full = {str(n): float(p) for n, p in group[0]["shown_prices"].items()}
                weights = np.where(np.isnan(weights), [full.get(n, np.nan) for n in info.outcomes],
                                   weights)  # fmt: skip
            said = ~np.isnan(stated)
            ref_ok = bool(said.any() and not (said & np.isnan(shown)).any())
            o = info.outcome_index() if named else -1
            item = {"d": d, "m": m, "entry": entry, "comp": self.comp[entry[1]], "week": week,
                    "t": t, "k": k, "scored": o >= 0, "has_m": ref_ok}  # fmt: skip
            item["uniform"] = 0.5 * (1.0 - 1.0 / k)
            if o >= 0:
                P = complete(stated[None, :], weights[None, :])
                item["brier"] = float(question_brier(P, [o])[0])
                item["log"] = float(-np.log(np.clip(P[0, o], 0.001, 0.999)))
                if ref_ok:
                    M = complete(np.where(said, shown, np.nan)[None, :], weights[None, :])
                    item["m_brier"] = float(question_brier(M, [o])[0])
            q.append(item)
        return q

    # --- money (§4) ---

    def money(self, cohorts):
        """Per competitor: starting cash, P/L (Decimal) and per-market P/L (§4.1, §4.2)."""
        latest = {}
        initial = {}
        for r in self.snapshots:
            e = (int(r["cohort_id"]), r["competitor"], int(r["replicate"]))
            if e[0] not in cohorts:
                continue
            initial[e] = Decimal(r["initial_balance"])
            ts = when(r["ts"])
            if ts <= self.as_of and (e not in latest or latest[e][0] < ts):
                latest[e] = (ts, r)
        init = defaultdict(float)
        pnl = defaultdict(Decimal)
        for e in self.entries:
            if e[0] in cohorts and e in initial:
                init[e[1]] += float(initial[e])
                total = Decimal(latest[e][1]["total"]) if e in latest else initial[e]
                pnl[e[1]] += total - initial[e]
        by_market = defaultdict(lambda: defaultdict(float))
        per_entry = defaultdict(lambda: defaultdict(float))
        for r in self.positions:
            e = (int(r["cohort_id"]), r["competitor"], int(r["replicate"]))
            if e[0] not in cohorts:
                continue
            closed = when(r["closed_at"])
            open_then = r["status"] == "open" or (closed is not None and closed > self.as_of)
            value = Decimal(r["realized_pnl"])
            if open_then:
                price = self.mark(int(r["market_id"]), r["outcome"])
                moved = (
                    Decimal(0)
                    if price is None
                    else (Decimal(r["shares"]) * price - Decimal(r["cost_basis"]))
                )
                value = value + moved if r["status"] == "open" else moved
            per_entry[e][int(r["market_id"])] += float(value)
        for e in sorted(per_entry):
            for m, v in per_entry[e].items():
                by_market[e[1]][m] += v
        return init, pnl, by_market

    def mark(self, market_id, outcome):
        info = self.markets[market_id]
        if info.status == "void":
            return None
        if info.status == "resolved" and info.resolved in info.outcomes:
            return Decimal(1) if outcome == info.resolved else Decimal(0)
        own = info.last_prices.get(outcome)
        if own not in (None, ""):
            return Decimal(str(own))
        if len(info.outcomes) == 2 and outcome in info.outcomes:
            other = info.last_prices.get(info.outcomes[1 - info.outcomes.index(outcome)])
            if other not in (None, ""):
                return Decimal(1) - Decimal(str(other))
        return None


def recompute_group(sc, cohorts, present):
    """Every figure of one group's rows (§3-§6), by competitor slug."""
    qs = [q for q in sc.questions if q["entry"][0] in cohorts]
    out = {s: {} for s in present}
    n_comp = len(sc.names)
    scored = [q for q in qs if q["scored"]]
    for s in present:
        ci = sc.comp[s]
        mine = [q for q in qs if q["comp"] == ci]
        res = [q for q in scored if q["comp"] == ci]
        with_m = [q for q in res if q["has_m"]]
        f = out[s]
        f["n_forecasts"], f["n_resolved"] = len(mine), len(res)
        f["brier"] = sum(q["brier"] for q in res) / len(res) if res else None
        f["log_score"] = sum(q["log"] for q in res) / len(res) if res else None
        f["skill_vs_market"] = (
            sum(q["m_brier"] - q["brier"] for q in with_m) / len(with_m) if with_m else None
        )
        f["bss_vs_uniform"] = (
            1.0 - sum(q["brier"] for q in res) / sum(q["uniform"] for q in res) if res else None
        )
        # §4.5 provisional: ceil((z_.975 + z_.8)^2 sd^2 / delta^2) = 350.
        z = statistics.NormalDist().inv_cdf(0.975) + statistics.NormalDist().inv_cdf(0.8)
        f["provisional"] = len(res) < max(2, math.ceil(z * z * 0.1335**2 / 0.02**2))
    # §2.2 intervals of Brier and skill: one call, markets of the group's scored questions.
    row = np.asarray([q["comp"] for q in scored], dtype=np.int64)
    cluster = np.asarray([q["m"] for q in scored], dtype=np.int64)
    brier = np.asarray([q["brier"] for q in scored])
    has_m = np.asarray([q["has_m"] for q in scored], dtype=float)
    skill = np.asarray([q.get("m_brier", math.nan) - q["brier"] if q["has_m"] else math.nan
                        for q in scored])  # fmt: skip
    (blo, bhi), (slo, shi) = market_bootstrap(
        row, cluster, [(brier, np.ones(brier.size)), (skill, has_m)], n_comp, sc.seed
    )
    for s in present:
        ci = sc.comp[s]
        out[s] |= {"brier_lo": blo[ci], "brier_hi": bhi[ci], "skill_lo": slo[ci],
                   "skill_hi": shi[ci]}  # fmt: skip
    money(sc, cohorts, present, out)
    win_rates(sc, cohorts, present, out)
    coverage(sc, cohorts, present, qs, out)
    common(sc, cohorts, present, qs, out)
    edges(sc, cohorts, present, out)
    out["_dm"] = dm_pairs(sc, qs, [s for s in present if out[s]["n_resolved"] > 0])
    return out


def money(sc, cohorts, present, out):
    """§4.1 pooled return and P/L, §4.2 its interval."""
    init, pnl, by_market = sc.money(cohorts)
    for s in present:
        out[s]["pnl"] = pnl[s].quantize(Decimal("0.01"))
        out[s]["return_pct"] = 100.0 * float(pnl[s]) / init[s] if init[s] else None
    comps = [s for s in sorted(present, key=sc.comp.get) if init[s] > 0]
    markets = sorted({m for s in comps for m in by_market[s]})
    if not comps or not markets:
        return
    col = {m: j for j, m in enumerate(markets)}
    matrix = np.zeros((len(comps), len(markets)))
    for r, s in enumerate(comps):
        for m, v in by_market[s].items():
            matrix[r, col[m]] = v
    outside = np.asarray([float(pnl[s]) for s in comps]) - matrix.sum(axis=1)
    initial = np.asarray([init[s] for s in comps])
    rng = np.random.default_rng(sc.seed)
    n_cl, n_boot = len(markets), 2000
    totals = np.empty((n_boot, len(comps)))
    step = max(1, CHUNK_CELLS // n_cl)
    for start in range(0, n_boot, step):
        b = min(step, n_boot - start)
        draws = rng.integers(0, n_cl, size=(b, n_cl)) + (np.arange(b) * n_cl)[:, None]
        counts = np.bincount(draws.ravel(), minlength=b * n_cl).reshape(b, n_cl)
        totals[start : start + b] = counts @ matrix.T
    lo, hi = percentile_interval(100.0 * (totals + outside) / initial)
    for r, s in enumerate(comps):
        out[s]["return_lo"], out[s]["return_hi"] = float(lo[r]), float(hi[r])


def win_rates(sc, cohorts, present, out):
    """§4.3: every BUY on a market resolved by as_of counts once."""
    won, lost = defaultdict(int), defaultdict(int)
    for r in sc.trades:
        info = sc.markets[int(r["market_id"])]
        if r["side"] != "BUY" or int(r["cohort_id"]) not in cohorts or info.status != "resolved":
            continue
        if r["outcome"] == info.resolved:
            won[r["competitor"]] += 1
        else:
            lost[r["competitor"]] += 1
    for s in present:
        n = won[s] + lost[s]
        out[s]["win_rate"] = won[s] / n if n else None
    for s in present:  # §4.4 cost and tokens of the decisions read
        usage = [u for e, u in sc.usage.items() if e[0] in cohorts and e[1] == s]
        out[s]["cost_usd"] = sum((u[1] for u in usage), Decimal(0)).quantize(Decimal("0.0001"))
        out[s]["_tokens"] = sum(u[0] for u in usage)


def coverage(sc, cohorts, present, qs, out):
    """§3.6: resolved sample questions asked, and how many were scored."""
    scored = {(q["d"], q["m"]) for q in qs if q["scored"]}
    asked, hit = defaultdict(int), defaultdict(int)
    for d, (entry, week, _t) in sc.decisions.items():
        if entry[0] not in cohorts:
            continue
        for m, _prices in sc.samples.get((entry[0], week), ()):
            if sc.markets[m].outcome_index() >= 0:
                asked[entry[1]] += 1
                hit[entry[1]] += (d, m) in scored
    for s in present:
        out[s]["questions_asked"], out[s]["questions_scored"] = asked[s], hit[s]


def common(sc, cohorts, present, qs, out):
    """§3.7: every competitor on the same questions, a missing forecast imputed at the shown
    price."""
    keys, ref = [], []
    for (cohort, week), items in sorted(sc.samples.items()):
        if cohort not in cohorts:
            continue
        for m, prices in items:
            info = sc.markets[m]
            o = info.outcome_index()
            if o < 0:
                continue
            stated = np.asarray([_price(prices.get(n)) for n in info.outcomes])
            if np.isnan(stated).all() or stated.size < 2:
                continue
            keys.append((cohort, week, m))
            ref.append(float(question_brier(complete(stated[None, :], stated[None, :]), [o])[0]))
    if not keys:
        return
    index = {k: j for j, k in enumerate(keys)}
    order = sorted(present, key=sc.comp.get)
    col = {s: j for j, s in enumerate(order)}
    total = np.zeros((len(keys), len(order)))
    count = np.zeros((len(keys), len(order)))
    for q in qs:
        j = index.get((q["entry"][0], q["week"], q["m"]))
        if q["scored"] and j is not None:
            total[j, col[q["entry"][1]]] += q["brier"]
            count[j, col[q["entry"][1]]] += 1
    m_brier = np.repeat(np.asarray(ref), len(order))
    own = (count > 0).reshape(-1)
    brier = np.where(own, (total / np.maximum(count, 1)).reshape(-1), m_brier)
    comp = np.tile(np.asarray([sc.comp[s] for s in order], dtype=np.int64), len(keys))
    market = np.repeat(np.asarray([k[2] for k in keys], dtype=np.int64), len(order))
    skill = m_brier - brier
    ((lo, hi),) = market_bootstrap(comp, market, [(skill, np.ones(skill.size))],
                                   len(sc.names), sc.seed)  # fmt: skip
    for s in order:
        ci, mask = sc.comp[s], comp == sc.comp[s]
        out[s] |= {"common_questions": len(keys), "common_own": int(own[mask].sum()),
                   "common_brier": float(brier[mask].sum() / mask.sum()),
                   "common_skill": float(skill[mask].sum() / mask.sum()),
                   "common_skill_lo": lo[ci], "common_skill_hi": hi[ci]}  # fmt: skip


def _price(value):
    try:
        return float(value)
    except (TypeError, ValueError):
        return math.nan


def edges(sc, cohorts, present, out):
    """§5: closing-line value of each BUY with a closing line, the edge label per competitor."""
    series = defaultdict(list)
    for r in sc.trades:
        if r["side"] != "BUY" or int(r["cohort_id"]) not in cohorts or r.get("close_price") is None:
            continue
        if sc.markets[int(r["market_id"])].status == "void":
            continue
        t = when(r["executed_at"]).timestamp()
        series[r["competitor"]].append((t, int(r["trade_id"]),
                                        float(r["close_price"]) - float(r["price"])))  # fmt: skip
    tested, p, se = [], [], []
    for s in present:
        rows = sorted(series[s])
        out[s]["clv_trades"] = len(rows)
        if not rows:
            out[s] |= {"edge_label": None, "edge_p_holm": None, "edge_borderline": None}
            continue
        value, error, _flag = edge_p(np.asarray([r[2] for r in rows]), sc.seed)
        out[s] |= {"edge_label": "NOT_TESTED", "edge_p_holm": None, "edge_borderline": None}
        if value is not None:
            tested.append(s)
            p.append(value)
            se.append(error)
    if tested:
        p, se = np.asarray(p), np.asarray(se)
        adjusted = holm(p)
        worst = holm(np.minimum(p + 3.0 * se, 1.0))
        best = holm(np.maximum(p - 3.0 * se, 0.0))
        for k, s in enumerate(tested):
            out[s] |= {"edge_label": label(worst[k]), "edge_p_holm": float(adjusted[k]),
                       "edge_borderline": label(best[k]) != label(worst[k])}  # fmt: skip


def dm_pairs(sc, qs, competitors):
    """§6.1: each pair's Brier loss series on (cohort, week, market), replicates averaged, in
    the order of the key's first decision time; the verdicts at 5% / number of pairs."""
    scored = [q for q in qs if q["scored"]]
    keys = sorted({(q["entry"][0], q["week"], q["m"]) for q in scored})
    index = {k: j for j, k in enumerate(keys)}
    first = np.full(len(keys), np.inf)
    for q in scored:
        j = index[(q["entry"][0], q["week"], q["m"])]
        first[j] = min(first[j], q["t"])
    order = np.lexsort((np.arange(len(keys)), first))
    loss = {}
    for s in competitors:
        total, count = np.zeros(len(keys)), np.zeros(len(keys))
        for q in scored:
            if q["entry"][1] == s:
                j = index[(q["entry"][0], q["week"], q["m"])]
                total[j] += q["brier"]
                count[j] += 1
        with np.errstate(invalid="ignore", divide="ignore"):
            loss[s] = np.where(count > 0, total / np.maximum(count, 1), np.nan)[order]
    pairs = [(a, b) for i, a in enumerate(competitors) for b in competitors[i + 1 :]]
    level = 0.05 / len(pairs) if pairs else 0.05
    return [(a, b) for a, b in pairs if dm_verdict(loss[a], loss[b], level) is not None]


def ranks_and_letters(rows, figures, different):
    """§4.6: the ranks the pages print and why a row has none; §6.3 the letters of ranked
    rows."""
    use_skill = any(figures[r["competitor"]].get("skill_vs_market") is not None for r in rows)
    head = "skill_vs_market" if use_skill else "return_pct"

    def key(r):
        f = figures[r["competitor"]]
        primary = f.get(head)
        ret = f.get("return_pct")
        return (primary is None, -(primary or 0.0), -(ret if ret is not None else -math.inf))

    order = sorted(rows, key=key)  # ties keep the published order (the competitor id)
    ranked, reasons = [], {}
    for r in order:
        f = figures[r["competitor"]]
        if f["n_forecasts"] == 0 and not f.get("_tokens") and not f.get("pnl"):
            reasons[r["competitor"]] = "no forecast made yet"
        elif f.get(head) is None:
            reasons[r["competitor"]] = (
                "none of its forecasts has resolved"
                if f["n_resolved"] == 0
                else "no resolved forecast with a market price"
            )
        else:
            ranked.append(r["competitor"])
    rank = {s: i + 1 for i, s in enumerate(ranked)}
    # §6.3: letters only under the skill headline, once two competitors have scored questions.
    tested = sum(1 for r in rows if figures[r["competitor"]]["n_resolved"] > 0) >= 2
    if head != "skill_vs_market" or not tested:
        return rank, reasons, {}
    found = letters(ranked, [(a, b) for a, b in different if a in rank and b in rank])
    return rank, reasons, found


def check(directory, scope):
    sc = Scope(load(directory), scope)
    groups = defaultdict(list)
    for r in sc.rows:
        groups[r.get("cohort_id")].append(r)
    problems, figures_checked = [], 0
    for cohort, rows in sorted(groups.items(), key=lambda kv: (kv[0] is not None, kv[0] or 0)):
        cohorts = set(sc.cohorts) if cohort is None else {int(cohort)}
        present = sorted({e[1] for e in sc.entries if e[0] in cohorts})
        figures = recompute_group(sc, cohorts, present)
        rank, reasons, found = ranks_and_letters(rows, figures, figures.pop("_dm"))
        where = "all cohorts" if cohort is None else f"cohort {cohort}"
        if sorted(r["competitor"] for r in rows) != present:
            problems.append(f"{where}: rows for {sorted(r['competitor'] for r in rows)}, "
                            f"entries of {present}")  # fmt: skip
        for r in rows:
            f = figures.get(r["competitor"], {})
            f["rank"] = rank.get(r["competitor"])
            f["unranked_reason"] = reasons.get(r["competitor"])
            f["group_letters"] = found.get(r["competitor"]) or None
            # Every published column but the identity ones: one this script has no figure for
            # (a group without trades has no return interval) must be published empty, so a
            # figure the specification does not produce cannot pass unseen.
            names = [n for n in f if not n.startswith("_")]
            names += [n for n in r if n not in IDENTITY and n not in f]
            for name in names:
                value = f.get(name)
                figures_checked += 1
                if differs(r.get(name), value):
                    problems.append(f"{where}, {r['competitor']}: {name} published "
                                    f"{r.get(name)!r}, recomputed {value!r}")  # fmt: skip
    return sc, problems, figures_checked


def differs(published, value):
    if isinstance(value, float) and not math.isfinite(value):
        value = None
    if published in (None, "") or value is None:
        return (published not in (None, "")) != (value is not None)
    if isinstance(value, bool) or isinstance(published, bool):
        return bool(published) != bool(value)
    if isinstance(value, Decimal):
        return Decimal(str(published)).quantize(value, ROUND_HALF_EVEN) != value
    if isinstance(value, int | str):
        return str(published) != str(value)
    return not math.isclose(float(published), value, rel_tol=TOLERANCE, abs_tol=1e-12)


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("directory")
    parser.add_argument("--scope", default="demo")
    args = parser.parse_args(argv)
    sc, problems, n = check(args.directory, args.scope)
    for p in problems:
        print(p)
    if problems:
        print(f"FAILED: {len(problems)} of {n} figures differ ({args.scope} run {sc.run})")
        return 1
    print(f"ok: {n} figures of {len(sc.rows)} rows ({args.scope} run {sc.run}) recomputed")
    return 0


if __name__ == "__main__":
    sys.exit(main())
