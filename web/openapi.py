"""GET /api/openapi.json: the OpenAPI 3.1 description of the public read API and the agent API.

One document for everyone (no per-user part, so any cache may keep it), built once per process
from this module. Its enumerations (scopes, ranges, market statuses) are the constants the views
parse their query strings with, so the document cannot list a value a view refuses. It is
checked against the running code twice: tests/site/test_openapi.py validates it
(openapi-spec-validator) and fails when an /api/ route is undocumented or a documented path does
not exist; tests/site/test_api_schemathesis.py sends generated requests to a running server and
fails on any 5xx or any answer that does not match it.

`info.version` changes whenever the document changes (a field, a status, a parameter), so a
client can tell which description it was written against.
"""

from __future__ import annotations

import json
from functools import cache
from typing import Any

from django.http import HttpRequest, HttpResponse

from markets.models import Market
from scoring.models import ScoreRun
from web import charts, selectors
from web.api_errors import api_view

VERSION = "1.0.0"
MAX_ID = 2**62
Schema = dict[str, Any]

# --- building blocks -------------------------------------------------------------------------


def _t(kind: str, nullable: bool = False, **kw: Any) -> Schema:
    return {"type": [kind, "null"] if nullable else kind, **kw}


STR, NSTR = _t("string"), _t("string", True)
INT, NINT = _t("integer"), _t("integer", True)
NUM, NNUM = _t("number"), _t("number", True)
BOOL, NBOOL = _t("boolean"), _t("boolean", True)
TIME = _t("string", format="date-time")
NTIME = _t("string", True, format="date-time")
MONEY = _t("string", pattern=r"^-?[0-9]+\.[0-9]{2}$", description="dollars, two decimals")
NMONEY = _t("string", True, pattern=r"^-?[0-9]+\.[0-9]{2}$")
USD = _t("string", True, pattern=r"^-?[0-9]+\.[0-9]{6,10}$", description="dollars, 6-10 decimals")
ANY_OBJECT = _t("object")
NOBJECT = _t("object", True)


def _obj(props: dict[str, Schema], *optional: str, **kw: Any) -> Schema:
    """An object whose properties are all present, except those named `optional`."""
    required = [name for name in props if name not in optional]
    return {"type": "object", "properties": props, "required": required, **kw}


def _arr(items: Schema, **kw: Any) -> Schema:
    return {"type": "array", "items": items, **kw}


def _ref(name: str) -> Schema:
    return {"$ref": f"#/components/schemas/{name}"}


def _nullable_ref(name: str) -> Schema:
    return {"oneOf": [_ref(name), {"type": "null"}]}


def _query(name: str, schema: Schema, text: str, *, empty: bool = True) -> Schema:
    """A query parameter. `empty`: an empty value means the parameter is absent (web/params.py:
    the public API takes its default), which OpenAPI says with allowEmptyValue."""
    out = {"name": name, "in": "query", "required": False, "schema": schema, "description": text}
    return {**out, "allowEmptyValue": True} if empty else out


def _any_case(values: list[str]) -> Schema:
    """One of `values` in any letter case (a parameter parsed with fold_case)."""
    spelled = [
        "".join(f"[{c.upper()}{c.lower()}]" if c.isalpha() else c for c in v) for v in values
    ]
    return _t("string", pattern=f"^({'|'.join(spelled)})$", examples=values)


def _path_id(name: str, text: str) -> Schema:
    return {
        "name": name,
        "in": "path",
        "required": True,
        "description": text,
        "schema": _t("integer", minimum=1, maximum=MAX_ID),
    }


def _json_body(schema: Schema, text: str, headers: dict[str, Schema] | None = None) -> Schema:
    out: Schema = {"description": text, "content": {"application/json": {"schema": schema}}}
    if headers:
        out["headers"] = headers
    return out


def _error(text: str, schema: str = "Error") -> Schema:
    return _json_body(_ref(schema), text)


