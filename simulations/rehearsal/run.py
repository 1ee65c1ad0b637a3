"""`arena rehearse`: the live path run end to end, for N weeks, on an accelerated clock.

The orchestrator (this process) plans the run, then starts the arena as ops run it, as real
processes: gunicorn, K Celery workers and one beat, all with ARENA_SCOPE=rehearsal and the
same ARENA_CLOCK_* (so every one of them reads the same accelerated time), on the configured
database and on a broker of the rehearsal's own (a private redis-server when the broker is
Redis, else the embedded broker in the run's directory). Polymarket and the models are stood in
by real HTTP servers in this process (simulations/world_server.py serving a seeded world on the
same clock, simulations/simllm.py). Nothing is called directly: beat's schedule drives sync,
cohorts, decisions, snapshots, resolution, settlement, seals and scoring on the workers.

Meanwhile it injects the printed fault schedule (simulations/rehearsal/faults.py), has staff
correct two resolutions through the admin and approve the lineup review's proposal of a catalog
change (simulations/rehearsal/lineup.py), polls /healthz; at the end it saves /api/seals as an
outsider would and runs the checks (simulations/rehearsal/checks.py).

Beat starts last, at the clock's anchor, when the arena's time is just before the first Sunday:
web and workers take seconds to start, which the accelerated clock would turn into hours, and a
beat ticking before the rehearsal's first week would open the week before it.
"""

from __future__ import annotations

import os
import secrets
import subprocess
import sys
import time
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from decimal import Decimal
from pathlib import Path
from typing import Any

from django.conf import settings
from django.db import connection

from agents.models import Competitor
from agents.services import DEFAULT_LINEUP
from cohorts.models import Cohort
from cohorts.services import week_start_for
from core import clock
from core.progress import Progress
from simulations.demo_plan import build_plan
from simulations.rehearsal import agent as rehearse_agent
from simulations.rehearsal import faults as rehearse_faults
from simulations.rehearsal import lineup as rehearse_lineup
from simulations.rehearsal.http import HealthProbe, StaffSession
from simulations.rehearsal.procs import (
    Child,
    PrivateRedis,
    RehearsalError,
    beat_argv,
    free_port,
    wait_for,
    web_argv,
    worker_argv,
)
from simulations.simllm import SimulatedLLMServer
from simulations.simmodels import CHARACTERS
from simulations.world import World
from simulations.world_server import WorldServer

# One arena week in about two minutes of wall time.
DEFAULT_RATE = 5040.0
BEFORE_FIRST_SUNDAY = timedelta(minutes=40)  # arena time when beat starts
# Beat stops this long (arena time) before the Sunday after the last week: its stop and the
# messages already queued take wall seconds, hours of arena time.
STOP_BEFORE_SUNDAY = timedelta(hours=12)
STARTUP_SECONDS = 30.0  # wall seconds web and workers get to start before the clock's anchor
CLAIM_WALL_SECONDS = 30.0  # a claim goes stale after this much wall time
HTTP_TIMEOUT = 2.0  # Polymarket stand-in: a stall of HTTP_TIMEOUT + 2 is a client timeout
LLM_TIMEOUT = 4.0
MODEL_LATENCY_SCALE = 0.01  # the simulated models answer in tenths of a second
BEAT_MAX_BACKLOG = 4
MAX_RESTARTS = 3  # per child: one that keeps dying is a failure, not an outage survived
DRAIN_SECONDS = 180.0  # wall time allowed, after the last week, for decisions to finish
STAFF_USER = "rehearsal-staff"
SLUG_PREFIX = "rehearsal-"


@dataclass
class Options:
    weeks: int = 2
    rate: float = DEFAULT_RATE
    faults: bool = False
    workers: int = 1
    competitors: int = 8
    models: int = 3
    markets: int = 60
    seed: int = 7
    concurrency: int = 4


