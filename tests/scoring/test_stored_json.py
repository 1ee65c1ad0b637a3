"""The stored results of a score run, byte for byte: what readers (pages, API, exports) parse.

The expected JSON in tests/scoring/data/ was written by this module's `stored` on a commit whose
scoring engine passed dicts of arrays from compute to the rows; the typed results that replaced
them must store exactly the same bytes (key order included) and the same row columns. Cohort
primary keys are the only values that differ between databases, so they are named, not numbered.

Floating-point figures are compared to 1e-9 relative: numpy's sums take different SIMD paths on
different CPUs (AVX-512 against AVX2), which moves the last bits of a bootstrap interval or a
p-value from one machine to the next. Keys, their order, strings and the shape are exact.
"""

from __future__ import annotations

import dataclasses
import json
import math
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest
from django.db import connection

from scoring.models import ScoreRun
from scoring.services import compute_scores
from scoring.stored import RowDetails, RunDetails
from tests.scoring.test_leaderboard import END, scripted  # noqa: F401 - pytest fixture
from tests.scoring.test_leaderboard_edge import CLOSE, scenario  # noqa: F401 - pytest fixture

pytestmark = pytest.mark.django_db

DATA = Path(__file__).parent / "data"
COLUMNS = (
    "rank", "n_forecasts", "n_resolved", "brier", "brier_lo", "brier_hi", "log_score",
    "skill_vs_market", "skill_lo", "skill_hi", "bss_vs_half", "return_pct", "return_lo",
    "return_hi", "pnl", "realized_pnl", "unrealized_pnl", "win_rate", "implied_confidence_brier",
    "tokens", "cost_usd", "cost_per_resolved", "provisional", "required_n",
)  # fmt: skip


def _name_cohorts(value: Any, names: dict[str, str]) -> Any:
    """The same JSON with every cohort primary key (as a dict key or a cohort's "id") named."""
    if isinstance(value, dict):
        out = {names.get(k, k): _name_cohorts(v, names) for k, v in value.items()}
        if "week_start" in out and "id" in out:
            out["id"] = names[str(out["id"])]
        return out
    if isinstance(value, list):
        return [_name_cohorts(v, names) for v in value]
    return value


def stored(run: ScoreRun) -> str:
    """The run's stored details and every row (columns as text, details as stored), one string."""
    run = ScoreRun.objects.get(pk=run.pk)
    names = {str(c["id"]): f"cohort-{i}" for i, c in enumerate(run.details["cohorts"])}
    rows = []
    for row in run.rows.select_related("competitor").order_by("cohort_id", "competitor__slug"):
        columns = {name: str(getattr(row, name)) for name in COLUMNS}
        group = "all" if row.cohort_id is None else names[str(row.cohort_id)]
        rows.append(
            {
                "group": group,
                "competitor": row.competitor.slug,
                "columns": columns,
                "details": _name_cohorts(row.details, names),
            }
        )
    rows.sort(key=lambda r: (r["group"], r["competitor"]))  # NULL cohorts sort first everywhere
    body = {"run": _name_cohorts(run.details, names), "rows": rows}
    return json.dumps(body, indent=1, ensure_ascii=False) + "\n"


@pytest.mark.parametrize(
    ("fixture", "as_of"),
    [("scripted", END + timedelta(hours=1)), ("scenario", CLOSE + timedelta(days=1))],
)
def test_stored_json_is_unchanged(fixture, as_of, request):
    request.getfixturevalue(fixture)
    run = compute_scores("live", as_of=as_of)
    expected = (DATA / f"stored_{fixture}.json").read_text()
    # SQLite stores the JSON text as written, key order included; jsonb keeps its own key order.
    keep_order = connection.vendor == "sqlite"
    assert _differences(json.loads(stored(run)), json.loads(expected), "$", keep_order) == []


def _number(value: Any) -> float | None:
    """A float, or a column's text of a float ("0.1234"), as a number; None for anything else."""
    if isinstance(value, float):
        return value
    if isinstance(value, str) and any(c in value for c in ".eE") and value not in ("", "None"):
        try:
            return float(value)
        except ValueError:
            return None
    return None


def _differences(got: Any, want: Any, path: str, keep_order: bool) -> list[str]:
    """Where `got` differs from `want`: exact but for floats, equal to 1e-9 relative."""
    if isinstance(want, dict) and isinstance(got, dict):
        if (list(got) if keep_order else sorted(got)) != (
            list(want) if keep_order else sorted(want)
        ):
            return [f"{path}: keys {list(got)} != {list(want)}"]
        return [d for k in want for d in _differences(got[k], want[k], f"{path}.{k}", keep_order)]
    if isinstance(want, list) and isinstance(got, list):
        if len(got) != len(want):
            return [f"{path}: {len(got)} items != {len(want)}"]
        pairs = zip(got, want, strict=True)
        return [
            d
            for i, (g, w) in enumerate(pairs)
            for d in _differences(g, w, f"{path}[{i}]", keep_order)
        ]
    g, w = _number(got), _number(want)
    if g is not None and w is not None and type(got) is type(want):
        same = (math.isnan(g) and math.isnan(w)) or math.isclose(g, w, rel_tol=1e-9, abs_tol=1e-12)
        return [] if same else [f"{path}: {got!r} != {want!r}"]
    return [] if got == want else [f"{path}: {got!r} != {want!r}"]


@pytest.mark.parametrize("fixture", ["scripted", "scenario"])
def test_typed_readers_write_back_what_they_read(fixture):
    """RowDetails and RunDetails are the one reader of the stored JSON and the writer of it: read
    and written again, every stored object comes back byte for byte."""
    body = json.loads((DATA / f"stored_{fixture}.json").read_text())
    run = RunDetails.from_json(body["run"])
    assert json.dumps(run.to_json()) == json.dumps(body["run"])
    for row in body["rows"]:
        assert json.dumps(RowDetails.from_json(row["details"]).to_json()) == json.dumps(
            row["details"]
        )


def test_typed_reader_of_an_older_row_reads_missing_as_none():
    details = RowDetails.from_json({"slug": "a", "clv": {"n": 0, "label": None}, "calibration": 3})
    assert details.slug == "a" and details.murphy is None and details.calibration == []
    assert details.clv is not None and details.clv.n == 0 and details.clv.mean_prob is None
    assert RowDetails.from_json(None) == RowDetails()
    assert RunDetails.from_json({"dm": {"all": {"brier": [{"a": "x"}]}}}).dm_for("all").brier == []
    assert RunDetails.from_json(None).headline("all") is None


def test_notes_read_the_sealed_constants(monkeypatch):
    from scoring import present

    monkeypatch.setattr(present, "C", dataclasses.replace(present.C, max_bet_fraction=0.3))
    monkeypatch.setattr(present.metrics, "provisional_threshold", lambda: 123)
    text = " ".join(present.notes())
    assert "within 30% of the paper cash" in text
    assert "the sealed threshold (123)" in text


def test_competitor_page_reads_a_computed_row(scripted, client):  # noqa: F811 - fixture
    compute_scores("live", as_of=END + timedelta(hours=1))
    body = client.get("/competitors/alice/?scope=live").content.decode()
    assert "No calibration data yet" not in body and "Reliability (REL)" in body
    assert "/competitors/bob/?scope=live" in body  # the Diebold-Mariano row against bob
    assert "Expected calibration error (ECE)" in body  # an "other measure"
    assert "Calibration bins" in body
