"""The sealed methodology file: hash, seed, describe(), and refusal of an incomplete file."""

import dataclasses
import hashlib
import json

import pytest

from core import methodology


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
    assert c.edge_labels == ("GENUINE_EDGE", "WEAK_EDGE", "NO_EDGE")


def test_describe_lists_every_constant_with_a_meaning():
    rows = methodology.describe()
    names = [name for name, _, _ in rows]
    assert names == [f.name for f in dataclasses.fields(methodology.Constants)]
    for name, value, meaning in rows:
        assert value == getattr(methodology.CONSTANTS, name)
        assert isinstance(meaning, str) and len(meaning) > 20


def test_a_file_with_a_missing_or_unknown_constant_is_refused(tmp_path):
    doc = json.loads(methodology.path_for("1").read_text())
    del doc["constants"]["log_eps"]
    doc["constants"]["surprise"] = {"value": 1, "meaning": "not a known constant"}
    bad = tmp_path / "methodology_v1.json"
    bad.write_text(json.dumps(doc))
    with pytest.raises(ValueError, match="log_eps"):
        methodology.load("1", path=bad)
    doc["version"] = "2"
    bad.write_text(json.dumps(doc))
    with pytest.raises(ValueError, match="version"):
        methodology.load("1", path=bad)
