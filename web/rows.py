"""Table rows as the pages show them, computed once in Python.

A Django template pays for every variable lookup, filter, tag and `{% url %}` of a row, and a
cold render (the first read after a write) is mostly that work: a cohort page's universe,
decision and entry tables were over half of its render. Each row here carries its text and
links ready; the templates only print them, with auto-escaping still on (plain strings are
escaped as they are printed; the few marks that are HTML come from the same simple tags the
templates use, which build them with format_html or from constant markup).
"""

from __future__ import annotations

import functools
import re
from collections.abc import Iterable
from dataclasses import dataclass

from django.urls import reverse
from django.utils.formats import localize
from django.utils.safestring import SafeString
from django.utils.text import Truncator

from cohorts.models import Decision
from web.decision_words import action_label, decision_link_text
from web.standings import coverage_text, row_coverage, row_methodology
from web.templatetags.arena import (
    ci,
    frozen,
    money,
    num,
    pct,
    ratio_pct,
    signed,
    simulated_badge,
    simulated_mark,
    swatch,
    version,
)

_SENTINEL = 987654321
_SLUG = re.compile(r"[-a-zA-Z0-9_]+")  # what the <slug:...> converter accepts


@functools.cache
def _parts(name: str, n: int) -> tuple[str, ...]:
    """The text of route `name`'s URL around its `n` arguments, reversing once: for <int:...>
    and <slug:...> arguments every URL of the route is that text around them."""
    return tuple(reverse(name, args=[_SENTINEL] * n).split(str(_SENTINEL)))


def _url(name: str, *args: str) -> str:
    parts = _parts(name, len(args))
    return parts[0] + "".join(arg + part for arg, part in zip(args, parts[1:], strict=True))


def market_url(pk: int) -> str:
    return _url("market-detail", str(int(pk)))


def decision_url(pk: int) -> str:
    return _url("decision-detail", str(int(pk)))


def competitor_url(slug: str) -> str:
    if not _SLUG.fullmatch(slug):  # reverse() refuses it as the route would
        return reverse("competitor-detail", args=[slug])
    return _url("competitor-detail", slug)


def entry_url(cohort_id: int, slug: str) -> str:
    if not _SLUG.fullmatch(slug):
        return reverse("entry-detail", args=[cohort_id, slug])
    return _url("entry-detail", str(int(cohort_id)), slug)


def _name(display_name: str, replicate: int) -> str:
    return f"{display_name} #{replicate}" if replicate > 1 else display_name


class Cells:
    """A row whose cells a template reads by name. Django's template lookup tries `row[name]`
    before `row.name`, and on a plain dataclass that raises TypeError, which costs more than
    the lookup: a cohort page reads some 500 cells, 0.25 ms of its 2.4 ms of rendering."""

    __slots__ = ()

    def __getitem__(self, name: str) -> object:
        return getattr(self, name)


@dataclass(frozen=True)
class EntryRow(Cells):
    """One row of a cohort's entry table."""

    swatch: SafeString
    href: str
    name: str
    simulated: SafeString
    corrected: bool
    value: str
    at_cost: bool
    return_text: str
    return_class: str  # "up", "down" or ""
    cash: str
    invested: str
    n_trades: int
    n_open: int
    n_resolved: int


def entry_rows(cohort_id: int, entries: Iterable) -> list[EntryRow]:
    """`entries` as selectors.entry_rows decorates them (value, return_pct, invested, counts),
    each with .corrected."""
    out = []
    for e in entries:
        c = e.competitor
        href = entry_url(cohort_id, c.slug)
        if e.replicate > 1:
            href += f"?replicate={e.replicate}"
        r = e.return_pct
        out.append(
            EntryRow(
                swatch=swatch(c),
                href=href,
                name=_name(c.display_name, e.replicate),
                simulated=simulated_badge(c),
                corrected=bool(getattr(e, "corrected", False)),
                value=money(e.value),
                at_cost=bool(e.value_at_cost),
                return_text=signed(r, 2),
                return_class="up" if r > 0 else "down" if r < 0 else "",
                cash=money(e.cash),
                invested=money(e.invested),
                n_trades=e.n_trades,
                n_open=e.n_open,
                n_resolved=e.n_resolved,
            )
        )
    return out


@dataclass(frozen=True)
class DecisionRow(Cells):
    """One row of a cohort's recent decisions."""

    week: int
    competitor: str
    simulated: SafeString
    href: str
    status: str
    link_text: str
    action: str
    n_trades: int
    reasoning: str


