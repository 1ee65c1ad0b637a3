"""Hot pages rendered on write: after a write commits in a worker, the visitor that follows
finds the home page, the open cohorts' pages, the leaderboard API, the overview series and the
first market list page already cached; without a worker nothing is queued and visitors render
as they do without it."""

from datetime import UTC, datetime

import pytest
from django.core.cache import cache

from agents.models import Competitor
from arena.celery import app
from cohorts.services import open_cohort
from core.versions import data_changed
from markets.models import Market
from web import prerender, tasks

pytestmark = pytest.mark.django_db(transaction=True)
SUNDAY = datetime(2026, 11, 15, tzinfo=UTC)


@pytest.fixture(autouse=True)
def page_cache_on(settings):
    settings.ARENA_PAGE_CACHE = True
    cache.clear()


@pytest.fixture
def a_cohort():
    Competitor.objects.create(slug="cash", display_name="Cash", kind="baseline", strategy="cash")
    cohort, _ = open_cohort(SUNDAY, at=SUNDAY)
    return cohort


def _write(external_id: str, question: str) -> None:
    """A market stored and announced as every write path announces its commit."""
    Market.objects.create(
        external_id=external_id, question=question, outcomes=["Yes", "No"],
        last_prices={"Yes": "0.5", "No": "0.5"}, volume=1000,
    )  # fmt: skip
    data_changed()


def _visitor_sees(client, paths):
    return {path: client.get(path).get("X-Cache") for path in paths}


def test_the_hot_pages_are_the_ones_visitors_read_most(a_cohort):
    assert prerender.hot_paths() == [
        "/", "/api/leaderboard", "/api/overview", "/markets/", f"/cohorts/{a_cohort.pk}/"
    ]


def test_a_render_round_leaves_every_hot_page_cached_for_the_next_visitor(client, a_cohort):
    _write("m1", "Q?")
    rendered = prerender.render_hot_pages()
    assert set(rendered) == set(prerender.hot_paths())
    assert set(rendered.values()) == {"miss"}  # each rendered and stored now
    assert set(_visitor_sees(client, rendered).values()) == {"hit"}
    # A round with nothing new renders nothing.
    assert set(prerender.render_hot_pages().values()) == {"hit"}


@pytest.fixture
def in_a_worker(monkeypatch):
    monkeypatch.setattr(tasks, "_worker", True)
    eager = app.conf.task_always_eager
    app.conf.task_always_eager = True  # the queued task runs here, as a worker would run it
    yield
    app.conf.task_always_eager = eager


def test_a_write_committed_in_a_worker_renders_the_hot_pages(client, a_cohort, in_a_worker):
    prerender.render_hot_pages()
    _write("m2", "New?")
    # The write's token change queued (and, eager, ran) a round: visitors find the new data.
    seen = _visitor_sees(client, prerender.hot_paths())
    assert set(seen.values()) == {"hit"}, seen
    assert "New?" in client.get("/markets/").content.decode()
    assert cache.get(prerender.QUEUED_KEY) is None  # taken by the round that ran


def test_a_write_outside_a_worker_queues_nothing(client, a_cohort, monkeypatch):
    # Explicitly outside: a test that ran a Celery worker in this process has marked it one.
    monkeypatch.setattr(tasks, "_worker", False)
    prerender.render_hot_pages()
    _write("m3", "Web?")
    assert cache.get(prerender.QUEUED_KEY) is None
    assert client.get("/markets/").get("X-Cache") == "miss"  # the visitor renders, as before


