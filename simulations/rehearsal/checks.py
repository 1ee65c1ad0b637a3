"""What a rehearsal checks at the end, each a pass or a fail with its detail, and the report.

- every (cohort, week, entry) the run reached has exactly one decision, final (done or held,
  failed or skipped with its reason): none missing, none doubled, none left claimed;
- every week reached is sealed; `arena verify` and `arena verify --published` (the /api/seals
  pages saved during the run) pass; `arena doctor` (the ledgers) passes;
- no trade executed at a price older than the methodology's universe_price_window_minutes;
- the published leaderboard equals the one recomputed from the exports (`arena verify --scores`);
- no 5xx in the web's access log (but /healthz's 503 while something is down, which is its job,
  and the 503 "send it again" of a request whose database connection the run cut);
- /healthz said "error" during each outage and at no other time;
- the checks the run's parts add (run.more_checks): the outside agent decided every week it was
  entered in (agent.py); the lineup review's catalog change, approved by staff, is the next
  cohort's release only (lineup.py).
The arena's own verbs are run as subprocesses with the children's environment, as an operator
would run them next to the arena.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from collections import Counter
from dataclasses import asdict, dataclass
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

from django.conf import settings
from django.db.models import Count

from agents.attempts import LOST, SENT
from cohorts.decisions.run import UNIVERSE_PRICE_WINDOW
from cohorts.models import Cohort, Decision, Entry, LLMCall, Position, Trade, Universe, WeekSeal
from markets.models import Market, ResolutionChange
from scoring.models import ScoreRun

# /healthz's broker state is at most FRESH_SECONDS (2 s) old, plus a check's wait: how late it
# may notice an outage's end.
HEALTH_LAG_SECONDS = 5.0
VERB_TIMEOUT = 600


@dataclass
class Check:
    name: str
    ok: bool
    detail: str

    def line(self) -> str:
        return f"{'PASS' if self.ok else 'FAIL'}  {self.name}: {self.detail}"


def reached(run: Any) -> list[tuple[Cohort, int]]:
    """(cohort, week) pairs whose decision Sunday the run reached."""
    last = run.end
    pairs = []
    for cohort in Cohort.objects.filter(pk__in=run.cohort_ids).order_by("week_start"):
        for week in range(1, cohort.decision_weeks + 1):
            if cohort.week_start + timedelta(days=7 * (week - 1)) <= last:
                pairs.append((cohort, week))
    return pairs


def unfinished(run: Any) -> bool:
    """True while a reached week still misses a final decision."""
    for cohort, week in reached(run):
        entries = Entry.objects.filter(cohort=cohort).count()
        final = Decision.objects.filter(
            entry__cohort=cohort, week=week,
            status__in=[Decision.Status.DONE, Decision.Status.FAILED, Decision.Status.SKIPPED],
        ).count()  # fmt: skip
        if final < entries:
            return True
    return False


def correction_candidates(cohort_ids: list[int]) -> list[Market]:
    """Markets resolved Yes or No upstream, those held by an entry of the rehearsal first (their
    settlements are what a correction reverses)."""
    held = set(Position.objects.filter(entry__cohort_id__in=cohort_ids)
               .values_list("market_id", flat=True))  # fmt: skip
    resolved = Market.objects.filter(status=Market.Status.RESOLVED,
                                     resolved_outcome__in=["Yes", "No"]).order_by("pk")  # fmt: skip
    return sorted(resolved[:200], key=lambda m: (m.pk not in held, m.pk))


def staff_changed(market: Market) -> bool:
    return ResolutionChange.objects.filter(market=market, source=Market.ResolvedBy.ADMIN).exists()


def check_corrections(run: Any) -> Check:
    applied = [c for c in run.corrections if c["applied"]]
    kinds = sorted({c["action"] for c in applied})
    # A refusal before the correction went through (the admin reports any refusal whole, e.g. a
    # reversal that cannot be paid back) is in the detail; what counts is that both were made.
    detail = "; ".join(f"market {c['market']} {c['action']}: {c['said']}" for c in run.corrections)
    ok = kinds == ["resolve_to_outcome", "void_markets"]
    return Check("staff corrections", ok, detail or "none made")


def check_decisions(run: Any) -> Check:
    pairs = reached(run)
    if not pairs:
        return Check("decisions", False, "no cohort week was reached")
    problems, statuses = [], Counter()
    for cohort, week in pairs:
        entries = set(Entry.objects.filter(cohort=cohort).values_list("pk", flat=True))
        rows = list(Decision.objects.filter(entry__cohort=cohort, week=week))
        per_entry = Counter(d.entry_id for d in rows)
        missing = entries - set(per_entry)
        doubled = [e for e, n in per_entry.items() if n > 1]
        if missing:
            problems.append(f"cohort {cohort.pk} week {week}: {len(missing)} entries without one")
        if doubled:
            problems.append(f"cohort {cohort.pk} week {week}: {len(doubled)} entries with two")
        for d in rows:
            label = (
                "held" if d.status == Decision.Status.DONE and not d.trades.exists() else d.status
            )
            statuses[label] += 1
            if d.status in (Decision.Status.CLAIMED, Decision.Status.RETRYABLE):
                problems.append(f"decision {d.pk} left {d.status}")
            elif d.status in (Decision.Status.FAILED, Decision.Status.SKIPPED) and not d.error:
                problems.append(f"decision {d.pk} {d.status} without a reason")
    doubles = (
        Decision.objects.filter(entry__cohort_id__in=run.cohort_ids)
        .values("entry_id", "week").annotate(n=Count("id")).filter(n__gt=1).count()
    )  # fmt: skip
    if doubles:
        problems.append(f"{doubles} (entry, week) pairs with more than one decision")
    failed = Decision.objects.filter(
        entry__cohort_id__in=run.cohort_ids, status=Decision.Status.FAILED
    ).values_list("error", flat=True)
    reasons = Counter(_short(e) for e in failed)
    detail = (f"{sum(statuses.values())} decisions over {len(pairs)} cohort-weeks: "
              + ", ".join(f"{n} {s}" for s, n in sorted(statuses.items())))  # fmt: skip
    if reasons:
        detail += "; failed: " + "; ".join(f"{n} x {r}" for r, n in reasons.items())
    if problems:
        return Check("decisions", False, "; ".join(problems[:5]) + f" ({detail})")
    return Check("decisions", True, detail)


def _short(text: str) -> str:
    return re.sub(r"\s+", " ", text or "")[:120]


def check_model_calls(run: Any) -> Check:
    """Every chat request the simulated models received is a call record of the run's
    decisions, a worker killed mid-call included (its call is on the record as lost). A kill
    can land after a call's row is committed and before its request leaves: such a call is
    lost and never reached the server, so records may exceed requests by lost calls only."""
    if run.model_requests is None:
        return Check("model calls on record", False, "the simulated models were not started")
    calls = LLMCall.objects.filter(
        decision__entry__cohort_id__in=run.cohort_ids, url__endswith="/chat/completions"
    )
    records = calls.count()
    lost = calls.filter(error_kind=LOST).count()
    sent = calls.filter(error_kind=SENT).count()
    takeovers = sum(
        len(t or [])
        for t in Decision.objects.filter(entry__cohort_id__in=run.cohort_ids).values_list(
            "takeovers", flat=True
        )
    )
    requests = run.model_requests
    detail = (f"{requests} requests seen, {records} call records ({lost} lost with their "
              f"worker, {sent} still unanswered), {takeovers} decision take-over(s)")  # fmt: skip
    ok = sent == 0 and (records == requests or 0 < records - requests <= lost)
    killed = any(f["name"] == "worker-kill" and f["injected"] for f in run.faults)
    if killed and not (lost and takeovers):
        return Check("model calls on record", False, "a worker was killed mid-call but no call "
                     f"is on the record as lost or no decision taken over: {detail}")  # fmt: skip
    return Check("model calls on record", ok, detail)


def check_sealed(run: Any) -> Check:
    pairs = reached(run)
    sealed = set(WeekSeal.objects.filter(cohort_id__in=run.cohort_ids, seq=1)
                 .values_list("cohort_id", "week"))  # fmt: skip
    missing = [(c.pk, w) for c, w in pairs if (c.pk, w) not in sealed]
    reasons = Counter(WeekSeal.objects.filter(cohort_id__in=run.cohort_ids)
                      .values_list("reason", flat=True))  # fmt: skip
    detail = f"{len(pairs) - len(missing)}/{len(pairs)} weeks sealed ({dict(reasons)})"
    if missing:
        return Check("sealed", False, f"{detail}; not sealed: {missing[:8]}")
    return Check("sealed", True, detail)


def check_freshness(run: Any) -> Check:
    """Every trade of a decision at a price at most UNIVERSE_PRICE_WINDOW old when it executed:
    the frozen universe's price within the window of the freeze, else a market price marked
    within the window."""
    frozen = {(u.cohort_id, u.week): u.frozen_at
              for u in Universe.objects.filter(cohort_id__in=run.cohort_ids)}  # fmt: skip
    stale, n = [], 0
    trades = Trade.objects.filter(entry__cohort_id__in=run.cohort_ids, decision__isnull=False)
    for t in trades.select_related("decision", "entry"):
        n += 1
        source = (t.quote or {}).get("source")
        if source == "decision":
            priced = frozen.get((t.entry.cohort_id, t.decision.week))
        else:
            raw = (t.quote or {}).get("priced_at")
            priced = datetime.fromisoformat(raw) if raw else None
        if priced is None or t.executed_at - priced > UNIVERSE_PRICE_WINDOW:
            stale.append(f"trade {t.pk} ({source}, priced {priced}, executed {t.executed_at})")
    window = int(UNIVERSE_PRICE_WINDOW.total_seconds() // 60)
    if stale:
        return Check("fresh prices", False, f"{len(stale)}/{n} trades older than {window} min: "
                     + "; ".join(stale[:3]))  # fmt: skip
    return Check("fresh prices", True, f"{n} trades, each priced within {window} min")


def check_web_log(run: Any) -> Check:
    if run.access_log is None or not run.access_log.exists():
        return Check("web 5xx", False, "no access log")
    statuses: Counter = Counter()
    bad, excused = [], 0
    for line in run.access_log.read_text(errors="replace").splitlines():
        found = re.search(r"path=(\S+).*?status=(\d{3})", line)
        if not found:
            continue
        path, status = found.group(1), int(found.group(2))
        statuses[status // 100] += 1
        if status == 503 and path != "/healthz" and _during_database_outage(run, line):
            excused += 1
        elif status >= 500 and not (path == "/healthz" and status == 503):
            bad.append(f"{status} {path}")
    detail = f"{sum(statuses.values())} requests ({', '.join(f'{n} {k}xx' for k, n in sorted(statuses.items()))})"
    if excused:
        detail += f"; {excused} x 503 to retry while the database was down"
    if bad:
        return Check("web 5xx", False, f"{len(bad)} x 5xx: {'; '.join(bad[:5])} ({detail})")
    return Check("web 5xx", True, f"0 x 5xx; {detail}")


def _during_database_outage(run: Any, line: str) -> bool:
    """A 503 answered while the run had the database down (pg-kill terminates every backend,
    some in the middle of a request): the site's "retry" (web/unavailable.py), as /healthz's
    503 is its job then. A 500 is never excused."""
    stamp = re.search(r"ts=(\S+)Z", line)
    if stamp is None:
        return False
    at = datetime.fromisoformat(stamp.group(1) + "+00:00").timestamp()
    return any(o["what"] == "database" and o["start"] <= at <= o["end"] + HEALTH_LAG_SECONDS
               for o in run.outages)  # fmt: skip


def check_health(run: Any) -> Check:
    """Each outage reported while it lasted (when it lasted long enough to be seen), and no
    error state outside the outages."""
    samples = run.health.samples if run.health is not None else []
    if not samples:
        return Check("healthz", False, "no /healthz answer recorded")

    def in_window(s: Any) -> bool:
        return any(s.overlaps(o["start"], o["end"] + HEALTH_LAG_SECONDS) for o in run.outages)

    problems = []
    # Until a worker's first heartbeat, /healthz rightly says no worker is proven alive (on a
    # database migrated more than WORKER_LATE ago that is an error, not "starting"): that alone
    # is excused during the start-up, counted apart. Anything else failing then (the database,
    # the broker, an answer that is not 200 or 503) outside an outage the run caused is a
    # failure like any later one, and an outage must be seen in any sample.
    first_ok = next((i for i, s in enumerate(samples) if s.worker == "ok"), None)
    if first_ok is None:
        return Check("healthz", False, f"no worker heartbeat in {len(samples)} samples")
    every, startup, samples = samples, samples[:first_ok], samples[first_ok:]
    for o in run.outages:
        seen = [s for s in every if s.overlaps(o["start"], o["end"] + HEALTH_LAG_SECONDS)
                and (s.http != 200 or s.status == "error")]  # fmt: skip
        if o["required"] and not seen:
            problems.append(f"the {o['what']} outage ({o['end'] - o['start']:.0f} s) was never "
                            "reported")  # fmt: skip
    false = [s for s in startup if _startup_error(s) and not in_window(s)]
    false += [s for s in samples if (s.http != 200 or s.status == "error") and not in_window(s)]
    if false:
        first = false[0]
        problems.append(f"{len(false)} error answers outside any outage, first at arena "
                        f"{first.arena}: {first.http} {first.status} broker={first.broker} "
                        f"db={first.database} worker={first.worker}")  # fmt: skip
    states = Counter(f"{s.http} {s.status}" for s in samples)
    detail = (f"{len(samples)} samples ({', '.join(f'{n} x {k}' for k, n in states.items())}), "
              f"{len(run.outages)} outage(s), after {len(startup)} during start-up before the "
              "first worker heartbeat")  # fmt: skip
    if problems:
        return Check("healthz", False, "; ".join(problems) + f" ({detail})")
    return Check("healthz", True, detail)


def _startup_error(sample: Any) -> bool:
    """An error answer before the first heartbeat that a missing worker does not explain."""
    return (
        sample.http not in (200, 503) or sample.database == "error" or sample.broker == "error"
    )


def check_scored(run: Any) -> Check:
    runs = ScoreRun.objects.filter(scope=ScoreRun.Scope.REHEARSAL).count()
    if not runs:
        return Check("scored", False, "no score run of the rehearsal scope")
    return Check("scored", True, f"{runs} score runs of the rehearsal scope")


def run_verb(run: Any, *args: str) -> tuple[bool, str]:
    """`arena ARGS` as a subprocess in the rehearsal's environment; (exit 0, last lines)."""
    manage = str(Path(settings.BASE_DIR) / "manage.py")
    env = {**run.child_env, "ARENA_CLOCK_RATE": "", "ARENA_CLOCK_START": ""}
    env = {k: v for k, v in env.items() if v != ""}
    done = subprocess.run([sys.executable, manage, "arena", *args], env=env, capture_output=True,
                          text=True, timeout=VERB_TIMEOUT, cwd=settings.BASE_DIR)  # fmt: skip
    out = " | ".join(line for line in (done.stdout + done.stderr).splitlines() if line.strip())
    return done.returncode == 0, out[-600:]


