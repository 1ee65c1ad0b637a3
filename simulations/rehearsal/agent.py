"""The rehearsal's outside agent: a team's agent entered and run the way a team runs one.

Staff enter it through the admin, as the product has them do (docs/enter-your-agent.md): the
competitor of kind "outside agent" with the Ed25519 public key its team sent, then an API token
issued on the token form and read once from the page that shows it. The agent is the reference
agent, docs/examples/outside_agent.py, run as its own isolated process (python -I, in the run's
directory: nothing of the arena importable) with --follow: it sleeps until each Sunday on the
server's clock, polls until the week's universe is frozen, signs and submits.

Why the rehearsal widens the submission window (ARENA_REHEARSAL_SUBMISSION_WINDOW_MINUTES,
refused outside rehearsal scope; the methodology's constant and every sealed version stay as
they are): the methodology's 30 arena minutes are 0.36 s of wall time at the default rate
5040, and the agent has to see the freeze, read its week and have its POST received inside it.
Measured on the two-week rehearsal with faults on PostgreSQL + Redis (2 cores): at load 5-6 the
accepted submissions arrived 12 and 21 arena minutes after their freezes; at load 12, with the
pg-kill fault answering one GET 500 in the second week, two POSTs arrived 30.2 and 31.6 minutes
after the freeze and were refused 410, leaving the week HOLD "no submission". A window that
holds only on an idle machine is a flaky check; WINDOW_MINUTES (2.9 s of wall at rate 5040)
is far beyond any delay measured, and still ends long before the next decide catch-up round
seals the week. Trades after the frozen-price window are priced (or refused) as any late
decision's are, which the "fresh prices" check covers. A week without a valid submission is
still recorded as HOLD "no submission" by the weekly run, and the check below fails it.
"""

from __future__ import annotations

import base64
import re
import sys
from dataclasses import dataclass, field
from html.parser import HTMLParser
from pathlib import Path
from typing import Any

import requests
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey
from cryptography.hazmat.primitives.serialization import (
    Encoding,
    NoEncryption,
    PrivateFormat,
    PublicFormat,
)
from django.conf import settings

from agents import tokens
from agents.models import AgentToken, Competitor
from cohorts.decisions.outside import NO_SUBMISSION
from cohorts.models import AgentSubmission, Decision, Entry, Universe, WeekSeal
from scoring.models import LeaderboardRow, ScoreRun
from simulations.rehearsal.checks import Check, reached
from simulations.rehearsal.http import HTTP_TIMEOUT, StaffSession
from simulations.rehearsal.procs import Child, RehearsalError

SLUG = "rehearsal-outside-agent"  # SLUG_PREFIX: the run hands it back inactive at the end
WINDOW_MINUTES = 240  # the rehearsal's submission window, arena minutes (see above)
POLL_SECONDS = 0.02  # wall seconds between two looks while a week is not open yet
# The polls of a Sunday (and the retries of a fault) must never meet a 429, whose Retry-After
# of 60 wall seconds would be half an arena week.
RATE_PER_MINUTE = 3000
AGENT = Path(settings.BASE_DIR) / "docs" / "examples" / "outside_agent.py"
ISSUED = re.compile(r'<code id="issued-token">([^<]+)</code>')
ERRORS = re.compile(r'<ul class="errorlist[^"]*"[^>]*>(.*?)</ul>', re.S)


class _Form(HTMLParser):
    """The fields an admin form would post as a browser sends it: inputs with their values
    (checkboxes only when checked), each select's chosen option, textareas' text."""

    def __init__(self) -> None:
        super().__init__()
        self.fields: dict[str, str] = {}
        self._select: str | None = None
        self._first: str | None = None
        self._textarea: str | None = None

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        a = {k: v or "" for k, v in attrs}
        name = a.get("name", "")
        if tag == "input" and name and a.get("type", "text") not in ("submit", "button", "file"):
            if a.get("type") not in ("checkbox", "radio") or "checked" in a:
                self.fields[name] = a.get("value", "on" if a.get("type") == "checkbox" else "")
        elif tag == "select" and name:
            self._select, self._first = name, None
        elif tag == "option" and self._select:
            if self._first is None:
                self._first = a.get("value", "")
            if "selected" in a:
                self.fields[self._select] = a.get("value", "")
        elif tag == "textarea" and name:
            self._textarea = name
            self.fields[name] = ""

    def handle_endtag(self, tag: str) -> None:
        if tag == "select" and self._select:
            self.fields.setdefault(self._select, self._first or "")
            self._select = None
        elif tag == "textarea":
            self._textarea = None

    def handle_data(self, data: str) -> None:
        if self._textarea:
            # The browser drops a textarea's first newline (HTML's parsing rule).
            text = self.fields[self._textarea]
            self.fields[self._textarea] = text + (data if text else data.removeprefix("\n"))


