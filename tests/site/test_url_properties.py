"""Property: every public URL, driven with generated parameters, never answers 5xx; a parameter
value outside what the URL documents answers 400 with one line (JSON `{"error"}` under /api/),
never a silent default. Runs on whichever database the suite runs on (SQLite and PostgreSQL).

The oracle for what is valid is written here from the documented rules (whole numbers in a
range, a fixed set of choices, text without control characters), not read from the views.
"""

from __future__ import annotations

import re
from datetime import date

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from arena.health import record_heartbeat
from markets.models import Market
from web import charts, selectors
from web.exports import files as exports

pytestmark = pytest.mark.django_db

WHOLE = re.compile(r"[+-]?[0-9]{1,18}")
SCOPES = list(selectors.SCOPES)
API_LIST = {"limit": ("int", 1, 200), "offset": ("int", 0, 10**9)}
RANGE = {"range": ("choice_ci", list(charts.RANGES))}
# URL pattern -> the parameters it documents.
URLS: dict[str, dict[str, tuple]] = {
    "/": {"scope": ("choice", SCOPES), "sort": ("choice", list(selectors.SORTABLE)),
          "dir": ("choice", ["asc", "desc"]), **RANGE},
    "/cohorts/": {"kind": ("choice", SCOPES)},
    "/cohorts/{cohort}/": RANGE,
    "/cohorts/{cohort}/entries/{slug}/": {**RANGE, "replicate": ("int", 1, 1000)},
    "/competitors/": {},
    "/competitors/{slug}/": {"scope": ("choice", SCOPES)},
    "/markets/": {"q": ("text", 200), "status": ("choice", Market.Status.values),
                  "page": ("int", 1, 10**9)},
    "/markets/{market}/": RANGE,
    "/decisions/{decision}/": {},
    "/methodology/": {},
    "/methodology/spec.md": {"download": ("choice", ["1"])},
    "/about/": {},
    "/enter/": {},
    "/api/openapi.json": {},
    "/api/cohorts/": {**API_LIST, "kind": ("choice", SCOPES)},
    "/api/cohorts/{cohort}": {},
    "/api/cohorts/{cohort}/series": {**RANGE, "entry": ("int", 1, 2**62)},
    "/api/decisions/{decision}": {},
    "/api/leaderboard": {"scope": ("choice", SCOPES), "cohort": ("int", 1, 2**62)},
    "/api/markets": {**API_LIST, "q": ("text", 200), "status": ("choice", Market.Status.values)},
    "/api/markets/{market}": {},
    "/api/markets/{market}/prices": RANGE,
    "/api/overview": {"scope": ("choice", SCOPES), **RANGE},
    "/api/seals": {**API_LIST, "kind": ("choice", SCOPES), "cohort": ("int", 1, 2**62)},
    "/exports/{what}.{fmt}": {"limit": ("int", 1, exports.MAX_LIMIT),
                              "cohort": ("int", 1, 2**62), "since": ("date",),
                              "until": ("date",), "scope": ("choice", SCOPES)},
    "/exports/": {},
    "/method/": {},
    "/method/{name}": {},
    "/healthz": {},
}  # fmt: skip


def valid(spec: tuple, value: str) -> bool:
    if value == "":
        return True  # absent: the documented default
    kind = spec[0]
    if kind == "int":
        return bool(WHOLE.fullmatch(value)) and spec[1] <= int(value) <= spec[2]
    if kind == "choice":
        return value in spec[1]
    if kind == "choice_ci":
        return value.upper() in spec[1]
    if kind == "text":
        return len(value) <= spec[1] and not any(
            ord(c) < 32 or 0x7F <= ord(c) < 0xA0 for c in value
        )
    if kind == "date":
        try:
            return exports.FIRST_DAY <= date.fromisoformat(value) <= exports.LAST_DAY
        except ValueError:
            return False
    raise AssertionError(kind)


def good_values(spec: tuple) -> st.SearchStrategy[str]:
    kind = spec[0]
    if kind == "int":
        return st.integers(spec[1], min(spec[2], spec[1] + 500)).map(str)
    if kind in ("choice", "choice_ci"):
        return st.sampled_from(spec[1])
    if kind == "date":
        return st.dates(date(2020, 1, 1), date(2030, 12, 31)).map(str)
    return st.text(st.characters(min_codepoint=32, blacklist_categories=("Cs", "Cc")), max_size=20)


ANY_TEXT = st.text(st.characters(blacklist_categories=("Cs",)), max_size=30)
NUMBERS = st.integers(-(2**70), 2**70).map(str)
EDGES = st.sampled_from(["", "0", "-1", "abc", "1e3", " 5", "5 ", "٣", "\x00", "9" * 40,
                         "9999-12-31", "0001-01-01", "2026-02-30", "all", "ALL", "1h", "%00"])  # fmt: skip


def values(spec: tuple) -> st.SearchStrategy[str]:
    return st.one_of(good_values(spec), ANY_TEXT, NUMBERS, EDGES)


