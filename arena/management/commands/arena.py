"""The `arena` command: one verb per operation, each implemented next to the app it concerns.

A verb lives in a module as a function `<name>(cmd, options)` with an optional
`<name>_arguments(parser)`. Failures end with a one-line reason and a non-zero exit; pass
--traceback to see the stack.
"""

import importlib
import logging
import sys

from django.core.management.base import BaseCommand, CommandError

# verb -> (module, function name). The module is imported only when its verb runs.
VERBS: dict[str, tuple[str, str]] = {
    "up": ("arena.up", "up"),
    "sync-markets": ("markets.cli", "sync_markets"),
    "resolve": ("markets.cli", "resolve"),
    "open-cohort": ("cohorts.cli", "open_cohort"),
    "snapshot": ("cohorts.cli", "snapshot"),
    "doctor": ("cohorts.cli", "doctor"),
    "decide": ("cohorts.decide_cli", "decide"),
    "score": ("scoring.cli", "score"),
    "demo": ("simulations.demo_cli", "demo"),
    "replay-forecastbench": ("simulations.replay_cli", "replay_forecastbench"),
    "export": ("arena.exports_cli", "export"),
    "backup": ("arena.backup", "backup"),
    "restore": ("arena.backup", "restore"),
    "retention": ("cohorts.retention", "retention"),
}


class Command(BaseCommand):
    help = "Run an arena operation: " + ", ".join(VERBS)

    def add_arguments(self, parser):
        sub = parser.add_subparsers(dest="verb", metavar="VERB", required=True)
        for verb, (module_name, func_name) in VERBS.items():
            p = sub.add_parser(verb, help=f"{verb}")
            try:
                module = importlib.import_module(module_name)
            except ImportError:
                continue  # not built yet: the verb then fails with a clear message
            adder = getattr(module, f"{func_name}_arguments", None)
            if adder is not None:
                adder(p)

    def handle(self, *args, **options):
        verb = options["verb"]
        if verb != "up" and options.get("verbosity", 1) < 2:
            # A verb's own summary is its output; INFO logs from the services are for the
            # worker's log, shown here only with -v 2.
            logging.getLogger().setLevel(logging.WARNING)
        module_name, func_name = VERBS[verb]
        try:
            func = getattr(importlib.import_module(module_name), func_name)
        except (ImportError, AttributeError) as exc:
            raise CommandError(f"verb {verb!r} is not available: {exc}") from exc
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
            raise CommandError(f"{verb} failed: {type(exc).__name__}: {exc}") from exc
