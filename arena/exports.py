"""Bounded, streamed exports of decisions, trades, snapshots, forecasts and scores.

The same generator feeds `/exports/<what>.<csv|json>` and `arena export`. Rows stream from the
database with `.iterator()` (constant memory) and every export is bounded twice: by a date range
(default: the last DEFAULT_DAYS days) and by a row cap (default DEFAULT_LIMIT, at most
MAX_LIMIT). Every row carries its cohort's kind, so replay and demo rows can never pass for
live ones. Money columns are strings with two decimals, as in the JSON API.
"""

from __future__ import annotations

import csv
import json
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from datetime import UTC, date, datetime, time, timedelta
from decimal import Decimal
from typing import Any

from django.db.models import F, QuerySet
from django.http import (
    Http404,
    HttpRequest,
    HttpResponse,
    HttpResponseBadRequest,
    StreamingHttpResponse,
)
from django.utils import timezone

from agents.models import Decision, Forecast
from cohorts.models import Snapshot, Trade
from scoring.models import LeaderboardRow, ScoreRun

DEFAULT_DAYS = 90
DEFAULT_LIMIT = 10_000
MAX_LIMIT = 100_000
CHUNK = 2_000
FORMATS = ("csv", "json")


class ExportError(ValueError):
    """A request the export cannot serve (bad date, unknown kind, ...)."""


@dataclass(frozen=True)
class Spec:
    """One export: its rows (queryset builder), its date field, and the columns it emits."""

    base: Callable[[], QuerySet]
    date_field: str
    cohort_field: str
    columns: tuple[tuple[str, str], ...]  # (output column, queryset lookup)


def _entry_cols(prefix: str) -> tuple[tuple[str, str], ...]:
    return (
        ("cohort_id", f"{prefix}cohort_id"),
        ("cohort_kind", f"{prefix}cohort__kind"),
        ("competitor", f"{prefix}competitor__slug"),
        ("replicate", f"{prefix}replicate"),
    )


SPECS: dict[str, Spec] = {
    "decisions": Spec(
        base=lambda: Decision.objects.all(),
        date_field="claimed_at",
        cohort_field="entry__cohort_id",
        columns=(
            ("decision_id", "id"),
            *_entry_cols("entry__"),
            ("week", "week"),
            ("status", "status"),
            ("action", "action"),
            ("decided_at", "decided_at"),
            ("reasoning", "reasoning"),
            ("parsed", "parsed"),
            ("validation_errors", "validation_errors"),
            ("hold_reason", "hold_reason"),
            ("error", "error"),
            ("prompt_version", "prompt_version"),
            ("prompt_sha256", "prompt_sha256"),
            ("universe_hash", "universe_hash"),
            ("system_prompt", "system_prompt"),
            ("user_prompt", "user_prompt"),
            ("tokens_in", "tokens_in"),
            ("tokens_out", "tokens_out"),
            ("cost_usd", "cost_usd"),
            ("latency_ms", "latency_ms"),
        ),
    ),
    "trades": Spec(
        base=lambda: Trade.objects.all(),
        date_field="executed_at",
        cohort_field="entry__cohort_id",
        columns=(
            ("trade_id", "id"),
            *_entry_cols("entry__"),
            ("decision_id", "decision_id"),
            ("market_id", "position__market_id"),
            ("question", "position__market__question"),
            ("outcome", "position__outcome"),
            ("side", "side"),
            ("amount", "amount"),
            ("shares", "shares"),
            ("price", "price"),
            ("realized_pnl", "realized_pnl"),
            ("executed_at", "executed_at"),
        ),
    ),
    "snapshots": Spec(
        base=lambda: Snapshot.objects.all(),
        date_field="ts",
        cohort_field="entry__cohort_id",
        columns=(
            ("entry_id", "entry_id"),
            *_entry_cols("entry__"),
            ("ts", "ts"),
            ("cash", "cash"),
            ("positions_value", "positions_value"),
            ("total", "total"),
            ("realized_pnl", "realized_pnl"),
            ("unrealized_pnl", "unrealized_pnl"),
        ),
    ),
    "forecasts": Spec(
        base=lambda: Forecast.objects.all(),
        date_field="created_at",
        cohort_field="entry__cohort_id",
        columns=(
            ("forecast_id", "id"),
            *_entry_cols("entry__"),
            ("decision_id", "decision_id"),
            ("week", "decision__week"),
            ("market_id", "market_id"),
            ("outcome", "outcome"),
            ("probability", "probability"),
            ("market_price", "market_price"),
            ("source", "source"),
            ("created_at", "created_at"),
            ("market_status", "market__status"),
            ("resolved_outcome", "market__resolved_outcome"),
        ),
    ),
    "scores": Spec(
        base=lambda: LeaderboardRow.objects.filter(run__status=ScoreRun.Status.DONE),
        date_field="run__as_of",
        cohort_field="cohort_id",
        columns=(
            ("run_id", "run_id"),
            # The run's scope is the kind of every cohort it covers.
            ("cohort_kind", "run__scope"),
            ("as_of", "run__as_of"),
            ("methodology_hash", "run__methodology_hash"),
            ("cohort_id", "cohort_id"),
            ("competitor", "competitor__slug"),
            ("rank", "rank"),
            ("n_forecasts", "n_forecasts"),
            ("n_resolved", "n_resolved"),
            ("brier", "brier"),
            ("brier_lo", "brier_lo"),
            ("brier_hi", "brier_hi"),
            ("log_score", "log_score"),
            ("skill_vs_market", "skill_vs_market"),
            ("skill_lo", "skill_lo"),
            ("skill_hi", "skill_hi"),
            ("return_pct", "return_pct"),
            ("return_lo", "return_lo"),
            ("return_hi", "return_hi"),
            ("pnl", "pnl"),
            ("win_rate", "win_rate"),
            ("cost_usd", "cost_usd"),
            ("provisional", "provisional"),
        ),
    ),
}


