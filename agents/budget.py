"""A competitor's context budget: how much of the frozen universe its prompt can show.

A small local model has a small context (llama.cpp's server: `--ctx-size`, often 4-8k tokens),
while the universe block alone can be 25k tokens. Sending it anyway gets an immediate refusal
(or an answer cut off for want of room), so the prompt is fitted first:

- The context size comes from the competitor's `context_tokens`, else the server (`GET /props`,
  llama.cpp's `n_ctx`), else it is unknown and the prompt is sent whole; a refusal that names the
  server's `n_ctx` then fits it and asks again (cohorts/decisions/run.py).
- The prompt shows the first N markets of the shared universe (its volume order) that fit with
  room for the answer (prompt + max_tokens + a small reserve for the repair within the context),
  the forecast sample always among them. Every competitor of a cohort forecasts the same sample,
  which is what the forecast scores compare; a smaller budget only narrows the markets it may bet
  on (docs: README "A local model").
- Tokens are counted by the server where it offers it (llama.cpp's `POST /tokenize`), else
  estimated at 2.8 characters per token: the prompt's ids, prices and dates tokenize far worse
  than English prose (~30 % more tokens than the 4 chars/token rule of thumb on these prompts),
  and an estimate that runs low gets a refused prompt.
- A prompt that cannot fit even with the sample alone is never sent: the decision holds with
  the reason.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

from agents.llm import LLMClient
from agents.simulated import is_loopback_url
from core.http import HttpError, fetch

CHARS_PER_TOKEN = 2.8
# Chat-template tokens around the messages (role markers, BOS/EOS) that a text count misses.
TEMPLATE_OVERHEAD = 48
# The answer's room when the competitor's params set no max_tokens but a context is known.
DEFAULT_ANSWER_TOKENS = 1024
# Kept free besides the answer so the repair turn (a short quote of the answer and the problems)
# can usually be asked within the same context.
REPAIR_RESERVE = 512
# A repair whose answer would have less room than this is not sent (held instead).
MIN_ANSWER_TOKENS = 128
# Helper requests (/props, /tokenize) are quick on any live server; they must not eat a phase.
PROBE_TIMEOUT = 10.0
# /props and /tokenize answers are a few kilobytes; more is a broken or hostile server.
PROBE_MAX_BYTES = 1_000_000
# Of an answer that is quoted back in the repair turn within a budget, at most this much.
MAX_QUOTED_CHARS = 600


def estimate_tokens(text: str) -> int:
    """A safe (high) token count for prompt text without a tokenizer."""
    return math.ceil(len(text) / CHARS_PER_TOKEN)


def answer_tokens(params: dict) -> int | None:
    """The answer's room the competitor asked for (max_tokens or max_completion_tokens)."""
    for key in ("max_tokens", "max_completion_tokens"):
        value = params.get(key)
        if isinstance(value, int) and not isinstance(value, bool) and value > 0:
            return value
    return None


def _server_root(base_url: str) -> str:
    """llama.cpp serves /props and /tokenize beside /v1, not under it."""
    url = base_url.rstrip("/")
    return url[: -len("/v1")] if url.endswith("/v1") else url


class Server:
    """What a model server tells about its context and tokenizer (llama.cpp's extras)."""

    def __init__(self, client: LLMClient, total_seconds: float = 60.0) -> None:
        self.client = client
        self.root = _server_root(client.base_url)
        self.can_tokenize: bool | None = None  # None: not tried yet
        # All probes of one decision together stay within this (then counts are estimated), so
        # they cannot push the decision past its claim timeout (agents/endpoints.py).
        self.total_seconds = total_seconds
        self.spent = 0.0

    def _request(self, method: str, path: str, body: dict | None = None) -> dict | None:
        left = self.total_seconds - self.spent
        if left <= 0:
            return None
        start = time.monotonic()
        try:
            reply = fetch(
                method,
                f"{self.root}{path}",
                json_body=body,
                headers=self.client.headers,
                timeout=min(PROBE_TIMEOUT, self.client.timeout, left),
                max_bytes=PROBE_MAX_BYTES,
            )
            payload = reply.json() if reply.status == 200 else None
        except (HttpError, ValueError):
            payload = None
        finally:
            self.spent += time.monotonic() - start
        return payload if isinstance(payload, dict) else None

    def context_size(self) -> int | None:
        """`n_ctx` from llama.cpp's `GET /props` (per slot), or None when the server has none."""
        payload = self._request("GET", "/props")
        if payload is None:
            return None
        settings = payload.get("default_generation_settings")
        for source in (settings if isinstance(settings, dict) else {}, payload):
            n_ctx = source.get("n_ctx")
            if isinstance(n_ctx, int) and not isinstance(n_ctx, bool) and n_ctx > 0:
                return n_ctx
        return None

    def count(self, text: str) -> int | None:
        """The server's own token count of `text`, or None (then the caller estimates)."""
        if self.can_tokenize is False:
            return None
        payload = self._request("POST", "/tokenize", {"content": text})
        tokens = payload.get("tokens") if payload else None
        self.can_tokenize = isinstance(tokens, list)
        return len(tokens) if isinstance(tokens, list) else None