@st.composite
def requests(draw, ids: dict[str, list[str]]):
    pattern = draw(st.sampled_from(sorted(URLS)))
    path = pattern
    for name, known in ids.items():
        if "{" + name + "}" in path:
            choice = draw(st.one_of(st.sampled_from(known), st.integers(0, 2**64).map(str)))
            path = path.replace("{" + name + "}", choice)
    documented = URLS[pattern]
    chosen = draw(st.lists(st.sampled_from(sorted(documented)), unique=True)) if documented else []
    query = {name: draw(values(documented[name])) for name in chosen}
    if draw(st.booleans()):
        query["utm_source"] = draw(ANY_TEXT)  # unknown names are ignored
    hx_target = draw(st.sampled_from(["", "leaderboard-table", "market-results"]))
    return pattern, path, query, hx_target


def _ids(world) -> dict[str, list[str]]:
    cohort = world.cohort_main
    entry = world.entries[0]
    return {
        "cohort": [str(cohort.pk)],
        "slug": [entry.competitor.slug, "no-such-slug"],
        "market": [str(m.pk) for m in world.markets[:3]],
        "decision": [str(d.pk) for d in world.decisions[:2]],
        "what": sorted(exports.WHATS) + ["nope"],
        "fmt": list(exports.FORMATS) + ["xml"],
        "name": ["verification", "verification.md", "examples/verify_export.py", "../x", "no"],
    }


def _one_line(response, path: str) -> str:
    body = b"".join(response.streaming_content) if response.streaming else response.content
    text = body.decode()
    if path.startswith("/api/"):
        payload = response.json()
        assert set(payload) == {"error"}, payload
        text = payload["error"]
    assert text.strip() and "\n" not in text.strip(), text
    return text


def test_every_public_url_answers_without_5xx_and_refuses_bad_parameters(client, arena_world):
    ids = _ids(arena_world)

    @settings(max_examples=120, deadline=None, derandomize=True,
              suppress_health_check=[HealthCheck.too_slow])  # fmt: skip
    @given(requests(ids))
    def check(request):
        # A worker is running, as it is wherever the site is served: /healthz answers 503 when
        # none has beaten for minutes, which a long suite on an old test database would be.
        record_heartbeat()
        pattern, path, query, hx_target = request
        headers = {"HTTP_HX_REQUEST": "true", "HTTP_HX_TARGET": hx_target} if hx_target else {}
        response = client.get(path, query, **headers)
        assert response.status_code < 500, (path, query, response.status_code)
        documented = URLS[pattern]
        bad = [name for name, value in query.items() if name in documented
               and not valid(documented[name], value)]  # fmt: skip
        if bad:
            assert response.status_code in (400, 404), (path, query, response.status_code)
            if response.status_code == 400:
                _one_line(response, path)
        elif response.status_code == 400:
            # Only a combination can be wrong when each value is fine: since after until, or
            # the seals export (JSON only) asked for as CSV.
            assert pattern.startswith("/exports/"), (path, query)
            message = _one_line(response, path)
            assert (
                "since must not be after until" in message
                or path == "/exports/seals.csv"
                and "JSON only" in message
            ), (path, query, message)
        else:
            assert response.status_code in (200, 404), (path, query, response.status_code)

    check()


def _patterns(patterns, prefix: str = "") -> set[str]:
    out = set()
    for p in patterns:
        route = prefix + str(p.pattern)
        if hasattr(p, "url_patterns"):
            out |= _patterns(p.url_patterns, route)
        else:
            out.add("/" + re.sub(r"<(?:\w+:)?(\w+)>", r"{\1}", route))
    return out


def test_the_property_covers_every_public_url():
    # A URL added to the site without a line in URLS would escape the property above.
    from django.urls import get_resolver

    renames = {"{cohort_id}": "{cohort}", "{market_id}": "{market}", "{decision_id}": "{decision}"}
    public = set()
    for pattern in _patterns(get_resolver().url_patterns):
        if pattern.startswith("/admin/"):
            continue  # staff only, behind the login
        if pattern.startswith("/api/agent/"):
            continue  # behind a token: generated requests with one are test_api_schemathesis.py's
        for old, new in renames.items():
            pattern = pattern.replace(old, new)
        public.add(pattern)
    assert public == set(URLS)


@pytest.mark.parametrize(
    ("path", "message"),
    [
        ("/markets/?q=%00", "q must not contain control characters"),
        ("/api/markets?q=%00", "q must not contain control characters"),
        ("/api/markets?limit=abc", "limit must be a whole number from 1 to 200"),
        ("/api/markets?limit=-1", "limit must be a whole number from 1 to 200"),
        ("/cohorts/?kind=nope", "kind must be one of live, replay, demo"),
        ("/?sort=evil", "sort must be one of"),
        ("/markets/?page=abc", "page must be a whole number"),
        ("/exports/decisions.csv?until=9999-12-31", "until must be between"),
        ("/?range=5Y", "range must be one of 10M, 1H, 1D, 1W, 1M, 3M, ALL"),
        ("/api/overview?scope=moon", "scope must be one of live, replay, demo"),
        ("/api/overview?range=5Y", "range must be one of"),
        ("/api/seals?limit=abc", "limit must be a whole number from 1 to 200"),
        ("/api/leaderboard?cohort=abc", "cohort must be a whole number"),
    ],
)
def test_the_attack_runs_bad_inputs_are_one_line_400s(client, db, path, message):
    response = client.get(path)
    assert response.status_code == 400
    assert message in _one_line(response, path)
