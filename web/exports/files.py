"""Bounded, streamed exports of decisions, trades, snapshots, forecasts and scores.

The same generator feeds `/exports/<what>.<csv|json>` and `arena export`; `/exports/` lists them.
Rows stream from the database with `.iterator()` in chunks sized to the rows (a decision carries
its prompts, often hundreds of kB, so it is fetched a few at a time: memory stays bounded by the
chunk, not the export), oldest first, and every export is bounded by a row cap (default
DEFAULT_LIMIT, at most MAX_LIMIT) and, unless it is a replay or demo scope or one cohort, by a
date window. `since`/`until` filter the date column the export shows (decided_at, executed_at,
ts, created_at, as_of).

Default window: live data (or all kinds together) runs on the wall clock, so the last
DEFAULT_DAYS days up to today. A replay or demo scope, and a single cohort, run on their own
simulated clock, which has nothing to do with today's date: all of their time, under the row cap.
A window that holds no rows says so (`empty_note`), naming where the rows are.

A limit that is not a whole number from 1 to MAX_LIMIT, a cohort that is not a whole number, or
a date that is unreadable or outside FIRST_DAY..LAST_DAY answers 400, never a silent default.

Every row carries its cohort's kind, so replay and demo rows can never pass for live ones, and
whether its competitor is simulated (the built-in simulated model endpoint, not a real model).
Money columns are strings with two decimals, as in the JSON API. Every number is written
positionally and every CSV cell that a spreadsheet would run as a formula is defused
(web/exports/text.py). Every row also carries a seal hash (docs/verification.md): `record_hash`
(+ `week_root`) of a decision, `decision_hash` of the decision a trade or forecast came from,
`cohort_root` for snapshots and scores. `seals.json` is the full sealed record that
`arena verify --export` checks (whole cohorts, JSON only).
"""

from __future__ import annotations

import csv
import json
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import UTC, date, datetime, time, timedelta
from decimal import Decimal
from typing import Any

from django.db.models import F, Max, Min, QuerySet
from django.http import Http404, HttpRequest, HttpResponse, StreamingHttpResponse
from django.views.decorators.http import require_safe

from cohorts.models import Cohort, Universe
from cohorts.seals import sealing as seals
from cohorts.seals import verify as seal_verify
from core import clock
from markets.models import Market
from scoring.models import LeaderboardRow, ScoreRun
from scoring.selectors import board_details
from scoring.stored import RunDetails
from web import params, standings
from web.exports import gate
from web.exports.specs import SPECS, Spec
from web.exports.text import csv_cell, json_row, number_text

DEFAULT_DAYS = 90
DEFAULT_LIMIT = 10_000
MAX_LIMIT = 100_000
FIRST_DAY = date(1, 1, 1)
LAST_DAY = date(9998, 12, 31)  # until is inclusive: the day after must still be a date
FORMATS = ("csv", "json")
SCOPES = tuple(Cohort.Kind.values)
# Scopes whose rows are dated by a simulated clock: a window counted back from today means nothing.
# A rehearsal's is accelerated: its days are not today's.
OWN_CLOCK = (Cohort.Kind.REPLAY, Cohort.Kind.DEMO, Cohort.Kind.REHEARSAL)


class ExportError(ValueError):
    """A request the export cannot serve (bad date, unknown kind, ...)."""


SEALS = "seals"
WHATS = (*SPECS, SEALS)


@dataclass(frozen=True)
class Bounds:
    since: datetime | None  # None: from the first row
    until: datetime | None  # exclusive; None: to the last row
    limit: int
    cohort: int | None
    scope: str | None = None  # live / replay / demo; None: every kind
    window: str = ""  # how the window was chosen, in words


def _parse_day(raw: str | date | None, name: str) -> date | None:
    if raw in (None, ""):
        return None
    if isinstance(raw, date):
        return raw
    try:
        day = date.fromisoformat(str(raw))
    except ValueError as exc:
        raise ExportError(f"{name} must be a date YYYY-MM-DD, got {str(raw)[:40]!r}") from exc
    if not FIRST_DAY <= day <= LAST_DAY:
        raise ExportError(f"{name} must be between {FIRST_DAY} and {LAST_DAY}")
    return day


