"""Shared test fixtures. Fakes of external services live in tests/fakes/ and are real servers."""

import os

import pytest
from django.db import connection

# `migrate` seeds the default lineup on a new database (cohorts/lineup.py); the tests' databases
# start empty, as their builders expect. Tests of the seeding set it back for their own migrate.
os.environ["ARENA_LINEUP_ON_MIGRATE"] = "0"

# The fakes of outside services and a demo database, for every test that needs them.
pytest_plugins = ("tests.fixtures",)


def pytest_collection_modifyitems(config, items):
    # Tests that need PostgreSQL or Redis run when those are configured (.ci/run sets both);
    # on a plain machine they are skipped with the reason shown.
    is_pg = os.environ.get("DATABASE_URL", "").startswith(("postgres", "postgresql"))
    has_redis = bool(os.environ.get("REDIS_URL"))
    # The real llama.cpp test needs the `llama` dependency group (a ~15 min build): deselected
    # (counted as such) unless asked for; asked for without the build, it fails.
    if os.environ.get("ARENA_LLAMA_TESTS") != "1":
        llama = [item for item in items if item.get_closest_marker("llama")]
        if llama:
            config.hook.pytest_deselected(items=llama)
            items[:] = [item for item in items if not item.get_closest_marker("llama")]
    # Tests that make a SQLite database of their own run the same on either pass: once, in the
    # SQLite pass (deselected, counted as such, when the suite runs on PostgreSQL).
    # So do tests that touch no database at all (the math, the parsers, the HTTP clients against
    # their fakes): on PostgreSQL they would run the same code on the same input again. A test
    # whose processes read DATABASE_URL while it opens no connection itself takes the django_db
    # mark to run on both. And the browser tests: what they check is what Chromium does with a
    # page (layout, scripts, charts), the same on either engine; the reads behind every page
    # and partial run on PostgreSQL through the client tests (tests/site/test_url_properties.py
    # walks every route). Both passes are CPU-bound on the 2-core CI machine, so a test run
    # twice for nothing is paid for in wall time.
    if is_pg:
        once = [item for item in items if item.get_closest_marker("own_sqlite")
                or item.get_closest_marker("browser") or not _on_the_database(item)]  # fmt: skip
        if once:
            config.hook.pytest_deselected(items=once)
            gone = set(map(id, once))
            items[:] = [item for item in items if id(item) not in gone]
    for item in items:
        if "postgres" in item.keywords and not is_pg:
            item.add_marker(pytest.mark.skip(reason="needs DATABASE_URL=postgres://..."))
        if "redis" in item.keywords and not has_redis:
            item.add_marker(pytest.mark.skip(reason="needs REDIS_URL"))


# Fixtures through which a test reaches the test database (pytest-django's, and the project's
# that build on them); a test with none of them and no django_db mark never opens a connection.
DATABASE_FIXTURES = frozenset({
    "db", "transactional_db", "django_db_reset_sequences", "django_db_serialized_rollback",
    "live_server", "admin_client", "admin_user", "django_user_model",
})  # fmt: skip


def _on_the_database(item) -> bool:
    if any(item.get_closest_marker(m) for m in ("django_db", "postgres", "redis")):
        return True
    if DATABASE_FIXTURES & set(getattr(item, "fixturenames", ())):
        return True
    # A fixture of ours that opens the database itself (a demo built once for a module, with
    # django_db_blocker.unblock()); pytest-django's own autouse fixtures ask for the blocker too.
    info = getattr(item, "_fixtureinfo", None)
    for defs in (info.name2fixturedefs.values() if info else ()):
        for fixturedef in defs:
            module = getattr(fixturedef.func, "__module__", "") or ""
            if "django_db_blocker" in fixturedef.argnames and not module.startswith("pytest_django"):
                return True
    return False


@pytest.fixture(autouse=True, scope="session")
def _collected_static(tmp_path_factory):
    """Pages name static files by their content-hashed names, which come from the manifest that
    collectstatic writes (as a deploy does). Collected once per run into a private folder;
    hashing only (Django's manifest storage, the same names whitenoise serves) because
    compressing plotly on every run would cost seconds for nothing the tests read."""
    from django.conf import settings
    from django.core.management import call_command
    from django.test.utils import override_settings

    storages = {
        **settings.STORAGES,
        "staticfiles": {"BACKEND": "django.contrib.staticfiles.storage.ManifestStaticFilesStorage"},
    }
    with override_settings(STATIC_ROOT=tmp_path_factory.mktemp("static"), STORAGES=storages):
        call_command("collectstatic", interactive=False, verbosity=0)
        # The live server (browser tests) serves /static/ through the finders only: let them
        # find the hashed names too (tests/static_collected.py).
        finders = [*settings.STATICFILES_FINDERS, "tests.static_collected.CollectedFinder"]
        with override_settings(STATICFILES_FINDERS=finders):
            yield


@pytest.fixture(autouse=True, scope="session")
def _isolated_cache_and_broker():
    """Keep test runs off the developer's var/: a private in-memory cache (so parallel test runs
    cannot clear each other's login counters) and an in-memory broker for tasks that tests enqueue
    without a worker. Tests that need a real broker build their own producer."""
    from django.test.utils import override_settings

    from arena.celery import app

    previous = app.conf.broker_url
    app.conf.broker_url = "memory://"
    locmem = {"default": {"BACKEND": "django.core.cache.backends.locmem.LocMemCache"}}
    # Page caching is invalidated on commit, and most tests run inside a transaction that never
    # commits; tests/arena/test_page_cache.py turns it on with real commits.
    # No test process, nor a worker a test starts, reads a real provider's model catalog (the
    # lineup review's tests point it at their fake).
    os.environ["ARENA_LINEUP_CATALOGS"] = ""
    with override_settings(CACHES=locmem, ARENA_PAGE_CACHE=False, ARENA_LINEUP_CATALOGS=""):
        yield
    app.conf.broker_url = previous


@pytest.fixture(autouse=True)
def _arena_celery_app_stays_current():
    """Fail the test that leaves another Celery app current, and put the arena's back.

    `Celery(broker=...)` makes itself the current app (set_as_current defaults to True), and every
    shared task resolves through the current app: a producer made for a private broker and left
    current sends the arena's own tasks (the scorer, the hot-page round) to that broker, gone
    with its test, so a later test in the same process finds dispatch broken. Producers in tests
    pass set_as_current=False.
    """
    from celery import current_app

    from arena.celery import app

    yield
    left = current_app._get_current_object()
    if left is not app:
        app.set_current()
        pytest.fail(f"the test left Celery app {left.main or left!r} current: "
                    "make producers with Celery(..., set_as_current=False)")


@pytest.fixture
def db_vendor():
    return connection.vendor


@pytest.fixture(autouse=True)
def _outside_a_worker(monkeypatch):
    """Each test starts outside a Celery worker, as the site's own processes do: a test that ran
    a worker in this process (celery's worker_init) marked the process one for good, and writes
    in a worker reserve the hot pages' renders (web/prerender.py). Tests of a worker say so."""
    from web import tasks

    monkeypatch.setattr(tasks, "_worker", False)


@pytest.fixture(autouse=True)
def _export_slots():
    """Fresh export slots per test: the test client frees a streamed export's slot only when
    its body is read to the end, and many tests only look at the headers."""
    from web.exports import gate as export_gate

    export_gate.SLOTS = export_gate._Slots()