def verb_check(run: Any, name: str, *args: str) -> Check:
    ok, out = run_verb(run, *args)
    return Check(name, ok, out or "(no output)")


def all_checks(run: Any) -> list[Check]:
    checks = [check_decisions(run), check_model_calls(run), check_sealed(run)]
    checks.append(verb_check(run, "verify", "verify"))
    if run.seals_file is not None:
        checks.append(verb_check(run, "verify --published", "verify", "--published",
                                 str(run.seals_file)))  # fmt: skip
    else:
        checks.append(Check("verify --published", False, "the seals could not be saved"))
    checks.append(verb_check(run, "doctor", "doctor"))
    checks.append(check_freshness(run))
    checks.append(check_scored(run))
    checks.append(verb_check(run, "leaderboard = exports", "verify", "--scores"))
    checks.append(check_web_log(run))
    checks.append(check_health(run))
    if run.faults:
        checks.append(check_corrections(run))
        checks.append(Check("faults met", not run.unmet,
                            f"still queued at the end: {run.unmet}" if run.unmet else
                            "every queued Gamma and model fault reached a client"))  # fmt: skip
    checks += [more(run) for more in run.more_checks]
    for fault in run.faults:
        ok = fault["injected"] or fault["detail"].startswith("not injected: the ")
        checks.append(Check(f"fault {fault['name']}", ok, fault["detail"] or "not reached"))
    return checks


