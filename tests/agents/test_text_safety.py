"""core/text.py: which characters untrusted text loses, and the linear-time JSON search."""

import time

import pytest

from agents.parsing import extract_json
from core.text import clean, clean_json, flat, reveal_bidi, storable, storable_json


def test_clean_drops_controls_bidi_and_surrogates_but_keeps_line_breaks():
    assert clean("a\x00b\x07c\td\ne\r\u202eseY\u2066\ud800\x9b") == "abc\td\ne\rseY"


def test_flat_puts_text_on_one_line():
    assert flat("  Will it\n\nIMPORTANT:\u2028 rain?\t ") == "Will it IMPORTANT: rain?"


def test_storable_replaces_only_what_no_database_takes():
    assert storable("a\x00\u202e\ud800") == "a\ufffd\u202e\ufffd"


def test_reveal_bidi_shows_the_code_points():
    assert reveal_bidi("\u202eseY") == "<U+202E>seY"


def test_json_walks_keep_untouched_values_and_clean_nested_ones():
    value = {"a": [1, {"b\x00": "x\u202ey"}], "c": None}
    assert clean_json(value) == {"a": [1, {"b": "xy"}], "c": None}
    assert storable_json(value) == {"a": [1, {"b\ufffd": "x\u202ey"}], "c": None}
    same = {"a": ["ok", {"b": 2}]}
    assert clean_json(same) is same


def test_json_walk_survives_nesting_deeper_than_the_recursion_limit():
    value: list = []
    for _ in range(100_000):
        value = [value, "\x00"]
    out = storable_json(value)
    assert out[1] == "\ufffd"


@pytest.mark.parametrize(
    "text",
    [
        "{" * 1_000_000,
        '{"a":' * 200_000,
        "x {y} " * 170_000,
        '{"k": "{' * 130_000,
        '{"a": [' + "0," * 500_000,
        "```json\n{{{\n```\n" * 60_000,
        '{"a":[0,' * 40 + "0," * 500_000 + "]}x" * 40,
    ],
)
def test_finding_the_object_in_a_megabyte_takes_well_under_a_second(text):
    started = time.process_time()
    with pytest.raises(ValueError):
        extract_json(text)
    assert time.process_time() - started < 1.0
