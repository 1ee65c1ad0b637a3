"""The trading rules on the methodology page are a template filled from the sealed constants."""

from __future__ import annotations

import dataclasses

from core import methodology
from web import pages


def test_rules_read_the_sealed_amounts(monkeypatch):
    rules = " ".join(pages.trading_rules())
    assert f"Minimum bet ${methodology.CONSTANTS.min_bet};" in rules
    assert f"at most {methodology.CONSTANTS.max_bet_fraction:.0%} of the cash" in rules
    assert "{" not in rules
    changed = dataclasses.replace(methodology.CONSTANTS, min_bet="75.00", max_bet_fraction=0.2)
    monkeypatch.setattr(methodology, "CONSTANTS", changed)
    rules = " ".join(pages.trading_rules())
    assert "Minimum bet $75.00;" in rules and "at most 20% of the cash" in rules
