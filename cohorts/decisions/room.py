"""The room a model's answer has within a competitor's context budget (agents/budget.py): the
request's max_tokens and json_schema, and the repair turn fitted beside the prompt.

Split from cohorts/decisions/run.py, which runs the phases; these only build what a phase sends.
"""

from __future__ import annotations

from agents.budget import MAX_QUOTED_CHARS, MIN_ANSWER_TOKENS, Budget, Counter, Server
from agents.models import Competitor, Release
from agents.parsing import DecisionContext
from agents.prompts import repair_prompt
from agents.schema import response_format

Messages = list[dict[str, str | None]]


def request_params(
    competitor: Competitor | Release,
    budget: Budget,
    shown: list[dict],
    ctx: DecisionContext,
    *,
    max_tokens: int | None = None,
) -> dict:
    """The params of the competitor's release (or the competitor) as one phase sends them."""
    params = dict(competitor.params or {})
    if budget.context_tokens is not None:
        # Within a budget the answer's room is always bounded, or a server generates until the
        # context is full.
        params.pop("max_completion_tokens", None)
        params["max_tokens"] = max_tokens or budget.answer_tokens
    if competitor.structured_output:
        params["response_format"] = response_format(
            [str(m["market_id"]) for m in shown],
            ctx.forecast_sample,
            sorted(ctx.position_ids),
        )
    return params


def least_answer(budget: Budget) -> int:
    """Below this much room a repair is not sent (the competitor's own max_tokens if smaller)."""
    return min(MIN_ANSWER_TOKENS, budget.answer_tokens)


def repair_within_budget(
    budget: Budget,
    server: Server | None,
    messages: Messages,
    answer: str | None,
    problems: list[str],
) -> tuple[Messages, int | None]:
    """The repair turn and its answer's room (None: no budget). Within a context budget the
    whole answer (up to max_tokens) would not fit again beside the prompt and a new answer: its
    start is quoted, or nothing of it when even that leaves too little room."""
    repair = repair_messages(budget, messages, answer, problems, MAX_QUOTED_CHARS)
    room = repair_room(budget, server, repair)
    if room is not None and room < least_answer(budget):
        repair = repair_messages(budget, messages, answer, problems, 0)
        room = repair_room(budget, server, repair)
    return repair, room


def repair_messages(
    budget: Budget, messages: Messages, answer: str | None, problems: list[str], quote_chars: int
) -> Messages:
    quoted = answer or ""
    if budget.context_tokens is not None and len(quoted) > quote_chars:
        quoted = quoted[:quote_chars] + " [...]"
    return [
        *messages,
        {"role": "assistant", "content": quoted},
        {"role": "user", "content": repair_prompt(problems)},
    ]


def repair_room(budget: Budget, server: Server | None, repair: Messages) -> int | None:
    """Tokens left for the repair's answer within the context (None: no budget)."""
    if budget.context_tokens is None:
        return None
    used = Counter(server)([m["content"] or "" for m in repair])
    return min(budget.answer_tokens, budget.context_tokens - used)


def cut_off_problem(error: str) -> str:
    """The repair's request after an answer that ran out of room."""
    return (
        f"your answer was cut off before it was complete ({error}); answer again with the JSON "
        "object only, a short reasoning (a few sentences) and nothing after the object"
    )