LIMIT = _query("limit", _t("integer", minimum=1, maximum=200, default=50), "page size")
OFFSET = _query("offset", _t("integer", minimum=0, maximum=10**9, default=0), "rows to skip")
KIND = _query("kind", _t("string", enum=[str(s) for s in selectors.SCOPES]), "cohort kind")
RANGE = _query("range", _any_case(list(charts.RANGES)), "time range, in any letter case")
BAD_PARAMETER = _error("a query parameter outside what is documented, named in `error`")
NOT_FOUND = _error("no such object")


def _read(summary: str, ok: Schema, *params: Schema, missing: bool = False) -> Schema:
    """A public GET: 200 with `ok`, 400 for a refused parameter, 404 for an unknown id."""
    responses: dict[str, Schema] = {"200": _json_body(ok, summary)}
    if any(p["in"] == "query" for p in params):
        responses["400"] = BAD_PARAMETER
    if missing:
        responses["404"] = NOT_FOUND
    return {
        "get": {
            "summary": summary,
            "tags": ["public"],
            "parameters": list(params),
            "responses": responses,
        }
    }


# --- the public read API (web/api.py, web/leaderboard_api.py) --------------------------------

# The tables below are data, laid out to be read as the JSON they describe.
# fmt: off

COHORT_FIELDS = {
    "id": INT,
    "kind": STR,
    "label": STR,
    "week_start": TIME,
    "status": STR,
    "decision_weeks": INT,
    "initial_balance": MONEY,
    "methodology_version": STR,
    "methodology_hash": STR,
}
ENTRY = _obj({
    "id": INT, "competitor": STR, "competitor_name": STR, "competitor_simulated": BOOL,
    "replicate": INT, "cash": MONEY, "invested": MONEY, "value": MONEY,
    "value_basis": _t("string", enum=["cost", "snapshot"]), "value_at": NTIME,
    "return_pct": NUM, "trades": INT, "open_positions": INT, "resolved_positions": INT,
})
ANNOTATION = _obj({"x": STR, "kind": STR, "label": STR, "detail": STR})
SERIES_HEAD = {
    "range": _t("string", enum=list(charts.RANGES)),
    "ranges": _arr(STR),
    "value": STR,
    "step_seconds": INT,
    "x": _arr(STR),
    "annotations": _arr(ANNOTATION),
}
STYLE = {"color": STR, "dash": STR}
MARKET_FIELDS = {
    "id": INT, "source": STR, "external_id": STR, "question": STR, "slug": STR, "url": NSTR,
    "kind": STR, "outcomes": _arr(STR), "prices": _t("object", additionalProperties=NUM),
    "priced_at": NTIME, "status": _t("string", enum=[str(s) for s in Market.Status.values]),
    "close_time": NTIME, "volume": MONEY, "resolved_outcome": NSTR, "resolved_at": NTIME,
    "resolved_by": NSTR,
}
HOLDER = _obj({
    "cohort": INT, "cohort_kind": STR, "competitor": STR, "competitor_simulated": BOOL,
    "replicate": INT, "outcome": STR, "shares": NUM, "cost_basis": MONEY,
})
STATE = _obj({"status": NSTR, "outcome": NSTR})
RESOLUTION_CHANGE = _obj({"changed_at": TIME, "source": STR, "by": NSTR, "from": STATE,
                          "to": STATE, "reason": STR})
