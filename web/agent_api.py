"""The agent API (/api/agent/v1/): outside agents read their week and submit their decision.

HTTP only: the token, the rate limit, the body's size and the JSON answer. What a week shows and
how a submission is judged is cohorts/decisions/submissions.py. Every answer is JSON and never
cached; every refusal is `{"error": "<one line>"}` with its status:

    400 malformed body or query, 401 no/wrong/revoked/expired token or a bad signature,
    403 another competitor's decision, 404 no entry, 409 not open yet or already decided,
    410 past the deadline, 413 body over the cap, 415 not JSON, 422 an invalid answer,
    429 over the token's rate.

A token is accepted in the Authorization header only (`Bearer <token>`): one in a query string
is refused, since URLs end up in access logs, proxies and browser histories.
"""

from __future__ import annotations

from collections.abc import Callable
from functools import wraps

from django.http import HttpRequest, HttpResponse, JsonResponse
from django.views.decorators.csrf import csrf_exempt
from django_ratelimit.core import is_ratelimited

from agents import signing, tokens
from agents.models import AgentToken
from cohorts.decisions import submissions
from web import api, selectors

IDEMPOTENCY_HEADER = "Idempotency-Key"


def _json(body: dict, status: int = 200, headers: dict[str, str] | None = None) -> JsonResponse:
    response = JsonResponse(body, status=status, headers=headers)
    response["Cache-Control"] = "no-store"
    return response


def _error(message: str, status: int, headers: dict[str, str] | None = None) -> JsonResponse:
    return _json({"error": message}, status, headers)


def _answer(answer: submissions.Answer) -> JsonResponse:
    return _json(answer.body, answer.status)


def agent_view(*methods: str) -> Callable:
    """Authenticates the token (header only), applies its rate, refuses other methods."""

    def wrap(view: Callable[..., HttpResponse]) -> Callable[..., HttpResponse]:
        @wraps(view)
        def wrapped(request: HttpRequest, *args, **kwargs) -> HttpResponse:
            if request.method not in methods:
                allowed = ", ".join(methods)
                return _error(f"method {request.method} not allowed; use {allowed}", 405,
                              {"Allow": allowed})  # fmt: skip
            if _token_in_query(request):
                return _error("send the token in the Authorization header (Bearer), never in "
                              "a URL: revoke this one, it may have been logged", 400)  # fmt: skip
            scheme, _, token = request.headers.get("Authorization", "").partition(" ")
            if scheme.lower() != "bearer" or not token.strip():
                return _error("an Authorization: Bearer <token> header is required", 401,
                              {"WWW-Authenticate": "Bearer"})  # fmt: skip
            try:
                row = tokens.authenticate(token.strip())
            except tokens.TokenRefused as exc:
                return _error(f"token refused: {exc}", 401, {"WWW-Authenticate": "Bearer"})
            if _over_rate(request, row):
                return _error(f"token {row.prefix} is over its {row.rate_per_minute} requests "
                              "a minute; retry after a minute", 429, {"Retry-After": "60"})  # fmt: skip
            return view(request, row, *args, **kwargs)

        return csrf_exempt(wrapped)

    return wrap


def _token_in_query(request: HttpRequest) -> bool:
    lowered = {k.lower() for k in request.GET}
    if lowered & {"token", "access_token", "api_key", "key", "auth", "authorization"}:
        return True
    return any(tokens.PREFIX in v for values in request.GET.lists() for v in values[1])


def _over_rate(request: HttpRequest, row: AgentToken) -> bool:
    return is_ratelimited(
        request,
        group="agent-api",
        key=lambda _group, _request: row.prefix,
        rate=f"{row.rate_per_minute}/m",
        increment=True,
    )


@agent_view("GET")
def week(request: HttpRequest, token: AgentToken) -> HttpResponse:
    cohort = request.GET.get("cohort")
    if cohort is not None and (not cohort.isdigit() or len(cohort) > 12):
        return _error("cohort is a cohort id (a positive integer)", 400)
    return _answer(submissions.week_view(token.competitor, int(cohort) if cohort else None))


@agent_view("POST")
def decision(request: HttpRequest, token: AgentToken) -> HttpResponse:
    size = _announced_size(request)
    if size is None:
        return _error("a Content-Length header with the body's size is required", 411)
    too_big = size > submissions.MAX_BODY_BYTES
    # Over the cap the body is not read: the audit row keeps its announced size and no bytes.
    body = b"" if too_big else request.read(submissions.MAX_BODY_BYTES + 1)
    row = submissions.receive(
        token,
        body,
        size=size if too_big else len(body),
        content_type=request.headers.get("Content-Type", ""),
        signature=request.headers.get(signing.HEADER, ""),
        key=request.headers.get(IDEMPOTENCY_HEADER, ""),
    )
    if too_big or len(body) > submissions.MAX_BODY_BYTES:
        answer = submissions.refused(
            413, f"the body is {size} bytes; at most {submissions.MAX_BODY_BYTES} are accepted"
        )
    else:
        answer = submissions.replayed(row) or submissions.submit(row)
    return _answer(submissions.close(row, answer))


def _announced_size(request: HttpRequest) -> int | None:
    value = request.headers.get("Content-Length", "")
    return int(value) if value.isdigit() and len(value) < 16 else None


@agent_view("GET")
def decision_record(request: HttpRequest, token: AgentToken, decision_id: int) -> HttpResponse:
    found = selectors.decision_or_none(decision_id)
    if found is None:
        return _error(f"no decision {decision_id}", 404)
    if found.entry.competitor_id != token.competitor_id:
        return _error(f"decision {decision_id} is another competitor's; read it at "
                      f"/api/decisions/{decision_id}", 403)  # fmt: skip
    response = api.decision_json(found)
    response["Cache-Control"] = "no-store"
    return response
