"""The bodies of the busiest tables, built as escaped HTML in Python.

Django's template engine spends several microseconds on each value it prints (a lookup through
the context stack, the filters, autoescaping), and these tables print hundreds: the home
leaderboard's rows were 1.0 ms of a 1.7 ms render. Here every value goes through
`esc` (what `{{ }}` does: plain text escaped, SafeString such as a swatch kept), and the
markup is the template's, attribute for attribute.
"""

from __future__ import annotations

import html
from collections.abc import Iterable

from django.utils.safestring import SafeData, SafeString, mark_safe

from web.rows import DecisionRow, EntryRow, LeaderRow


def esc(value: object) -> str:
    """What `{{ value }}` prints: HTML already marked safe as it is, anything else escaped
    (html.escape, as Django's escape does, without making a SafeString of each value)."""
    if isinstance(value, SafeData):
        return str(value)
    return html.escape(str(value))


HEADLINE_SKILL = "brier_skill_vs_market"
HEADLINE_RETURN = "return_pct"


def _letters(r: LeaderRow) -> str:
    if not r.letters:
        return ""
    return (
        f' <span class="tier group-letters" title="{esc(r.letters_title)}">{esc(r.letters)}</span>'
    )


def _provisional(r: LeaderRow) -> str:
    if not r.provisional:
        return ""
    return f'<span class="badge badge-provisional" title="{esc(r.provisional_title)}">provisional</span>'


def _coverage(r: LeaderRow) -> str:
    """The row's coverage under its scored count: questions scored of those asked."""
    if not r.coverage:
        return ""
    return (
        f'<br><span class="coverage" title="{esc(r.coverage_title)}">'
        f"coverage {esc(r.coverage)}</span>"
    )


def leader_rows_html(rows: Iterable[LeaderRow], headline: str, run_method: str) -> SafeString:
    """The home leaderboard's <tr> rows; `run_method` is the run's methodology label (a row
    scored under another gets a badge naming its own)."""
    skill_head = " headline" if headline == HEADLINE_SKILL else ""
    return_head = " headline" if headline == HEADLINE_RETURN else ""
    out = []
    for r in rows:
        method = (
            f'<span class="badge badge-method" title="{esc(r.method_title)}">{esc(r.method)}</span>'
            if r.method and r.method != run_method
            else ""
        )
        baseline = '<span class="badge badge-baseline">baseline</span>' if r.baseline else ""
        cost = (
            '<span class="muted" title="Baselines call no model">none</span>'
            if r.baseline
            else esc(r.cost)
        )
        out.append(
            f'<tr class="{esc(r.css)}">'
            f'<td class="key rank" data-label="Rank">{esc(r.rank)}{_letters(r)}</td>'
            f'<th scope="row" class="key competitor" data-label="Competitor">{esc(r.swatch)}'
            f'<a href="{esc(r.href)}">{esc(r.name)}</a> {_provisional(r)} {method} {baseline}'
            f"{esc(r.simulated)}</th>"
            f'<td class="key num{skill_head}" data-label="Skill vs market">{esc(r.skill)} '
            f'<span class="ci">{esc(r.skill_ci)}</span></td>'
            f'<td class="num" data-label="Brier">{esc(r.brier)} <span class="ci">{esc(r.brier_ci)}</span></td>'
            f'<td class="num" data-label="Log score">{esc(r.log_score)}</td>'
            f'<td class="key num{return_head}" data-label="Return">{esc(r.ret)} '
            f'<span class="ci">{esc(r.ret_ci)}</span></td>'
            f'<td class="num" data-label="P/L">{esc(r.pnl)}</td>'
            f'<td class="num" data-label="Win rate">{esc(r.win_rate)}</td>'
            f'<td class="num" data-label="Scored, coverage">{esc(r.n_resolved)}'
            f'<span class="muted"> of {esc(r.n_forecasts)}</span>{_coverage(r)}</td>'
            f'<td class="num" data-label="Cost">{cost}</td></tr>'
        )
    return mark_safe("\n".join(out))  # noqa: S308  every value above is escaped


def standing_rows_html(rows: Iterable[LeaderRow], headline: str) -> SafeString:
    """The cohort page's standings rows: rank, competitor, skill, return, resolved."""
    skill_head = " headline" if headline == HEADLINE_SKILL else ""
    return_head = " headline" if headline == HEADLINE_RETURN else ""
    out = []
    for r in rows:
        out.append(
            f'<tr class="{esc(r.css)}">'
            f'<td class="key rank num" data-label="Rank">{esc(r.rank)}{_letters(r)}</td>'
            f'<th scope="row" class="key competitor" data-label="Competitor">{esc(r.swatch)}'
            f'<a href="{esc(r.href)}">{esc(r.name)}</a> {_provisional(r)}</th>'
            f'<td class="num{skill_head}" data-label="Skill vs market">{esc(r.skill)} '
            f'<span class="ci">{esc(r.skill_ci)}</span></td>'
            f'<td class="num{return_head}" data-label="Return">{esc(r.ret)} '
            f'<span class="ci">{esc(r.ret_ci)}</span></td>'
            f'<td class="num" data-label="Scored, coverage">{esc(r.n_resolved)}'
            f'<span class="muted"> of {esc(r.n_forecasts)}</span>{_coverage(r)}</td></tr>'
        )
    return mark_safe("\n".join(out))  # noqa: S308  every value above is escaped


CORRECTED = (
    ' <a class="corrected" href="#corrections-h" '
    'title="A staff correction moved this entry\'s numbers">corrected</a>'
)


def entry_rows_html(rows: Iterable[EntryRow]) -> SafeString:
    """The cohort page's entry table rows."""
    out = []
    for e in rows:
        corrected = CORRECTED if e.corrected else ""
        at_cost = ' <span class="muted">at cost</span>' if e.at_cost else ""
        out.append(
            f'<tr><th scope="row">{esc(e.swatch)}<a href="{esc(e.href)}">{esc(e.name)}</a> '
            f"{esc(e.simulated)}{corrected}</th>"
            f'<td class="num" data-label="Value">{esc(e.value)}{at_cost}</td>'
            f'<td class="num {esc(e.return_class)}" data-label="Return">{esc(e.return_text)}%</td>'
            f'<td class="num" data-label="Cash">{esc(e.cash)}</td>'
            f'<td class="num" data-label="Invested">{esc(e.invested)}</td>'
            f'<td class="num" data-label="Trades">{esc(e.n_trades)}</td>'
            f'<td class="num" data-label="Open">{esc(e.n_open)}</td>'
            f'<td class="num" data-label="Resolved">{esc(e.n_resolved)}</td></tr>'
        )
    return mark_safe("\n".join(out))  # noqa: S308  every value above is escaped


def decision_rows_html(rows: Iterable[DecisionRow]) -> SafeString:
    """The cohort page's recent decisions."""
    out = [
        f'<tr><td data-label="Week">{esc(d.week)}</td>'
        f'<td data-label="Competitor">{esc(d.competitor)} {esc(d.simulated)}</td>'
        f'<td data-label="Status">{esc(d.status)}</td>'
        f'<td data-label="Decision"><a href="{esc(d.href)}">{esc(d.link_text)}</a></td>'
        f'<td class="num" data-label="Trades">{esc(d.n_trades)}</td>'
        f'<td class="reasoning" data-label="Reasoning">{esc(d.reasoning)}</td></tr>'
        for d in rows
    ]
    return mark_safe("\n".join(out))  # noqa: S308  every value above is escaped
