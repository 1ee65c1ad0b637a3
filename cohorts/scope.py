"""Which scope the live path writes: live, or rehearsal under ARENA_SCOPE=rehearsal.

`arena rehearse` runs the unchanged live path (beat -> sync -> freeze -> decide -> snapshots ->
resolution -> settlement -> seal -> score) on an accelerated clock against stand-ins. Every place
that picks "the live cohorts" or "the live markets" asks here, so under ARENA_SCOPE=rehearsal the
same code reads and writes only the rehearsal scope, and a live deployment never touches it.
"""

from __future__ import annotations

from django.conf import settings

from cohorts.models import Cohort
from markets.models import Market, live_path_source

# The scopes the live path can run as; each deployment runs exactly one of them.
LIVE_PATH_KINDS: tuple[str, ...] = (Cohort.Kind.LIVE, Cohort.Kind.REHEARSAL)

# Where each cohort kind's markets come from.
SOURCE_FOR_KIND: dict[str, str] = {
    Cohort.Kind.LIVE: Market.Source.POLYMARKET,
    Cohort.Kind.REPLAY: Market.Source.FORECASTBENCH,
    Cohort.Kind.DEMO: Market.Source.DEMO,
    Cohort.Kind.REHEARSAL: Market.Source.REHEARSAL,
}
KIND_FOR_SOURCE: dict[str, str] = {source: kind for kind, source in SOURCE_FOR_KIND.items()}


def live_path_kind() -> str:
    """The cohort kind (and score scope) the beat, the workers and the operator's verbs act on."""
    return Cohort.Kind.REHEARSAL if settings.ARENA_SCOPE == "rehearsal" else Cohort.Kind.LIVE


def on_live_path(kind: str) -> bool:
    """Whether cohorts of `kind` run on this deployment's clock of record, with the live rules
    (fresh markets, deadlines, re-runs at now), rather than on a simulation's own clock."""
    return kind == live_path_kind()


def other_live_path_kinds() -> tuple[str, ...]:
    """The live-path scopes this deployment does not run: never scored or acted on here."""
    return tuple(k for k in LIVE_PATH_KINDS if k != live_path_kind())


class LiveDataPresent(Exception):
    """A rehearsal process was pointed at a database that holds live cohorts."""


def refuse_live_data() -> None:
    """Under ARENA_SCOPE=rehearsal, raise LiveDataPresent when the database holds live cohorts:
    a rehearsal must never write next to (or be mixed with) real results. A live deployment
    is never refused. A database without the cohort table yet (before migrate) holds no
    cohort, so it passes."""
    if settings.ARENA_SCOPE != "rehearsal":
        return
    from django.db import connection

    if Cohort._meta.db_table not in connection.introspection.table_names():
        return
    n = Cohort.objects.filter(kind=Cohort.Kind.LIVE).count()
    if n:
        raise LiveDataPresent(
            f"refusing to run with ARENA_SCOPE=rehearsal: this database holds {n} live "
            f"cohort{'s' if n != 1 else ''}; point the rehearsal at its own database"
        )


__all__ = [
    "KIND_FOR_SOURCE",
    "LIVE_PATH_KINDS",
    "SOURCE_FOR_KIND",
    "LiveDataPresent",
    "live_path_kind",
    "live_path_source",
    "on_live_path",
    "other_live_path_kinds",
    "exit_on_live_data",
    "refuse_live_data",
]


def exit_on_live_data(code: int = 1) -> None:
    """refuse_live_data for a process starting (web, worker, beat): the reason in one line on
    stderr and exit `code` before anything is written."""
    import sys

    try:
        refuse_live_data()
    except LiveDataPresent as exc:
        sys.stderr.write(f"arena: {exc}\n")
        sys.stderr.flush()
        raise SystemExit(code) from None