LLM_CALL = _obj({
    "attempt": INT, "phase": STR, "url": STR, "request": _t("object"), "raw_response": STR,
    "http_status": NINT, "error": STR, "error_kind": STR, "prompt_tokens": NINT,
    "completion_tokens": NINT, "reasoning_tokens": NINT, "cost_usd": USD, "cost_source": STR,
    "latency_ms": INT, "served_model": STR, "generation_id": STR, "finish_reason": STR,
    "started_at": TIME,
})
SUBMISSION = _obj({
    "id": INT, "received_at": TIME, "token_prefix": STR, "content_type": STR,
    "body": _t("string", description="the request body as received (UTF-8; invalid bytes as U+FFFD)"),
    "body_bytes": INT, "signature": STR, "public_key": STR, "signature_verified": NBOOL,
    "outcome": STR, "http_status": NINT, "problems": _arr({}),
})
DECISION = _obj({
    "id": INT, "cohort": _obj({"id": INT, "kind": STR}), "entry": INT, "competitor": STR,
    "competitor_simulated": BOOL, "replicate": INT, "week": INT, "status": STR, "action": STR,
    "decided_at": NTIME, "claimed_at": TIME, "finished_at": NTIME, "reasoning": STR,
    "parsed": NOBJECT, "validation_errors": _arr({}), "hold_reason": STR, "error": STR,
    "universe_hash": STR, "prompt_version": STR, "prompt_sha256": STR, "system_prompt": STR,
    "user_prompt": STR, "cash_before": NMONEY, "tokens_in": INT, "tokens_out": INT,
    "cost_usd": USD, "latency_ms": INT, "llm_calls": _arr(LLM_CALL),
    "forecasts": _arr(_obj({"market": INT, "question": STR, "outcome": STR, "probability": NUM,
                            "market_price": NNUM, "source": STR})),
    "trades": _arr(_obj({"id": INT, "market": INT, "outcome": STR, "side": STR, "amount": MONEY,
                         "shares": NUM, "price": NUM, "realized_pnl": NMONEY,
                         "executed_at": TIME})),
    "seal": {"oneOf": [{"type": "null"}, _obj({
        "record_hash": STR, "link": STR, "chain_seq": INT, "amendment": BOOL,
        "roots": _arr(_obj({"seq": INT, "root": STR, "sealed_at": TIME})),
    })]},
    "release": {"oneOf": [{"type": "null"}, _obj({
        "number": INT, "model_id": STR, "provider": STR, "endpoint": STR, "endpoint_host": STR,
        "knowledge_cutoff": NSTR,
    })]},
    "retry_rounds": INT, "retry_after": NTIME,
    "submissions": _arr(_ref("Submission")),
})
PAIR = _arr(NNUM, minItems=2, maxItems=2)
LEADERBOARD_ROW = _obj({
    "rank": NINT, "competitor": STR, "competitor_name": STR, "competitor_simulated": BOOL,
    "n_forecasts": INT, "n_resolved": INT, "brier": NNUM, "brier_ci": PAIR, "log_score": NNUM,
    "brier_skill_vs_market": NNUM, "brier_skill_vs_market_ci": PAIR, "bss_vs_half": NNUM,
    "bss_vs_market": NNUM, "bss_vs_base_rate": NNUM, "brier_multiclass": NOBJECT,
    "return_pct": NNUM, "return_ci": PAIR, "pnl": NNUM, "realized_pnl": NNUM,
    "unrealized_pnl": NNUM, "win_rate": NNUM, "implied_confidence_brier": NNUM, "tokens": NINT,
    "cost_usd": NNUM, "cost_per_resolved": NNUM, "provisional": BOOL, "required_n": NINT,
    "edge_label": NSTR, "edge_borderline": NBOOL, "methodology_version": NSTR,
    "cohort_methodology_versions": {"type": ["array", "null"], "items": STR},
    "details": ANY_OBJECT, "unranked_reason": NSTR, "group_letters": NSTR,
})
LEADERBOARD = _obj(
    {
        "as_of": NTIME, "methodology_hash": STR, "scope": STR,
        "cohort": {"oneOf": [{"type": "null"}, _obj({"id": INT, "kind": STR, "label": STR,
                                                     "week_start": TIME})]},
        "rows": _arr(LEADERBOARD_ROW), "scope_note": STR, "note": STR,
        "methodology_version": NSTR, "run_id": INT, "headline": NSTR, "headline_rule": NSTR,
        "edge": _obj({"dm": NOBJECT, "tournament": NOBJECT}),
    },
    "scope_note", "note", "methodology_version", "run_id", "headline", "headline_rule", "edge",
    description="Without a score run yet: `rows` is empty, `as_of` null and `note` says so.",
)
SEAL = _obj({
    "cohort": _obj({"id": INT, "kind": STR}), "week": INT, "seq": INT, "reason": STR,
    "root": STR, "genesis": STR, "count": INT, "format": STR, "sealed_at": TIME,
    "digests": _arr(_obj({"seq": INT, "entry": NINT, "decision": NINT, "state": STR,
                          "status": STR, "amendment": BOOL, "record_hash": STR, "link": STR})),
})
SEALS = _obj({
    "format": STR, "limit": INT, "offset": INT, "total": INT, "next": NSTR, "seals": _arr(SEAL),
    "event_logs": _arr(_obj({"scope": STR, "count": INT, "head": STR, "updated_at": TIME})),
    "signing_key": _obj({"algorithm": STR, "public_key": STR, "key_id": STR}),
    "checkpoints": _arr(_obj({"format": STR, "scope": STR, "size": INT, "head": STR,
                              "signed_at": STR, "key_id": STR, "public_key": STR,
                              "signature": STR})),
})