def bounds(
    since: str | date | None = None,
    until: str | date | None = None,
    limit: int | str | None = None,
    cohort: int | str | None = None,
    today: date | None = None,
    scope: str | None = None,
) -> Bounds:
    """Validate export bounds. `until` is inclusive (a whole day); a limit past the cap is refused.

    Missing dates follow the data's clock: the last DEFAULT_DAYS days up to today for live data
    (or all kinds), everything for a replay or demo scope or a single cohort.
    """
    scope = scope or None
    if scope is not None and scope not in SCOPES:
        raise ExportError(f"scope must be one of {', '.join(SCOPES)}")
    n = _whole(limit, "limit", DEFAULT_LIMIT, 1, MAX_LIMIT)
    cohort_id = _whole(cohort, "cohort", None, 1, 2**62)
    until_day = _parse_day(until, "until")
    since_day = _parse_day(since, "since")
    own_clock = cohort_id is not None or scope in OWN_CLOCK
    asked = since_day is not None or until_day is not None
    if own_clock:
        whose = f"cohort {cohort_id}" if cohort_id is not None else f"the {scope} scope"
        window = f"all of {whose}'s time: it runs on its own clock"
    else:
        today = today or clock.now().date()
        until_day = until_day or today
        since_day = since_day or max(
            FIRST_DAY, until_day - timedelta(days=min(DEFAULT_DAYS, (until_day - FIRST_DAY).days))
        )
        window = f"the last {DEFAULT_DAYS} days up to today: live data runs on the wall clock"
    if asked:
        window = f"as asked: {since_day or 'the start'} to {until_day or 'the end'}, both included"
    if since_day and until_day and since_day > until_day:
        raise ExportError("since must not be after until")
    return Bounds(
        since=datetime.combine(since_day, time.min, tzinfo=UTC) if since_day else None,
        until=(
            datetime.combine(until_day + timedelta(days=1), time.min, tzinfo=UTC)
            if until_day
            else None
        ),
        limit=n,
        cohort=cohort_id,
        scope=scope,
        window=window,
    )


def _whole(raw: int | str | None, name: str, default: int | None, lo: int, hi: int) -> int | None:
    """As the pages and the API read whole numbers (web/params.py)."""
    if raw in (None, ""):
        return default
    text = str(raw)
    value = int(text) if params.WHOLE.fullmatch(text) else None
    if value is None or not lo <= value <= hi:
        raise ExportError(f"{name} must be a whole number from {lo} to {hi}")
    return value


def _spec(what: str) -> Spec:
    spec = SPECS.get(what)
    if spec is None:
        raise ExportError(f"unknown export {what!r}; choose from {', '.join(SPECS)}")
    return spec


def _scoped(spec: Spec, b: Bounds) -> QuerySet:
    """The export's rows within its scope and cohort, before the date window."""
    qs = spec.base()
    if b.scope is not None:
        qs = qs.filter(**{spec.kind_field: b.scope})
    if b.cohort is not None:
        qs = qs.filter(**{spec.cohort_field: b.cohort})
    return qs


def _windowed(spec: Spec, b: Bounds) -> QuerySet:
    qs = _scoped(spec, b)
    if b.since is not None:
        qs = qs.filter(**{f"{spec.date_field}__gte": b.since})
    if b.until is not None:
        qs = qs.filter(**{f"{spec.date_field}__lt": b.until})
    return qs


def rows(what: str, b: Bounds) -> Iterator[dict[str, Any]]:
    """The export's rows as dicts (column -> JSON-ready value), oldest first, streamed."""
    spec = _spec(what)
    names = [c for c, _ in (*spec.columns, *spec.appended)]
    lookups = [lookup for _, lookup in (*spec.columns, *spec.appended)]
    qs = (
        _windowed(spec, b)
        .order_by(F(spec.date_field).asc(nulls_last=True), "pk")
        .values_list(*lookups)[: b.limit]
    )
    roots: dict[int | None, str | None] = {None: None}
    shown: dict[tuple[int, int], dict] = {}
    ranks: dict[int, dict[tuple[int | None, str], tuple[int | None, str | None, str | None]]] = {}
    for values in qs.iterator(chunk_size=spec.chunk):
        row = {name: _plain(v) for name, v in zip(names, values)}
        late = {name: row.pop(name) for name, _ in spec.appended}
        if spec.cohort_root:
            cohort_id = row.get("cohort_id")
            if cohort_id not in roots:
                roots[cohort_id] = seals.cohort_root(cohort_id)
            row["cohort_root"] = roots[cohort_id]
        if spec.shown_prices:
            row["shown_prices"] = _shown_prices(row, shown)
        if spec.page_ranks:
            if row["run_id"] not in ranks:
                ranks[row["run_id"]] = _page_ranks(row["run_id"])
            key = (row.get("cohort_id"), row["competitor"])
            rank, reason, letters = ranks[row["run_id"]].get(key, (None, None, None))
            row["rank"], row["unranked_reason"] = rank, reason
            if spec.page_letters:
                late["group_letters"] = letters
        if spec.sample_markets:
            late["sample"] = _sample_markets(row)
        yield row | late


