"""The `arena` command: one verb per operation, each implemented next to the app it concerns.

A verb lives in a module as a function `<name>(cmd, options)` with an optional
`<name>_arguments(parser)` and `<name>_validate(options)` (checks of the options alone, run
before the database is looked at). A verb that needs the database finds it there and migrated,
or stops in one line before anything connects. Failures end with a one-line reason (`arena <verb>: ...`) and a
non-zero exit; pass --traceback to see the stack. A warning logged many times during one verb
(the same message template) is shown once, then counted in one line at the end.
"""

import argparse
import importlib
import logging
import sys
from collections import Counter

from django.core.management.base import BaseCommand, CommandError, handle_default_options
from django.db import connections

from arena.cli import MAKES_ITS_DATABASE, database_problem

PROG = "arena"

# verb -> (module, function name, one-line description). The module is imported only when its
# verb runs (or its options are listed).
VERBS: dict[str, tuple[str, str, str]] = {
    "up": ("arena.up", "up", "migrate, seed the lineup, run web + worker + beat until Ctrl-C"),
    "sync-markets": ("markets.cli", "sync_markets", "pull the top open Polymarket markets"),
    "resolve": ("markets.cli", "resolve", "record upstream resolutions and settle"),
    "open-cohort": ("cohorts.cli", "open_cohort", "open the week's cohort (idempotent)"),
    "snapshot": ("cohorts.cli", "snapshot", "settle, mark positions to market, advance cohorts"),
    "doctor": ("cohorts.cli", "doctor", "check the money invariants"),
    "verify": ("arena.verify_cli", "verify", "recompute the sealed records; fail on any change"),
    "rotate-key": (
        "cohorts.seals.rotate",
        "rotate_key",
        "replace the signing key, endorsed by the old one (or --unendorsed)",
    ),
    "signing-key": (
        "cohorts.seals.rotate",
        "signing_key",
        "make or read the signing key; fail unless it is the arena's latest",
    ),
    "decide": ("cohorts.decisions.cli", "decide", "run this week's decisions"),
    "score": ("scoring.cli", "score", "recompute the leaderboards"),
    "demo": ("simulations.demo_cli", "demo", "build a labelled synthetic history offline"),
    "replay-forecastbench": (
        "simulations.replay_cli",
        "replay_forecastbench",
        "replay ForecastBench question sets as cohorts",
    ),
    "rehearse": (
        "simulations.rehearsal.cli",
        "rehearse",
        "run the live path for N weeks on a fast clock, then check it",
    ),
    "simulated-llm": (
        "simulations.simllm_cli",
        "simulated_llm",
        "serve the simulated model endpoint on 127.0.0.1 (no real model)",
    ),
    "standin": (
        "simulations.standin_cli",
        "standin",
        "serve the Polymarket stand-in and simulated models, offline",
    ),
    "export": ("arena.exports_cli", "export", "write a bounded CSV/JSON export to stdout"),
    "backup": ("arena.backup", "backup", "copy the database to a file"),
    "restore": ("arena.backup", "restore", "replace the database from a backup"),
    "retention": ("cohorts.retention", "retention", "roll old snapshots up to hourly"),
    "rebuild-series": (
        "cohorts.cli",
        "rebuild_series",
        "recompute the chart series from the snapshot table",
    ),
}

# Django's own options that mean nothing to an arena user; they still work, unlisted.
_HIDDEN = {
    "--version",
    "--settings",
    "--pythonpath",
    "--no-color",
    "--force-color",
    "--skip-checks",
}


class _Formatter(argparse.HelpFormatter):
    """One line per verb: wide enough for the longest, without argparse's extra VERB line."""

    def __init__(self, prog: str) -> None:
        super().__init__(prog, max_help_position=26, width=100)

    def _format_action(self, action):
        if isinstance(action, argparse._SubParsersAction):
            return "".join(self._format_action(a) for a in action._get_subactions())
        return super()._format_action(action)


