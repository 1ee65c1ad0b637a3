"""The Gamma gamma_client against the fake server: paging, lookups, retries, faults."""

import time

import pytest
import requests

from markets.gamma import (
    GammaBadResponse,
    GammaClient,
    GammaClientError,
    GammaUnavailable,
    MarketNotFound,
    PageLog,
)
from tests.fakes.gamma_server import (
    OFFSET_ON_KEYSET,
    OFFSET_TOO_LARGE,
    bulk_markets,
    example_resolved_binary,
    make_market,
)


def ids(pages):
    return [m["id"] for page in pages for m in page]


def test_top_markets_walks_keyset_pages_by_volume(gamma, gamma_client):
    markets = bulk_markets(250)
    gamma.add(*reversed(markets))  # stored order must not matter: the server sorts
    pagelog = PageLog()
    pages = list(gamma_client.iter_top_markets(250, log_to=pagelog))

    assert [len(p) for p in pages] == [100, 100, 50]
    assert ids(pages) == [m["id"] for m in markets]  # volume descending
    assert pagelog.pages == 3 and not pagelog.stopped_early
    sent = gamma.requests_to("/markets/keyset")
    assert "after_cursor" not in sent[0].query
    for req in sent[1:]:
        assert req.query["after_cursor"][0]
    for req in sent:  # every filter resent on every page (the cursor is bound to them)
        assert req.query["closed"] == ["false"]
        assert req.query["order"] == ["volumeNum"]
        assert req.query["ascending"] == ["false"]
        assert req.query["limit"] == ["100"]
        assert "offset" not in req.query and "cursor" not in req.query


def test_top_markets_stops_at_limit_without_extra_pages(gamma, gamma_client):
    gamma.add(*bulk_markets(300))
    pages = list(gamma_client.iter_top_markets(150))
    assert len(ids(pages)) == 150
    assert len(gamma.requests_to("/markets/keyset")) == 2


def test_last_full_page_then_empty_page_ends_pagination(gamma, gamma_client):
    # next_cursor is present on every full page, so 200 markets take a third, empty page.
    gamma.add(*bulk_markets(200))
    pages = list(gamma_client.iter_keyset({"closed": "false"}))
    assert [len(p) for p in pages] == [100, 100, 0]


def test_top_markets_skips_closed_markets(gamma, gamma_client):
    gamma.add(make_market("1", volume=10), example_resolved_binary())
    assert ids(gamma_client.iter_top_markets(10)) == ["1"]


def test_repeated_cursor_stops_pagination(gamma, gamma_client):
    gamma.add(*bulk_markets(500))
    gamma.repeat_cursor = True  # the server keeps answering page 1 with the same cursor
    pagelog = PageLog()
    pages = list(gamma_client.iter_keyset({"closed": "false"}, log_to=pagelog))
    # Page 1, then page 1 again with the cursor already seen: stop there, not after 1000.
    assert len(pages) == 2 and ids([pages[0]]) == ids([pages[1]])
    assert "repeated" in pagelog.stopped_early
    assert len(gamma.requests_to("/markets/keyset")) == 2


def test_page_cap(gamma, sleeps):
    gamma.add(*bulk_markets(500))
    gamma_client = GammaClient(gamma.url, timeout=1, sleep=sleeps.append, max_pages=2)
    pagelog = PageLog()
    pages = list(gamma_client.iter_keyset({"closed": "false"}, log_to=pagelog))
    assert len(pages) == 2 and "page cap" in pagelog.stopped_early


def test_get_market_by_id_open_or_closed(gamma, gamma_client):
    gamma.add(example_resolved_binary())
    assert gamma_client.get_market("604489")["question"] == "Will Trump visit China by October 31?"


def test_unknown_id_is_market_not_found(gamma, gamma_client, sleeps):
    with pytest.raises(MarketNotFound):
        gamma_client.get_market("999")
    assert sleeps == []  # a 404 is an answer, not retried


def test_condition_ids_batched_by_100_and_both_states(gamma, gamma_client):
    markets = bulk_markets(230)
    for m in markets[:30]:
        m["closed"] = True
    gamma.add(*markets)
    found = gamma_client.markets_by_condition_ids([m["conditionId"] for m in markets])

    assert sorted(m["id"] for m in found) == sorted(m["id"] for m in markets)
    sent = gamma.requests_to("/markets/keyset")
    assert all(len(r.query["condition_ids"]) <= 100 for r in sent)
    assert {r.query["closed"][0] for r in sent} == {"true", "false"}
    assert len(sent) == 6  # 3 batches x (open, closed)


def test_condition_ids_closed_only(gamma, gamma_client):
    gamma.add(make_market("1"), example_resolved_binary())
    cids = [make_market("1")["conditionId"], example_resolved_binary()["conditionId"]]
    assert [m["id"] for m in gamma_client.markets_by_condition_ids(cids, closed=True)] == ["604489"]


def test_500_then_success_is_retried(gamma, gamma_client, sleeps):
    gamma.add(*bulk_markets(5))
    gamma.fail(status=500)
    assert len(ids(gamma_client.iter_top_markets(5))) == 5
    assert sleeps == [0.5]  # one backoff before the second try