def test_writes_while_a_round_is_queued_ride_along(a_cohort, monkeypatch):
    monkeypatch.setattr(tasks, "_worker", True)  # not eager: the message waits in the broker
    assert not app.conf.task_always_eager
    sent = []
    # The cache outlives a test: an earlier write in this worker may have left its mark.
    cache.delete(prerender.QUEUED_KEY)
    for n in range(3):
        _write(f"b{n}", "B?")
        sent.append(cache.get(prerender.QUEUED_KEY))
    assert sent == [1, 1, 1]  # one round queued for the three writes
    # The round takes the mark before it renders (rendered outside a worker, so that nothing
    # its renders write queues another round here).
    monkeypatch.setattr(tasks, "_worker", False)
    prerender.render_hot_pages()
    assert cache.get(prerender.QUEUED_KEY) is None


def test_until_the_round_renders_them_visitors_get_the_previous_version_never_a_render(
    client, a_cohort, monkeypatch
):
    prerender.render_hot_pages()  # every hot page cached at this version
    monkeypatch.setattr(tasks, "_worker", True)  # not eager: the round waits in the broker
    cache.delete(prerender.QUEUED_KEY)
    _write("r1", "Reserved?")
    # The write reserved the new version's renders for the round: visitors read the previous
    # version meanwhile ("stale"), none renders a hot page.
    before = _visitor_sees(client, prerender.hot_paths())
    assert set(before.values()) == {"stale"}, before
    assert "Reserved?" not in client.get("/markets/").content.decode()
    monkeypatch.setattr(tasks, "_worker", False)
    rendered = prerender.render_hot_pages()  # the round renders through the reservation
    assert set(rendered.values()) == {"miss"}, rendered
    after = _visitor_sees(client, prerender.hot_paths())
    assert set(after.values()) == {"hit"}, after
    assert "Reserved?" in client.get("/markets/").content.decode()


def test_the_renders_are_reserved_before_a_visitor_can_read_the_new_tokens(a_cohort, monkeypatch):
    """No window between a write's new tokens and their reservation: when the tokens are about
    to be published, every hot page's lock under them is already held and the cache still
    holds the old tokens."""
    from core import versions

    prerender.render_hot_pages()
    monkeypatch.setattr(tasks, "_worker", True)  # not eager: the round waits in the broker
    cache.delete(prerender.QUEUED_KEY)
    seen = []

    def check(tokens, **_kwargs):
        # Connected after the site's receiver, so it runs once the site has reserved.
        published = cache.get_many(list(tokens))
        reserved = prerender.reserve(prerender.hot_paths(), tokens)  # taken already: 0 more
        seen.append((published, tokens, reserved))

    versions.replacing.connect(check, dispatch_uid="test.check")
    try:
        _write("w1", "Window?")
    finally:
        versions.replacing.disconnect(dispatch_uid="test.check")
    [(published, tokens, reserved)] = seen
    assert all(published.get(k) != v for k, v in tokens.items())  # not published yet
    assert reserved == 0  # every hot page's lock under the new tokens was already held
    assert cache.get_many(list(tokens)) == tokens  # then published


def test_two_writes_on_two_threads_leave_the_version_they_publish_together_reserved(
    client, a_cohort, monkeypatch
):
    """Two writes in one worker, interleaved as two threads can: each reserves its own new token
    beside the other's old one, then both publish. The version they make together is reserved
    by the one that publishes last, so its visitors get the previous version, never a render."""
    from core import versions

    prerender.render_hot_pages()  # every hot page cached at this version
    monkeypatch.setattr(tasks, "_worker", True)  # not eager: the round waits in the broker
    cache.delete(prerender.QUEUED_KEY)
    ticked = {versions.VALUES_KEY: "v-new"}
    synced = {versions.DATA_KEY: "d-new"}
    versions.replacing.send(sender=None, tokens=ticked)  # the tick's thread reserves
    versions.replacing.send(sender=None, tokens=synced)  # the sync's thread reserves
    for tokens in (ticked, synced):  # then each publishes and announces it
        cache.set_many(tokens, None)
        versions.replaced.send(sender=None, keys=tuple(tokens))
    seen = _visitor_sees(client, prerender.hot_paths())
    assert set(seen.values()) == {"stale"}, seen