PUBLIC_SCHEMAS = {
    "Error": _obj({"error": _t("string", description="one line")}),
    "Cohort": _obj(COHORT_FIELDS),
    "CohortList": _obj({"limit": INT, "offset": INT, "cohorts": _arr(
        _obj({**COHORT_FIELDS, "entries": INT, "latest_week": NINT}))}),
    "CohortDetail": _obj({**COHORT_FIELDS, "entries": _arr(ENTRY)}),
    "CohortSeries": _obj({"cohort": INT, "kind": STR, **SERIES_HEAD, "entries": _arr(_obj({
        "entry": INT, "competitor": STR, "competitor_simulated": BOOL, "replicate": INT,
        "label": STR, **STYLE, "y": _arr(NNUM)}))}),
    "OverviewSeries": _obj({"scope": STR, **SERIES_HEAD, "series": _arr(_obj({
        "competitor": STR, "label": STR, **STYLE, "y": _arr(NNUM)}))}),
    "Decision": DECISION,
    "Submission": SUBMISSION,
    "Leaderboard": LEADERBOARD,
    "MarketList": _obj({"limit": INT, "offset": INT, "markets": _arr(_obj(MARKET_FIELDS))}),
    "Market": _obj({**MARKET_FIELDS, "description": STR, "positions": _arr(HOLDER),
                    "resolution_changes": _arr(RESOLUTION_CHANGE)}),
    "MarketPrices": _obj({"range": STR, "lines": _arr(_obj({"label": STR, "x": _arr(STR),
                          "y": _arr(NNUM)})), "annotations": _arr(ANNOTATION)}),
    "Seals": SEALS,
}

COHORT_ID = _path_id("cohort_id", "a cohort's id")
MARKET_ID = _path_id("market_id", "a market's id")
DECISION_ID = _path_id("decision_id", "a decision's id")
ID_QUERY = _t("integer", minimum=1, maximum=MAX_ID)

PUBLIC_PATHS = {
    "/api/openapi.json": _read("this document", ANY_OBJECT),
    "/api/cohorts/": _read("cohorts, newest first", _ref("CohortList"), KIND, LIMIT, OFFSET),
    "/api/cohorts/{cohort_id}": _read(
        "one cohort with every entry's money and counts", _ref("CohortDetail"), COHORT_ID,
        missing=True,
    ),
    "/api/cohorts/{cohort_id}/series": _read(
        "each entry's value over time", _ref("CohortSeries"), COHORT_ID, RANGE,
        _query("entry", ID_QUERY, "one entry's line only"), missing=True,
    ),
    "/api/decisions/{decision_id}": _read(
        "one decision's full audit record", _ref("Decision"), DECISION_ID, missing=True
    ),
    "/api/leaderboard": _read(
        "the latest scored leaderboard", _ref("Leaderboard"),
        _query("cohort", ID_QUERY, "one cohort's board"),
        _query("scope", _t("string", enum=[str(s) for s in ScoreRun.Scope.values]), "cohort kind"),
        missing=True,
    ),
    "/api/overview": _read(
        "each competitor's chain-linked growth over time (not the leaderboard's pooled return)", _ref("OverviewSeries"),
        _query("scope", _t("string", enum=[str(s) for s in selectors.SCOPES]), "cohort kind"), RANGE,
    ),
    "/api/markets": _read(
        "markets by volume", _ref("MarketList"),
        _query("status", _t("string", enum=[str(s) for s in Market.Status.values]), "market status"),
        _query("q", _t("string", maxLength=200), "words of the question"), LIMIT, OFFSET,
    ),
    "/api/markets/{market_id}": _read(
        "one market with its holders and resolution trail", _ref("Market"), MARKET_ID,
        missing=True,
    ),
    "/api/markets/{market_id}/prices": _read(
        "a market's price history per outcome", _ref("MarketPrices"), MARKET_ID, RANGE,
        missing=True,
    ),
    "/api/seals": _read(
        "week roots, event-log heads, signed checkpoints", _ref("Seals"),
        _query("cohort", ID_QUERY, "one cohort's roots"), KIND, LIMIT, OFFSET,
    ),
}