def test_backoff_grows_exponentially_then_gives_up(gamma, gamma_client, sleeps):
    gamma.fail(status=503, times=10)
    with pytest.raises(GammaUnavailable, match="503 after 4 tries"):
        gamma_client.get_market("1")
    assert sleeps == [0.5, 1.0, 2.0]
    assert len(gamma.requests) == 4


@pytest.mark.exclusive  # a 0.3 s read timeout and a wall-time bound: runs alone
def test_timeout_once_is_retried(gamma, sleeps):
    gamma.add(*bulk_markets(3))
    gamma.fail("timeout", delay=5.0)  # held far beyond the gamma_client's timeout
    gamma_client = GammaClient(gamma.url, timeout=0.3, retries=2, sleep=sleeps.append)
    started = time.monotonic()
    assert len(ids(gamma_client.iter_top_markets(3))) == 3
    assert time.monotonic() - started < 3  # it gave up on the held request, did not wait
    assert len(sleeps) == 1


def test_connection_refused_is_unavailable(sleeps):
    with pytest.raises(GammaUnavailable, match="ConnectionError"):
        GammaClient("http://127.0.0.1:9", timeout=0.5, retries=1, sleep=sleeps.append).get_market(
            "1"
        )
    assert len(sleeps) == 1


def test_retry_after_is_honoured(gamma, gamma_client, sleeps):
    gamma.add(make_market("1"))
    gamma.fail(status=429, retry_after="7")
    assert gamma_client.get_market("1")["id"] == "1"
    assert sleeps == [7.0]


def test_retry_after_is_capped(gamma, gamma_client, sleeps):
    gamma.add(make_market("1"))
    gamma.fail(status=429, retry_after="86400")
    gamma_client.get_market("1")
    assert sleeps == [120.0]


def test_malformed_body_once_is_retried(gamma, gamma_client, sleeps):
    gamma.add(*bulk_markets(3))
    gamma.fail("malformed")
    assert len(ids(gamma_client.iter_top_markets(3))) == 3
    assert len(sleeps) == 1


def test_malformed_body_every_time_is_a_clear_error(gamma, gamma_client):
    gamma.fail("malformed", times=10)
    with pytest.raises(GammaBadResponse, match="not JSON after 4 tries"):
        list(gamma_client.iter_top_markets(10))


def test_wrong_shape_every_time_is_bad_response(gamma, gamma_client, sleeps):
    gamma.fail("shape", times=10)  # 200 with a bare list where {markets, next_cursor} belongs
    with pytest.raises(GammaBadResponse, match="not the documented shape after 4 tries"):
        list(gamma_client.iter_top_markets(10))


def test_client_error_is_not_retried(gamma, gamma_client, sleeps):
    with pytest.raises(GammaClientError) as err:
        gamma_client._get_json("/markets/keyset", {"offset": 100})
    assert err.value.status == 422 and OFFSET_ON_KEYSET["error"] in err.value.body
    assert sleeps == []


def test_user_agent_and_timeout_on_every_call(gamma, gamma_client):
    gamma.add(make_market("1"))
    gamma_client.get_market("1")
    list(gamma_client.iter_top_markets(1))
    agents = {r.headers.get("User-Agent") for r in gamma.requests}
    assert len(agents) == 1
    (agent,) = agents
    assert agent.startswith("forecasting-arena/")


# --- the fake itself reproduces the documented traps ----------------------------------------


def test_fake_keyset_rejects_offset_and_ignores_cursor(gamma):
    gamma.add(*bulk_markets(150))
    r = requests.get(f"{gamma.url}/markets/keyset", params={"offset": 100}, timeout=5)
    assert r.status_code == 422 and r.json() == OFFSET_ON_KEYSET
    first = requests.get(f"{gamma.url}/markets/keyset", params={"limit": 100}, timeout=5).json()
    again = requests.get(
        f"{gamma.url}/markets/keyset",
        params={"limit": 100, "cursor": first["next_cursor"]},
        timeout=5,
    ).json()
    assert again == first  # `cursor` is not `after_cursor`: page 1 again


def test_fake_clamps_limit_and_binds_cursor_to_query(gamma):
    gamma.add(*bulk_markets(150))
    page = requests.get(f"{gamma.url}/markets/keyset", params={"limit": 500}, timeout=5).json()
    assert len(page["markets"]) == 100
    other = requests.get(
        f"{gamma.url}/markets/keyset",
        params={"limit": 500, "order": "volumeNum", "after_cursor": page["next_cursor"]},
        timeout=5,
    )
    assert other.status_code == 422


def test_fake_legacy_list_and_offset_ceiling(gamma):
    gamma.add(*bulk_markets(5))
    r = requests.get(f"{gamma.url}/markets", params={"limit": 2}, timeout=5)
    assert isinstance(r.json(), list) and len(r.json()) == 2
    assert requests.get(f"{gamma.url}/markets", params={"slug": "nope"}, timeout=5).json() == []
    r = requests.get(f"{gamma.url}/markets", params={"offset": 2100}, timeout=5)
    assert r.status_code == 422 and r.json() == OFFSET_TOO_LARGE


def test_fake_rejects_more_than_100_condition_ids(gamma):
    params = [("condition_ids", f"0x{i:064x}") for i in range(101)]
    assert requests.get(f"{gamma.url}/markets/keyset", params=params, timeout=5).status_code == 422
