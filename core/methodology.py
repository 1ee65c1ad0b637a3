"""The frozen methodology: every scoring constant, read from one versioned JSON file.

The file's SHA-256 is published on /methodology and stored on every cohort and score run, so a
number on the site can always be traced to the exact constants that produced it. Changing a
constant (or what one means) means adding methodology_v<N+1>.json and bumping
METHODOLOGY_VERSION, never editing an earlier file: tests pin the hash of every published version.

Which version applies where:
- a cohort keeps the version (and hash) it was opened under: its trading rules and its universe
  sample seed were fixed then, and they are never rewritten;
- a score run always computes with the current version (the fixes of a new version are fixes,
  and scores are recomputed from raw data every run); the run and every leaderboard row record
  the version that scored them, next to the version each cohort started under.
"""

from __future__ import annotations

import dataclasses
import functools
import hashlib
import json
from pathlib import Path
from typing import Any

METHODOLOGY_VERSION = "5"
VERSIONS = ("1", "2", "3", "4", "5")  # every published file, oldest first

_DIR = Path(__file__).resolve().parent

# Hashes that were stored on cohorts and score runs but belong to no published file. Commit 2c88d7d
# edited v1 in place (one meaning text; every value unchanged): rows written between that commit
# and v2 carry this hash. They are v1 rule-wise.
UNSEALED_HASHES = {
    "c5333b9b25373a6ef89fb7de82501a55ba2add6f0637f331b26f7d5a398353e3": (
        "1",
        "v1 as edited in place by commit 2c88d7d (max_bet_fraction's meaning text changed, "
        "every value the same); superseded by v2",
    ),
}


@dataclasses.dataclass(frozen=True)
class Constants:
    """Typed, read-only view of the current version's constants; field names are the JSON keys."""

    log_eps: float
    calibration_bins: int
    brier_multiclass_convention: str
    brier_question_convention: str
    forecast_completion: str
    rps_normalisation: str
    bootstrap_resamples: int
    ci_level: float
    bootstrap_interval: str
    bootstrap_unit: str
    return_interval_unit: str
    seed_rule: str
    dm_bandwidth_rule: str
    dm_kernel: str
    dm_small_sample_correction: str
    dm_min_n: int
    dm_family_alpha: float
    dm_multiple_comparison: str
    dm_loss_order: str
    dm_grouping: str
    info_test_logit_clip: float
    info_test_max_iter: int
    info_test_tol: float
    info_test_max_abs_eta: float
    info_test_min_n: int
    clv_closing_rule: str
    clv_close_horizon_hours: float
    clv_logodds_clip: float
    devig_method: str
    edge_threshold_binary: float
    edge_threshold_multi: float
    kelly_fraction: float
    min_bet: str
    max_bet_fraction: float
    universe_price_window_minutes: int
    outside_submission_window_minutes: int
    market_sync_bound_minutes: int
    provisional_brier_delta: float
    provisional_power: float
    provisional_alpha: float
    provisional_reference_sd: float
    sb_resamples: int
    sb_levels: tuple[float, ...]
    sb_block_rule: str
    sb_min_block_length: float
    sb_bias_correction: str
    sb_min_sd: float
    sb_min_n: int
    edge_labels: tuple[str, ...]
    edge_label_alphas: tuple[float, ...]
    edge_multiple_comparison: str
    edge_borderline_z: float
    tournament_reference: str
    tournament_time_average: str
    tournament_take: str
    win_rate_unit: str
    payout_rounding: str
    bss_base_rate_reference: str
    question_coverage: str
    common_set_imputation: str
    ranking_view: str


@dataclasses.dataclass(frozen=True)
class Document:
    """One frozen file as published: any version, not only the current one."""

    version: str
    sha256: str
    values: dict[str, Any]
    meanings: dict[str, str]
    changelog: tuple[str, ...]

    def rows(self) -> list[tuple[str, Any, str]]:
        return [(name, self.values[name], self.meanings[name]) for name in self.values]


def path_for(version: str) -> Path:
    return _DIR / f"methodology_v{version}.json"


def _freeze(value: Any) -> Any:
    # Lists become tuples so the frozen dataclass is really immutable (and hashable).
    return tuple(value) if isinstance(value, list) else value


def read(version: str, path: Path | None = None) -> Document:
    """Read any published file (for the changelog and for checking a stored hash)."""
    raw = (path or path_for(version)).read_bytes()
    doc = json.loads(raw)
    if str(doc.get("version")) != version:
        raise ValueError(
            f"methodology file says version {doc.get('version')!r}, expected {version!r}"
        )
    entries = doc["constants"]
    return Document(
        version=version,
        sha256=hashlib.sha256(raw).hexdigest(),
        values={k: _freeze(v["value"]) for k, v in entries.items()},
        meanings={k: v["meaning"] for k, v in entries.items()},
        changelog=tuple(doc.get("changelog") or ()),
    )


def load(
    version: str = METHODOLOGY_VERSION, path: Path | None = None
) -> tuple[Constants, dict[str, str], str]:
    """Read the file the code computes with: (constants, meanings, sha256 hex of the file bytes).

    Raises ValueError when the file's keys and the Constants fields differ, so a constant
    can never be silently missing or ignored.
    """
    doc = read(version, path)
    expected = {f.name for f in dataclasses.fields(Constants)}
    if set(doc.values) != expected:
        missing, extra = expected - set(doc.values), set(doc.values) - expected
        raise ValueError(f"methodology v{version} keys differ: missing {missing}, unknown {extra}")
    return Constants(**doc.values), doc.meanings, doc.sha256


CONSTANTS, _MEANINGS, METHODOLOGY_HASH = load()


def seed() -> int:
    """Seed for every bootstrap, derived from the constants hash (see the seed_rule constant)."""
    return int(METHODOLOGY_HASH[:16], 16)


def describe() -> list[tuple[str, Any, str]]:
    """(name, value, meaning) for every current constant, in file order, for /methodology."""
    return [(name, getattr(CONSTANTS, name), meaning) for name, meaning in _MEANINGS.items()]


@functools.cache
def sealed(version: str) -> Document:
    """A published file, read once per process (they never change while it runs)."""
    return read(version)


def history() -> list[dict[str, Any]]:
    """Every published version, newest first, with its hash, its changelog and what differs from
    the version before it (constants added, removed, or with a new value), for /methodology."""
    docs = [sealed(v) for v in VERSIONS]
    out = []
    for i, doc in enumerate(docs):
        before = docs[i - 1] if i else None
        changed = []
        if before is not None:
            for name, value in doc.values.items():
                if name not in before.values:
                    changed.append((name, None, value))
                elif before.values[name] != value:
                    changed.append((name, before.values[name], value))
            changed += [(n, v, None) for n, v in before.values.items() if n not in doc.values]
        out.append(
            {
                "version": doc.version,
                "sha256": doc.sha256,
                "current": doc.version == METHODOLOGY_VERSION,
                "changelog": list(doc.changelog),
                "changed": changed,
            }
        )
    return out[::-1]


def version_of_hash(sha256: str) -> tuple[str | None, str]:
    """(version, label) a stored hash belongs to; (None, "unknown") for a hash of no known file."""
    for version in VERSIONS:
        if sealed(version).sha256 == sha256:
            return version, f"v{version}"
    if sha256 in UNSEALED_HASHES:
        return UNSEALED_HASHES[sha256]
    return None, "unknown"
