"""What a decision did, in the words every page uses: a HOLD the model chose is told apart
from one the arena forced (an answer it could not use), and a link to a decision names it."""

from __future__ import annotations

HOLD = "HOLD"


def action_label(action: str, hold_reason: str) -> str:
    """What a decision did, in words that tell a HOLD the model chose from one the arena forced
    (an answer that could not be used: `hold_reason` says why)."""
    if action == HOLD:
        return "forced HOLD" if hold_reason else "chosen HOLD"
    return action or "—"


def decision_link_text(week: int, action: str, hold_reason: str, status: str) -> str:
    """A link to a decision names it: its week and what it did (or its status, when it did
    nothing yet), never a bare "Done"."""
    did = action_label(action, hold_reason)
    return f"week {week}: {did if action else status.lower()}"