def report(run: Any, checks: list[Check], load: tuple[float, float, float]) -> dict:
    decisions = Decision.objects.filter(entry__cohort_id__in=run.cohort_ids)
    return {
        "ok": all(c.ok for c in checks),
        "weeks": run.options.weeks,
        "rate": run.options.rate,
        "workers": run.options.workers,
        "competitors": run.options.competitors,
        "simulated_models": min(run.options.models, run.options.competitors),
        "engine": run.engine,
        "broker": run.broker,
        "first_sunday": run.first_sunday.isoformat(),
        "wall_seconds": round(run.finished_wall - run.started_wall, 1),
        "load_average": list(load),
        "cohorts": len(run.cohort_ids),
        "decisions": decisions.count(),
        "decisions_by_status": dict(Counter(decisions.values_list("status", flat=True))),
        "trades": Trade.objects.filter(entry__cohort_id__in=run.cohort_ids).count(),
        "faults": run.faults,
        "corrections": run.corrections,
        "lineup": run.lineup,
        "outages": run.outages,
        "health_timeline": run.health.timeline() if run.health is not None else [],
        "checks": [asdict(c) for c in checks],
        "notes": run.notes,
        "outside_agent": run.outside,
        "directory": str(run.directory),
    }


def text_report(doc: dict) -> list[str]:
    lines = [
        f"rehearsal {'PASSED' if doc['ok'] else 'FAILED'}: {doc['weeks']} week(s) in "
        f"{doc['wall_seconds']:.0f} s wall on {doc['engine']} + {doc['broker']} broker, "
        f"{doc['competitors']} competitors ({doc['simulated_models']} simulated models), "
        f"{doc['workers']} worker(s); {doc['decisions']} decisions, {doc['trades']} trades; "
        f"load average {' '.join(f'{x:.2f}' for x in doc['load_average'])}",
    ]
    injected = [f for f in doc["faults"] if f["injected"]]
    if doc["faults"]:
        lines.append(f"faults: {len(injected)} injected of {len(doc['faults'])} scheduled")
    lines += [("PASS  " if c["ok"] else "FAIL  ") + f"{c['name']}: {c['detail']}"
              for c in doc["checks"]]  # fmt: skip
    lines.append("/healthz timeline (wall from start):")
    t0 = doc["health_timeline"][0]["from"] if doc["health_timeline"] else 0
    for span in doc["health_timeline"]:
        lines.append(f"  {span['from'] - t0:7.1f}-{span['to'] - t0:7.1f} s  arena "
                     f"{span['arena']}  {span['state']} ({span['samples']})")  # fmt: skip
    lines += [f"note: {n}" for n in doc["notes"]]
    return lines


def load_average() -> tuple[float, float, float]:
    return os.getloadavg()


def write_json(doc: dict, path: str) -> None:
    Path(path).write_text(json.dumps(doc, indent=1, default=str), encoding="utf-8")
