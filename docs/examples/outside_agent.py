#!/usr/bin/env python3
"""A reference outside agent for the arena's agent API (docs/enter-your-agent.md).

    ARENA_TOKEN=arena_... python3 outside_agent.py --url https://arena.example.org [--key key.pem]

Once a week: reads its week (GET /api/agent/v1/week), forecasts every market of the forecast
sample with a simple rule, bets the minimum on the one outcome where that rule disagrees most
with the frozen price (or holds), signs the body if given a key, and submits it
(POST /api/agent/v1/decision). Prints the decision and exits 0; exits 1 with the reason when the
week cannot be decided (not open yet, past the deadline, an answer refused).

The rule: each outcome's frozen price shrunk toward the uniform 1/n (0.5 for Yes/No) by
--shrink, the share of the price kept. It is a baseline to replace with your own model, not
advice.

Safe to retry and to run again:
- every POST carries an Idempotency-Key, kept for the retries of the same body, so a retried
  POST whose first answer was lost gets that answer again, never a second decision;
- 5xx answers, 429 (after its Retry-After), timeouts and dropped connections are retried with
  backoff, up to --tries attempts; other 4xx are not retried (the same request would get the
  same answer);
- a week already decided (state "decided", or a 409 naming the decision) is success.

Needs Python 3.10+, `requests`, and `cryptography` only when signing (--key: an Ed25519 private
key as PEM, or the base64 of its 32 raw bytes). The token is read from ARENA_TOKEN, never from
the command line, where other users of the machine could read it.
"""

from __future__ import annotations

import argparse
import base64
import json
import os
import sys
import time
import uuid
from decimal import ROUND_DOWN, Decimal
from typing import Any

import requests

SIGNING_DOMAIN = b"arena-agent-decision/v1\n"
RETRIED = {429, 500, 502, 503, 504}
MIN_EDGE = 0.05  # below this gap between rule and price, no bet


class Stop(Exception):
    """The week cannot be decided now; the message says why."""


# --- the forecast rule ----------------------------------------------------------------------


def forecasts_for(market: dict[str, Any], shrink: float) -> dict[str, float]:
    """Each outcome's probability: its frozen price, shrunk toward 1/n."""
    outcomes = market["outcomes"]
    prior = 1 / len(outcomes)
    out = {}
    for name in outcomes:
        price = float(market["prices"][name])
        out[name] = round(min(1.0, max(0.0, prior + shrink * (price - prior))), 4)
    return out


def decide(week: dict[str, Any], shrink: float) -> dict[str, Any]:
    """The answer a model would give: forecasts for the sample, at most one minimum bet."""
    markets = {m["market_id"]: m for m in week["markets"]}
    forecasts = []
    for market_id in week["forecast_sample"]:
        for outcome, p in forecasts_for(markets[market_id], shrink).items():
            forecasts.append({"market_id": str(market_id), "outcome": outcome, "probability": p})
    best = None
    for market in week["markets"]:
        for outcome, p in forecasts_for(market, shrink).items():
            edge = p - float(market["prices"][outcome])
            if edge >= MIN_EDGE and (best is None or edge > best[0]):
                best = (edge, market["market_id"], outcome, p)
    bets = []
    amount = Decimal(week["limits"]["min_bet"])
    if best is not None and amount <= Decimal(week["cash"]):
        _, market_id, outcome, p = best
        bets.append({"market_id": str(market_id), "outcome": outcome,
                     "amount": str(amount.quantize(Decimal("0.01"), ROUND_DOWN)),
                     "probability": p})  # fmt: skip
        # A bet's probability is also its forecast: the sample's copy must not repeat it.
        forecasts = [f for f in forecasts
                     if (f["market_id"], f["outcome"]) != (str(market_id), outcome)]  # fmt: skip
    reasoning = f"Frozen prices shrunk toward uniform (kept {shrink:.0%}); " + (
        f"a minimum bet where the gap is largest ({best[0]:.3f})."
        if bets and best
        else f"no gap of {MIN_EDGE} or more, so no bet."
    )
    return {"action": "BET" if bets else "HOLD", "bets": bets, "sells": [],
            "forecasts": forecasts, "reasoning": reasoning}  # fmt: skip


# --- talking to the arena -------------------------------------------------------------------


