"""The sealed methodology: every scoring constant, read from one versioned JSON file.

The file's SHA-256 is published on /methodology and stored on every cohort and score run, so a
number on the site can always be traced to the exact constants that produced it. Changing a
constant means adding methodology_v2.json and bumping METHODOLOGY_VERSION, never editing v1.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
from pathlib import Path
from typing import Any

METHODOLOGY_VERSION = "1"

_DIR = Path(__file__).resolve().parent


@dataclasses.dataclass(frozen=True)
class Constants:
    """Typed, read-only view of the constants; field names are the JSON keys."""

    log_eps: float
    calibration_bins: int
    brier_multiclass_convention: str
    rps_normalisation: str
    bootstrap_resamples: int
    ci_level: float
    bootstrap_interval: str
    bootstrap_unit: str
    seed_rule: str
    dm_bandwidth_rule: str
    dm_kernel: str
    dm_small_sample_correction: str
    dm_min_n: int
    dm_family_alpha: float
    dm_multiple_comparison: str
    info_test_logit_clip: float
    info_test_max_iter: int
    info_test_tol: float
    info_test_max_abs_eta: float
    info_test_min_n: int
    clv_closing_rule: str
    clv_logodds_clip: float
    devig_method: str
    edge_threshold_binary: float
    edge_threshold_multi: float
    kelly_fraction: float
    min_bet: str
    max_bet_fraction: float
    provisional_brier_delta: float
    provisional_power: float
    provisional_alpha: float
    sb_resamples: int
    sb_levels: tuple[float, ...]
    sb_block_rule: str
    sb_min_block_length: float
    sb_bias_correction: str
    sb_min_n: int
    edge_labels: tuple[str, ...]
    tournament_reference: str
    tournament_time_average: str
    tournament_take: str


def path_for(version: str) -> Path:
    return _DIR / f"methodology_v{version}.json"


def _freeze(value: Any) -> Any:
    # Lists become tuples so the frozen dataclass is really immutable (and hashable).
    return tuple(value) if isinstance(value, list) else value


def load(
    version: str = METHODOLOGY_VERSION, path: Path | None = None
) -> tuple[Constants, dict[str, str], str]:
    """Read one methodology file: (constants, meanings, sha256 hex of the file bytes).

    Raises ValueError when the file's keys and the Constants fields differ, so a constant
    can never be silently missing or ignored.
    """
    raw = (path or path_for(version)).read_bytes()
    doc = json.loads(raw)
    if str(doc.get("version")) != version:
        raise ValueError(
            f"methodology file says version {doc.get('version')!r}, expected {version!r}"
        )
    entries = doc["constants"]
    expected = {f.name for f in dataclasses.fields(Constants)}
    if set(entries) != expected:
        missing, extra = expected - set(entries), set(entries) - expected
        raise ValueError(f"methodology v{version} keys differ: missing {missing}, unknown {extra}")
    constants = Constants(**{k: _freeze(v["value"]) for k, v in entries.items()})
    meanings = {k: v["meaning"] for k, v in entries.items()}
    return constants, meanings, hashlib.sha256(raw).hexdigest()


CONSTANTS, _MEANINGS, METHODOLOGY_HASH = load()


def seed() -> int:
    """Seed for every bootstrap, derived from the constants hash (see the seed_rule constant)."""
    return int(METHODOLOGY_HASH[:16], 16)


def describe() -> list[tuple[str, Any, str]]:
    """(name, value, meaning) for every constant, in file order, for the /methodology page."""
    return [(name, getattr(CONSTANTS, name), meaning) for name, meaning in _MEANINGS.items()]
