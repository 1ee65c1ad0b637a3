"""What markets tells the packages above it, without knowing who they are.

markets records outcomes; it never settles positions or scores forecasts itself (those live in
cohorts and scoring, which depend on markets, not the other way round). Receivers are connected in
their app's ready() and only dispatch to a service.
"""

from django.dispatch import Signal

# Sent, outside any transaction, for a market whose final resolution (resolved or void) or reopen
# has been recorded while positions may still depend on it. kwargs: market. A receiver brings its
# own records in line (cohorts settles, or reverses an earlier settlement) and returns True;
# its exceptions propagate to the caller, which counts them as a failed settlement.
market_resolved = Signal()

# Sent once after a run that changed at least one resolution has committed: anything computed
# from outcomes (scores) is stale. Sent robustly: a receiver's failure is logged, never raised.
resolutions_changed = Signal()