@dataclass
class Counter:
    """Counts a prompt's tokens: the server's tokenizer when it has one, else the estimate."""

    server: Server | None = None
    by: str = "estimate"

    def __call__(self, messages: Sequence[str]) -> int:
        text = "\n\n".join(messages)
        counted = self.server.count(text) if self.server is not None else None
        if counted is None:
            self.by = "estimate"
            return estimate_tokens(text) + TEMPLATE_OVERHEAD
        self.by = "server"
        return counted + TEMPLATE_OVERHEAD


@dataclass
class Budget:
    """The room one competitor's prompt has (None context: unknown, nothing is cut)."""

    context_tokens: int | None
    source: str  # "competitor" | "server" | "context refusal" | ""
    answer_tokens: int

    @property
    def prompt_limit(self) -> int | None:
        if self.context_tokens is None:
            return None
        return self.context_tokens - self.answer_tokens - self.reserve

    @property
    def reserve(self) -> int:
        if self.context_tokens is None:
            return 0
        return min(REPAIR_RESERVE, self.context_tokens // 8)


def budget_for(
    context_tokens: int | None, params: dict, server: Server | None, source_hint: str = ""
) -> Budget:
    """The competitor's budget: its own context setting, else the server's, else unknown."""
    asked = answer_tokens(params)
    if context_tokens:
        return Budget(context_tokens, source_hint or "competitor", asked or DEFAULT_ANSWER_TOKENS)
    n_ctx = server.context_size() if server is not None else None
    if n_ctx:
        return Budget(n_ctx, "server", asked or DEFAULT_ANSWER_TOKENS)
    return Budget(None, "", asked or 0)


def server_for(client: LLMClient, base_url: str, total_seconds: float = 60.0) -> Server | None:
    """A server worth asking about context and tokens: a competitor's own endpoint on this
    machine (a local llama.cpp/vLLM/Ollama). Hosted APIs have no such routes; asking them on every
    decision would only add failed requests."""
    if not base_url or not is_loopback_url(client.base_url):
        return None
    return Server(client, total_seconds)


@dataclass
class Fit:
    """The markets one prompt shows, and what the budget cut."""

    markets: list[dict]
    prompt_tokens: int | None
    counted_by: str
    cut_ids: list[str] = field(default_factory=list)
    fits: bool = True

    def record(self, budget: Budget, total: int) -> dict:
        """The decision's `prompt_budget` (JSON)."""
        return {
            "context_tokens": budget.context_tokens,
            "context_source": budget.source,
            "answer_tokens": budget.answer_tokens,
            "prompt_tokens": self.prompt_tokens,
            "counted_by": self.counted_by,
            "markets_shown": len(self.markets),
            "markets_total": total,
            "cut_market_ids": self.cut_ids,
            "fits": self.fits,
        }


def shown(markets: list[dict], sample: set[str], n: int) -> list[dict]:
    """The first n markets of the universe, plus every sample market, in universe order."""
    return [m for i, m in enumerate(markets) if i < n or str(m["market_id"]) in sample]


def fit(
    markets: list[dict],
    sample: Sequence[object],
    render: Callable[[list[dict]], Sequence[str]],
    count: Counter,
    limit: int | None,
) -> Fit:
    """The largest first-N of `markets` (plus the sample) whose rendered prompt has at most
    `limit` tokens. `render(markets)` gives the prompt's message texts."""
    sample_ids = {str(m) for m in sample}
    if limit is None:
        return Fit(list(markets), None, "")
    whole = count(render(markets))
    if whole <= limit:
        return Fit(list(markets), whole, count.by)
    smallest = shown(markets, sample_ids, 0)
    least = count(render(smallest))
    if least > limit:
        return Fit(smallest, least, count.by, _cut(markets, smallest), fits=False)
    # Tokens grow with N; binary search the largest N that fits (about log2(500) = 9 counts).
    lo, hi, best_tokens = 0, len(markets), least
    while hi - lo > 1:
        mid = (lo + hi) // 2
        tokens = count(render(shown(markets, sample_ids, mid)))
        if tokens <= limit:
            lo, best_tokens = mid, tokens
        else:
            hi = mid
    chosen = shown(markets, sample_ids, lo)
    return Fit(chosen, best_tokens, count.by, _cut(markets, chosen))


def _cut(markets: list[dict], chosen: list[dict]) -> list[str]:
    kept = {str(m["market_id"]) for m in chosen}
    return [str(m["market_id"]) for m in markets if str(m["market_id"]) not in kept]
