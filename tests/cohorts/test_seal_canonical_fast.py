"""The C-encoder path of canonical() prints exactly what the reference JCS encoder prints, for
every JSON value (the pinned seal bytes in test_seal_bytes.py must never move)."""

from __future__ import annotations

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from cohorts.seals import canonical as sc

KEYS = st.text(max_size=6) | st.sampled_from(["a", "\ue000", "\U0001f600", "b\U00010000"])
SCALARS = (
    st.none()
    | st.booleans()
    | st.integers(min_value=-(2**60), max_value=2**60)
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.sampled_from([0.0, -0.0, 1.0, 1e-7, 1e21, 1e16, 2.0**53, 0.1, 123.456, 5e-324])
    | st.text(max_size=10)
)
JSON = st.recursive(
    SCALARS,
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(KEYS, inner, max_size=4),
    max_leaves=20,
)


@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(JSON)
def test_the_fast_path_prints_the_reference_bytes(value):
    assert sc.canonical(value) == sc._enc(value).encode("utf-8", "surrogatepass")


def test_values_only_the_reference_prints_right_take_it():
    for value in (1e-7, 2**60, {"\U0001f600": 1, "\ue000": 2}, 1e21):
        try:
            sc._fast(value)
        except sc._Slow:
            continue
        raise AssertionError(f"{value!r} took the fast path")
    assert sc.canonical({"b": 1.0, "a": [0.5, None, True]}) == b'{"a":[0.5,null,true],"b":1}'