@dataclass(frozen=True)
class Bounds:
    since: datetime
    until: datetime  # exclusive
    limit: int
    cohort: int | None


def _parse_day(raw: str | date | None, name: str) -> date | None:
    if raw in (None, ""):
        return None
    if isinstance(raw, date):
        return raw
    try:
        return date.fromisoformat(str(raw))
    except ValueError as exc:
        raise ExportError(f"{name} must be a date YYYY-MM-DD, got {raw!r}") from exc


def bounds(
    since: str | date | None = None,
    until: str | date | None = None,
    limit: int | str | None = None,
    cohort: int | str | None = None,
    today: date | None = None,
) -> Bounds:
    """Validate export bounds. `until` is inclusive (a whole day); the row cap is clamped."""
    today = today or timezone.now().date()
    until_day = _parse_day(until, "until") or today
    since_day = _parse_day(since, "since") or until_day - timedelta(days=DEFAULT_DAYS)
    if since_day > until_day:
        raise ExportError("since must not be after until")
    try:
        n = DEFAULT_LIMIT if limit in (None, "") else int(limit)
        cohort_id = None if cohort in (None, "") else int(cohort)
    except (TypeError, ValueError) as exc:
        raise ExportError("limit and cohort must be integers") from exc
    if n < 1:
        raise ExportError("limit must be at least 1")
    return Bounds(
        since=datetime.combine(since_day, time.min, tzinfo=UTC),
        until=datetime.combine(until_day + timedelta(days=1), time.min, tzinfo=UTC),
        limit=min(n, MAX_LIMIT),
        cohort=cohort_id,
    )


def rows(what: str, b: Bounds) -> Iterator[dict[str, Any]]:
    """The export's rows as dicts (column -> JSON-ready value), oldest first, streamed."""
    spec = SPECS.get(what)
    if spec is None:
        raise ExportError(f"unknown export {what!r}; choose from {', '.join(SPECS)}")
    qs = spec.base().filter(
        **{f"{spec.date_field}__gte": b.since, f"{spec.date_field}__lt": b.until}
    )
    if b.cohort is not None:
        qs = qs.filter(**{spec.cohort_field: b.cohort})
    names = [c for c, _ in spec.columns]
    lookups = [lookup for _, lookup in spec.columns]
    qs = qs.order_by(F(spec.date_field).asc(), "pk").values_list(*lookups)[: b.limit]
    for values in qs.iterator(chunk_size=CHUNK):
        yield {name: _plain(v) for name, v in zip(names, values)}


def _plain(v: Any) -> Any:
    if isinstance(v, Decimal):
        # Money fields have two places; shares and prices keep theirs.
        return str(v)
    if isinstance(v, datetime):
        return v.isoformat()
    return v


class _Line:
    """csv.writer target that hands back each written line instead of storing it."""

    def write(self, value: str) -> str:
        return value


def stream(what: str, fmt: str, b: Bounds) -> Iterator[str]:
    """The export serialised as text chunks (CSV with a header row, or one JSON document)."""
    if fmt not in FORMATS:
        raise ExportError(f"format must be one of {', '.join(FORMATS)}")
    source = rows(what, b)  # validates `what` before the first chunk is produced
    if fmt == "csv":
        return _csv(what, source)
    return _json(what, b, source)


def _csv(what: str, source: Iterator[dict]) -> Iterator[str]:
    writer = csv.writer(_Line())
    yield writer.writerow([c for c, _ in SPECS[what].columns])
    for row in source:
        yield writer.writerow(
            [json.dumps(v) if isinstance(v, dict | list) else v for v in row.values()]
        )


def _json(what: str, b: Bounds, source: Iterator[dict]) -> Iterator[str]:
    head = {
        "export": what,
        "since": b.since.isoformat(),
        "until_exclusive": b.until.isoformat(),
        "limit": b.limit,
        "cohort": b.cohort,
        "money": "strings with two decimals",
    }
    yield json.dumps(head)[:-1] + ', "rows": ['
    first = True
    for row in source:
        yield ("\n" if first else ",\n") + json.dumps(row, separators=(",", ":"))
        first = False
    yield "\n]}\n"


def export_view(request: HttpRequest, what: str, fmt: str) -> HttpResponse:
    """`/exports/<what>.<csv|json>?since=YYYY-MM-DD&until=YYYY-MM-DD&cohort=ID&limit=N`."""
    if what not in SPECS or fmt not in FORMATS:
        raise Http404("no such export")
    try:
        b = bounds(
            request.GET.get("since"),
            request.GET.get("until"),
            request.GET.get("limit"),
            request.GET.get("cohort"),
        )
        body = stream(what, fmt, b)
    except ExportError as exc:
        return HttpResponseBadRequest(str(exc), content_type="text/plain")
    content_type = "text/csv; charset=utf-8" if fmt == "csv" else "application/json"
    response = StreamingHttpResponse(body, content_type=content_type)
    response["Content-Disposition"] = f'attachment; filename="arena-{what}.{fmt}"'
    response["X-Export-Limit"] = str(b.limit)
    return response