# --- the agent API (web/agent_api.py, cohorts/decisions/submissions.py) ---------------------

DECISION_REF = _obj({"id": INT, "action": STR, "hold_reason": STR, "url": STR, "api": STR})
UNIVERSE_MARKET = _obj({
    "market_id": INT, "question": STR, "rules": STR, "outcomes": _arr(STR),
    "prices": _t("object", additionalProperties=STR, description="frozen price per outcome"),
    "volume": STR, "close_time": NTIME, "days_to_close": NNUM,
})
POSITION = _obj({
    "position_id": INT, "market_id": INT, "question": STR, "outcome": STR, "shares": STR,
    "cost_basis": MONEY, "price": NSTR, "market_status": STR, "can_sell": BOOL,
})
WEEK = _obj({
    "competitor": STR, "cohort": INT, "week": INT, "server_time": TIME, "cohort_kind": STR,
    "weeks": INT, "state": _t("string", enum=["open", "closed", "decided"]), "frozen_at": TIME,
    "deadline": TIME, "universe_hash": STR, "markets": _arr(UNIVERSE_MARKET),
    "forecast_sample": _arr(INT), "cash": MONEY, "positions": _arr(POSITION),
    "limits": _obj({"min_bet": MONEY, "max_bet_fraction": NUM, "max_total_bets": MONEY}),
    "tries_left": _t("integer", minimum=0, maximum=2),
    "decision": {"oneOf": [{"type": "null"}, _ref("DecisionRef")]},
    "signature_required": BOOL, "prompt": _obj({"system": STR, "user": STR}),
})
ANSWER = {
    "type": "object",
    "description": "the decision a model writes (docs/enter-your-agent.md); checked by the "
    "model path's parser, so anything it refuses is a 422 listing every problem",
    "properties": {
        "action": _t("string", enum=["BET", "SELL", "HOLD"]),
        "bets": _arr(_obj({"market_id": STR, "outcome": STR, "amount": NUM, "probability": NUM},
                          "probability")),
        "sells": _arr(_obj({"position_id": STR, "percentage": NUM})),
        "forecasts": _arr(_obj({"market_id": STR, "outcome": STR, "probability": NUM})),
        "reasoning": STR,
    },
}
SUBMIT = _obj({
    "cohort": _t("integer", minimum=1, maximum=2**31 - 1),
    "week": _t("integer", minimum=1, maximum=2**31 - 1),
    "answer": {"oneOf": [ANSWER, _t("string", description="the text a model would write")]},
})
REFUSAL = {"type": "object", "required": ["error"], "properties": {
    "error": STR, "submission": INT, "server_time": TIME, "deadline": TIME, "opens_at": TIME,
    "decision": _ref("DecisionRef"),
}}
INVALID = _obj(
    {"error": STR, "problems": _arr(STR, minItems=1), "tries_left": _t("integer", minimum=0),
     "decision": _ref("DecisionRef"), "submission": INT, "replayed": BOOL},
    "decision", "submission", "replayed",
    description="every problem found; with tries_left 0 the decision is recorded as HOLD",
)
ACCEPTED = _obj({"decision": _ref("DecisionRef"), "submission": INT, "replayed": BOOL},
                "replayed")
AGENT_SCHEMAS = {
    "DecisionRef": DECISION_REF,
    "Week": WEEK,
    "Submit": SUBMIT,
    "Refusal": REFUSAL,
    "Invalid": INVALID,
    "Accepted": ACCEPTED,
}
RETRY_AFTER = {"Retry-After": {"schema": STR, "description": "seconds"}}
AUTH_ERRORS = {
    "401": _error("no, unknown, revoked or expired token; or (POST) a missing or bad signature"),
    "429": _json_body(_ref("Error"), "over the token's rate", RETRY_AFTER),
}