@dataclass
class Run:
    """What happened, for the checks and the report."""

    options: Options
    directory: Path
    first_sunday: datetime
    end: datetime
    engine: str
    broker: str
    base_url: str = ""
    started_wall: float = 0.0
    finished_wall: float = 0.0
    outages: list[dict] = field(default_factory=list)
    faults: list[dict] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    corrections: list[dict] = field(default_factory=list)
    health: Any = None  # HealthProbe
    seals_file: Path | None = None
    child_env: dict[str, str] = field(default_factory=dict)
    access_log: Path | None = None
    cohort_ids: list[int] = field(default_factory=list)
    unmet: list[str] = field(default_factory=list)  # queued stand-in faults no client met
    model_requests: int | None = None  # chat requests the simulated models received
    outside: dict | None = None  # the outside agent's record (simulations/rehearsal/agent.py)
    more_checks: list = field(default_factory=list)  # callables run -> Check, after the others
    lineup: dict = field(default_factory=dict)  # the catalog change (simulations/rehearsal/lineup.py)


def refuse_live_data() -> None:
    """A rehearsal never runs on a database that holds live results."""
    live = Cohort.objects.filter(kind=Cohort.Kind.LIVE).count()
    if live:
        raise RehearsalError(
            f"this database holds {live} live cohort(s): a rehearsal runs only on a database of "
            "its own (set DATABASE_URL to an empty, migrated one)"
        )


def plan_start(options: Options) -> datetime:
    """The first Sunday: after every cohort already in the database has finished deciding, so
    a rehearsal run on a database holding earlier rehearsals meets none of their weeks."""
    today = week_start_for(clock.wall()) + timedelta(days=7)
    last = Cohort.objects.order_by("-week_start").first()
    if last is None:
        return today
    after = last.week_start + timedelta(days=7 * (last.decision_weeks + 1))
    return max(today, week_start_for(after) + timedelta(days=7))


