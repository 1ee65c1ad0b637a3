"""`arena verify` (dispatched by the arena command): check the sealed records and exit non-zero,
naming the first record that does not match, when anything was changed after sealing."""

from __future__ import annotations

import json
from pathlib import Path

from django.core.management.base import CommandError

from cohorts.models import Cohort
from cohorts.seals import published as seal_published
from cohorts.seals import verify as seal_verify


def verify_arguments(parser) -> None:
    parser.add_argument("--cohort", type=int, help="only this cohort (default: all)")
    parser.add_argument(
        "--export",
        metavar="FILE",
        help="verify a seal export (/exports/seals.json) alone, without the database",
    )
    parser.add_argument(
        "--published",
        metavar="FILE",
        nargs="+",
        help="saved /api/seals responses or checkpoints: today's roots and logs (the database's, "
        "or the export's with --export) must still contain them, and their signatures verify",
    )


def _load(path: str, what: str) -> dict:
    try:
        return json.loads(Path(path).read_text(encoding="utf-8"))
    except OSError as exc:
        raise CommandError(f"cannot read {what} {path}: {exc.strerror or exc}") from exc
    except (UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise CommandError(f"{what} {path} is not JSON: {exc}") from exc


def _load_saved(path: str) -> object:
    """A saved JSON document, or JSON lines (ARENA_SEAL_PUBLISH_DIR's checkpoint files)."""
    try:
        return _load(path, "saved file")
    except CommandError:
        try:
            lines = Path(path).read_text(encoding="utf-8").splitlines()
            return [json.loads(line) for line in lines if line.strip()]
        except (OSError, UnicodeDecodeError, json.JSONDecodeError):
            raise CommandError(f"saved file {path} is neither JSON nor JSON lines") from None


def verify(cmd, options) -> None:
    paths = options.get("published") or []
    published = [_load_saved(path) for path in paths] if paths else None
    try:
        if published is not None:
            seal_published.collect(published)  # a file holding nothing comparable is refused
    except (seal_published.PublishedFormatError, KeyError, TypeError, AttributeError) as exc:
        raise CommandError(f"a --published file is not a saved /api/seals response: {exc}") from exc
    if options.get("export"):
        doc = _load(options["export"], "export")
        try:
            report = seal_verify.verify_export(doc, published)
        except (seal_verify.ExportFormatError, KeyError, TypeError, AttributeError) as exc:
            raise CommandError(f"{options['export']} is not a usable seal export: {exc}") from exc
    else:
        cohort_id = options.get("cohort")
        if cohort_id is not None and not Cohort.objects.filter(pk=cohort_id).exists():
            raise CommandError(f"no cohort with id {cohort_id}")
        report = seal_verify.verify_database(cohort_id, published)
    for note in report.notes:
        cmd.stdout.write(f"note: {note}")
    if not report.ok:
        for problem in report.problems[1:]:
            cmd.stderr.write(problem)
        raise CommandError(f"verify FAILED: {report.problems[0]}")
    cmd.stdout.write(f"ok: {report.summary()} match their seals")