def _page_ranks(
    run_id: int,
) -> dict[tuple[int | None, str], tuple[int | None, str | None, str | None]]:
    """(cohort id or None, competitor slug) -> (the rank the pages show, why it has none, its
    group letters) for every row of one run, each group ranked and lettered as its leaderboard
    page does it. One query per run."""
    run = ScoreRun.objects.defer("details").get(pk=run_id)
    slices = board_details([run_id])  # each group's, not the run's every table
    groups: dict[int | None, list[LeaderboardRow]] = {}
    for r in LeaderboardRow.objects.filter(run_id=run_id).select_related("competitor"):
        groups.setdefault(r.cohort_id, []).append(r)
    out: dict[tuple[int | None, str], tuple[int | None, str | None, str | None]] = {}
    for cohort_id, rows_ in groups.items():
        group = "all" if cohort_id is None else str(cohort_id)
        details = slices.get((run_id, cohort_id), RunDetails())
        board = standings.build(run, rows_, group=group, details=details)
        for st in board.scored + board.unscored:
            out[(cohort_id, st.row.competitor.slug)] = (
                st.rank,
                st.reason or None,
                st.letters or None,
            )
    return out


def _sample_markets(row: dict[str, Any]) -> list[dict[str, Any]]:
    """A universe's forecast sample as the questions it asked: per market, in sample order, its
    outcomes, the prices the universe showed and its resolution (two queries per universe)."""
    ids = [m for m in row.get("forecast_sample") or [] if isinstance(m, int)]
    items = (
        Universe.objects.filter(cohort_id=row["cohort_id"], week=row["week"])
        .values_list("markets", flat=True)
        .first()
    )
    shown = {
        item.get("market_id"): item.get("prices") for item in items or [] if isinstance(item, dict)
    }
    markets = {
        pk: (outcomes, status, resolved, resolved_at, recorded_at)
        for pk, outcomes, status, resolved, resolved_at, recorded_at in Market.objects.filter(
            pk__in=ids
        ).values_list(
            "pk", "outcomes", "status", "resolved_outcome", "resolved_at", "resolution_recorded_at"
        )
    }
    return [
        {
            "market_id": m,
            "market_outcomes": markets[m][0],
            "shown_prices": shown.get(m),
            "market_status": markets[m][1],
            "resolved_outcome": markets[m][2],
            "resolved_at": _plain(markets[m][3]),
            "resolution_recorded_at": _plain(markets[m][4]),
        }
        for m in ids
        if m in markets
    ]


def _shown_prices(row: dict[str, Any], cache: dict[tuple[int, int], dict]) -> Any:
    """The prices the row's universe showed for the outcomes of its market, when it has more
    than two outcomes (binary rows: null). One query per cohort-week, kept for the export."""
    if len(row.get("market_outcomes") or ()) <= 2:
        return None
    key = (row["cohort_id"], row["week"])
    if key not in cache:
        items = (
            Universe.objects.filter(cohort_id=key[0], week=key[1])
            .values_list("markets", flat=True)
            .first()
        )
        cache[key] = {
            item.get("market_id"): item.get("prices")
            for item in items or []
            if isinstance(item, dict)
        }
    return cache[key].get(row["market_id"])


def _describe(b: Bounds) -> str:
    parts = []
    if b.scope is not None:
        parts.append(f"scope {b.scope}")
    if b.cohort is not None:
        parts.append(f"cohort {b.cohort}")
    return " in " + ", ".join(parts) if parts else ""


def empty_note(what: str, b: Bounds) -> str | None:
    """None when the export has rows; otherwise one line saying why it has none.

    Costs one LIMIT 1 query when there are rows, two more (the span outside the window) when not.
    """
    spec = _spec(what)
    if _windowed(spec, b).exists():
        return None
    where = _describe(b)
    span = _scoped(spec, b).aggregate(first=Min(spec.date_field), last=Max(spec.date_field))
    if span["first"] is None:
        return f"no {what}{where} yet"
    since = f"{b.since:%Y-%m-%d}" if b.since else "the start"
    until = f"{b.until - timedelta(days=1):%Y-%m-%d}" if b.until else "the end"
    return (
        f"no {what}{where} from {since} to {until} ({spec.date_column}); there are some from "
        f"{span['first']:%Y-%m-%d} to {span['last']:%Y-%m-%d}: choose since/until to reach them"
    )


def _plain(v: Any) -> Any:
    if isinstance(v, Decimal):
        # Money fields have two places; shares and prices keep theirs; never "0E-10".
        return number_text(v)
    if isinstance(v, datetime):
        return v.isoformat()
    return v


class _Line:
    """csv.writer target that hands back each written line instead of storing it."""

    def write(self, value: str) -> str:
        return value


