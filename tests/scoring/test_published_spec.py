"""The published words recomputed: the scoring specification and the glossary against a demo
and a replay.

One small demo and one small ForecastBench replay are built, scored and exported as a visitor
downloads them (the JSON exports of the demo and the replay scope); then
- docs/examples/recompute_scores.py, run as its own process with nothing of the arena on its
  path, reproduces every figure of each scope's latest run from those files alone (the "Done
  when" of an outsider's recomputation);
- every glossary entry that states a formula is recomputed as its text writes it and compared
  with the published figure; the four readings the glossary once printed (return intervals
  over entries, multi-outcome outcomes scored one-vs-rest, skill against a constant 0.25, win
  rate by settled positions) are recomputed too and must not match, and no entry may say them.
"""

from __future__ import annotations

import importlib.util
import json
import math
import os
import subprocess
import sys
from collections import defaultdict
from datetime import UTC, date, datetime
from pathlib import Path

import numpy as np
import pytest
from django.db import transaction
from django.test import override_settings

from agents.services import ensure_default_lineup
from core import methodology
from simulations.replay import replay
from tests import demo_snapshot
from web import glossary
from web.exports import files as exports

ROOT = Path(__file__).resolve().parents[2]
SCRIPT = ROOT / "docs" / "examples" / "recompute_scores.py"
SPEC = ROOT / "docs" / "scoring-spec.md"
NOW = datetime(2026, 4, 4, 12, 0, tzinfo=UTC)  # five weekly cohorts from 2026-03-01
# ForecastBench sets in the real format (tests/replay/): 2026-01-04 resolved by 2026-03-01,
# 2026-01-18 without a resolution set yet.
REPLAY_SETS = ROOT / "tests" / "replay" / "fixtures"
REPLAY_NOW = datetime(2026, 3, 2, tzinfo=UTC)
# The module's builds need the test database, which pytest-django sets up only when a selected
# test asks for it: every test does, so any selection (-k) of the ones that read files works.
pytestmark = pytest.mark.django_db
SCRIPT_EXPORTS = ("scores", "forecasts", "trades", "snapshots", "positions", "universes",
                  "decisions")  # fmt: skip
# The scores export's columns that name a row; every other one is a figure the script checks.
IDENTITY = {"run_id", "cohort_kind", "as_of", "methodology_hash", "methodology_version",
            "cohort_id", "competitor", "competitor_simulated", "cohort_root"}  # fmt: skip


def _export(scope: str, folder: Path) -> Path:
    b = exports.bounds(scope=scope, limit=exports.MAX_LIMIT)
    for what in SCRIPT_EXPORTS:
        text = "".join(exports.stream(what, "json", b))
        assert not json.loads(text)["row_cap_reached"], what
        (folder / f"{what}.json").write_text(text)
    return folder


@pytest.fixture(scope="module")
def exported(tmp_path_factory, django_db_setup, django_db_blocker):
    """The demo's exports, written to files; the database is left as it was."""
    folder = tmp_path_factory.mktemp("exports")
    with django_db_blocker.unblock(), transaction.atomic():
        ensure_default_lineup()
        demo_snapshot.demo(weeks=5, seed=42, n_markets=160, now=NOW, latency_scale=0)
        _export("demo", folder)
        transaction.set_rollback(True)
    return folder


@pytest.fixture(scope="module")
def replay_exported(tmp_path_factory, django_db_setup, django_db_blocker):
    """A replay scope's exports: the resolved set answered by the default lineup, whose
    language models (no API key) skip, and the unresolved one by the baselines and the
    simulated models: two cohorts, one ranked by skill with letters and entries asked questions
    they never forecast, one ranked by return with open positions marked at the last prices."""
    folder = tmp_path_factory.mktemp("replay-exports")
    with (
        django_db_blocker.unblock(),
        transaction.atomic(),
        override_settings(ARENA_LLM_API_KEY=""),
    ):
        ensure_default_lineup()
        sets = str(REPLAY_SETS)
        replay(sets, [date(2026, 1, 4)], score=False, now=REPLAY_NOW)
        replay(sets, [date(2026, 1, 18)], simulated=True, now=REPLAY_NOW)
        _export("replay", folder)
        transaction.set_rollback(True)
    return folder


