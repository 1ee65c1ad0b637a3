"""`arena verify`: the sealed records (cohorts/seals/cli.py), and with `--scores` the published
leaderboards recomputed from the exports (scoring/verify_scores.py).

Wired here, at the top floor, because the scores check reads the exports (web) and scores with
the scoring engine, and cohorts, where the seal check lives, may import neither.
"""

from __future__ import annotations

import json
import time
from pathlib import Path

from django.core.management.base import CommandError

from cohorts.seals import cli as seal_cli
from core.progress import Progress
from scoring import verify_scores
from web.exports import files as exports

# The exports the scores rest on, by the file name `--scores --export DIR` reads.
SCORE_EXPORTS = ("scores", "forecasts", "trades")
MONEY_EXPORT = "snapshots"  # optional: P/L and return are checked when it is there whole
BAR_AFTER = 2.0  # seconds: a shorter check draws no bar


def verify_arguments(parser) -> None:
    seal_cli.verify_arguments(parser)
    parser.add_argument(
        "--scores",
        action="store_true",
        help="recompute the latest published leaderboard of each scope from the exports "
        "(the database's, or with --export DIR the scores.json, forecasts.json, trades.json and "
        "optionally snapshots.json saved there) and name every figure that differs",
    )


def verify(cmd, options) -> None:
    if not options.get("scores"):
        seal_cli.verify(cmd, options)
        return
    if options.get("published") or options.get("cohort") is not None:
        raise CommandError("--scores checks whole score runs: without --published and --cohort")
    started = time.monotonic()
    directory = options.get("export")
    docs = {what: _read(directory, what) if directory else _export(what) for what in SCORE_EXPORTS}
    for what, doc in docs.items():
        if doc.get("row_cap_reached"):
            raise CommandError(
                f"the {what} export reached its row cap: it does not hold every row the scores "
                "rest on (export it per scope with a higher --limit)"
            )
    scores, forecasts, trades = (docs[what]["rows"] for what in SCORE_EXPORTS)
    snapshots, money_note = _snapshots(directory)
    total = verify_scores.rows_to_check(scores)
    bar = Progress(total, "scores", stream=cmd.stderr._out)
    bar.enabled = bar.enabled and total > 0

    def advance(n: int) -> None:
        if time.monotonic() - started > BAR_AFTER:
            bar.advance(n)
        else:
            bar.done += n

    try:
        check = verify_scores.check_scores(scores, forecasts, trades, advance, snapshots)
    except verify_scores.ScoreExportError as exc:
        raise CommandError(f"the exports cannot be read: {exc}") from exc
    finally:
        if time.monotonic() - started > BAR_AFTER:
            bar.close()
    for note in [*([money_note] if money_note else []), *check.notes]:
        cmd.stdout.write(f"note: {note}")
    if not check.runs:
        raise CommandError("verify FAILED: no finished score run in the scores export")
    if not check.ok:
        for problem in check.problems[1:]:
            cmd.stderr.write(problem)
        raise CommandError(
            f"verify FAILED: {len(check.problems)} published figures differ; first: "
            f"{check.problems[0]}"
        )
    cmd.stdout.write(f"ok: {check.summary()} recomputed from the exports, within 1e-12")


def _export(what: str) -> dict:
    """The export as /exports/<what>.json serves it, of every scope's whole history."""
    docs = []
    for scope in exports.SCOPES:
        # All of the scope's time: live exports default to the last days, and a run rests on all.
        b = exports.bounds(since=exports.FIRST_DAY, limit=exports.MAX_LIMIT, scope=scope)
        docs.append(json.loads("".join(exports.stream(what, "json", b))))
    return {
        "rows": [row for doc in docs for row in doc["rows"]],
        "row_cap_reached": any(doc["row_cap_reached"] for doc in docs),
    }


def _snapshots(directory: str | None) -> tuple[list[dict] | None, str | None]:
    """The snapshot rows, or None and why P/L and return are not checked."""
    if directory and not (Path(directory) / f"{MONEY_EXPORT}.json").exists():
        return None, f"no {MONEY_EXPORT}.json in {directory}: return_pct and pnl not recomputed"
    doc = _read(directory, MONEY_EXPORT) if directory else _export(MONEY_EXPORT)
    if doc.get("row_cap_reached"):
        return None, (
            f"the {MONEY_EXPORT} export reached its row cap: return_pct and pnl not recomputed"
        )
    return doc["rows"], None


def _read(directory: str, what: str) -> dict:
    path = Path(directory) / f"{what}.json"
    try:
        doc = json.loads(path.read_text(encoding="utf-8"))
    except OSError as exc:
        raise CommandError(f"cannot read {path}: {exc.strerror or exc}") from exc
    except (UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise CommandError(f"{path} is not JSON: {exc}") from exc
    if not isinstance(doc, dict) or not isinstance(doc.get("rows"), list):
        raise CommandError(f"{path} is not an /exports/{what}.json document (no rows)")
    return doc