def stream(what: str, fmt: str, b: Bounds, note: str | None = None) -> Iterator[str]:
    """The export serialised as text chunks (CSV with a header row, or one JSON document).

    `note` (from `empty_note`) goes into the JSON head; CSV callers carry it beside the body.
    """
    if fmt not in FORMATS:
        raise ExportError(f"format must be one of {', '.join(FORMATS)}")
    if what == SEALS:
        if fmt != "json":
            raise ExportError("the seals export is JSON only (a document of chains, not rows)")
        # Whole cohorts (a chain cut short cannot be verified): the window bounds week_start
        # and applies only without a cohort; the row cap counts cohorts.
        whole = b.cohort is not None
        return seal_verify.export_chunks(
            b.cohort,
            None if whole else b.since,
            None if whole else b.until,
            b.limit,
            kind=b.scope,
        )
    source = rows(what, b)  # validates `what` before the first chunk is produced
    if fmt == "csv":
        return _csv(what, source)
    return _json(what, b, source, note)


def _csv(what: str, source: Iterator[dict]) -> Iterator[str]:
    writer = csv.writer(_Line())
    spec = SPECS[what]
    yield writer.writerow(spec.header)
    for row in source:
        yield writer.writerow([csv_cell(v) for v in row.values()])


def _json(what: str, b: Bounds, source: Iterator[dict], note: str | None) -> Iterator[str]:
    head = {
        "export": what,
        "scope": b.scope,
        "cohort": b.cohort,
        "date_column": SPECS[what].date_column,
        "since": b.since.isoformat() if b.since else None,
        "until_exclusive": b.until.isoformat() if b.until else None,
        "window": b.window,
        "limit": b.limit,
        "money": "strings with two decimals",
    }
    if note:
        head["note"] = note
    yield json.dumps(head)[:-1] + ', "rows": ['
    n = 0
    for row in source:
        yield ("\n" if n == 0 else ",\n") + json_row(row)
        n += 1
    # Known only at the end: whether the cap cut the export short.
    yield f'\n], "row_cap_reached": {json.dumps(n >= b.limit)}}}\n'


def admit(request: HttpRequest, what: str, fmt: str) -> gate.Admission | None:
    """The gate's decision for `/exports/<what>.<fmt>` (web/exports/gate.py): bounds refused (a
    400 to come), a kept copy (no slot needed), a slot taken, or None: answer the 429. Reads
    the cache only, never the database or the session, so a refusal costs next to nothing."""
    try:
        b = bounds(
            request.GET.get("since"),
            request.GET.get("until"),
            request.GET.get("limit"),
            request.GET.get("cohort"),
            scope=request.GET.get("scope"),
        )
    except ExportError as exc:
        return gate.Admission(error=str(exc))
    key, _ = gate.cache_key(f"{what}.{fmt}|{b}")
    kept = gate.cached(key)
    if kept is not None:
        return gate.Admission(b, key=key, kept=kept)
    client = gate.client_of(request)
    if not gate.SLOTS.take(client):
        return None
    return gate.Admission(b, key=key, client=client)


@require_safe
def export_view(request: HttpRequest, what: str, fmt: str) -> HttpResponse:
    """`/exports/<what>.<csv|json>?since=&until=&scope=&cohort=&limit=` (see /exports/)."""
    if what not in WHATS or fmt not in FORMATS:
        raise Http404("no such export")
    # Normally admitted by web/exports/door.py before any other middleware (which settles it);
    # without that middleware (a stack that lacks it) the view admits and settles itself.
    given = getattr(request, "export_admission", None)
    admission = given or admit(request, what, fmt)
    if admission is None:
        return gate.busy()
    try:
        return _respond(request, what, fmt, admission)
    finally:
        if given is None:
            admission.settle()


def _respond(
    request: HttpRequest, what: str, fmt: str, admission: gate.Admission
) -> HttpResponse:
    if admission.error is not None:
        return params.bad_request(request, admission.error)
    b = admission.bounds
    content_type = "text/csv; charset=utf-8" if fmt == "csv" else "application/json"
    if admission.kept is not None:
        headers, content = admission.kept
        response = HttpResponse(content, content_type=content_type)
        for name, value in headers.items():
            response[name] = value
        response["X-Cache"] = "hit"
        return response
    try:
        note = None if what == SEALS else empty_note(what, b)
        body = stream(what, fmt, b, note)
    except ExportError as exc:
        return params.bad_request(request, str(exc))  # the slot is freed by settle()
    headers = {
        "Content-Disposition": f'attachment; filename="arena-{what}.{fmt}"',
        "X-Export-Limit": str(b.limit),
        "X-Export-Window": b.window,
    }
    if note:
        headers["X-Export-Note"] = note
    slots = admission.slots
    response = StreamingHttpResponse(
        gate.Gated(body, slots, admission.hand_over(), admission.key, headers),
        content_type=content_type,
    )
    for name, value in headers.items():
        response[name] = value
    return response