def _script():
    spec = importlib.util.spec_from_file_location("recompute_scores", SCRIPT)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _run_script(folder: Path, scope: str, cwd: Path) -> int:
    """The example in its own process, started in an empty folder with an empty PYTHONPATH and
    -I (isolated mode: no user site, no current directory on the path): nothing of the arena
    importable. Returns how many figures it compared, having checked it compared every figure
    column of every row of the scope's latest run."""
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "DJANGO_SETTINGS_MODULE")}
    done = subprocess.run(
        [sys.executable, "-I", str(SCRIPT), str(folder), "--scope", scope],
        cwd=cwd, env=env, capture_output=True, text=True, timeout=600,
    )  # fmt: skip
    assert done.returncode == 0, done.stdout[-4000:] + done.stderr[-2000:]
    assert done.stdout.startswith("ok: ")
    figures = int(done.stdout.split()[1])
    rows = json.loads((folder / "scores.json").read_text())["rows"]
    latest = [r for r in rows if r["run_id"] == max(x["run_id"] for x in rows)]
    columns = set(latest[0])
    assert all(set(r) == columns for r in latest) and columns > IDENTITY
    assert figures == len(latest) * len(columns - IDENTITY)
    return figures


def test_the_example_reproduces_every_figure_from_the_exports_alone(exported, tmp_path):
    _run_script(exported, "demo", tmp_path)
    assert _script().IDENTITY == IDENTITY
    # The script imports nothing of the arena: only the standard library and numpy.
    source = SCRIPT.read_text()
    imports = {line.split()[1].split(".")[0] for line in source.splitlines()
                if line.startswith(("import ", "from "))}  # fmt: skip
    assert imports <= {"__future__", "argparse", "json", "math", "statistics", "sys",
                       "collections", "datetime", "decimal", "pathlib", "numpy"}  # fmt: skip


def test_the_example_reproduces_a_replays_figures(replay_exported, tmp_path):
    rows = json.loads((replay_exported / "scores.json").read_text())["rows"]
    assert {r["cohort_kind"] for r in rows} == {"replay"}
    _run_script(replay_exported, "replay", tmp_path)
    # The replay is the one its docstring promises: a cohort ranked by skill with letters, one
    # ranked by return without them, and rows asked questions they never answered.
    cohorts = defaultdict(list)
    for r in rows:
        cohorts[r["cohort_id"]].append(r)
    by_skill = [c for c in cohorts.values() if any(r["skill_vs_market"] is not None for r in c)]
    by_return = [
        c for c in cohorts.values()
        if all(r["skill_vs_market"] is None for r in c) and any(r["rank"] for r in c)
    ]  # fmt: skip
    assert by_skill and all(r["group_letters"] for c in by_skill for r in c if r["rank"])
    assert by_return and not any(r["group_letters"] for c in by_return for r in c)
    assert any(r["questions_asked"] > r["questions_scored"] == 0 for r in rows)
    assert any(r["unranked_reason"] == "no forecast made yet" for r in rows)


def test_a_published_figure_without_a_rule_is_caught(replay_exported, tmp_path):
    """A figure the specification does not produce (a common-question count for a cohort with
    no resolved question, a reason for a ranked row) is reported, not skipped."""
    for path in replay_exported.iterdir():
        (tmp_path / path.name).write_text(path.read_text())
    doc = json.loads((tmp_path / "scores.json").read_text())
    latest = max(r["run_id"] for r in doc["rows"])
    unresolved = next(r for r in doc["rows"] if r["run_id"] == latest and r["rank"]
                      and r["common_questions"] is None)  # fmt: skip
    unresolved["common_questions"] = 5
    ranked = next(r for r in doc["rows"] if r["run_id"] == latest and r["rank"])
    ranked["unranked_reason"] = "none of its forecasts has resolved"
    (tmp_path / "scores.json").write_text(json.dumps(doc))
    _sc, problems, _n = _script().check(tmp_path, "replay")
    assert len(problems) == 2, problems
    assert sorted(p.split(": ")[1].split()[0] for p in problems) == [
        "common_questions", "unranked_reason"]  # fmt: skip


def test_a_wrong_figure_is_caught(exported, tmp_path):
    """The comparison can fail: one published interval end moved by 1e-6 is reported."""
    for path in exported.iterdir():
        (tmp_path / path.name).write_text(path.read_text())
    doc = json.loads((tmp_path / "scores.json").read_text())
    row = next(r for r in doc["rows"] if r["skill_lo"] is not None and r["run_id"] == max(
        x["run_id"] for x in doc["rows"]))  # fmt: skip
    row["skill_lo"] += 1e-6
    (tmp_path / "scores.json").write_text(json.dumps(doc))
    sc, problems, _ = _script().check(tmp_path, "demo")
    assert len(problems) == 1 and "skill_lo" in problems[0]


def test_the_spec_names_the_methodology_it_describes():
    text = SPEC.read_text()
    assert f"methodology version {methodology.METHODOLOGY_VERSION}" in text
    assert methodology.METHODOLOGY_HASH in text
    for convention in ("rng.integers(0, n, size=(b, n))", "numpy.percentile", "ratio of sums",
                       "sorted union", "anchor - 24", "Politis and White", "divided by its sum",
                       "statistic 0", "1/K", "Holm", "fresh generator"):  # fmt: skip
        assert convention in text, convention