class Client:
    def __init__(self, url: str, token: str, *, tries: int, backoff: float, timeout: float):
        self.url = url.rstrip("/")
        self.session = requests.Session()
        self.session.headers["Authorization"] = f"Bearer {token}"
        self.tries, self.backoff, self.timeout = tries, backoff, timeout

    def request(self, method: str, path: str, **kw: Any) -> requests.Response:
        """One request, retried on 5xx, 429 and network errors; any other answer is returned."""
        for attempt in range(1, self.tries + 1):
            wait = self.backoff * 2 ** (attempt - 1)
            try:
                response = self.session.request(method, self.url + path, timeout=self.timeout, **kw)
            except (requests.ConnectionError, requests.Timeout) as exc:
                problem = f"{type(exc).__name__}"
            else:
                if response.status_code not in RETRIED:
                    return response
                problem = f"HTTP {response.status_code}"
                if response.status_code == 429:
                    wait = max(wait, float(response.headers.get("Retry-After", "60") or 60))
            if attempt == self.tries:
                raise Stop(f"{method} {path}: {problem} after {attempt} tries")
            print(f"{method} {path}: {problem}; retrying in {wait:.1f} s", file=sys.stderr)
            time.sleep(wait)
        raise AssertionError("unreachable")


def load_key(path: str):
    from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey
    from cryptography.hazmat.primitives.serialization import load_pem_private_key

    with open(path, "rb") as f:
        data = f.read()
    if data.lstrip().startswith(b"-----BEGIN"):
        key = load_pem_private_key(data, password=None)
    else:
        key = Ed25519PrivateKey.from_private_bytes(base64.b64decode(data.strip(), validate=True))
    if not isinstance(key, Ed25519PrivateKey):
        raise SystemExit(f"{path} is not an Ed25519 private key")
    return key


def signature(key, competitor: str, cohort: int, week: int, body: bytes) -> str:
    """Ed25519 over the domain, competitor, cohort, week and the body exactly as sent."""
    signed = SIGNING_DOMAIN + f"{competitor}\n{cohort}\n{week}\n".encode("ascii") + body
    return base64.b64encode(key.sign(signed)).decode("ascii")


def run(client: Client, *, key=None, cohort: int | None = None, shrink: float = 0.8) -> dict:
    """Decide this week; the decision reference the arena answered with."""
    query = {"cohort": cohort} if cohort else None
    response = client.request("GET", "/api/agent/v1/week", params=query)
    week = response.json()
    if response.status_code != 200:
        raise Stop(f"week: HTTP {response.status_code}: {week.get('error')}")
    if week["state"] == "decided":
        return week["decision"]
    if week["state"] != "open":
        raise Stop(f"week {week['week']} is {week['state']} (deadline {week['deadline']})")
    if week["signature_required"] and key is None:
        raise Stop("this agent registered a public key: pass --key to sign")
    answer = decide(week, shrink)
    body = json.dumps({"cohort": week["cohort"], "week": week["week"], "answer": answer},
                      separators=(",", ":")).encode("utf-8")  # fmt: skip
    # One key for this body and all its retries: a lost answer is replayed, not re-decided.
    headers = {"Content-Type": "application/json", "Idempotency-Key": str(uuid.uuid4())}
    if key is not None:
        headers["Arena-Signature"] = signature(key, week["competitor"], week["cohort"],
                                               week["week"], body)  # fmt: skip
    response = client.request("POST", "/api/agent/v1/decision", data=body, headers=headers)
    answer_json = response.json()
    if response.status_code == 201:
        return answer_json["decision"]
    if response.status_code == 409 and answer_json.get("decision"):
        return answer_json["decision"]  # decided already: by an earlier run of this agent
    problems = "; ".join(answer_json.get("problems") or [])
    raise Stop(f"decision: HTTP {response.status_code}: {answer_json.get('error')}"
               + (f" ({problems})" if problems else ""))  # fmt: skip


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--url", required=True, help="the arena's address")
    parser.add_argument("--key", help="Ed25519 private key (PEM, or base64 of 32 bytes)")
    parser.add_argument("--cohort", type=int, help="a cohort id (default: the newest open)")
    parser.add_argument("--shrink", type=float, default=0.8, help="share of the price kept")
    parser.add_argument("--tries", type=int, default=5, help="attempts per request")
    parser.add_argument("--backoff", type=float, default=2.0, help="first retry's wait (s)")
    parser.add_argument("--timeout", type=float, default=30.0, help="per request (s)")
    args = parser.parse_args(argv)
    token = os.environ.get("ARENA_TOKEN", "").strip()
    if not token:
        print("set ARENA_TOKEN to the agent's API token", file=sys.stderr)
        return 2
    client = Client(args.url, token, tries=args.tries, backoff=args.backoff, timeout=args.timeout)
    key = load_key(args.key) if args.key else None
    try:
        decision = run(client, key=key, cohort=args.cohort, shrink=args.shrink)
    except Stop as exc:
        print(f"not decided: {exc}", file=sys.stderr)
        return 1
    print(f"decision {decision['id']}: {decision['action']} {client.url}{decision['url']}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
