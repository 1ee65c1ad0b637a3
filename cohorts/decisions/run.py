"""The weekly decision run: one claimed Decision row per entry and week, fully audited.

    decide()        freeze each eligible cohort's universe, then one run_decision per entry
                    (a Celery task each, or inline with sync=True for replay/demo/tests)
    run_decision()  claim -> prompt -> model (or baseline) -> parse + rule check
                    -> one repair attempt quoting the problems -> ONE transaction with the
                    forecasts, trades, ledger rows and the decision's outcome

Concurrency (cohorts/decisions/claims.py): the Decision row *is* the claim (UNIQUE(entry,
week)). Whoever inserts it runs the decision; everyone else gets the existing row. A claim whose
runner died is reclaimed after ARENA_CLAIM_TIMEOUT_SECONDS by a conditional UPDATE that sets a
new claim_token (row count 1 = ours), and the final write only succeeds while our token is still
on the row, so a slow runner that lost its claim cannot write a second set of trades.

Room: a model competitor's prompt is fitted to its context (agents/budget.py) before it is sent,
and what was cut is stored on the decision (`prompt_budget`). An answer that ran out of room
(finish_reason length) goes to the repair; a prompt the server refuses as over its context is
fitted to the size the refusal names and asked once more; a prompt that cannot fit is never sent.
All three end held with the reason when nothing fits, never failed for the week.

Rounds: a live decision whose model calls all failed on a provider outage ends RETRYABLE with a
retry time, and the catch-up runs it again as a new round within cohorts/decisions/retry.py's
bounds (rounds, the week's window); every round's calls stay on the decision.

Clock: `at` (simulated in replay/demo) is the decision's time: prices, the prompt's date,
trades. Claims use the wall clock, because staleness is about real processes dying.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from decimal import Decimal

from django.db import InterfaceError, OperationalError, transaction

from agents import baselines
from agents.attempts import CONTEXT, LENGTH, Attempt
from agents.budget import Budget, Counter, Fit, Server, budget_for, fit, server_for
from agents.endpoints import client_for, probe_seconds
from agents.llm import ChatResult, LLMClient
from agents.models import Competitor, Release
from agents.parsing import DecisionContext, DecisionValidationError, ParsedDecision, parse_decision
from agents.prompts import (
    PROMPT_SHA256,
    PROMPT_VERSION,
    PositionView,
    decision_context,
    system_prompt,
    user_prompt,
)
from cohorts.decisions import outside
from cohorts.decisions import retry as decision_retry
from cohorts.decisions.claims import ClaimLost, claim_decision, finish, pending_entry_ids
from cohorts.decisions.room import (
    cut_off_problem,
    least_answer,
    repair_within_budget,
    request_params,
)
from cohorts.lineage import pinned_release
from cohorts.llm_calls import CallRecorder, before_send, call_totals, store_calls
from cohorts.models import Cohort, Decision, Entry, Forecast, Universe
from cohorts.scope import live_path_kind, on_live_path
from cohorts.seals import sealing as seals
from cohorts.services import (
    BetOrder,
    ExecutionError,
    PriceBook,
    SellOrder,
    check_orders,
    cohort_week,
    decision_eligible_cohorts,
    execute_orders,
)
from cohorts.universe import EmptyUniverse, freeze_universe, position_views, price_book
from core import clock, logcontext
from core.methodology import CONSTANTS
from core.versions import data_changed

log = logging.getLogger(__name__)

TRANSIENT_DB_ERRORS = (OperationalError, InterfaceError)

# A live decision trades at the prices its universe froze only this soon after the freeze. A
# later run (a staff re-run, the 15-minute catch-up of skipped decisions) would otherwise get a
# free look at the future; it trades at each market's current marked price instead, and only
# when that price was itself marked within this window, keeping the frozen price beside it.
# A frozen methodology constant: the rule is part of how a week is played.
UNIVERSE_PRICE_WINDOW = timedelta(minutes=CONSTANTS.universe_price_window_minutes)


# --- decide: the weekly fan-out ---------------------------------------------------------


def decide(
    cohort: Cohort | int | None = None,
    week: int | None = None,
    at: datetime | None = None,
    *,
    sync: bool = False,
    enqueue: Callable[[list[int], int, datetime | None], None] | None = None,
    refused: list[dict] | None = None,
) -> int:
    """Run (sync=True) or enqueue one decision per entry; returns the number of entries.

    Enqueueing is the caller's: `enqueue(entry_ids, week, at)` is cohorts.decisions.tasks.enqueue_decisions
    for the workers (passed in, so this service never imports its own tasks module).

    Without `cohort`, every live cohort that is decision-eligible at `at`. The universe is
    frozen here, once, before any entry runs, so all entries share it. Replay and demo freeze
    their own universe first (freeze_universe with explicit markets/prices) and then call this
    with sync=True; the existing universe is reused.

    A live week whose universe is empty (the sync failing, no fresh market) is refused: no entry
    runs, so nothing is claimed and nothing is sealed on nothing. Each refusal is logged and,
    when `refused` is given, appended to it as {"cohort", "week", "reason"}.
    """
    if not sync and enqueue is None:
        raise ValueError("decide(sync=False) needs an enqueue function")
    explicit_at = at
    at = at or clock.now()
    if explicit_at is None:  # the live catch-up, not a replay or demo on a clock of its own
        for expired in decision_retry.expire_overdue(at, live_path_kind()):
            seals.after_decision(expired)  # its week may now be complete or its placeholder final
    count = 0
    for c in _cohorts(cohort, at):
        w = week if week is not None else cohort_week(c, at)
        if w < 1:
            continue
        try:
            universe = freeze_universe(c, w, at)
        except EmptyUniverse as exc:
            _refuse(c, w, str(exc), refused)
            continue
        if not universe.markets and on_live_path(c.kind):
            _refuse(c, w, "its frozen universe holds no market", refused)
            continue
        entry_ids = pending_entry_ids(c, w)
        waiting = outside.still_open(entry_ids, universe, at)
        entry_ids = [e for e in entry_ids if e not in waiting]  # they submit themselves
        count += len(entry_ids)
        if sync:
            for entry_id in entry_ids:
                run_decision(entry_id, w, at)
        elif enqueue is not None:
            enqueue(entry_ids, w, explicit_at)
    return count


def _refuse(cohort: Cohort, week: int, reason: str, refused: list[dict] | None) -> None:
    log.warning("decisions refused", extra={"cohort": cohort.pk, "week": week, "reason": reason})
    if refused is not None:
        refused.append({"cohort": cohort.pk, "week": week, "reason": reason})


def _cohorts(cohort: Cohort | int | None, at: datetime) -> list[Cohort]:
    if cohort is None:
        return list(decision_eligible_cohorts(at))
    if isinstance(cohort, Cohort):
        return [cohort]
    return [Cohort.objects.get(pk=cohort)]


# --- run_decision -----------------------------------------------------------------------


def run_decision(
    entry_id: int, week: int, at: datetime | None = None, *, runner: str = ""
) -> Decision:
    """Decide for one entry and week, once. Returns the Decision (someone else's if taken).
    `runner` names who runs it (a Celery worker's name; this process when blank), kept on the
    claim so a take-over can say whom it took the decision from.

    Unexpected errors end the decision as failed (visible in the admin) rather than leaving a
    claim behind; transient database errors mark it retryable and are raised for the task's
    retry.
    """
    at = at or clock.now()
    entry = Entry.objects.select_related("competitor", "cohort", "release").get(pk=entry_id)
    # Every line logged while deciding (the client's retries, the parser, Celery's) names it.
    # `entry` and `week` are on Celery's own lines of the task too (arena/logfmt.py).
    with logcontext.bound(
        cohort=entry.cohort_id, entry=entry_id, week=week, competitor=entry.competitor.slug
    ):
        decision = claim_decision(entry_id, week, pinned_release(entry).pk, runner=runner)
        if decision is None:
            return Decision.objects.get(entry_id=entry_id, week=week)
        with logcontext.bound(decision=decision.pk):
            _run_claimed(decision, entry, week, at)
            decision.refresh_from_db()
            log.info(
                "decision finished",
                extra={"status": decision.status, "reason": decision.error or decision.hold_reason},
            )
            seals.after_decision(decision)  # seals the week once its last decision is final
    return decision


def _run_claimed(decision: Decision, entry: Entry, week: int, at: datetime) -> None:
    run = _Run(decision, entry, week, at)
    try:
        run.execute()
    except ClaimLost:
        log.warning("claim lost to another runner; results dropped")
    except TRANSIENT_DB_ERRORS:
        finish(decision, Decision.Status.RETRYABLE, error="transient database error; will retry")
        raise
    except Exception as exc:
        log.exception("decision failed")
        finish(decision, Decision.Status.FAILED, error=f"{type(exc).__name__}: {exc}"[:2000])


@dataclass
class _Answer:
    """What the competitor replied in one phase: the text, or why there is none."""

    ok: bool
    content: str | None
    error: str = ""
    kind: str | None = None  # the last attempt's error kind
    n_ctx: int | None = None  # the context size a refusal named
    calls: list[Attempt] = field(default_factory=list)  # this phase's attempts


@dataclass
class _Run:
    """One claimed decision being worked on; execute() fills in what the prompt showed (the
    universe, positions, prices, the parser's context and the two prompt texts) and the client
    of a model competitor; the model called is the entry's release, never the competitor's."""

    decision: Decision
    entry: Entry
    week: int
    at: datetime
    attempts: list[Attempt] = field(default_factory=list)
    universe: Universe = field(init=False)
    positions: list[PositionView] = field(init=False)
    ctx: DecisionContext = field(init=False)
    prices: PriceBook = field(init=False)
    shown_prices: PriceBook = field(init=False)  # the frozen prices the prompt showed
    fresh_after: datetime | None = field(init=False, default=None)
    system: str = field(init=False, default="")
    user: str = field(init=False, default="")
    client: LLMClient | None = field(init=False, default=None)
    server: Server | None = field(init=False, default=None)
    budget: Budget = field(init=False, default_factory=lambda: Budget(None, "", 0))
    fitted: Fit | None = field(init=False, default=None)
    shown: list[dict] = field(init=False, default_factory=list)
    model: Release = field(init=False)  # the entry's release
    recorder: CallRecorder = field(init=False)

    def __post_init__(self) -> None:
        self.recorder = CallRecorder(self.decision)

    def execute(self) -> None:
        competitor = self.entry.competitor
        self.model = pinned_release(self.entry)  # what is called, whatever the competitor says
        self.universe = freeze_universe(self.entry.cohort, self.week, self.at)
        self.positions = position_views(self.entry, self.universe)
        self.shown_prices = price_book(self.universe)
        self.prices = self.shown_prices
        late = self.at - self.universe.frozen_at > UNIVERSE_PRICE_WINDOW
        if late and on_live_path(self.entry.cohort.kind):
            self.prices, self.fresh_after = {}, self.at - UNIVERSE_PRICE_WINDOW
        skip_reason = ""
        if competitor.is_llm:
            self.client, skip_reason = client_for(competitor, self.model)
            if self.client is not None and not competitor.simulated:
                self.server = server_for(self.client, self.model.base_url, probe_seconds())
            if self.client is not None:
                # Every chat request is on the record before it leaves (cohorts/llm_calls.py).
                self.client.before_send = before_send(self.recorder)
        self._plan(self.model.context_tokens, "competitor")
        if competitor.is_outside:  # never called: it submits (cohorts/decisions/submissions.py)
            if self.at < outside.deadline(self.universe):  # a re-run inside its window
                finish(self.decision, Decision.Status.SKIPPED, error=outside.STILL_OPEN)
            else:
                self._commit(None, validation_errors=[], hold_reason=outside.NO_SUBMISSION)
            return
        if competitor.is_llm and self.client is None:
            finish(self.decision, Decision.Status.SKIPPED, error=skip_reason)
            return
        self._decide()

    def _plan(self, context_tokens: int | None, source: str) -> None:
        """Fit the prompt to the competitor's context (agents/budget.py) and record it."""
        competitor = self.entry.competitor
        self.system = system_prompt()
        if competitor.is_llm and self.client is not None:
            self.budget = budget_for(context_tokens, self.model.params or {}, self.server, source)
        self.fitted = fit(
            self.universe.markets,
            self.universe.forecast_sample,
            lambda markets: (self.system, self._user_text(markets)),
            Counter(self.server),
            self.budget.prompt_limit,
        )
        self.shown = self.fitted.markets
        self.ctx = decision_context(self.universe, self.positions, self.shown)
        self.user = self._user_text(self.shown)
        self._record_prompt()

    def _user_text(self, markets: list[dict]) -> str:
        return user_prompt(
            universe=self.universe,
            week=self.week,
            weeks=self.entry.cohort.decision_weeks,
            at=self.at,
            cash=self.entry.cash,
            positions=self.positions,
            markets=markets,
        )

    def _record_prompt(self) -> None:
        budget = {}
        if self.fitted is not None and self.budget.context_tokens is not None:
            budget = self.fitted.record(self.budget, len(self.universe.markets))
        fields = {
            "universe": self.universe,
            "universe_hash": self.universe.content_hash,
            "prompt_version": PROMPT_VERSION,
            "prompt_sha256": PROMPT_SHA256,
            "system_prompt": self.system,
            "user_prompt": self.user,
            "forecast_sample": self.universe.forecast_sample,
            "cash_before": self.entry.cash,
            "decided_at": self.at,
            "prompt_budget": budget,
        }
        updated = Decision.objects.filter(
            pk=self.decision.pk, claim_token=self.decision.claim_token
        ).update(**fields)
        if updated != 1:
            raise ClaimLost

    def _messages(self) -> list[dict[str, str | None]]:
        return [
            {"role": "system", "content": self.system},
            {"role": "user", "content": self.user},
        ]

    def _decide(self) -> None:
        if self.fitted is not None and not self.fitted.fits:
            self._hold_unsent()
            return
        messages = self._messages()
        first = self._ask(messages, "initial")
        if not first.ok and first.kind == CONTEXT:
            refitted, messages = self._refit(first)
            if refitted is None:
                return
            first = refitted
        if not first.ok and first.kind == CONTEXT:
            self._commit(None, validation_errors=[], hold_reason=first.error[:2000])
            return
        if not first.ok and first.kind != LENGTH:
            self._no_answer(first)
            return
        if first.ok:
            parsed, problems = self._validate(first.content)
        else:  # cut off: whatever was written is quoted back with the request to be brief
            parsed, problems = None, [cut_off_problem(first.error)]
        if not problems:
            self._commit(parsed, validation_errors=[])
            return
        errors = [{"phase": "initial", "problems": problems}]
        repair, room = repair_within_budget(
            self.budget, self.server, messages, first.content, problems
        )
        if room is not None and room < least_answer(self.budget):
            parsed, problems = (
                None,
                [f"the repair cannot fit the {self.budget.context_tokens}-token context; not sent"],
            )
        else:
            second = self._ask(repair, "repair", max_tokens=room)
            if second.ok:
                parsed, problems = self._validate(second.content)
            elif second.kind == LENGTH:
                parsed, problems = None, [cut_off_problem(second.error)]
            else:
                parsed, problems = None, [f"the repair call failed: {second.error}"]
        if not problems:
            self._commit(parsed, validation_errors=errors)
            return
        errors.append({"phase": "repair", "problems": problems})
        reason = "invalid decision after one repair attempt: " + "; ".join(problems)
        self._commit(None, validation_errors=errors, hold_reason=reason[:2000])

    def _hold_unsent(self) -> None:
        tokens = self.fitted.prompt_tokens if self.fitted is not None else None
        reason = (
            f"the prompt cannot fit the {self.budget.context_tokens}-token context "
            f"({self.budget.source}): {tokens} tokens with the forecast sample alone, plus "
            f"{self.budget.answer_tokens} for the answer; not sent"
        )
        self._commit(None, validation_errors=[], hold_reason=reason)

    def _refit(self, refused: _Answer) -> tuple[_Answer | None, list[dict[str, str | None]]]:
        """The server refused the prompt as over its context: fit it to the context the refusal
        named (when that is smaller than what it was fitted to) and ask once more."""
        used = self.budget.context_tokens
        if refused.n_ctx is None or (used is not None and refused.n_ctx >= used):
            return refused, self._messages()
        self._plan(refused.n_ctx, "context refusal")
        if self.fitted is not None and not self.fitted.fits:
            self._hold_unsent()
            return None, []
        messages = self._messages()
        return self._ask(messages, "refit"), messages

    # --- asking the competitor -----------------------------------------------------------

    def _ask(
        self, messages: list[dict[str, str | None]], phase: str, max_tokens: int | None = None
    ) -> _Answer:
        if not self.entry.competitor.is_llm:
            return self._ask_baseline(self.entry.competitor, phase)
        if self.client is None:
            raise RuntimeError("a model competitor is asked without a client")  # see execute()
        model = self.model
        self.recorder.start(phase)
        try:
            result: ChatResult = self.client.chat(
                model.model_id,
                messages,
                params=request_params(
                    model, self.budget, self.shown, self.ctx, max_tokens=max_tokens
                ),
                price_in_per_m=model.price_in_per_m,
                price_out_per_m=model.price_out_per_m,
            )
        except BaseException as exc:
            self.recorder.abandon(f"the client raised {type(exc).__name__}")
            raise
        self.attempts.extend(result.attempts)
        self.recorder.complete(result.attempts)
        last = result.attempts[-1] if result.attempts else None
        if last is not None and not result.ok and last.error_kind == LENGTH:
            # What was written before the cut is the repair's starting point.
            return _Answer(False, last.content, result.error, LENGTH)
        kind = last.error_kind if last is not None else None
        n_ctx = last.n_ctx if last is not None else None
        return _Answer(result.ok, result.content, result.error, kind, n_ctx, result.attempts)

    def _ask_baseline(self, competitor: Competitor, phase: str) -> _Answer:
        inp = baselines.BaselineInput(
            strategy=competitor.strategy,
            cohort_id=self.entry.cohort_id,
            week=self.week,
            entry_id=self.entry.pk,
            cash=self.entry.cash,
            markets=self.universe.markets,
            forecast_sample=self.universe.forecast_sample,
        )
        text = baselines.decide(inp)
        # Stored like a model call so the audit page shows what the baseline "answered".
        attempt = Attempt(
            number=1,
            url=f"builtin:baseline/{competitor.strategy}",
            request_body={"strategy": competitor.strategy, "seed": str(inp.seed), "phase": phase},
            started_at=clock.now(),
            http_status=None,
            raw_response=text,
            content=text,
            cost_usd=Decimal(0),
            cost_source="baseline",
            served_model=f"baseline/{competitor.strategy}",
        )
        store_calls(self.decision, [attempt], phase)
        return _Answer(True, text)

    # --- validation and the final write ----------------------------------------------------

    def _validate(self, text: str | None) -> tuple[ParsedDecision | None, list[str]]:
        try:
            parsed = parse_decision(text or "", self.ctx)
        except DecisionValidationError as exc:
            return None, exc.problems
        bets, sells = _orders(parsed)
        return parsed, check_orders(
            self.entry, bets, sells, self.prices, fresh_after=self.fresh_after
        )

    def _no_answer(self, answer: _Answer) -> None:
        """No answer at all: another round later when a live decision lost it to a provider
        outage and its bounds allow (cohorts/decisions/retry.py); otherwise failed for the week."""
        status: str = Decision.Status.FAILED
        fields: dict[str, object] = {"error": answer.error}
        if on_live_path(self.entry.cohort.kind) and decision_retry.outage(answer.calls):
            rounds = self.decision.retry_rounds + 1
            verdict = decision_retry.after_outage(
                now=clock.now(),
                rounds=rounds,
                limit=decision_retry.max_rounds(),
                closes=decision_retry.window_end(self.entry.cohort.week_start, self.week),
                calls=answer.calls,
                error=answer.error,
            )
            status = verdict.status
            fields = {
                "error": verdict.reason[:2000],
                "retry_rounds": rounds,
                "retry_after": verdict.retry_after,
            }
        if not finish(self.decision, status, **fields, **call_totals(self.decision)):
            raise ClaimLost

    def _commit(
        self, parsed: ParsedDecision | None, *, validation_errors: list, hold_reason: str = ""
    ) -> None:
        try:
            self._write(parsed, validation_errors, hold_reason)
        except ExecutionError as exc:
            # The rules were re-checked under lock and something changed since check_orders
            # (e.g. the entry's cash): keep the forecasts, trade nothing, say why.
            reason = "orders refused at execution: " + "; ".join(exc.reasons)
            self._write(parsed, validation_errors, reason[:2000], trade=False)

    def _write(
        self,
        parsed: ParsedDecision | None,
        validation_errors: list,
        hold_reason: str,
        trade: bool = True,
    ) -> None:
        trading = parsed if parsed is not None and trade and parsed.action != "HOLD" else None
        action = trading.action if trading is not None else Decision.Action.HOLD
        with transaction.atomic():
            updated = Decision.objects.filter(
                pk=self.decision.pk,
                claim_token=self.decision.claim_token,
                status=Decision.Status.CLAIMED,
            ).update(
                status=Decision.Status.DONE,
                finished_at=clock.now(),
                action=action,
                reasoning=parsed.reasoning if parsed else "",
                parsed=parsed.to_json() if parsed else None,
                validation_errors=validation_errors,
                hold_reason=hold_reason,
                **call_totals(self.decision),
            )
            if updated != 1:
                raise ClaimLost
            data_changed()
            if parsed is not None:
                Forecast.objects.bulk_create(self._forecasts(parsed))
            if trading is not None:
                bets, sells = _orders(trading)
                execute_orders(
                    self.entry,
                    bets,
                    sells,
                    self.prices,
                    decision=self.decision,
                    at=self.at,
                    fresh_after=self.fresh_after,
                    shown=self.shown_prices,
                )

    def _forecasts(self, parsed: ParsedDecision) -> list[Forecast]:
        bet_keys = {(b.market_id, b.outcome) for b in parsed.bets}
        sample = set(self.ctx.forecast_sample)
        rows = []
        for f in parsed.forecasts:
            if (f.market_id, f.outcome) in bet_keys:
                source = Forecast.Source.BET
            elif f.market_id in sample:
                source = Forecast.Source.SAMPLE
            else:
                source = Forecast.Source.OTHER
            shown = self.shown_prices.get((int(f.market_id), f.outcome))
            rows.append(
                Forecast(
                    decision=self.decision,
                    entry=self.entry,
                    market_id=int(f.market_id),
                    outcome=f.outcome,
                    probability=f.probability,
                    market_price=float(shown) if shown is not None else None,
                    source=source,
                    created_at=self.at,
                )
            )
        return rows


def _orders(parsed: ParsedDecision) -> tuple[list[BetOrder], list[SellOrder]]:
    bets = [BetOrder(int(b.market_id), b.outcome, b.amount) for b in parsed.bets]
    sells = [SellOrder(int(s.position_id), s.percentage) for s in parsed.sells]
    return bets, sells
