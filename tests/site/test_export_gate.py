"""What an anonymous export may cost: kept by data version, limited in concurrency (429 with
Retry-After beyond), its slot held while it streams and freed when it ends or is dropped."""

import pytest
from django.core.cache import cache
from django.http import StreamingHttpResponse

from core.versions import data_changed
from web.exports import gate as export_gate

pytestmark = pytest.mark.django_db(transaction=True)
WIDE = "/exports/snapshots.csv?since=2026-01-01&until=2026-12-31"


@pytest.fixture(autouse=True)
def cache_on(settings):
    settings.ARENA_PAGE_CACHE = True
    settings.ARENA_EXPORTS_CONCURRENT = 2
    settings.ARENA_EXPORTS_PER_CLIENT = 1
    cache.clear()


def _read(response) -> bytes:
    if isinstance(response, StreamingHttpResponse):
        content = b"".join(response.streaming_content)
        response.close()
        return content
    return response.content


def test_a_repeated_export_is_a_cache_read_until_the_data_moves(client, arena_world):
    first = client.get(WIDE)
    assert isinstance(first, StreamingHttpResponse)
    content = _read(first)
    again = client.get(WIDE)
    assert again["X-Cache"] == "hit" and again.content == content
    assert again["X-Export-Limit"] == first["X-Export-Limit"]
    data_changed()  # a committed write: the kept copy is no longer served
    after = client.get(WIDE)
    assert "X-Cache" not in after and _read(after) == content
    assert client.get(WIDE)["X-Cache"] == "hit"


def test_exports_beyond_the_limits_get_429_with_retry_after(client, arena_world):
    held = client.get(WIDE, REMOTE_ADDR="192.0.2.1")  # streaming, not yet read: holds a slot
    same_client = client.get(WIDE + "&limit=5", REMOTE_ADDR="192.0.2.1")
    same_net = client.get(WIDE + "&limit=6", REMOTE_ADDR="192.0.2.1")
    assert same_client.status_code == same_net.status_code == 429
    assert same_client["Retry-After"] == str(export_gate.RETRY_AFTER_SECONDS)
    other = client.get(WIDE + "&limit=7", REMOTE_ADDR="192.0.2.2")  # the second overall slot
    third = client.get(WIDE + "&limit=8", REMOTE_ADDR="192.0.2.3")
    assert other.status_code == 200 and third.status_code == 429
    _read(held)
    other.close()  # dropped unread: its slot is freed too
    assert export_gate.SLOTS._running == 0
    assert client.get(WIDE + "&limit=8", REMOTE_ADDR="192.0.2.3").status_code == 200


def test_a_kept_export_needs_no_slot(client, arena_world):
    _read(client.get(WIDE, REMOTE_ADDR="192.0.2.1"))
    held = [client.get(WIDE + f"&limit={n}", REMOTE_ADDR=f"192.0.2.{n}") for n in (2, 3)]
    assert client.get(WIDE, REMOTE_ADDR="192.0.2.9")["X-Cache"] == "hit"
    for response in held:
        _read(response)


def test_a_refused_export_frees_its_slot(client, arena_world):
    for _ in range(5):
        assert client.get("/exports/snapshots.csv?limit=0").status_code == 400
        assert client.get("/exports/snapshots.csv?since=banana").status_code == 400
    assert export_gate.SLOTS._running == 0


def test_a_refused_export_runs_no_query_and_no_middleware_behind_the_door(
    client, arena_world, django_user_model
):
    """The 429 is answered by web/exports/door.py before sessions, auth and the page cache: a
    flood of refusals costs no database query (not even the session of a signed-in reader) and
    no Set-Cookie or Vary: Cookie from the stack behind."""
    from django.db import connection
    from django.test.utils import CaptureQueriesContext

    user = django_user_model.objects.create_user("reader", password="x")
    client.force_login(user)  # a real session: the stack would load it from the database
    held = [client.get(WIDE + f"&limit={n}", REMOTE_ADDR=f"192.0.2.{n}") for n in (2, 3)]
    with CaptureQueriesContext(connection) as queries:
        refused = client.get(WIDE + "&limit=9", REMOTE_ADDR="192.0.2.9")
    assert refused.status_code == 429 and refused["Retry-After"]
    assert len(queries) == 0, [q["sql"] for q in queries.captured_queries]
    assert "Set-Cookie" not in refused and "Cookie" not in refused.get("Vary", "")
    for response in held:
        _read(response)
    assert export_gate.SLOTS._running == 0


def test_an_admitted_export_that_fails_frees_its_slot(client, arena_world):
    """A slot taken at the door is given back whatever the view does with it: a 400 from the
    body (seals is JSON only) or a kept copy served while a slot was free."""
    assert client.get("/exports/seals.csv").status_code == 400
    _read(client.get(WIDE))
    assert client.get(WIDE)["X-Cache"] == "hit"
    assert export_gate.SLOTS._running == 0


def test_the_machine_wide_limit_holds_across_processes(settings, tmp_path):
    """Two gates (two gunicorn workers) share ARENA_EXPORTS_MACHINE slots through lock files."""
    settings.VAR_DIR = tmp_path
    settings.ARENA_EXPORTS_MACHINE = 1
    one, other = export_gate._Slots(), export_gate._Slots()
    assert one.take("192.0.2.1")
    assert not other.take("192.0.2.2")  # the other worker: the machine's one slot is taken
    one.give_back("192.0.2.1")
    assert other.take("192.0.2.2")
    other.give_back("192.0.2.2")
