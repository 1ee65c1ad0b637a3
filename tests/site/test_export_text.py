"""Every export, CSV and JSON, web and CLI: no cell a spreadsheet runs as a formula, no number
in exponent notation, and the text itself kept (one leading quote on a defused cell)."""

import csv
import io
import json
import re
from decimal import Decimal

import pytest
from django.core.management import call_command

from cohorts.models import Decision, Forecast, Position, Snapshot
from markets.models import Market
from scoring.models import LeaderboardRow
from web.exports import files as exports
from web.exports.text import csv_cell, json_text, number_text

pytestmark = pytest.mark.django_db
WIDE = "since=2026-01-01&until=2026-12-31"
LINK = '=HYPERLINK("http://evil.example/x","Click")'
HOSTILE = [LINK, "+cmd|' /C calc'!A0", "-2+3+cmd|' /C calc'!A0", "@SUM(1+1)*cmd", "\t=1+1", "\r=1"]
EXPONENT = re.compile(r"[+-]?(?:[0-9]+\.?[0-9]*|\.[0-9]+)[eE][+-]?[0-9]+")
FORMULA = ("=", "+", "-", "@", "\t", "\r", "\n")


@pytest.fixture
def hostile_world(arena_world):
    """Market and model text that is a formula in every text column an export shows, and
    numbers that Python writes with an exponent in every kind of number column."""
    Market.objects.update(question=LINK)
    Decision.objects.update(
        reasoning=LINK,
        hold_reason=HOSTILE[1],
        error=HOSTILE[2],
        system_prompt=HOSTILE[3],
        user_prompt=HOSTILE[4],
        validation_errors=[HOSTILE[5], 1e-05],
        parsed={"action": "BET", "probability": 1e-07, "nested": [{"x": 1e22}]},
        cost_usd=Decimal("0E-10"),
    )
    Forecast.objects.update(probability=1e-05, market_price=2.5e-08, outcome=LINK)
    Position.objects.update(outcome="@evil")
    Snapshot.objects.update(realized_pnl=Decimal("0E-2"), unrealized_pnl=Decimal("-1E-2"))
    LeaderboardRow.objects.update(
        brier=1e-06, skill_vs_market=-3e-05, pnl=Decimal("0E-2"), cost_usd=Decimal("0E-10")
    )
    return arena_world


def _body(response) -> str:
    return b"".join(response.streaming_content).decode()


def _check_csv(text: str, what: str) -> int:
    rows = list(csv.reader(io.StringIO(text)))
    assert len(rows) > 1, what
    for row in rows[1:]:
        for cell in row:
            assert not EXPONENT.fullmatch(cell), (what, cell)
            if cell.startswith(FORMULA):
                assert re.fullmatch(r"[+-]?[0-9]+(\.[0-9]+)?", cell), (what, cell)
            if cell.startswith(("{", "[")):
                _check_json(cell, what)
    return len(rows) - 1


def _check_json(text: str, what: str) -> object:
    seen: list[str] = []
    doc = json.loads(text, parse_float=lambda s: seen.append(s) or float(s))
    assert not [s for s in seen if "e" in s.lower()], (what, seen)

    def strings(v):
        if isinstance(v, dict):
            for x in v.values():
                yield from strings(x)
        elif isinstance(v, list):
            for x in v:
                yield from strings(x)
        elif isinstance(v, str):
            yield v

    assert not [s for s in strings(doc) if EXPONENT.fullmatch(s)], what
    return doc


@pytest.mark.parametrize("what", list(exports.SPECS))
def test_every_export_defuses_formulas_and_writes_numbers_positionally(client, hostile_world, what):
    text = _body(client.get(f"/exports/{what}.csv?{WIDE}"))
    n = _check_csv(text, what)
    doc = _check_json(_body(client.get(f"/exports/{what}.json?{WIDE}")), what)
    assert isinstance(doc, dict) and len(doc["rows"]) == n
    out = io.StringIO()
    call_command("arena", "export", "--what", what, "--since", "2026-01-01", stdout=out)
    assert out.getvalue() == text  # the CLI writes the same bytes


def test_defused_text_is_kept_and_json_keeps_it_as_is(client, hostile_world):
    rows = list(csv.DictReader(io.StringIO(_body(client.get(f"/exports/decisions.csv?{WIDE}")))))
    assert rows[0]["reasoning"] == "'" + LINK
    assert rows[0]["cost_usd"] == "0.0000000000"
    assert json.loads(rows[0]["parsed"])["probability"] == 1e-07
    trades = list(csv.DictReader(io.StringIO(_body(client.get(f"/exports/trades.csv?{WIDE}")))))
    assert {t["question"] for t in trades} == {"'" + LINK}
    assert {t["outcome"] for t in trades} == {"'@evil"}
    assert {t["amount"] for t in trades} == {"100.00"}
    doc = json.loads(_body(client.get(f"/exports/decisions.json?{WIDE}")))
    assert doc["rows"][0]["reasoning"] == LINK  # JSON is data, not a spreadsheet
    assert doc["rows"][0]["cost_usd"] == "0.0000000000"
    forecasts = json.loads(_body(client.get(f"/exports/forecasts.json?{WIDE}")))
    assert forecasts["rows"][0]["probability"] == 1e-05


@pytest.mark.parametrize(
    ("value", "text"),
    [
        (Decimal("0E-10"), "0.0000000000"),
        (Decimal("1E+3"), "1000"),
        (Decimal("-12.50"), "-12.50"),
        (1e-05, "0.00001"),
        (1e22, "10000000000000000000000"),
        (0.55, "0.55"),
        (3.0, "3.0"),
        (-2.5e-08, "-0.000000025"),
    ],
)
def test_number_text_is_positional_and_exact(value, text):
    assert number_text(value) == text
    assert Decimal(number_text(value)) == Decimal(
        repr(value) if isinstance(value, float) else value
    )


@pytest.mark.parametrize(
    ("value", "cell"),
    [
        ("=1+1", "'=1+1"),
        ("+1", "+1"),  # a number, not a formula
        ("-12.50", "-12.50"),
        ("-1+2", "'-1+2"),
        ("@x", "'@x"),
        ("\t=x", "'\t=x"),
        ("\r=x", "'\r=x"),
        ("plain = text", "plain = text"),
        (["=x"], '["=x"]'),
        (None, None),
        (True, True),
        (7, 7),
        (1e-05, "0.00001"),
    ],
)
def test_csv_cell(value, cell):
    assert csv_cell(value) == cell


def test_json_text_matches_json_dumps_except_for_exponents():
    value = {"a": [1, 2.5, None, True, "x\u202e"], "b": {"c": "d"}}
    assert json_text(value) == json.dumps(value)
    assert json_text(value, (",", ":")) == json.dumps(value, separators=(",", ":"))
    assert json_text([1e-05, float("nan")]) == "[0.00001, NaN]"
