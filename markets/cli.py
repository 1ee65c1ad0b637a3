"""`arena sync-markets` and `arena resolve`."""

from django.conf import settings
from django.core.management.base import CommandError

from core.progress import Progress
from markets import services
from markets.gamma import GammaError


def sync_markets_arguments(parser) -> None:
    parser.add_argument(
        "--limit",
        type=int,
        default=None,
        help=f"how many open markets to pull, by volume (default {settings.ARENA_SYNC_LIMIT})",
    )


def sync_markets(cmd, options) -> None:
    limit = options.get("limit")
    limit = settings.ARENA_SYNC_LIMIT if limit is None else limit
    if limit < 1:
        raise CommandError("--limit must be at least 1")
    progress = Progress(limit, "sync-markets")  # drawn on a terminal only
    try:
        report = services.sync_markets(limit=limit, on_page=progress.advance)
    except GammaError as exc:
        raise CommandError(f"Gamma API: {exc}") from exc
    finally:
        progress.close()
    cmd.stdout.write(report.summary())


def resolve(cmd, options) -> None:
    try:
        report = services.resolve_markets()
    except GammaError as exc:
        raise CommandError(f"Gamma API: {exc}") from exc
    cmd.stdout.write(report.summary())
    for flag in report.flags[:20]:
        cmd.stdout.write(f"  needs attention: {flag}")