# --- the glossary, recomputed as written ----------------------------------------------------


class Demo:
    """The exports read through the specification's own reader (the example script)."""

    def __init__(self, folder: Path):
        mod = _script()
        self.mod = mod
        self.sc = mod.Scope(mod.load(folder), "demo")
        self.all = {r["competitor"]: r for r in self.sc.rows if r.get("cohort_id") is None}
        self.cohorts = set(self.sc.cohorts)


def _brier_half_sum(d: Demo) -> dict[str, float]:
    """'Mean over the scored questions of half the sum over the K outcomes of (p_k - o_k)^2.'"""
    out = defaultdict(list)
    for q in d.sc.questions:
        if q["scored"]:
            out[d.sc.names[q["comp"]]].append(q["brier"])
    return {s: float(np.mean(v)) for s, v in out.items()}


def _brier_one_vs_rest(d: Demo) -> dict[str, float]:
    """The old words: every stated outcome its own yes/no item, (p - [it happened])^2."""
    out = defaultdict(list)
    for r in d.sc.forecasts:
        info = d.sc.markets[int(r["market_id"])]
        if info.outcome_index() >= 0 and r["outcome"] in info.outcomes:
            hit = 1.0 if r["outcome"] == info.resolved else 0.0
            out[r["competitor"]].append((float(r["probability"]) - hit) ** 2)
    return {s: float(np.mean(v)) for s, v in out.items()}


def _bss_uniform(d: Demo) -> dict[str, float]:
    """'1 - sum of question Briers / sum of the uniform forecast's, (1 - 1/K) / 2 each.'"""
    num, den = defaultdict(float), defaultdict(float)
    for q in d.sc.questions:
        if q["scored"]:
            num[d.sc.names[q["comp"]]] += q["brier"]
            den[d.sc.names[q["comp"]]] += (1 - 1 / q["k"]) / 2
    return {s: 1 - num[s] / den[s] for s in num}


def _bss_quarter(d: Demo) -> dict[str, float]:
    """The old words: 1 - Brier / 0.25."""
    return {s: 1 - b / 0.25 for s, b in _brier_half_sum(d).items()}


def _win_rate_bets(d: Demo) -> dict[str, float | None]:
    """'Bets that won over bets on resolved markets, each BUY once.'"""
    won, n = defaultdict(int), defaultdict(int)
    for r in d.sc.trades:
        info = d.sc.markets[int(r["market_id"])]
        if r["side"] == "BUY" and info.status == "resolved":
            n[r["competitor"]] += 1
            won[r["competitor"]] += r["outcome"] == info.resolved
    return {s: won[s] / n[s] for s in n}


def _win_rate_positions(d: Demo) -> dict[str, float | None]:
    """The old words: settled positions that won over settled positions that won or lost."""
    won, n = defaultdict(int), defaultdict(int)
    for r in d.sc.positions:
        info = d.sc.markets[int(r["market_id"])]
        if r["status"] == "settled" and info.status == "resolved":
            n[r["competitor"]] += 1
            won[r["competitor"]] += r["outcome"] == info.resolved
    return {s: won[s] / n[s] for s in n}


def _return_interval(d: Demo, how: str) -> dict[str, tuple[float, float]]:
    """Percentile interval of the pooled return over 2,000 resamples of the seeded generator:
    'market_union' draws from the markets any competitor traded (the words), 'own' from the
    competitor's own markets only, 'entries' resamples its entries' returns (the old words)."""
    init, pnl, by_market = d.sc.money(d.cohorts)
    out = {}
    if how == "entries":
        for s in init:
            rets = []
            for e in d.sc.entries:
                if e[1] == s:
                    first = [r for r in d.sc.snapshots if (int(r["cohort_id"]), r["competitor"],
                             int(r["replicate"])) == e]  # fmt: skip
                    last = max(first, key=lambda r: r["ts"])
                    base = float(last["initial_balance"])
                    rets.append(100 * (float(last["total"]) - base) / base)
            rng = np.random.default_rng(d.sc.seed)
            draws = rng.integers(0, len(rets), size=(2000, len(rets)))
            means = np.asarray(rets)[draws].mean(axis=1)
            out[s] = tuple(np.percentile(means, [2.5, 97.5]))
        return out
    names = [s for s in sorted(init, key=d.sc.comp.get) if init[s] > 0]
    union = sorted({m for s in names for m in by_market[s]})
    for s in names:
        markets = union if how == "market_union" else sorted(by_market[s])
        values = np.asarray([by_market[s].get(m, 0.0) for m in markets])
        outside = float(pnl[s]) - values.sum()
        rng = np.random.default_rng(d.sc.seed)
        counts = np.stack([np.bincount(rng.integers(0, len(markets), len(markets)),
                                       minlength=len(markets)) for _ in range(2000)])  # fmt: skip
        returns = 100 * (counts @ values + outside) / init[s]
        out[s] = tuple(np.percentile(returns, [2.5, 97.5]))
    return out


