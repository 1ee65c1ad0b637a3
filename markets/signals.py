"""What markets tells the packages above it, without knowing who they are.

markets records outcomes; it never settles positions or scores forecasts itself (those live in
cohorts and scoring, which depend on markets, not the other way round). Both signals are sent
by markets.resolution.record_resolution only, whose docstring lists everything that follows a
resolution. Receivers are connected in their app's ready() and only dispatch to a service.
"""

from django.dispatch import Signal

# Sent INSIDE the transaction that records a market's resolution (resolved, void, or a staff
# reopen), after its ResolutionChange row is written. kwargs: market. The receiver brings its
# own records in line (cohorts settles, or reverses an earlier settlement), and its writes
# commit or roll back with the resolution: a settlement that cannot follow a staff correction
# refuses the correction, and a simulation's settlement precedes the snapshot of its tick.
# Exceptions propagate to record_resolution (see its `settle_failures`).
market_resolved = Signal()

# Sent on commit of a transaction that changed a resolution (transaction.on_commit), never
# before and never after a rollback: anything computed from outcomes (scores) is stale. Sent
# robustly: a receiver's failure is logged, never raised.
resolutions_changed = Signal()

# Sent by markets.corrections before a staff correction, to ask what time it is in the market's
# scope. kwargs: market. A receiver answers with the scope's clock (a replay or the demo: the
# latest simulated instant its cohorts reached) or None (live: the wall clock). A correction in
# a simulated scope must be timed on that clock: stamped with the wall clock it would lie after
# the scope's as_of, and scoring would treat the corrected market as not resolved yet.
scope_time = Signal()
