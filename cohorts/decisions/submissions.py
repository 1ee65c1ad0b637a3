"""Outside agents decide through the agent API: the week they see and the decision they submit.

    week_view()  what GET /api/agent/v1/week answers: the frozen universe exactly as a model's
                 prompt shows it, the forecast sample, cash and open positions, the limits, the
                 deadline and the prompt text a model would have received
    receive()    stores one POST as an AgentSubmission row (committed before anything is judged,
                 so no outcome can lose it)
    submit()     judges a stored submission: the envelope, the window (the server's clock
                 decides), the signature, then the answer with the same parser and rules as a
                 model's answer (cohorts/decisions/run.py's _Run, reused, never copied)

Tries: an invalid answer gets every problem back and one more try (a model's one repair); the
first valid answer, or a second invalid one (held, like a failed repair), is the decision. The
Decision row's UNIQUE(entry, week) makes two concurrent submissions end in exactly one
decision; the entry row's lock (PostgreSQL) serialises the count of tries.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any

from django.db import transaction

from agents import signing
from agents.models import AgentToken, Competitor
from agents.prompts import MAX_FRACTION, MIN_BET, max_allocation
from cohorts.decisions import outside
from cohorts.decisions.claims import claim_decision
from cohorts.decisions.run import UNIVERSE_PRICE_WINDOW, _Run
from cohorts.lineage import pinned_release
from cohorts.models import AgentSubmission, Cohort, Decision, Entry, Universe
from cohorts.scope import on_live_path
from cohorts.seals import sealing as seals
from cohorts.services import cohort_week, decision_eligible_cohorts
from cohorts.universe import position_views, price_book
from core import clock
from core.text import storable_json

MAX_BODY_BYTES = 64 * 1024
MAX_DEPTH = 32
TRIES = 2  # the answer and one more (a model's repair)
# When the weekly run freezes a week's universe: the beat's decide, five minutes into the week.
FREEZE_AFTER = timedelta(minutes=5)
S = AgentSubmission.Outcome


@dataclass
class Answer:
    """What the API sends back: the status and a JSON object with a one-line `error` if any."""

    status: int
    body: dict[str, Any]
    outcome: str = S.REFUSED
    problems: list[str] = field(default_factory=list)


def refused(status: int, error: str, **extra: Any) -> Answer:
    return Answer(status, {"error": error, **extra})


# --- the week ---------------------------------------------------------------------------


def _entry(competitor: Competitor, cohort_id: int | None, now: datetime) -> Entry | Answer:
    entries = Entry.objects.filter(competitor=competitor).select_related("cohort")
    if cohort_id is not None:
        entry = entries.filter(cohort_id=cohort_id).order_by("replicate").first()
        if entry is None:
            return refused(404, f"{competitor.slug} has no entry in cohort {cohort_id}",
                           server_time=now.isoformat())  # fmt: skip
        return entry
    open_ids = decision_eligible_cohorts(now).values("pk")
    entry = entries.filter(cohort__in=open_ids).order_by("-cohort__week_start", "replicate").first()
    if entry is None:
        # With the server's time: an agent waiting for its first cohort plans on that clock.
        return refused(404, f"no cohort open for decisions holds an entry of {competitor.slug}",
                       server_time=now.isoformat())  # fmt: skip
    return entry


def week_view(competitor: Competitor, cohort_id: int | None = None) -> Answer:
    now = clock.now()
    found = _entry(competitor, cohort_id, now)
    if isinstance(found, Answer):
        return found
    entry, cohort = found, found.cohort
    week = cohort_week(cohort, now)
    head = {"competitor": competitor.slug, "cohort": cohort.pk, "week": week,
            "server_time": now.isoformat()}  # fmt: skip
    if week < 1 or week > cohort.decision_weeks:
        return refused(409, f"cohort {cohort.pk} has no decision week at {now.isoformat()}", **head)
    universe = Universe.objects.filter(cohort=cohort, week=week).first()
    if universe is None:
        opens = cohort.week_start + timedelta(weeks=week - 1) + FREEZE_AFTER
        return refused(
            409,
            f"not open yet: week {week} of cohort {cohort.pk} opens at about {opens.isoformat()}, "
            "when its universe is frozen",
            opens_at=opens.isoformat(),
            **head,
        )
    run = _prepared(entry, universe, week, now)
    decision = Decision.objects.filter(entry=entry, week=week).first()
    final = decision is not None and decision.status == Decision.Status.DONE
    deadline = outside.deadline(universe)
    return Answer(
        200,
        {
            **head,
            "cohort_kind": cohort.kind,
            "weeks": cohort.decision_weeks,
            "state": "decided" if final else ("open" if now < deadline else "closed"),
            "frozen_at": universe.frozen_at.isoformat(),
            "deadline": deadline.isoformat(),
            "universe_hash": universe.content_hash,
            "markets": universe.markets,
            "forecast_sample": universe.forecast_sample,
            "cash": f"{entry.cash:.2f}",
            "positions": [_position(p) for p in run.positions],
            "limits": {
                "min_bet": f"{MIN_BET:.2f}",
                "max_bet_fraction": float(MAX_FRACTION),
                "max_total_bets": f"{max_allocation(entry.cash):.2f}",
            },
            "tries_left": 0 if final else max(0, TRIES - _invalid_tries(entry, week)),
            "decision": _decision_ref(decision) if final and decision else None,
            "signature_required": bool(competitor.public_key),
            "prompt": {"system": run.system, "user": run.user},
        },
        outcome=S.ACCEPTED,
    )


def _position(p) -> dict[str, Any]:
    return {
        "position_id": p.position_id,
        "market_id": p.market_id,
        "question": p.question,
        "outcome": p.outcome,
        "shares": str(p.shares),
        "cost_basis": f"{p.cost_basis:.2f}",
        "price": str(p.price) if p.price is not None else None,
        "market_status": p.market_status,
        "can_sell": p.market_status == "open",
    }


def _decision_ref(decision: Decision) -> dict[str, Any]:
    return {
        "id": decision.pk,
        "action": decision.action,
        "hold_reason": decision.hold_reason,
        "url": f"/decisions/{decision.pk}/",
        "api": f"/api/agent/v1/decisions/{decision.pk}",
    }


def _invalid_tries(entry: Entry, week: int) -> int:
    return AgentSubmission.objects.filter(entry=entry, week=week, outcome=S.INVALID).count()


@dataclass
class _AgentRun(_Run):
    """The model path's run, with the agent's answer in place of a model call: the same prompt
    record, parser, rule checks and final write. The prompt is recorded on the decision only
    once a claim holds it (an invalid first try claims nothing)."""

    claimed: bool = field(init=False, default=False)

    def _record_prompt(self) -> None:
        if self.claimed:
            super()._record_prompt()

    def prepare(self, universe: Universe) -> None:
        self.model = pinned_release(self.entry)
        self.universe = universe
        self.positions = position_views(self.entry, universe)
        self.shown_prices = price_book(universe)
        self.prices = self.shown_prices
        # Only a deadline configured past the frozen-price window gets here: the model path's
        # rule for a late run applies (current marked prices, never the frozen ones).
        if self.at - universe.frozen_at > UNIVERSE_PRICE_WINDOW and on_live_path(
            self.entry.cohort.kind
        ):
            self.prices, self.fresh_after = {}, self.at - UNIVERSE_PRICE_WINDOW
        self._plan(None, "outside agent")  # no budget: the whole universe, as GET week shows


def _prepared(entry: Entry, universe: Universe, week: int, at: datetime) -> _AgentRun:
    run = _AgentRun(Decision(entry=entry, week=week), entry, week, at)
    run.prepare(universe)
    return run


# --- a submission -----------------------------------------------------------------------


def receive(
    token: AgentToken, body: bytes, *, size: int, content_type: str, signature: str, key: str
) -> AgentSubmission:
    """Store the request as it came, in its own transaction, before judging anything."""
    return AgentSubmission.objects.create(
        competitor=token.competitor,
        received_at=clock.now(),
        token_prefix=token.prefix,
        content_type=content_type[:200],
        idempotency_key=key[:200],
        body=body,
        body_bytes=size,
        signature=signature[:200],
    )


def close(row: AgentSubmission, answer: Answer) -> Answer:
    """Write what the arena answered onto the audit row."""
    answer.body.setdefault("submission", row.pk)
    AgentSubmission.objects.filter(pk=row.pk).update(
        outcome=answer.outcome,
        http_status=answer.status,
        problems=answer.problems or ([answer.body["error"]] if "error" in answer.body else []),
        response=answer.body,
        entry=row.entry,
        week=row.week,
        decision=row.decision,
        public_key=row.public_key,
        signature_verified=row.signature_verified,
    )
    return answer


def replayed(row: AgentSubmission) -> Answer | None:
    """The answer already given to the same Idempotency-Key and body, if any."""
    if not row.idempotency_key:
        return None
    earlier = (
        AgentSubmission.objects.filter(
            competitor=row.competitor, idempotency_key=row.idempotency_key, pk__lt=row.pk
        )
        .exclude(http_status=None)
        .order_by("pk")
        .first()
    )
    if earlier is None:
        return None
    if bytes(earlier.body) != bytes(row.body):
        return refused(
            422, f"Idempotency-Key {row.idempotency_key!r} was used for a different body "
            f"(submission {earlier.pk}); use a new key for a new body",
        )  # fmt: skip
    return Answer(earlier.http_status or 200, {**(earlier.response or {}), "replayed": True})


def submit(row: AgentSubmission) -> Answer:
    """Judge a stored submission and write the decision when it is final."""
    envelope = _envelope(row)
    if isinstance(envelope, Answer):
        return envelope
    cohort_id, week, answer_text = envelope
    now = row.received_at
    found = _entry(row.competitor, cohort_id, now)
    if isinstance(found, Answer):
        return found
    entry = found
    row.entry, row.week = entry, week
    universe = Universe.objects.filter(cohort=entry.cohort, week=week).first()
    window = _window(entry.cohort, week, universe, now)
    if window is not None:
        return window
    assert universe is not None  # _window refuses a week without one
    bad_signature = _signature(row, entry.cohort, week)
    if bad_signature is not None:
        return bad_signature
    with transaction.atomic():
        # One submission of this entry at a time (PostgreSQL): the tries are counted once.
        Entry.objects.select_for_update().filter(pk=entry.pk).first()
        existing = Decision.objects.filter(entry=entry, week=week).first()
        if existing is not None and existing.status != Decision.Status.SKIPPED:
            row.decision = existing
            return _taken(existing, cohort_id, week)
        run = _prepared(entry, universe, week, now)
        parsed, problems = run._validate(answer_text)
        earlier = list(
            AgentSubmission.objects.filter(entry=entry, week=week, outcome=S.INVALID)
            .order_by("pk")
            .values_list("problems", flat=True)
        )
        if problems and len(earlier) + 1 < TRIES:
            # Written under the entry's lock, so a concurrent try counts this one.
            return close(row, Answer(
                422,
                {"error": f"the answer is invalid ({len(problems)} problem"
                          f"{'s' if len(problems) != 1 else ''}); one more try is allowed",
                 "problems": problems, "tries_left": TRIES - len(earlier) - 1},
                outcome=S.INVALID,
                problems=problems,
            ))  # fmt: skip
        decision = claim_decision(entry.pk, week, run.model.pk)
        if decision is None:
            taken = Decision.objects.get(entry=entry, week=week)
            row.decision = taken
            return _taken(taken, cohort_id, week)
        run.decision, run.claimed = decision, True
        run._record_prompt()
        errors = [{"phase": "initial", "problems": p} for p in earlier]
        if problems:
            errors.append({"phase": "repair", "problems": problems})
            reason = "invalid decision after one more try: " + "; ".join(problems)
            run._commit(None, validation_errors=errors, hold_reason=reason[:2000])
        else:
            run._commit(parsed, validation_errors=errors)
        row.decision = decision
        # The earlier tries of this week belong to the decision's audit record too.
        AgentSubmission.objects.filter(entry=entry, week=week, decision=None).exclude(
            pk=row.pk
        ).update(decision=decision)
        decision.refresh_from_db()
        ref = _decision_ref(decision)
        if problems:
            answer = Answer(
                422,
                {"error": "the answer is invalid again: the decision is recorded as HOLD",
                 "problems": problems, "tries_left": 0, "decision": ref},
                outcome=S.FINAL_INVALID,
                problems=problems,
            )  # fmt: skip
        else:
            answer = Answer(201, {"decision": ref}, outcome=S.ACCEPTED)
        # The row as the seal will read it, committed with the decision: a connection lost
        # between the two would leave the deciding submission "received" and unlinked, and the
        # agent's retry answered "already final" by a refusal on the record instead.
        close(row, answer)
    seals.after_decision(decision)  # the week seals once its last decision is final
    return answer


def _taken(decision: Decision, cohort_id: int, week: int) -> Answer:
    return refused(
        409,
        f"decision {decision.pk} for cohort {cohort_id} week {week} is already final "
        "(the first valid answer is the decision)",
        decision=_decision_ref(decision),
    )


def _window(cohort: Cohort, week: int, universe: Universe | None, now: datetime) -> Answer | None:
    current = cohort_week(cohort, now)
    times = {"server_time": now.isoformat()}
    if universe is None or week > current:
        if universe is None and week < current:
            return refused(410, f"week {week} of cohort {cohort.pk} is over", **times)
        return refused(409, f"not open yet: week {week} of cohort {cohort.pk} has no frozen "
                            "universe; read GET /api/agent/v1/week", **times)  # fmt: skip
    deadline = outside.deadline(universe)
    if now < universe.frozen_at:  # a clock moved back: the server's clock still decides
        return refused(409, "not open yet: the universe froze after this request", **times)
    if now >= deadline or week < current:
        return refused(
            410,
            f"the deadline of week {week} of cohort {cohort.pk} passed at "
            f"{deadline.isoformat()} (server time {now.isoformat()}; the server's clock decides)",
            deadline=deadline.isoformat(),
            **times,
        )
    return None


def _signature(row: AgentSubmission, cohort: Cohort, week: int) -> Answer | None:
    key = row.competitor.public_key
    if not key:
        return None
    row.public_key = key
    if not row.signature:
        row.signature_verified = False
        return refused(401, f"{row.competitor.slug} registered a public key: sign the body "
                            f"and send the signature in the {signing.HEADER} header")  # fmt: skip
    signed = signing.message(row.competitor.slug, cohort.pk, week, bytes(row.body))
    problem = signing.verify(key, row.signature, signed)
    row.signature_verified = problem is None
    return refused(401, problem) if problem else None


def _envelope(row: AgentSubmission) -> tuple[int, int, str] | Answer:
    """The body's {"cohort", "week", "answer"}; the answer as the text a model would have
    written (a JSON object is serialised; a string is taken as it is)."""
    media = row.content_type.split(";")[0].strip().lower()
    if media != "application/json":
        return refused(415, f"send Content-Type: application/json, not {media or 'none'!r}")
    try:
        text = bytes(row.body).decode("utf-8")
    except UnicodeDecodeError as exc:
        return refused(400, f"the body is not UTF-8 (byte {exc.start})")
    if _depth(text) > MAX_DEPTH:
        return refused(400, f"the JSON nests deeper than {MAX_DEPTH} levels")
    try:
        data = json.loads(text, parse_constant=_no_constant)
    except (ValueError, RecursionError) as exc:
        return refused(400, f"the body is not JSON: {str(exc)[:200]}")
    if storable_json(data) != data:
        return refused(400, "the body holds a NUL character or an unpaired surrogate")
    if not isinstance(data, dict):
        return refused(400, 'the body is a JSON object: {"cohort", "week", "answer"}')
    problems = []
    cohort_id, week = data.get("cohort"), data.get("week")
    for name, value in (("cohort", cohort_id), ("week", week)):
        if type(value) is not int or not 0 < value < 2**31:
            problems.append(f"{name} is a positive integer (read it from GET week)")
    answer = data.get("answer")
    if not isinstance(answer, dict | str):
        problems.append("answer is the decision object a model writes (or its text)")
    if problems:
        return refused(400, "; ".join(problems))
    assert isinstance(cohort_id, int) and isinstance(week, int)
    text_answer = answer if isinstance(answer, str) else json.dumps(answer, ensure_ascii=False)
    return cohort_id, week, text_answer


def _no_constant(name: str) -> Any:
    raise ValueError(f"{name} is not JSON")


def _depth(text: str) -> int:
    """The deepest nesting of [ and { outside strings (checked before json.loads recurses)."""
    depth = deepest = 0
    in_string = escaped = False
    for ch in text:
        if in_string:
            if escaped:
                escaped = False
            elif ch == "\\":
                escaped = True
            elif ch == '"':
                in_string = False
        elif ch == '"':
            in_string = True
        elif ch in "[{":
            depth += 1
            deepest = max(deepest, depth)
        elif ch in "]}":
            depth -= 1
    return deepest