class Rehearsal:
    """One rehearsal: start everything, run the weeks with the faults, stop everything."""

    http_timeout = HTTP_TIMEOUT
    llm_timeout = LLM_TIMEOUT

    def __init__(self, options: Options, out=None):
        self.options = options
        self.out = out or sys.stdout
        first = plan_start(options)
        stamp = clock.wall().strftime("%Y%m%dT%H%M%S")
        directory = Path(settings.VAR_DIR) / "rehearsals" / stamp
        directory.mkdir(parents=True, exist_ok=True)
        broker = str(settings.CELERY_BROKER_URL)
        self.run = Run(
            options=options, directory=directory, first_sunday=first,
            end=first + timedelta(days=7 * options.weeks) - STOP_BEFORE_SUNDAY,
            engine=connection.vendor,
            broker="redis" if broker.startswith(("redis://", "rediss://")) else "embedded",
        )  # fmt: skip
        self.redis: PrivateRedis | None = None
        self.world: WorldServer | None = None
        self.models: SimulatedLLMServer | None = None
        self.web: Child | None = None
        self.beat: Child | None = None
        self.workers: list[Child] = []
        self.outside: rehearse_agent.OutsideAgent | None = None
        self.faults = rehearse_faults.schedule(
            first, options.weeks, postgres=self.run.engine == "postgresql",
            redis=self.run.broker == "redis",
        ) if options.faults else rehearse_faults.FaultSchedule()  # fmt: skip
        self._deactivated: list[int] = []
        self.lineup_change: rehearse_lineup.LineupChange | None = None
        self._restarts: dict[str, int] = {}
        self._staff_password = secrets.token_urlsafe(18)

    def say(self, text: str) -> None:
        self.out.write(text + "\n")
        self.out.flush()

    # -- the stage the faults act on --

    def kill_workers(self) -> int:
        for worker in self.workers:
            worker.kill()
        return len(self.workers)

    def restart_workers(self) -> None:
        for worker in self.workers:
            worker.restart()

    def outage(self, what: str, start: float, end: float, required: bool) -> None:
        self.run.outages.append({"what": what, "start": start, "end": end, "required": required})

    def staff_corrections(self) -> str | None:
        """Staff reverse one resolved market and void another through the admin. A correction
        the admin refuses is retried once, as staff would (settlement takes its locks in the
        order a correction does, so a running settlement is no reason to refuse; the retry is a
        belt for anything transient), then the next resolved market is tried; None (try again
        later) until both are made."""
        from simulations.rehearsal.checks import correction_candidates, staff_changed

        done = {c["action"] for c in self.run.corrections if c["applied"]}
        tried = {c["market"] for c in self.run.corrections}
        candidates = [
            m for m in correction_candidates(self.run.cohort_ids or self._cohort_ids())
            if m.pk not in tried
        ]  # fmt: skip
        wanted = [
            ("resolve_to_outcome", "Rehearsal: the resolution source was misread; reversed"),
            ("void_markets", "Rehearsal: ambiguous question, 50-50"),
        ]
        staff: StaffSession | None = None
        for action, reason in wanted:
            while action not in done and candidates:
                if staff is None:
                    staff = StaffSession(self.run.base_url, STAFF_USER, self._staff_password)
                    staff.login()
                market = candidates.pop(0)
                flipped = "No" if market.resolved_outcome == "Yes" else "Yes"
                outcome = flipped if action == "resolve_to_outcome" else ""
                for _attempt in range(2):
                    said = staff.correct(market.pk, action, reason, outcome)
                    applied = staff_changed(market)
                    self.run.corrections.append({"market": market.pk, "action": action,
                                                 "was": market.resolved_outcome,
                                                 "outcome": outcome, "applied": applied,
                                                 "said": said})  # fmt: skip
                    if applied:
                        done.add(action)
                        break
        if len(done) < len(wanted):
            return None
        return "; ".join(
            f"{c['action']} market {c['market']} ({'applied' if c['applied'] else 'refused'}: "
            f"{c['said']})"
            for c in self.run.corrections
        )

    # -- setup --

    def _cohort_ids(self) -> list[int]:
        return list(
            Cohort.objects.filter(week_start__gte=self.run.first_sunday)
            .order_by("week_start")
            .values_list("pk", flat=True)
        )

    def _lineup(self, models_url: str) -> list[Competitor]:
        """The rehearsal's competitors, the only active ones while it runs: `models` simulated
        models answered by the stand-in, the rest baselines (the default lineup's, cycled)."""
        o = self.options
        characters = list(CHARACTERS.values())
        baselines = [s for s in DEFAULT_LINEUP if s["kind"] == Competitor.Kind.BASELINE]
        wanted: list[tuple[str, dict]] = []
        for i in range(min(o.models, o.competitors)):
            c = characters[i % len(characters)]
            n = f"-{i // len(characters) + 1}" if i >= len(characters) else ""
            wanted.append((f"{SLUG_PREFIX}{c.slug}{n}", {
                "display_name": f"{c.name}{n} (rehearsal)", "kind": Competitor.Kind.LLM,
                "family": "Simulated", "provider": "simulated", "model_id": c.model_id,
                "params": {"temperature": 0, "max_tokens": 32000}, "simulated": True,
                # Free, as the stand-in's catalog lists them: a price it lists later is a change.
                "price_in_per_m": Decimal(0), "price_out_per_m": Decimal(0),
                "base_url": models_url, "notes": "Rehearsal: the simulated model endpoint.",
            }))  # fmt: skip
        for i in range(max(o.competitors - o.models, 0)):
            spec = dict(baselines[i % len(baselines)])
            slug = spec.pop("slug")
            n = f"-{i // len(baselines) + 1}" if i >= len(baselines) else ""
            spec["display_name"] = f"{spec['display_name']}{n} (rehearsal)"
            wanted.append((f"{SLUG_PREFIX}{slug}{n}", spec))
        rehearsal = []
        for slug, fields in wanted:
            fields = {**fields, "active": True}
            competitor, _ = Competitor.objects.update_or_create(slug=slug, defaults=fields)
            rehearsal.append(competitor)
        others = Competitor.objects.filter(active=True).exclude(slug__in=[s for s, _ in wanted])
        self._deactivated = list(others.values_list("pk", flat=True))
        others.update(active=False)
        return rehearsal

    def _staff(self) -> None:
        from django.contrib.auth import get_user_model

        user_model = get_user_model()
        user, _ = user_model.objects.get_or_create(username=STAFF_USER)
        user.is_staff = user.is_superuser = user.is_active = True
        user.set_password(self._staff_password)
        user.save()

    def _retire_staff(self) -> None:
        """The staff account lives as long as the run: no password anyone knows afterwards."""
        from django.contrib.auth import get_user_model

        for user in get_user_model().objects.filter(username=STAFF_USER):
            user.is_active = False
            user.set_unusable_password()
            user.save()

    def _env(self, broker_url: str, start: datetime, anchor: datetime) -> dict[str, str]:
        o = self.options
        env = {k: v for k, v in os.environ.items()
               if k not in ("REDIS_CACHE_URL", "ARENA_SEAL_PUBLISH_URL", "ARENA_SEAL_PUBLISH_DIR",
                            "ARENA_SEAL_SIGNING_KEY", "ARENA_ROLE")}  # fmt: skip
        assert self.world is not None and self.models is not None
        env.update({
            "DJANGO_SETTINGS_MODULE": "arena.settings",
            "DATABASE_URL": _database_url(),
            "CELERY_BROKER_URL": broker_url,
            "ARENA_VAR_DIR": str(self.run.directory / "var"),
            "ARENA_SCOPE": "rehearsal",
            "ARENA_CLOCK_START": start.isoformat(),
            "ARENA_CLOCK_ANCHOR": anchor.isoformat(),
            "ARENA_CLOCK_RATE": repr(o.rate),
            "ARENA_GAMMA_URL": self.world.url,
            "ARENA_CLOB_URL": self.world.url,
            "ARENA_SYNC_LIMIT": str(min(o.markets, 500)),
            "ARENA_HTTP_TIMEOUT": str(HTTP_TIMEOUT),
            "ARENA_LLM_TIMEOUT": str(LLM_TIMEOUT),
            "ARENA_LLM_MAX_RETRIES": "3",
            "ARENA_LLM_BACKOFF_BASE": "0.2",
            "ARENA_LLM_MAX_BACKOFF": "5",
            "ARENA_LLM_PHASE_SECONDS": "20",
            # The weekly lineup review reads the stand-in's catalog, never a real provider's.
            "ARENA_LINEUP_CATALOGS": f"simulated={self.models.base_url}",
            "ARENA_LINEUP_TIMEOUT": str(HTTP_TIMEOUT),
            # Claims are stamped on the arena's clock: stale after CLAIM_WALL_SECONDS of wall.
            "ARENA_CLAIM_TIMEOUT_SECONDS": str(int(o.rate * CLAIM_WALL_SECONDS)),
            # Beat sends no more periodic work while this much waits for the workers: an
            # accelerated week schedules more than two cores can run.
            "ARENA_BEAT_MAX_BACKLOG": str(BEAT_MAX_BACKLOG),
            "ARENA_REHEARSAL_SUBMISSION_WINDOW_MINUTES": str(rehearse_agent.WINDOW_MINUTES),
            "LOG_LEVEL": "INFO",
            "PYTHONUNBUFFERED": "1",
        })  # fmt: skip
        return env

    # -- the run --

    def execute(self) -> Run:
        refuse_live_data()
        o, run = self.options, self.run
        self.say(
            f"rehearsal: {o.weeks} week(s) from Sunday {run.first_sunday:%Y-%m-%d}, clock rate "
            f"{o.rate:g} (one arena week = {7 * 86400 / o.rate:.0f} s wall), "
            f"{o.competitors} competitors ({min(o.models, o.competitors)} simulated models), "
            f"{o.workers} worker(s), {run.engine}, broker {run.broker}; logs in {run.directory}"
        )
        if self.faults.faults:
            self.say("fault schedule:")
            for line in self.faults.lines():
                self.say(line)
        run.started_wall = clock.wall().timestamp()
        try:
            self._start()
            self._play()
            self._drain()
            self._final_score()
        finally:
            run.faults = [f.as_dict() for f in self.faults.faults]
            self._stop_beat()
        return run

    def note_unmet_faults(self) -> None:
        """Faults queued on the stand-ins that no client met (a fault never tested)."""
        if self.models is not None:
            self.run.model_requests = self.models.requests
        if self.world is not None and self.models is not None:
            self.run.unmet = [f"Gamma {f.kind}" for f in self.world.faults] + [
                f"model {f.kind}" for f in self.models.faults
            ]

    def finish(self) -> None:
        """Stop every process and stand-in, hand the competitors back as they were."""
        if self.outside is not None:
            self.outside.stop()
            self.run.outside = self.outside.record()
        if self.run.health is not None:
            self.run.health.stop()
        for child in [*self.workers, *([self.web] if self.web else [])]:
            child.stop()
        for server in (self.world, self.models):
            if server is not None:
                server.stop()
        if self.redis is not None:
            self.redis.stop()
        clock.configure(None)
        Competitor.objects.filter(slug__startswith=SLUG_PREFIX).update(active=False)
        Competitor.objects.filter(pk__in=self._deactivated).update(active=True)
        self._retire_staff()
        self.run.finished_wall = clock.wall().timestamp()

    def _start(self) -> None:
        o, run = self.options, self.run
        start = run.first_sunday - BEFORE_FIRST_SUNDAY
        anchor = clock.wall() + timedelta(seconds=STARTUP_SECONDS)
        accelerated = clock.AcceleratedClock(start, anchor, o.rate)
        clock.configure(accelerated)  # this process reads the same time as its children
        plan = build_plan(seed=o.seed, weeks=o.weeks + 1, n_markets=o.markets,
                          start=run.first_sunday)  # fmt: skip
        self.world = WorldServer(World.of(plan), accelerated)
        # A stalled answer meets a client that gave up: that broken pipe is the fault working,
        # not an error to print over the progress bar.
        self.world._http.handle_error = lambda request, address: None  # type: ignore[method-assign]
        self.world.start()
        self.models = SimulatedLLMServer(latency_scale=MODEL_LATENCY_SCALE).start()
        lineup = self._lineup(self.models.base_url)
        self._staff()
        # Before beat's first tick, so the first week's lineup review finds the catalog changed.
        self.lineup_change = rehearse_lineup.plan(run, self.models, lineup, STAFF_USER)
        if self.lineup_change is not None:
            run.more_checks.append(rehearse_lineup.check_lineup)
        broker_url = "filesystem://"
        if run.broker == "redis":
            self.redis = PrivateRedis(run.directory).start()
            broker_url = self.redis.url
        env = run.child_env = self._env(broker_url, start, anchor)
        (run.directory / "var").mkdir(exist_ok=True)
        if not settings.DEBUG:
            subprocess.run([sys.executable, str(settings.BASE_DIR / "manage.py"), "collectstatic",
                            "--noinput", "-v", "0"], env=env, check=True)  # fmt: skip
        port = free_port()
        run.base_url = f"http://127.0.0.1:{port}"
        # gunicorn.conf.py sends the access lines to the web's log, in the arena's format.
        run.access_log = run.directory / "web.log"
        base = Path(settings.BASE_DIR)
        self.web = Child("web", web_argv(port, base / "gunicorn.conf.py"),
                         {**env, "ARENA_ROLE": "web"}, run.directory, base)  # fmt: skip
        self.workers = [
            Child(f"worker-{i + 1}", worker_argv(f"rehearsal-{i + 1}", o.concurrency),
                  {**env, "ARENA_ROLE": "worker"}, run.directory, base)
            for i in range(o.workers)
        ]  # fmt: skip
        wait_for(lambda: _answers(run.base_url), 3 * STARTUP_SECONDS, "the web server",
                 children=(self.web,))  # fmt: skip
        run.health = HealthProbe(run.base_url).start()
        # Entered by staff through the admin before beat opens the first cohort it joins.
        staff = StaffSession(run.base_url, STAFF_USER, self._staff_password)
        staff.login()
        self.outside = rehearse_agent.OutsideAgent(run.base_url, run.directory, o.rate)
        self.outside.start(self.outside.enter(staff))
        run.more_checks.append(rehearse_agent.check_outside_agent)
        left = (anchor - clock.wall()).total_seconds()
        if left < 0:
            self.say(f"note: web and workers took {STARTUP_SECONDS - left:.0f} s to start, "
                     "the first week starts late in arena time")  # fmt: skip
        wait_for(lambda: clock.wall() >= anchor, max(left, 0) + 1, "the clock's anchor")
        self.beat = Child("beat", beat_argv(run.directory / "celerybeat-schedule"),
                          {**env, "ARENA_ROLE": "beat"}, run.directory, base)  # fmt: skip

    def _play(self) -> None:
        run = self.run
        begin = clock.now()
        total_hours = max(int((run.end - begin).total_seconds() // 3600), 1)
        bar = Progress(total_hours, "rehearsal (arena hours)")
        shown = 0
        try:
            while (now := clock.now()) < run.end:
                for fault in self.faults.run_due(self, now):
                    bar.stream.write("\n" if bar.enabled else "")
                    self.say(f"fault {fault.name}: {fault.detail}")
                self._check_children()
                if self.outside is not None and (note := self.outside.watch()):
                    self.run.notes.append(note)
                if self.lineup_change is not None:
                    self.lineup_change.tick(now, run, STAFF_USER, self._staff_password)
                hours = int((clock.now() - begin).total_seconds() // 3600)
                if hours > shown:
                    bar.advance(min(hours, total_hours) - shown)
                    shown = min(hours, total_hours)
                run.cohort_ids = self._cohort_ids()
                time.sleep(0.2)
        finally:
            bar.close()

    def _check_children(self) -> None:
        """Restart a child that died, as the shipped systemd units (Restart=always) and compose
        (restart: unless-stopped) do, and say so in the report; a child that keeps dying fails
        the run. Why: a Celery worker can exit on a broker outage (kombu's reconnect after a
        Redis restart has been seen to end with "Unrecoverable error"), and what the rehearsal
        checks is that the deployment as shipped survives it, supervisor included."""
        for child in [self.web, self.beat, *self.workers]:
            if child is None or child.alive():
                continue
            code = child.popen.returncode
            self._restarts[child.name] = self._restarts.get(child.name, 0) + 1
            if self._restarts[child.name] > MAX_RESTARTS:
                raise RehearsalError(
                    f"{child.name} exited ({code}) during the run, {MAX_RESTARTS} restarts "
                    f"already; its log: {child.log_path}"
                )
            child.restart()
            note = (
                f"{child.name} exited ({code}) at {clock.now():%a %H:%M} arena and was restarted, "
                f"as its supervisor would (restart {self._restarts[child.name]}); its log: "
                f"{child.log_path}"
            )
            self.run.notes.append(note)
            self.say(note)

    def _stop_beat(self) -> None:
        if self.beat is not None:
            self.beat.stop()

    def _drain(self) -> None:
        """Stop beat (no new week) and wait for the decisions already sent to finish."""
        from simulations.rehearsal.checks import unfinished

        self._stop_beat()
        self.run.cohort_ids = self._cohort_ids()
        try:
            wait_for(lambda: not unfinished(self.run), DRAIN_SECONDS,
                     "the last decisions to finish", interval=0.5)  # fmt: skip
        except RehearsalError as exc:
            self.run.notes.append(str(exc))

    def _final_score(self) -> None:
        """With beat stopped and the last decisions done, stop the health probe and the workers
        (nothing records a resolution any more) and score the scope once, as a live site's next
        scheduled run would. Why: a run counts a resolution as known at its as_of by the
        upstream resolution time, so a run that read the markets just before a resolution was
        recorded (upstream hours earlier, or its transaction committing late) and a
        recomputation from the exports afterwards disagree until the next run. The check
        compares the latest run, which must follow every recorded resolution."""
        if self.run.health is not None:
            self.run.health.stop()
        for worker in self.workers:
            worker.stop()
        # In a child's environment, as the beat's score task would run it: the run's checkpoint
        # is signed with the deployment's key (in its var/), on its accelerated clock.
        manage = str(Path(settings.BASE_DIR) / "manage.py")
        done = subprocess.run(
            [sys.executable, manage, "arena", "score", "--scope", Cohort.Kind.REHEARSAL],
            env=self.run.child_env, capture_output=True, text=True, timeout=300,
            cwd=settings.BASE_DIR,
        )  # fmt: skip
        if done.returncode != 0:  # reported as a failed check ("leaderboard = exports")
            tail = " | ".join((done.stdout + done.stderr).strip().splitlines()[-3:])
            self.run.notes.append(f"the final score run failed: {tail}")


def _database_url() -> str:
    """The configured database, as a URL the children read (SQLite: the file this process uses,
    so a rehearsal on the default database stays on it even with another ARENA_VAR_DIR)."""
    if connection.vendor == "sqlite":
        return f"sqlite:///{connection.settings_dict['NAME']}"
    return str(settings.DATABASE_URL)


def _answers(base_url: str) -> bool:
    import requests

    try:
        return requests.get(base_url + "/healthz", timeout=2).status_code in (200, 503)
    except requests.RequestException:
        return False