# formula -> (recompute, published column, the words it needs, words that state another rule)
FORMULAS = {
    "brier:question_half_sum": (
        _brier_half_sum,
        "brier",
        ("half the sum", "once per question"),
        ("one-vs-rest",),
    ),  # fmt: skip
    "bss_half:uniform_1_over_k": (
        _bss_uniform,
        "bss_vs_uniform",
        ("1/K", "(1 - 1/K) / 2"),
        ("/ 0.25:", "Brier/0.25"),
    ),  # fmt: skip
    "win_rate:bets": (
        _win_rate_bets,
        "win_rate",
        ("Bets that won", "counts once"),
        ("Settled positions that won",),
    ),  # fmt: skip
    "ci:market_union": (
        lambda d: _return_interval(d, "market_union"),
        ("return_lo", "return_hi"),
        ("any competitor of the group traded", "never entries"),
        ("resample entries",),
    ),  # fmt: skip
}
WRONG = {  # the readings the glossary once printed, recomputed: none may match the figures
    "brier:one_vs_rest": (_brier_one_vs_rest, "brier"),
    "bss_half:quarter": (_bss_quarter, "bss_vs_uniform"),
    "win_rate:positions": (_win_rate_positions, "win_rate"),
    "ci:entries": (lambda d: _return_interval(d, "entries"), ("return_lo", "return_hi")),
    "ci:own_markets": (lambda d: _return_interval(d, "own"), ("return_lo", "return_hi")),
}


def _published(d: Demo, column) -> dict:
    if isinstance(column, tuple):
        return {
            s: (r[column[0]], r[column[1]]) for s, r in d.all.items() if r[column[0]] is not None
        }
    return {s: r[column] for s, r in d.all.items() if r[column] is not None}


def _close(a, b) -> bool:
    a, b = np.atleast_1d(np.asarray(a, dtype=float)), np.atleast_1d(np.asarray(b, dtype=float))
    return bool(np.allclose(a, b, rtol=1e-9, atol=1e-12))


def test_every_glossary_formula_recomputed_as_written_matches(exported):
    d = Demo(exported)
    named = {t.formula: t for t in glossary.TERMS if t.formula}
    for formula, (recompute, column, words, wrong_words) in FORMULAS.items():
        term = named.pop(formula)
        for w in words:
            assert w in term.text, (term.key, w)
        for w in wrong_words:
            assert w not in term.text, (term.key, w)
        published = _published(d, column)
        mine = recompute(d)
        assert published, formula
        for slug, value in published.items():
            assert _close(mine[slug], value), (formula, slug, mine[slug], value)
    # The entries whose figures the example script recomputes column by column.
    assert set(named) <= {"skill:mean_difference", "return:pooled", "resolved:questions",
                          "coverage:asked_sample", "common:shown_price", "edge_label:holm_clv"}  # fmt: skip


def test_the_readings_the_glossary_once_printed_do_not_match(exported):
    d = Demo(exported)
    for formula, (recompute, column) in WRONG.items():
        published = _published(d, column)
        mine = recompute(d)
        differ = [s for s, v in published.items() if s in mine and not _close(mine[s], v)]
        assert differ, formula  # the demo tells the two readings apart
    for term in glossary.TERMS:
        for phrase in ("return intervals resample entries", "one-vs-rest", "1 - Brier(competitor) / 0.25",
                       "Settled positions that won", "does not depend on the random seed"):  # fmt: skip
            assert phrase not in term.text, (term.key, phrase)


def test_the_seed_claim_is_the_monte_carlo_error(client, db):
    body = client.get("/methodology/").content.decode()
    assert "does not depend on the random seed" not in body
    error = math.sqrt(0.025 * 0.975 / methodology.CONSTANTS.sb_resamples)
    assert f"{error:.4f}" in body and "borderline" in body and "NOT_TESTED" in body
    spec = client.get("/methodology/spec.md")
    assert spec.status_code == 200 and spec["Content-Type"].startswith("text/markdown")
    assert spec.content.decode() == SPEC.read_text()
    assert client.get("/methodology/spec.md?download=1")["Content-Disposition"].startswith(
        "attachment"
    )


def test_the_pages_that_name_the_example_serve_it(client):
    """An outsider gets the example from the site, beside the spec and the exports: the link on
    /methodology/ and /exports/ serves the script's own bytes."""
    url = "/method/examples/recompute_scores.py"
    for page in ("/methodology/", "/exports/"):
        assert f'href="{url}"' in client.get(page).content.decode(), page
    served = client.get(url)
    assert served.status_code == 200 and served.content == SCRIPT.read_bytes()
