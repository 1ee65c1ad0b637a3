"""One log format: each record is one key=value line naming what it concerns (cohort, week,
competitor, decision) and why, whichever code logged it inside the work."""

from __future__ import annotations

import logging
import re
import socket

import pytest

from arena.logfmt import KeyValueFormatter, quote
from cohorts.decisions.run import decide, run_decision
from cohorts.models import Trade
from cohorts.seals.models import WeekSeal
from core import clock, logcontext
from core.jobs import reap_stale_jobs
from core.models import JobRun
from markets.resolution import record_resolution
from tests.agents.helpers import (
    AT,
    baseline_competitor,
    llm_competitor,
    make_cohort,
    make_markets,
)


class Lines(logging.Handler):
    """Formats as the console handler does, at the moment of logging (the context is live)."""

    def __init__(self) -> None:
        super().__init__()
        self.setFormatter(KeyValueFormatter())
        self.lines: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.lines.append(self.format(record))


@pytest.fixture
def lines():
    handler = Lines()
    root = logging.getLogger()
    level = root.level
    root.addHandler(handler)
    root.setLevel(logging.INFO)
    yield handler.lines
    root.removeHandler(handler)
    root.setLevel(level)


def test_a_line_carries_the_bound_work_and_stays_one_line(lines):
    log = logging.getLogger("arena.test")
    with logcontext.bound(cohort=3, week=2, competitor="gpt-5"):
        with logcontext.bound(decision=41):
            log.warning('model said "no"\nthen = nothing', extra={"reason": "HTTP 404: gone"})
        log.info("after")
    log.info("outside")

    first, after, outside = lines
    assert first.startswith("ts=") and "\n" not in first
    assert " level=WARNING role=" in first and " logger=arena.test " in first
    assert ' cohort=3 week=2 competitor=gpt-5 decision=41 reason="HTTP 404: gone" ' in first
    assert first.endswith(' msg="model said \\"no\\"\\nthen = nothing"')
    assert " cohort=3 week=2 competitor=gpt-5 msg=after" in after and "decision=" not in after
    assert "cohort=" not in outside


def test_quoting():
    assert quote("plain") == "plain"
    assert quote("") == '""'
    assert quote("a b") == '"a b"'
    assert quote("k=v") == '"k=v"'
    assert quote('x"\\\ny') == '"x\\"\\\\\\ny"'


@pytest.mark.django_db
def test_a_skipped_decision_logs_who_and_why(lines, settings):
    settings.ARENA_LLM_API_KEY = ""  # the default endpoint without a key: skipped
    make_markets(3)
    cohort = make_cohort([llm_competitor(None, slug="keyless")])
    entry = cohort.entries.get()

    decision = run_decision(entry.pk, 1, AT)

    (finished,) = [line for line in lines if 'msg="decision finished"' in line]
    assert (
        f" cohort={cohort.pk} entry={entry.pk} week=1 competitor=keyless decision={decision.pk}"
        " status=skipped "
        'reason="no API key: set OPENROUTER_API_KEY (or ARENA_LLM_API_KEY)" '
    ) in finished


@pytest.mark.django_db
def test_a_decision_task_and_its_decision_lines_share_the_task_id(lines, settings):
    from cohorts.decisions.tasks import run_decision as run_decision_task

    settings.ARENA_LLM_API_KEY = ""
    make_markets(3)
    cohort = make_cohort([llm_competitor(None, slug="keyless")])
    entry = cohort.entries.get()

    result = run_decision_task.apply(args=[entry.pk, 1, AT.isoformat()], task_id="t-42")

    assert result.successful(), result.traceback
    (finished,) = [line for line in lines if 'msg="decision finished"' in line]
    assert finished.split(" logger=")[1].startswith("cohorts.decisions.run task=t-42 worker=")
    (succeeded,) = [line for line in lines if "succeeded in" in line]
    assert f" task=t-42 entry={entry.pk} week=1 msg=" in succeeded
    # One grep follows the decision: its lines and Celery's lines of its task.
    follow = f"entry={entry.pk} week=1 "
    assert follow in finished and follow in succeeded


def test_an_access_line_names_the_client_as_fields(lines):
    from gunicorn.glogging import SafeAtoms

    atoms = SafeAtoms({"h": "127.0.0.1", "{x-forwarded-for}i": "203.0.113.9", "m": "GET",
                       "U": "/decisions/7/", "q": "", "s": 200, "B": 512, "M": 12,
                       "{x-cache}o": "miss"})  # fmt: skip
    logging.getLogger("gunicorn.access").info("%(m)s %(U)s", atoms)
    (line,) = lines
    assert line.endswith(
        " client=127.0.0.1 forwarded_for=203.0.113.9 method=GET path=/decisions/7/ status=200"
        " bytes=512 duration_ms=12 cache=miss msg=request"
    ), line


def _fields(line: str) -> dict[str, str]:
    return {k: v.strip('"') for k, v in re.findall(r'(\w+)=("(?:[^"\\]|\\.)*"|\S*)', line)}


def _line(lines: list[str], logger: str, msg_start: str) -> dict[str, str]:
    (line,) = [
        line for line in lines
        if f" logger={logger} " in line and _fields(line)["msg"].startswith(msg_start)
    ]  # fmt: skip
    return _fields(line)


@pytest.mark.django_db
def test_cohort_seal_settlement_and_reaped_run_lines_carry_their_ids_as_fields(lines):
    """`grep cohort=12` or `grep market=88` finds these lines: each names its ids as fields, and
    its message starts with the same words whatever the ids (once "sealed cohort 12 week 1",
    "market 88 (resolved): ...", "job run 20 abandoned")."""
    make_markets(6)
    cohort = make_cohort([baseline_competitor(s) for s in ("favorite", "random", "market")])
    decide(cohort=cohort, week=1, at=AT, sync=True)
    seal = WeekSeal.objects.get(cohort=cohort)
    market = Trade.objects.filter(entry__cohort=cohort).first().position.market
    record_resolution(market, status="resolved", outcome="Yes", by="admin", reason="settles")
    dead_pid = 2**22 + 1  # above Linux's largest pid: no such process
    run = JobRun.objects.create(job="sync", started_at=clock.now(),
                                owner=f"{socket.gethostname()}:{dead_pid}:1")  # fmt: skip
    assert reap_stale_jobs() == 1

    opened = _line(lines, "cohorts.services", "opened ")
    assert opened["cohort"] == str(cohort.pk)
    sealed = _line(lines, "cohorts.seals.sealing", "week sealed: #1 (complete)")
    assert (sealed["cohort"], sealed["week"], sealed["seal"]) == (str(cohort.pk), "1", str(seal.pk))
    settled = _line(lines, "cohorts.settlement", "market resolved: settled ")
    assert settled["market"] == str(market.pk)
    reaped = _line(lines, "core.reaper", "job run abandoned")
    assert reaped["run"] == str(run.pk)
