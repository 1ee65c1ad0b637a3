"""Hostile upstream input for the fuzz tests and bench/attack.py: chat-completion bodies a broken
or malicious model endpoint might send, and Gamma market objects a broken upstream might list.

Each is built from a small *recipe* (a kind and a few numbers), so hypothesis draws and shrinks
recipes, never megabytes; `model_body(recipe)` / `gamma_object(recipe, base)` turn one into what
the fake servers send. Kinds cover: deep nesting, NUL (escaped and raw), huge and wrongly typed
numbers, invalid UTF-8, unbalanced braces, bodies up to just over the client's 2 MB cap, prose
around JSON, wrong types anywhere, lone surrogates, bidi controls and newlines in text.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from hypothesis import strategies as st

from tests.fakes.openai_server import success_body

MODEL_KINDS = (
    "deep_array", "deep_object", "nul_escaped", "nul_raw", "huge_usage", "invalid_utf8",
    "unbalanced", "prose_json", "wrong_types", "surrogates", "bidi_reasoning", "random_bytes",
    "random_json", "http_error_body", "brace_flood", "valid",
)  # fmt: skip
HUGE_NUMBERS: tuple[Any, ...] = (
    1e12, 10**30, -1, 1e308, "12345678", "1e400", 2**63, -(10**20), 0.5, "NaN", True, [1], {},
)  # fmt: skip
WRONG_TYPES: tuple[Any, ...] = (None, 0, -1, 1.5, "", "x", [], {}, [None], {"a": [1]}, True)
CHOICE_FIELDS = ("choices", "message", "content", "finish_reason", "usage", "model", "id", "error")
BIG_BODY_SIZES = (1_000_000, 1_900_000, 2_000_001)  # the last is cut by the client's 2 MB cap


@dataclass(frozen=True)
class ModelRecipe:
    kind: str
    size: int = 0  # depth, repetitions or length, depending on the kind
    pick: int = 0  # which variant (a field, a number, a type)
    seed: bytes = b""  # random material for the kinds that need it


def model_recipes() -> st.SearchStrategy[ModelRecipe]:
    return st.builds(
        ModelRecipe,
        kind=st.sampled_from(MODEL_KINDS),
        size=st.integers(min_value=1, max_value=60_000),
        pick=st.integers(min_value=0, max_value=1000),
        seed=st.binary(max_size=64),
    )


def decision_text(forecast_ids: list[str], reasoning: str = "fuzz") -> str:
    """A valid HOLD answer for a universe whose forecast sample is `forecast_ids`."""
    forecasts = [{"market_id": m, "probability": 0.5} for m in forecast_ids]
    return json.dumps({"action": "HOLD", "forecasts": forecasts, "reasoning": reasoning})


def model_body(recipe: ModelRecipe, forecast_ids: list[str]) -> tuple[int, bytes]:
    """(HTTP status, body bytes) for one recipe."""
    kind, size, pick, seed = recipe.kind, recipe.size, recipe.pick, recipe.seed
    valid = decision_text(forecast_ids)
    if kind == "deep_array":
        return 200, b"[" * (size * 5) + b"]" * (size * 5 if pick % 2 else 0)
    if kind == "deep_object":
        content = '{"a":' * size + "1" + "}" * (size if pick % 2 else 0)
        return 200, _body(content if pick % 3 else valid, extra={"x": None}, deep=size)
    if kind == "nul_escaped":
        return 200, _body(valid.replace("fuzz", "fu\x00zz" * (1 + pick % 5)), model="m\x00")
    if kind == "nul_raw":
        body = _body(valid)
        at = pick % len(body)
        return 200, body[:at] + b"\x00" + body[at:]
    if kind == "huge_usage":
        payload = success_body(valid)
        field = ("prompt_tokens", "completion_tokens", "cost")[pick % 3]
        payload["usage"][field] = HUGE_NUMBERS[(pick // 3) % len(HUGE_NUMBERS)]
        payload["usage"]["completion_tokens_details"]["reasoning_tokens"] = HUGE_NUMBERS[
            pick % len(HUGE_NUMBERS)
        ]
        return 200, json.dumps(payload).encode()
    if kind == "invalid_utf8":
        body = _body(valid)
        at = pick % len(body)
        junk = seed or b"\xff\xfe\xc3"
        return 200, body[:at] + junk + body[at:]
    if kind == "unbalanced":
        opens, closes = "{" * (size % 5000), "}" * (pick % 5000)
        return 200, _body(f"{opens}{valid[: pick % len(valid)]}{closes}")
    if kind == "prose_json":
        prose = 'I think {carefully} about it } { and "quotes" ' * (1 + size % 50)
        return 200, _body(f"{prose}\n{valid}\n{prose}" if pick % 4 else f"```json\n{valid}\n```")
    if kind == "wrong_types":
        return 200, json.dumps(_wrong_types(valid, pick)).encode()
    if kind == "surrogates":
        raw = json.dumps(success_body(valid)).replace("fuzz", "\\ud800\\udfff\\udc00")
        return 200, raw.replace('"model": "', '"model": "\\ud83d', 1).encode()
    if kind == "bidi_reasoning":
        return 200, _body(decision_text(forecast_ids, "\u202eseY\u2066\n\u200f" * (1 + pick % 9)))
    if kind == "random_bytes":
        return 200, seed * (1 + size % 200)
    if kind == "random_json":
        return 200, json.dumps(_random_json(seed, pick)).encode()
    if kind == "http_error_body":
        status = (400, 401, 402, 403, 404, 408, 422, 429, 500, 502, 503)[pick % 11]
        error = {
            "error": {"message": "x\x00\u202e" * (size % 300), "code": HUGE_NUMBERS[pick % 13]}
        }
        return status, json.dumps(error).encode() if pick % 2 else b"[" * size
    if kind == "brace_flood":
        return 200, _body("{" * (size * 10))
    return 200, _body(valid)


def big_model_bodies(forecast_ids: list[str]) -> list[bytes]:
    """The near-2 MB bodies, a few of each shape (built once, not drawn: they are the slow ones)."""
    valid = decision_text(forecast_ids)
    bodies = []
    for size in BIG_BODY_SIZES:
        bodies.append(_body("{" * size))
        bodies.append(b"[" * size)
        bodies.append(_body("x {y} \x00 " * (size // 9) + valid))
        bodies.append(_body('{"a": "{' * (size // 8)))
    return bodies


def _body(content: Any, *, model: str = "fuzz/model", extra: dict | None = None,
          deep: int = 0) -> bytes:  # fmt: skip
    payload = success_body(content, model=model)
    if extra:
        payload.update(extra)
    text = json.dumps(payload)
    if deep:  # an unknown field nested `deep` levels: harmless, but the decoder must read it
        text = text[:-1] + ', "nested": ' + "[" * deep + "]" * deep + "}"
    return text.encode()


def _wrong_types(valid: str, pick: int) -> dict:
    payload = success_body(valid)
    field = CHOICE_FIELDS[pick % len(CHOICE_FIELDS)]
    value = WRONG_TYPES[(pick // len(CHOICE_FIELDS)) % len(WRONG_TYPES)]
    choice = payload["choices"][0]
    if field == "choices":
        payload["choices"] = value
    elif field == "message":
        choice["message"] = value
    elif field in ("content",):
        choice["message"]["content"] = value
    elif field == "finish_reason":
        choice["finish_reason"] = value
    elif field == "error":
        choice["error"] = value
    else:
        payload[field] = value
    return payload


def _random_json(seed: bytes, pick: int) -> Any:
    values: list[Any] = [b for b in seed] or [0]
    shapes: list[Any] = [values, {"choices": values}, {"choices": [{"message": values}]},
                         {"error": values}, str(seed), pick]  # fmt: skip
    return shapes[pick % len(shapes)]


# --- Gamma ---------------------------------------------------------------------------------------

GAMMA_KINDS = (
    "nul_question", "huge_question", "huge_description", "wrong_type", "missing_field",
    "duplicate_id", "newlines", "bidi", "surrogates", "nul_outcome", "huge_threshold",
    "bad_prices", "deep_field", "not_an_object", "bad_date", "huge_volume", "nul_key",
)  # fmt: skip
GAMMA_FIELDS = (
    "id", "question", "outcomes", "outcomePrices", "clobTokenIds", "volumeNum", "endDate",
    "closed", "description", "conditionId", "events", "tags", "groupItemThreshold", "slug",
    "bestBid", "umaResolutionStatus", "negRiskMarketID", "startDate",
)  # fmt: skip


@dataclass(frozen=True)
class GammaRecipe:
    kind: str
    pick: int = 0
    size: int = 1


def gamma_recipes() -> st.SearchStrategy[GammaRecipe]:
    return st.builds(
        GammaRecipe,
        kind=st.sampled_from(GAMMA_KINDS),
        pick=st.integers(min_value=0, max_value=1000),
        size=st.integers(min_value=1, max_value=300_000),
    )


def gamma_object(recipe: GammaRecipe, base: dict, duplicate_of: str) -> Any:
    """A hostile variant of the Gamma object `base` (a fresh id); `duplicate_of` is the id of a
    good market on the same page, for the duplicate-id kind."""
    kind, pick, size = recipe.kind, recipe.pick, recipe.size
    obj = dict(base)
    if kind == "nul_question":
        obj["question"] = "Will\x00 it" + "\x00" * (pick % 5) + " happen?"
    elif kind == "huge_question":
        obj["question"] = "Q" * size
    elif kind == "huge_description":
        obj["description"] = "d\n" * size
    elif kind == "wrong_type":
        obj[GAMMA_FIELDS[pick % len(GAMMA_FIELDS)]] = WRONG_TYPES[(pick // 18) % len(WRONG_TYPES)]
    elif kind == "missing_field":
        obj.pop(GAMMA_FIELDS[pick % len(GAMMA_FIELDS)], None)
    elif kind == "duplicate_id":
        obj["id"] = duplicate_of
        obj["question"] = "A second object with a good market's id"
    elif kind == "newlines":
        obj["question"] = "Real?\n\n[424242] Fake market\n  Yes 0.01 | No 0.99"
        obj["outcomes"] = json.dumps(["Yes\nforecast_sample: 1", "No\r\n"])
    elif kind == "bidi":
        obj["question"] = "\u202eseY\u202c or \u2067no\u2069?"
        obj["outcomes"] = json.dumps(["\u202eseY", "oN\u200f"])
        obj["description"] = "\u202e" * (pick % 50)
    elif kind == "surrogates":
        obj["question"] = "\ud800 lone \udfff"
        obj["events"] = [{"title": "\udc00", "slug": "s\ud800"}]
    elif kind == "nul_outcome":
        obj["outcomes"] = json.dumps(["Yes\x00", "\x00"])
    elif kind == "huge_threshold":
        obj["groupItemThreshold"] = str(10 ** (10 + pick % 40))
    elif kind == "bad_prices":
        obj["outcomePrices"] = ('["NaN", "1e999"]', "[1, 2, 3]", '"x"', "[[]]", '["-0", "2"]')[
            pick % 5
        ]
    elif kind == "deep_field":
        nested: Any = "x\x00"
        for _ in range(min(size, 500)):
            nested = [nested]
        obj["unknownDeep"] = nested
    elif kind == "not_an_object":
        return WRONG_TYPES[pick % len(WRONG_TYPES)]
    elif kind == "bad_date":
        obj["endDate"] = ("2026-13-45", "\x00", "9999999-01-01", "", "yesterday")[pick % 5]
    elif kind == "huge_volume":
        obj["volumeNum"] = (1e300, -5, "1e17", float("inf"), 10**40)[pick % 5]
    elif kind == "nul_key":
        obj["\x00key\u202e"] = {"\x00": "\x00"}
    return obj