class _Repeats(logging.Filter):
    """Lets the first record of each kind through and counts the rest.

    A kind is the logger and the message template ("prices rejected", its ids as fields), so the same
    warning about five hundred markets is one line, not five hundred.
    """

    def __init__(self) -> None:
        super().__init__()
        self.counts: Counter[tuple[str, str]] = Counter()
        self.first: dict[tuple[str, str], str] = {}
        self._last: tuple[logging.LogRecord | None, bool] = (None, True)

    def filter(self, record: logging.LogRecord) -> bool:
        # Installed on every root handler: each handler asks about the same record in turn.
        if record is self._last[0]:
            return self._last[1]
        key = (record.name, str(record.msg))
        self.counts[key] += 1
        if self.counts[key] == 1:
            self.first[key] = record.getMessage()
        self._last = (record, self.counts[key] == 1)
        return self._last[1]

    def summary(self) -> list[str]:
        return [
            f"{n} warnings in all like: {self.first[key]}"
            for key, n in self.counts.items()
            if n > 1
        ]


class Command(BaseCommand):
    help = f"Run the forecasting arena: `{PROG} VERB`, `{PROG} VERB --help` for a verb's options."

    def create_parser(self, prog_name, subcommand, **kwargs):
        parser = super().create_parser(prog_name, subcommand, **kwargs)
        parser.prog = PROG  # not "arena arena" (console script name + Django subcommand)
        return parser

    def add_arguments(self, parser):
        parser.prog = PROG  # before the subparsers copy it into their own prog
        parser.formatter_class = _Formatter
        for action in parser._actions:
            if set(action.option_strings) & _HIDDEN:
                action.help = argparse.SUPPRESS
        sub = parser.add_subparsers(dest="verb", metavar="VERB", title="verbs")
        for verb, (module_name, func_name, description) in VERBS.items():
            p = sub.add_parser(
                verb, help=description, description=description, formatter_class=_Formatter
            )
            module = importlib.import_module(module_name)
            adder = getattr(module, f"{func_name}_arguments", None)
            if adder is not None:
                adder(p)
        self._parser = parser

    def run_from_argv(self, argv):
        # Django's version, with the failure line naming the program and verb instead of
        # "CommandError:", and a bare `arena` listing the verbs.
        self._called_from_command_line = True
        parser = self.create_parser(argv[0], argv[1])
        options = parser.parse_args(argv[2:])
        if options.verb is None:
            parser.print_help(sys.stderr)
            sys.exit(2)
        cmd_options = vars(options)
        args = cmd_options.pop("args", ())
        handle_default_options(options)
        try:
            self.execute(*args, **cmd_options)
        except CommandError as exc:
            if options.traceback:
                raise
            self.stderr.write(f"{PROG} {options.verb}: {exc}")
            sys.exit(exc.returncode)
        finally:
            connections.close_all()

    def handle(self, *args, **options):
        verb = options["verb"]
        if verb is None:
            raise CommandError(f"which verb? one of: {', '.join(VERBS)}")
        root = logging.getLogger()
        if verb != "up" and options.get("verbosity", 1) < 2:
            # A verb's own summary is its output; INFO logs from the services are for the
            # worker's log, shown here only with -v 2.
            root.setLevel(logging.WARNING)
        module_name, func_name, _ = VERBS[verb]
        try:
            module = importlib.import_module(module_name)
            func = getattr(module, func_name)
        except (ImportError, AttributeError) as exc:
            raise CommandError(f"verb {verb!r} is not available: {exc}") from exc
        validate = getattr(module, f"{func_name}_validate", None)
        if validate is not None:
            validate(options)
        if verb not in MAKES_ITS_DATABASE:
            # Before anything connects: SQLite would leave an empty database file behind, and an
            # unmigrated one fails deep inside the verb with "no such table".
            problem = database_problem()
            if problem:
                raise CommandError(problem)
            # A rehearsal's verbs never run against real results (cohorts.scope).
            from cohorts.scope import LiveDataPresent, refuse_live_data

            try:
                refuse_live_data()
            except LiveDataPresent as exc:
                raise CommandError(str(exc)) from None
        repeats = _Repeats()
        if verb != "up":  # `up` streams its children's logs, which are not repeats to fold
            for handler in root.handlers:
                handler.addFilter(repeats)
        try:
            func(self, options)
        except CommandError:
            raise
        except KeyboardInterrupt:
            self.stderr.write("interrupted")
            sys.exit(130)
        except Exception as exc:
            if options.get("traceback"):
                raise
            raise CommandError(f"{type(exc).__name__}: {exc}") from exc
        finally:
            for handler in root.handlers:
                handler.removeFilter(repeats)
            for line in repeats.summary():
                self.stderr.write(line)