def fill(staff: StaffSession, path: str, values: dict[str, str | None]) -> requests.Response:
    """Staff open an admin form, change `values` (None: untick or empty), and save it."""
    page = staff.session.get(staff.base + path, timeout=HTTP_TIMEOUT)
    page.raise_for_status()
    form = _Form()
    form.feed(page.text)
    data = {**form.fields, **{k: v for k, v in values.items() if v is not None}}
    for name in [k for k, v in values.items() if v is None]:
        data.pop(name, None)
    data["_save"] = "Save"
    response = staff.session.post(staff.base + path, data=data, timeout=HTTP_TIMEOUT,
                                  headers={"Referer": staff.base + path})  # fmt: skip
    problems = [re.sub(r"<[^>]+>", " ", e).strip() for e in ERRORS.findall(response.text)]
    if response.status_code != 200 or problems:
        raise RehearsalError(f"the admin refused {path}: HTTP {response.status_code} {problems}")
    return response


@dataclass
class OutsideAgent:
    """One outside agent of a rehearsal: entered by staff, run as its own process."""

    base_url: str
    directory: Path
    rate: float
    slug: str = SLUG
    token_prefix: str = ""
    restarts: int = 0
    notes: list[str] = field(default_factory=list)
    child: Child | None = None

    def enter(self, staff: StaffSession) -> str:
        """Staff enter the agent with its team's public key and issue its token (the token,
        shown once); its private key is written to the run's directory for the agent alone."""
        key = Ed25519PrivateKey.generate()
        public = key.public_key().public_bytes(Encoding.Raw, PublicFormat.Raw)
        key_path = self.directory / "outside-agent-key.pem"
        key_path.touch(mode=0o600)
        key_path.write_bytes(key.private_bytes(Encoding.PEM, PrivateFormat.PKCS8, NoEncryption()))
        values: dict[str, str | None] = {
            "slug": self.slug, "display_name": "Outside agent (rehearsal)",
            "kind": Competitor.Kind.OUTSIDE, "active": "on", "simulated": None,
            "team": "Rehearsal team", "contact": "rehearsal@example.org",
            "link": "https://example.org/outside_agent.py", "agent_version": "reference-1",
            "public_key": base64.b64encode(public).decode("ascii"), "endpoint": "",
        }  # fmt: skip
        existing = Competitor.objects.filter(slug=self.slug).first()  # an earlier rehearsal's
        path = (f"/admin/agents/competitor/{existing.pk}/change/" if existing
                else "/admin/agents/competitor/add/")  # fmt: skip
        fill(staff, path, values)
        competitor = Competitor.objects.get(slug=self.slug, kind=Competitor.Kind.OUTSIDE)
        issued = fill(staff, "/admin/agents/agenttoken/add/", {
            "competitor": str(competitor.pk), "label": "rehearsal",
            "rate_per_minute": str(RATE_PER_MINUTE),
        })  # fmt: skip
        found = ISSUED.search(issued.text)
        if not found:
            raise RehearsalError("the token form did not show the issued token")
        token = found.group(1).strip()
        self.token_prefix = token[: len(tokens.PREFIX) + 8]  # its 32 random bytes may hold "_"
        self.key_path = key_path
        return token

    def start(self, token: str) -> None:
        argv = [sys.executable, "-I", str(AGENT), "--url", self.base_url, "--key",
                str(self.key_path), "--follow", "--poll", str(POLL_SECONDS), "--clock-rate",
                repr(self.rate), "--backoff", "0.05", "--tries", "6", "--timeout", "5"]  # fmt: skip
        env = {"PATH": "/usr/bin:/bin", "ARENA_TOKEN": token, "PYTHONUNBUFFERED": "1"}
        self.child = Child("outside-agent", argv, env, self.directory, self.directory)

    def watch(self) -> str | None:
        """Restart the agent if it exited, as its team's supervisor would; a note if so."""
        if self.child is None or self.child.alive():
            return None
        self.restarts += 1
        code = self.child.popen.returncode
        self.child.restart()
        note = f"the outside agent exited ({code}) and was restarted; its log: {self.child.log_path}"
        self.notes.append(note)
        return note

    def stop(self) -> None:
        """Stop the agent, and revoke its token: it lives as long as the run."""
        if self.child is not None:
            self.child.stop()
        for row in AgentToken.objects.filter(competitor__slug=self.slug, revoked_at__isnull=True):
            tokens.revoke(row)

    def record(self) -> dict[str, Any]:
        return {"slug": self.slug, "token_prefix": self.token_prefix, "restarts": self.restarts,
                "log": str(self.child.log_path) if self.child else "", "notes": self.notes,
                "window_minutes": WINDOW_MINUTES,
                **margins(self.slug)}  # fmt: skip


