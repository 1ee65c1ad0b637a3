"""Builders for the agent API tests: an outside agent entered in this week's live cohort, its
token and key, and the requests an agent sends (signed as docs/enter.md says)."""

from __future__ import annotations

import base64
import json
from dataclasses import dataclass
from datetime import timedelta

from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey
from cryptography.hazmat.primitives.serialization import Encoding, PublicFormat

from agents import signing, tokens
from agents.models import Competitor
from cohorts.models import Cohort, Entry, Universe
from cohorts.services import open_cohort, week_start_for
from cohorts.universe import freeze_universe
from core import clock
from tests.agents.helpers import baseline_competitor, make_markets


@dataclass
class Agent:
    competitor: Competitor
    token: str
    key: Ed25519PrivateKey | None
    cohort: Cohort
    entry: Entry
    universe: Universe

    def headers(self, body: bytes = b"", *, week: int | None = None, sign: bool = True) -> dict:
        h = {"HTTP_AUTHORIZATION": f"Bearer {self.token}"}
        if self.key is not None and sign:
            signed = signing.message(
                self.competitor.slug, self.cohort.pk, week or self.universe.week, body
            )
            h["HTTP_ARENA_SIGNATURE"] = base64.b64encode(self.key.sign(signed)).decode()
        return h

    def body(self, answer: dict | str, *, week: int | None = None) -> bytes:
        envelope = {"cohort": self.cohort.pk, "week": week or self.universe.week, "answer": answer}
        return json.dumps(envelope).encode()

    def first_market_bet(self, amount: int = 100, probability: float = 0.9) -> dict:
        """A bet on Yes of the universe's first market."""
        market = self.universe.markets[0]
        return {"market_id": str(market["market_id"]), "outcome": "Yes", "amount": amount,
                "probability": probability}  # fmt: skip

    def valid_answer(self, bets: list | None = None) -> dict:
        backed = {b["market_id"] for b in bets or []}
        forecasts = [
            {"market_id": str(m), "outcome": "Yes", "probability": 0.5}
            for m in self.universe.forecast_sample
            if str(m) not in backed
        ]
        action = "BET" if bets else "HOLD"
        return {"action": action, "bets": bets or [], "forecasts": forecasts,
                "reasoning": "a test agent"}  # fmt: skip


def public_key_b64(key: Ed25519PrivateKey) -> str:
    raw = key.public_key().public_bytes(Encoding.Raw, PublicFormat.Raw)
    return base64.b64encode(raw).decode()


def outside_agent(**kw) -> Agent:
    return outside_agents(**kw)[0]


def outside_agents(
    *, signed: bool = True, markets: int = 6, slugs: tuple[str, ...] = ("team-agent",),
    frozen_ago: int = 1, with_baseline: bool = False,
) -> list[Agent]:
    """Outside agents in this week's live cohort, its week frozen `frozen_ago` minutes ago."""
    keys, competitors = [], []
    for slug in slugs:
        key = Ed25519PrivateKey.generate() if signed else None
        keys.append(key)
        competitors.append(Competitor.objects.create(
            slug=slug, display_name=slug.replace("-", " ").title(), kind=Competitor.Kind.OUTSIDE,
            team="Team", agent_version="1.0", public_key=public_key_b64(key) if key else "",
        ))  # fmt: skip
    now = clock.now()
    make_markets(markets)
    others = [baseline_competitor("cash")] if with_baseline else []
    cohort, _ = open_cohort(week_start_for(now), kind=Cohort.Kind.LIVE,
                            competitors=[*competitors, *others], at=week_start_for(now))  # fmt: skip
    universe = freeze_universe(cohort, 1, now - timedelta(minutes=frozen_ago))
    return [
        Agent(c, tokens.issue(c).token, key, cohort, cohort.entries.get(competitor=c), universe)
        for c, key in zip(competitors, keys)
    ]
