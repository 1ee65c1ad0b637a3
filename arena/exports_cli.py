"""`arena export`: the same bounded, streamed exports as /exports/, written to stdout."""

from __future__ import annotations

from django.core.management.base import CommandError

from web.exports import files as exports


def export_arguments(parser) -> None:
    parser.add_argument("--what", required=True, choices=list(exports.WHATS))
    parser.add_argument("--format", default="csv", choices=list(exports.FORMATS))
    parser.add_argument(
        "--scope", default=None, choices=exports.SCOPES, help="only this kind (default: all)"
    )
    parser.add_argument("--cohort", type=int, default=None, help="only this cohort id")
    parser.add_argument(
        "--since",
        default=None,
        help=(
            f"YYYY-MM-DD, on the date column the export shows (default: {exports.DEFAULT_DAYS} "
            "days before --until; all time for --scope replay/demo or --cohort)"
        ),
    )
    parser.add_argument("--until", default=None, help="YYYY-MM-DD, inclusive (default: today)")
    parser.add_argument(
        "--limit",
        type=int,
        default=None,
        help=f"row cap (default {exports.DEFAULT_LIMIT}, at most {exports.MAX_LIMIT})",
    )


def export_validate(options) -> None:
    """The options alone, before the database is looked at: a bad date is the first thing said."""
    try:
        _bounds(options)
    except exports.ExportError as exc:
        raise CommandError(str(exc)) from exc


def _bounds(options) -> exports.Bounds:
    return exports.bounds(
        options.get("since"),
        options.get("until"),
        options.get("limit"),
        options.get("cohort"),
        scope=options.get("scope"),
    )


def export(cmd, options) -> None:
    try:
        b = _bounds(options)
        what = options["what"]
        note = None if what == exports.SEALS else exports.empty_note(what, b)
        for chunk in exports.stream(options["what"], options["format"], b, note):
            cmd.stdout.write(chunk, ending="")
    except exports.ExportError as exc:
        raise CommandError(str(exc)) from exc
    if note:
        # stdout is the data; the reason it is empty goes beside it.
        cmd.stderr.write(note)