# The submissions that decide a week: accepted, or invalid a second time and so held. A bet
# that arrives after the frozen-price window can meet stale quotes and be refused twice (a
# saturated rehearsal marks prices late): the week is still the agent's own decision.
DECIDING = (AgentSubmission.Outcome.ACCEPTED, AgentSubmission.Outcome.FINAL_INVALID)


def margins(slug: str) -> dict[str, Any]:
    """How long after each week's freeze its deciding submission arrived (arena minutes)."""
    out = []
    deciding = AgentSubmission.objects.filter(
        competitor__slug=slug, decision__isnull=False, outcome__in=DECIDING
    ).select_related("entry")
    for sub in deciding:
        universe = Universe.objects.filter(cohort_id=sub.entry.cohort_id, week=sub.week).first()
        if universe is not None:
            out.append(round((sub.received_at - universe.frozen_at).total_seconds() / 60, 2))
    return {"minutes_after_freeze": sorted(out)}


def check_outside_agent(run: Any) -> Check:
    """Every week the agent was entered in: its own signed submission decided it (never HOLD
    "no submission"), the week is sealed, its decision page shows the verified submission,
    its competitor page lists the entry whose page lists the decision, and the last score run ranks it with the others."""
    problems, decided = [], 0
    entries = Entry.objects.filter(cohort_id__in=run.cohort_ids, competitor__slug=SLUG)
    by_cohort = {e.cohort_id: e for e in entries}
    sealed = set(WeekSeal.objects.filter(cohort_id__in=run.cohort_ids)
                 .values_list("cohort_id", "week"))  # fmt: skip
    competitor_page = _page(run.base_url, f"/competitors/{SLUG}/")
    for cohort, week in reached(run):
        entry = by_cohort.get(cohort.pk)
        where = f"cohort {cohort.pk} week {week}"
        if entry is None:
            problems.append(f"{where}: no entry of the outside agent")
            continue
        decision = Decision.objects.filter(entry=entry, week=week).first()
        if decision is None or decision.status != Decision.Status.DONE:
            problems.append(f"{where}: {decision.status if decision else 'no decision'}")
            continue
        if decision.hold_reason == NO_SUBMISSION:
            problems.append(f"{where}: HOLD {NO_SUBMISSION} (decision {decision.pk})")
            continue
        subs = list(decision.submissions.all())
        if not subs or not all(s.signature and s.signature_verified for s in subs):
            problems.append(f"{where}: submissions not all signed and verified")
        if not any(s.outcome in DECIDING for s in subs):
            problems.append(f"{where}: no deciding submission on decision {decision.pk}'s record")
        if (cohort.pk, week) not in sealed:
            problems.append(f"{where}: not sealed")
        page = _page(run.base_url, f"/decisions/{decision.pk}/")
        if "verified with key" not in page:
            problems.append(f"{where}: decision page {decision.pk} shows no verified submission")
        entry_path = f"/cohorts/{cohort.pk}/entries/{SLUG}/"
        if entry_path not in competitor_page:
            problems.append(f"{where}: the entry is not on the competitor page")
        elif f"/decisions/{decision.pk}/" not in _page(run.base_url, entry_path):
            problems.append(f"{where}: decision {decision.pk} not on its entry's page")
        decided += 1
    latest = ScoreRun.objects.filter(scope=ScoreRun.Scope.REHEARSAL).order_by("-pk").first()
    scored = latest is not None and LeaderboardRow.objects.filter(
        run=latest, competitor__slug=SLUG
    ).exists()
    if not scored:
        problems.append("the latest rehearsal score run has no row for the outside agent")
    found = margins(SLUG)["minutes_after_freeze"]
    detail = (f"{decided} week(s) decided by its own signed submission, sealed, on its pages"
              f"{', scored' if scored else ''}; received {found} arena min after the freeze "
              f"(rehearsal window {WINDOW_MINUTES} min)")  # fmt: skip
    if problems or not decided:
        said = "; ".join(problems[:5] or ["no week reached"])
        return Check("outside agent", False, f"{said} ({detail})")
    return Check("outside agent", True, detail)


def _page(base_url: str, path: str) -> str:
    try:
        response = requests.get(base_url + path, timeout=HTTP_TIMEOUT)
    except requests.RequestException as exc:
        return f"no answer: {exc}"
    return response.text if response.status_code == 200 else f"HTTP {response.status_code}"
