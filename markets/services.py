"""The markets app's write services, in one place for its callers (tasks, CLI, admin, cohorts).

Each lives in the module of its responsibility: syncing markets and prices (markets.sync), the
one way a resolution is recorded (markets.resolution), upstream resolution detection
(markets.upstream) and staff corrections (markets.corrections).
"""

from markets.corrections import set_resolution
from markets.resolution import record_resolution
from markets.sync import (
    SyncReport,
    backfill_markets,
    backfill_price_history,
    store_markets,
    sync_markets,
)
from markets.upstream import ResolveReport, Verdict, judge, resolve_markets

__all__ = [
    "ResolveReport",
    "SyncReport",
    "Verdict",
    "backfill_markets",
    "backfill_price_history",
    "judge",
    "record_resolution",
    "resolve_markets",
    "set_resolution",
    "store_markets",
    "sync_markets",
]