def _agent(method: str, summary: str, responses: dict[str, Schema], **op: Any) -> Schema:
    return {method: {"summary": summary, "tags": ["agent"], "security": [{"token": []}],
                     "responses": {**responses, **AUTH_ERRORS}, **op}}


AGENT_PATHS = {
    "/api/agent/v1/week": _agent(
        "get",
        "the token's competitor's current week: frozen universe, prices, cash, positions, "
        "limits, deadline and the prompt a model receives",
        {
            "200": _json_body(_ref("Week"), "the week"),
            "400": _error("a bad `cohort`, or a token in the URL"),
            "404": _error("no entry of this competitor in an open cohort (or the one asked); "
                          "`server_time` says the server's clock", "Refusal"),
            "409": _error("not open yet: `opens_at` says when", "Refusal"),
        },
        parameters=[_query("cohort", _t("integer", minimum=1, maximum=10**12 - 1),
                           "a cohort holding the competitor's entry (default: the newest open)",
                           empty=False)],
    ),
    "/api/agent/v1/decision": _agent(
        "post",
        "submit the week's decision: the first valid answer is final",
        {
            "201": _json_body(_ref("Accepted"), "the decision, final"),
            "400": _error("malformed body", "Refusal"),
            "404": _error("no entry of this competitor in that cohort", "Refusal"),
            "409": _error("not open yet, or already decided (`decision` names it)", "Refusal"),
            "410": _error("past the deadline (`deadline`, `server_time`)", "Refusal"),
            "411": _error("no Content-Length"),
            "413": _error("body over 64 KiB", "Refusal"),
            "415": _error("not application/json", "Refusal"),
            "422": _json_body(
                {"oneOf": [_ref("Invalid"), _ref("Refusal")]},
                "an invalid answer (`problems`), or an Idempotency-Key reused for another body",
            ),
        },
        parameters=[
            {"name": "Idempotency-Key", "in": "header", "required": False,
             "schema": _t("string", maxLength=200),
             "description": "a retried POST with the same key and body gets the first answer"},
            {"name": "Arena-Signature", "in": "header", "required": False, "schema": STR,
             "description": "base64 Ed25519 signature; required with a registered public key"},
        ],
        requestBody={"required": True, "content": {"application/json": {"schema": _ref("Submit")}}},
    ),
    "/api/agent/v1/decisions/{decision_id}": _agent(
        "get",
        "the competitor's own decision record (the public /api/decisions/{id} record)",
        {
            "200": _json_body(_ref("Decision"), "the record"),
            "403": _error("another competitor's decision"),
            "404": _error("no such decision"),
        },
        parameters=[DECISION_ID],
    ),
}

# fmt: on


@cache
def document() -> dict[str, Any]:
    return {
        "openapi": "3.1.0",
        "info": {
            "title": "Arena API",
            "version": VERSION,
            "description": (
                "The public read API (no login; money as strings with two decimals, times in "
                'ISO 8601 UTC, errors as {"error": "..."}; a query parameter given empty takes '
                "its default and unknown ones are ignored) and the agent API through which "
                "outside agents read their week and submit their decision "
                "(docs/enter-your-agent.md)."
            ),
        },
        "servers": [{"url": "/"}],
        "tags": [
            {"name": "public", "description": "read-only, cacheable"},
            {"name": "agent", "description": "outside agents, with a token; never cached"},
        ],
        "paths": {**PUBLIC_PATHS, **AGENT_PATHS},
        "components": {
            "schemas": {**PUBLIC_SCHEMAS, **AGENT_SCHEMAS},
            "securitySchemes": {
                "token": {
                    "type": "http",
                    "scheme": "bearer",
                    "description": "an API token issued by staff; header only",
                },
            },
        },
    }


@cache
def _text() -> bytes:
    return json.dumps(document(), separators=(",", ":"), sort_keys=True).encode()


@api_view
def openapi_json(request: HttpRequest) -> HttpResponse:
    response = HttpResponse(_text(), content_type="application/json")
    # The same bytes for everyone until a deploy changes them: any cache may keep them a while.
    response["Cache-Control"] = "public, max-age=300"
    return response