def decision_rows(decisions: Iterable[dict]) -> list[DecisionRow]:
    """Decisions as selectors.recent_decisions reads them."""
    return [
        DecisionRow(
            week=d["week"],
            competitor=_name(d["entry__competitor__display_name"], d["entry__replicate"]),
            simulated=simulated_mark(d["entry__competitor__simulated"]),
            href=decision_url(d["pk"]),
            status=str(_DECISION_STATUS.get(d["status"], d["status"])),
            link_text=decision_link_text(
                d["week"],
                d["action"],
                d["hold_reason"],
                str(_DECISION_STATUS.get(d["status"], d["status"])),
            ),
            action=action_label(d["action"], d["hold_reason"]),
            n_trades=d["n_trades"],
            # A forced HOLD has no reasoning of its own: the reason it was forced stands in.
            reasoning=snippet(
                str(d["reasoning"] or (f"Forced: {d['hold_reason']}" if d["hold_reason"] else "")),
                REASONING_CHARS,
            ),
        )
        for d in decisions
    ]


_DECISION_STATUS = dict(Decision.Status.choices)
REASONING_CHARS = 160


def snippet(text: str, n: int) -> str:
    """Truncator(text).chars(n): at most n characters, the last an ellipsis when cut. Plain
    ASCII (most reasoning) has no combining characters for Truncator to skip, so it is cut
    directly: Truncator walks the text character by character, 0.3 ms for a page's twenty."""
    if text.isascii():
        return text if len(text) <= n else text[: n - 1] + "…"
    return Truncator(text).chars(n)


@dataclass(frozen=True)
class UniverseRow(Cells):
    """One market of a frozen universe: its question, its page (when it has one), the prices
    shown to the entries."""

    question: str
    href: str | None
    prices: str


def universe_rows(markets: Iterable[dict]) -> list[UniverseRow]:
    out = []
    for m in markets:
        prices = m.get("prices") or {}
        market_id = m.get("market_id")
        out.append(
            UniverseRow(
                question=str(m.get("question", "")),
                href=market_url(market_id) if market_id else None,
                prices=" · ".join(f"{k} {localize(v)}" for k, v in prices.items()),
            )
        )
    return out


@dataclass(frozen=True)
class LeaderRow(Cells):
    """One ranked row of the home leaderboard, every cell's text ready (standings.Board gives
    the ranks, group letters and decimals)."""

    css: str  # the row's classes: is-provisional
    rank: object
    letters: str
    letters_title: str
    swatch: SafeString
    href: str
    name: str
    provisional: bool
    provisional_title: str
    method: str  # the scoring methodology's version label, "" when the row does not say
    method_title: str
    baseline: bool
    simulated: SafeString
    skill: str
    skill_ci: str
    brier: str
    brier_ci: str
    log_score: str
    ret: str
    ret_ci: str
    pnl: str
    win_rate: str
    n_resolved: object
    n_forecasts: object
    cost: str
    coverage: str = ""  # "scored / asked" (standings.coverage_text)
    coverage_title: str = ""


def leader_rows(board, scope: str, sort: str) -> list[LeaderRow]:
    """The scored standings of `board` (web/standings.py) as the home table shows them."""
    places = board.places
    out = []
    for s in board.scored:
        row = s.row  # its fields directly, not through Standing.__getattr__
        c = row.competitor
        css = "is-provisional" if row.provisional else ""
        letters_title = ""
        if s.letters:
            n = len(s.differs_from)
            letters_title = (
                f"significantly different from the {n} ranked row{'s' if n > 1 else ''} "
                "with no letter in common; not from those sharing a letter"
                if n
                else "not significantly different from any ranked row"
            )
        provisional_title = f"{row.n_resolved} resolved"
        if row.required_n:
            provisional_title += (
                f" of the {row.required_n} needed to detect a "
                f"{frozen('provisional_brier_delta')} Brier edge"
            )
        method = row_methodology(row)
        method_label = version(method.version) if method and method.version else ""
        method_title = f"Scored with methodology {method_label}"
        if method and method.cohort_versions:
            method_title += "; cohort rules frozen under v" + ", v".join(
                str(v) for v in method.cohort_versions
            )
        baseline = c.kind == "baseline"
        coverage, coverage_title = coverage_text(row_coverage(row))
        out.append(
            LeaderRow(
                css=css,
                rank=s.rank,
                letters=s.letters,
                letters_title=letters_title,
                swatch=swatch(c),
                href=competitor_url(c.slug) + f"?scope={scope}",
                name=c.display_name,
                provisional=bool(row.provisional),
                provisional_title=provisional_title,
                method=method_label,
                method_title=method_title,
                baseline=baseline,
                simulated=simulated_badge(c),
                skill=signed(row.skill_vs_market, places["skill"]),
                skill_ci=ci(row.skill_lo, row.skill_hi, places["skill"]),
                brier=num(row.brier, places["brier"]),
                brier_ci=ci(row.brier_lo, row.brier_hi, places["brier"]),
                log_score=num(row.log_score, places["log_score"]),
                ret=pct(row.return_pct, places["return"]),
                ret_ci=ci(row.return_lo, row.return_hi, places["return"]),
                pnl=money(row.pnl),
                win_rate=ratio_pct(row.win_rate),
                n_resolved=row.n_resolved,
                n_forecasts=row.n_forecasts,
                cost="" if baseline else money(row.cost_usd),
                coverage=coverage,
                coverage_title=coverage_title,
            )
        )
    return out
