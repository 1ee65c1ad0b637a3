"""The sealed methodology files: pinned hashes, seed, describe(), history, refusal of a bad file."""

import dataclasses
import hashlib
import json

import pytest

from core import methodology

# A sealed file never changes: these are the SHA-256 of its bytes as published. v1 is the file
# as it was sealed before commit 2c88d7d edited it in place (restored byte for byte in v2's
# change); a change to either means a new version, never an edit.
SEALED = {
    "1": "ab09ba3a8b59bb8cffe5644c81ff52299b864b920e91e053ae2cf736ec098167",
    "2": "3d539c4d40e6a79f37d024b743d4ad13487c5d6e79b2659082f94eec493ba434",
    "3": "f5870eb90b5abf92ecb6c3d8b19e2cae97ec55d45b72c70db010ca63e3d2f2f5",
    "4": "f43ba4fb33ef2c8bc304683fb73e032cbfc6c3f66da8af59ed77c6aaeba69348",
    "5": "681ba2e849c47b65b27e43cb6a46ea6ac7892b487b09069041b5bca7c88d82b8",
}


@pytest.mark.parametrize("version", sorted(SEALED))
def test_sealed_files_are_pinned(version):
    raw = methodology.path_for(version).read_bytes()
    assert hashlib.sha256(raw).hexdigest() == SEALED[version]
    assert methodology.sealed(version).sha256 == SEALED[version]
    assert set(methodology.VERSIONS) == set(SEALED)


def test_v1_is_the_file_sealed_before_the_in_place_edit():
    v1 = methodology.sealed("1")
    assert v1.meanings["max_bet_fraction"].startswith("No single bet may exceed")
    # The edited copy's hash is known, labelled, and maps to v1.
    edited = "c5333b9b25373a6ef89fb7de82501a55ba2add6f0637f331b26f7d5a398353e3"
    version, label = methodology.version_of_hash(edited)
    assert version == "1" and "2c88d7d" in label
    assert methodology.version_of_hash(SEALED["1"]) == ("1", "v1")
    assert methodology.version_of_hash("0" * 64) == (None, "unknown")


def test_history_lists_every_version_with_its_changes():
    history = methodology.history()
    assert [h["version"] for h in history] == ["5", "4", "3", "2", "1"]
    v5, v4, v3, v2 = history[0], history[1], history[2], history[3]
    assert v5["current"] and v5["sha256"] == methodology.METHODOLOGY_HASH
    assert not v4["current"] and v4["sha256"] == SEALED["4"]
    assert not v3["current"] and v3["sha256"] == SEALED["3"]
    assert not v2["current"] and v2["sha256"] == SEALED["2"]
    changed5 = {name: (old, new) for name, old, new in v5["changed"]}
    assert changed5["edge_labels"][1][-1] == "NOT_TESTED"
    assert changed5["question_coverage"] == (None, "forecast_sample_resolved")
    assert changed5["common_set_imputation"] == (None, "universe_shown_price")
    assert changed5["ranking_view"] == (None, "own_questions")
    # v3's seed claim is corrected in the meanings, its values unchanged.
    v5doc = methodology.sealed("5")
    assert "does not depend on the seed" not in v5doc.meanings["sb_resamples"]
    assert "does not depend on the seed" in methodology.sealed("4").meanings["sb_resamples"]
    # v4 only adds the outside agents' deadline, equal to the frozen-price window.
    assert v4["changed"] == [("outside_submission_window_minutes", None, 30)]
    changed3 = {name: (old, new) for name, old, new in v3["changed"]}
    assert changed3["sb_resamples"] == (2000, 20000)
    assert changed3["edge_multiple_comparison"] == (None, "holm")
    assert changed3["dm_grouping"] == (None, "compact_letter_display")
    assert changed3["dm_loss_order"] == (None, "first_decision_time_then_cohort_week_market")
    assert changed3["return_interval_unit"] == (None, "market")
    assert len(v2["changelog"]) >= 8
    changed = {name: (old, new) for name, old, new in v2["changed"]}
    assert changed["sb_bias_correction"] == ("shift_by_bootstrap_bias", "shift_replicates_by_bias")
    assert changed["sb_min_sd"] == (None, 1e-9)
    assert changed["provisional_reference_sd"] == (None, 0.1335)
    assert "log_eps" not in changed  # unchanged values are not listed


def test_hash_is_the_sha256_of_the_file_bytes():
    raw = methodology.path_for(methodology.METHODOLOGY_VERSION).read_bytes()
    assert hashlib.sha256(raw).hexdigest() == methodology.METHODOLOGY_HASH
    assert json.loads(raw)["version"] == methodology.METHODOLOGY_VERSION


def test_seed_is_derived_from_the_hash():
    assert methodology.seed() == int(methodology.METHODOLOGY_HASH[:16], 16)


def test_constants_are_read_only_and_typed():
    c = methodology.CONSTANTS
    with pytest.raises(dataclasses.FrozenInstanceError):
        c.log_eps = 0.5
    assert isinstance(c.sb_levels, tuple) and isinstance(c.edge_labels, tuple)
    assert c.edge_labels == ("GENUINE_EDGE", "WEAK_EDGE", "NO_EDGE", "NOT_TESTED")


def test_describe_lists_every_constant_with_a_meaning():
    rows = methodology.describe()
    names = [name for name, _, _ in rows]
    assert names == [f.name for f in dataclasses.fields(methodology.Constants)]
    for name, value, meaning in rows:
        assert value == getattr(methodology.CONSTANTS, name)
        assert isinstance(meaning, str) and len(meaning) > 20


def test_a_file_with_a_missing_or_unknown_constant_is_refused(tmp_path):
    doc = json.loads(methodology.path_for("2").read_text())
    del doc["constants"]["log_eps"]
    doc["constants"]["surprise"] = {"value": 1, "meaning": "not a known constant"}
    bad = tmp_path / "methodology_v2.json"
    bad.write_text(json.dumps(doc))
    with pytest.raises(ValueError, match="log_eps"):
        methodology.load("2", path=bad)
    doc["version"] = "3"
    bad.write_text(json.dumps(doc))
    with pytest.raises(ValueError, match="version"):
        methodology.load("2", path=bad)
    # v1 is readable for the changelog but is not what the code computes with.
    with pytest.raises(ValueError, match="keys differ"):
        methodology.load("1")
