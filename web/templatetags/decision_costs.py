"""The decision page's cost and token figures, read from its calls so the two always agree.

A decision row stores the sum of the costs that were known (0 when none was): a server that
reports no cost (llama.cpp, most local servers) would then read as "$0.00" on the page while its
calls say "—". Here the total is None when no call had a price, and the count of unpriced calls
is given beside a partial total. A call lost with its worker (cohorts/llm_calls.py) has neither
tokens nor cost: it counts among the unpriced calls and those with unknown tokens.
"""

from __future__ import annotations

from decimal import Decimal

from django import template

register = template.Library()


@register.simple_tag
def call_costs(decision) -> dict:
    calls = list(decision.llm_calls.all())  # the page prefetches them
    known = [c.cost_usd for c in calls if c.cost_usd is not None]
    return {
        "total": sum(known, Decimal(0)) if known else None,
        "unpriced": len(calls) - len(known),
        "untokened": sum(1 for c in calls if c.prompt_tokens is None),
    }
