#!/usr/bin/env python3
"""A reference outside agent for the arena's agent API (docs/enter-your-agent.md).

    ARENA_TOKEN=arena_... python3 outside_agent.py --url https://arena.example.org [--key key.pem]
    ARENA_TOKEN=arena_... python3 outside_agent.py --url ... --key key.pem --follow

Once a week: reads its week (GET /api/agent/v1/week), forecasts every market of the forecast
sample with a simple rule, bets the minimum on the one outcome where that rule disagrees most
with the frozen price (or holds), signs the body if given a key, and submits it
(POST /api/agent/v1/decision). Prints the decision and exits 0; exits 1 with the reason when the
week cannot be decided (not open yet, past the deadline, an answer refused).

With --follow it keeps running instead (under a supervisor, like any daemon): it sleeps until the
next Sunday 00:00 UTC on the server's clock, polls every --poll seconds until each of its cohorts
has frozen that week's universe, decides each week the moment it opens, and sleeps again. It
remembers the cohorts it has seen, so an entry in several cohorts at once (one opens every
Sunday) decides in each. --clock-rate is how fast the arena's clock runs against the wall: 1 for
a live arena; a rehearsal on an accelerated clock says its rate, so the agent's sleeps and its
poll land inside a window that lasts well under a second of wall time.

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
import re
import sys
import threading
import time
import uuid
from concurrent.futures import ThreadPoolExecutor
from datetime import datetime, timedelta
from decimal import ROUND_DOWN, Decimal
from typing import Any

import requests

SIGNING_DOMAIN = b"arena-agent-decision/v1\n"
RETRIED = {429, 500, 502, 503, 504}
MIN_EDGE = 0.05  # below this gap between rule and price, no bet
# --follow: how long after Sunday 00:00 (server time) it keeps polling for a week that has not
# opened: the weekly run freezes at 00:05, and retries every 15 minutes after an outage.
OPEN_WAIT = timedelta(days=1)


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


def decide(week: dict[str, Any], shrink: float, avoid: frozenset[str] = frozenset()) -> dict[str, Any]:
    """The answer a model would give: forecasts for the sample, at most one minimum bet (on no
    market in `avoid`: those the arena refused a bet on)."""
    markets = {m["market_id"]: m for m in week["markets"]}
    forecasts = []
    for market_id in week["forecast_sample"]:
        for outcome, p in forecasts_for(markets[market_id], shrink).items():
            forecasts.append({"market_id": str(market_id), "outcome": outcome, "probability": p})
    best = None
    for market in week["markets"]:
        if str(market["market_id"]) in avoid:
            continue
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
        self._token = token

    def clone(self) -> Client:
        """Another client like this one, with its own connections (one per thread)."""
        return Client(self.url, self._token, tries=self.tries, backoff=self.backoff,
                      timeout=self.timeout)  # fmt: skip

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
    return submit(client, week, key=key, shrink=shrink)


def submit(client: Client, week: dict[str, Any], *, key=None, shrink: float = 0.8) -> dict:
    """Decide an open week (as GET .../week answered it) and submit; the decision reference.
    An answer the arena refuses with a try left (422, `tries_left` 1) is decided again without
    the bets it named (a market whose price went stale, say) and sent once more."""
    if week["signature_required"] and key is None:
        raise Stop("this agent registered a public key: pass --key to sign")
    avoid: frozenset[str] = frozenset()
    while True:
        response = _send(client, week, decide(week, shrink, avoid), key)
        answer_json = response.json()
        if response.status_code == 201:
            return answer_json["decision"]
        if response.status_code == 409 and answer_json.get("decision"):
            return answer_json["decision"]  # decided already: by an earlier run of this agent
        problems = answer_json.get("problems") or []
        named = frozenset(re.findall(r"\(market (\d+)", " ".join(problems)))
        if response.status_code == 422 and answer_json.get("tries_left") and named - avoid:
            print(f"refused, deciding again without market(s) {', '.join(sorted(named))}: "
                  + "; ".join(problems), file=sys.stderr, flush=True)  # fmt: skip
            avoid |= named
            continue
        raise Stop(f"decision: HTTP {response.status_code}: {answer_json.get('error')}"
                   + (f" ({'; '.join(problems)})" if problems else ""))  # fmt: skip


def _send(client: Client, week: dict[str, Any], answer: dict[str, Any], key) -> requests.Response:
    body = json.dumps({"cohort": week["cohort"], "week": week["week"], "answer": answer},
                      separators=(",", ":")).encode("utf-8")  # fmt: skip
    # One key for this body and all its retries: a lost answer is replayed, not re-decided.
    headers = {"Content-Type": "application/json", "Idempotency-Key": str(uuid.uuid4())}
    if key is not None:
        headers["Arena-Signature"] = signature(key, week["competitor"], week["cohort"],
                                               week["week"], body)  # fmt: skip
    return client.request("POST", "/api/agent/v1/decision", data=body, headers=headers)


class Follower:
    """--follow: every week of every cohort holding this agent's entry, decided as it opens."""

    def __init__(self, client: Client, *, key=None, shrink: float, poll: float, rate: float):
        self.client, self.key, self.shrink = client, key, shrink
        self.poll, self.rate = poll, rate
        self.cohorts: set[int] = set()  # cohorts seen that may still have decision weeks
        self.heard: tuple[datetime, float] | None = None  # (server time, monotonic) last answer
        self.clients: dict[int | None, Client] = {}  # a cohort's own, kept for keep-alive
        # Weeks a thread is submitting: the newest cohort is also looked at as "None", and two
        # threads sending one week at once would spend its one repair on each other.
        self.sending: set[tuple[int, int]] = set()
        self.sending_lock = threading.Lock()

    def server_now(self) -> datetime:
        """The server's time now: its last answer's, moved on by the wall time since at
        --clock-rate (the server's clock decides the deadline, not this machine's)."""
        if self.heard is None:  # never planned on this machine's clock
            raise Stop("no answer from the server yet")
        server, then = self.heard
        return server + timedelta(seconds=(time.monotonic() - then) * self.rate)

    def look(self, cohort: int | None, client: Client | None = None) -> tuple[str, dict[str, Any]]:
        """One cohort's week (None: the newest): ("open" | "settled" | "waiting" | "gone", it)."""
        response = (client or self.client).request(
            "GET", "/api/agent/v1/week", params={"cohort": cohort} if cohort else None
        )
        week = response.json()
        if week.get("server_time"):
            self.heard = (datetime.fromisoformat(week["server_time"]), time.monotonic())
        if response.status_code == 200:
            self.cohorts.add(week["cohort"])
            return ("open" if week["state"] == "open" else "settled"), week
        if response.status_code == 409 and "no decision week" in str(week.get("error")):
            return "gone", week  # the cohort's decision weeks are over
        return "waiting", week  # not open yet (409), or no cohort holds an entry yet (404)

    def round(self, until: datetime, sunday: datetime | None = None) -> None:
        """Every cohort's week, looked at until each is decided or closed or the server's time
        is past `until` (at least once); one line printed per decision (or why not).
        With `sunday`, the week that starts then: a week frozen before it is last week's, and
        the newest cohort counts only once it is the one that opened then (its week 1), so a
        cohort that opens late is not taken for an older cohort's answer."""
        pending: set[int | None] = {None, *self.cohorts}
        # Each cohort on a thread of its own: two weeks frozen together (an entry in two
        # cohorts) are submitted side by side, each well inside its window.
        with ThreadPoolExecutor(max_workers=4) as pool:
            while True:
                order = sorted(pending, key=lambda c: c or 0)
                for cohort, (state, week) in zip(order, pool.map(self.one, order)):
                    self.settle(pending, cohort, state, week, sunday)
                if not pending or self.server_now() >= until:
                    return
                time.sleep(self.poll)

    def one(self, cohort: int | None) -> tuple[str, dict[str, Any]]:
        """Look at one cohort's week and submit if it is open."""
        if cohort not in self.clients:  # one a thread, kept for keep-alive
            self.clients[cohort] = self.client.clone()
        client = self.clients[cohort]
        try:
            state, week = self.look(cohort, client)
        except (Stop, ValueError) as exc:  # ValueError: an answer that is not JSON
            print(f"no answer: {exc}", file=sys.stderr, flush=True)
            return "waiting", {}  # asked again on the next pass
        if state != "open":
            return state, week
        mine = (week["cohort"], week["week"])
        with self.sending_lock:
            if mine in self.sending:
                return "waiting", week  # another thread is sending it; looked at next pass
            self.sending.add(mine)
        try:
            decision = submit(client, week, key=self.key, shrink=self.shrink)
        except (Stop, ValueError) as exc:
            # Looked at again on the next pass: decided (a 409 names the decision if this one
            # arrived after all), closed, or still open to try again.
            print(f"not decided yet: {exc}", file=sys.stderr, flush=True)
            return "waiting", week
        finally:
            with self.sending_lock:
                self.sending.discard(mine)
        print(f"decision {decision['id']}: {decision['action']} {client.url}{decision['url']} "
              f"(cohort {week['cohort']} week {week['week']})", flush=True)
        return "settled", week

    def settle(self, pending: set[int | None], cohort: int | None, state: str,
               week: dict[str, Any], sunday: datetime | None) -> None:  # fmt: skip
        if state == "gone" and cohort is not None:
            self.cohorts.discard(cohort)
        if sunday is not None and state == "settled":
            if datetime.fromisoformat(week["frozen_at"]) < sunday:
                state = "waiting"  # last week's, decided: this week's is not open yet
            elif cohort is None and week["week"] != 1:
                state = "waiting"
        if state in ("settled", "gone"):
            pending.discard(cohort)

    def forever(self) -> None:
        while self.heard is None:  # the server's time, before anything is planned on it
            try:
                self.look(None)
            except (Stop, ValueError) as exc:
                print(f"no answer yet: {exc}", file=sys.stderr, flush=True)
            if self.heard is None:
                time.sleep(self.poll)
        self.round(self.server_now())  # whatever is open now
        while True:
            now = self.server_now()
            sunday = (now - timedelta(days=(now.weekday() + 1) % 7)).replace(
                hour=0, minute=0, second=0, microsecond=0)  # fmt: skip
            if now >= sunday + OPEN_WAIT:
                sunday += timedelta(days=7)
                wait = (sunday - now).total_seconds() / self.rate
                print(f"next week {sunday:%Y-%m-%d} in {wait:.1f} s", flush=True)
                time.sleep(max(wait - self.poll, 0))
            self.round(sunday + OPEN_WAIT, sunday)
            left = (sunday + OPEN_WAIT - self.server_now()).total_seconds() / self.rate
            time.sleep(max(left, 0))  # this week is done: nothing to ask until the next


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--url", required=True, help="the arena's address")
    parser.add_argument("--key", help="Ed25519 private key (PEM, or base64 of 32 bytes)")
    parser.add_argument("--cohort", type=int, help="a cohort id (default: the newest open)")
    parser.add_argument("--shrink", type=float, default=0.8, help="share of the price kept")
    parser.add_argument("--tries", type=int, default=5, help="attempts per request")
    parser.add_argument("--backoff", type=float, default=2.0, help="first retry's wait (s)")
    parser.add_argument("--timeout", type=float, default=30.0, help="per request (s)")
    parser.add_argument("--follow", action="store_true",
                        help="keep running: decide every week as it opens, until stopped")
    parser.add_argument("--poll", type=float, default=10.0,
                        help="--follow: seconds between two looks while a week is not open")
    parser.add_argument("--clock-rate", type=float, default=1.0,
                        help="--follow: the arena clock's speed against the wall (1 live)")
    args = parser.parse_args(argv)
    token = os.environ.get("ARENA_TOKEN", "").strip()
    if not token:
        print("set ARENA_TOKEN to the agent's API token", file=sys.stderr)
        return 2
    client = Client(args.url, token, tries=args.tries, backoff=args.backoff, timeout=args.timeout)
    key = load_key(args.key) if args.key else None
    if args.follow:
        follower = Follower(client, key=key, shrink=args.shrink, poll=args.poll,
                            rate=args.clock_rate)  # fmt: skip
        try:
            follower.forever()
        except KeyboardInterrupt:
            return 0
    try:
        decision = run(client, key=key, cohort=args.cohort, shrink=args.shrink)
    except Stop as exc:
        print(f"not decided: {exc}", file=sys.stderr)
        return 1
    print(f"decision {decision['id']}: {decision['action']} {client.url}{decision['url']}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
