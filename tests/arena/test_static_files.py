"""Static files under every way the site runs, `./run up` (DEBUG on) included: pages name the
hashed copies that `arena up`'s collectstatic writes, those are served compressed (brotli or
gzip) and cached for a year as immutable, and only pages with a chart load plotly.js."""

import re

import pytest
from django.conf import settings
from django.core.management import call_command
from django.test import Client
from django.test.utils import override_settings

pytestmark = pytest.mark.django_db

SRC = re.compile(r'<script src="(/static/[^"]+)"')


@pytest.fixture(scope="module")
def collected(tmp_path_factory):
    """collectstatic as `arena up` runs it, with the project's own storage, into a private
    folder (the settings' storage, not the tests' plain manifest one). The admin's files are
    left out: they are compressed the same way and would only cost the suite seconds."""
    from arena import settings as project

    root = tmp_path_factory.mktemp("served-static")
    with override_settings(STATIC_ROOT=root, STORAGES=project.STORAGES):
        call_command("collectstatic", interactive=False, verbosity=0, ignore_patterns=["admin"])
    return root, project.STORAGES


@pytest.mark.parametrize("debug", [True, False])
def test_a_chart_page_names_hashed_files_served_compressed_and_immutable(collected, debug):
    root, storages = collected
    with override_settings(
        STATIC_ROOT=root,
        STORAGES=storages,
        DEBUG=debug,
        WHITENOISE_USE_FINDERS=debug,
        WHITENOISE_AUTOREFRESH=debug,
    ):
        page = Client().get("/")
        assert page.status_code == 200
        scripts = SRC.findall(page.content.decode())
        plotly = re.findall(r'data-plotly="(/static/[^"]+)"', page.content.decode())
        assert len(plotly) == 1 and re.search(r"plotly-basic\.min\.[0-9a-f]{12}\.js$", plotly[0])
        assert all(re.search(r"\.[0-9a-f]{12}\.", s) for s in scripts), scripts
        for encoding in ("br", "gzip"):
            got = Client().get(plotly[0], HTTP_ACCEPT_ENCODING=encoding)
            assert got.status_code == 200
            assert got["Content-Encoding"] == encoding
            assert "immutable" in got["Cache-Control"]
            age = int(re.search(r"max-age=(\d+)", got["Cache-Control"]).group(1))
            assert age >= 365 * 24 * 3600
            body = b"".join(got.streaming_content)
            # The basic bundle (scatter, bar, pie) compressed: what a first visit pays.
            assert len(body) < 400_000, (encoding, len(body))


def test_a_page_without_a_chart_loads_no_plotly(collected):
    root, storages = collected
    with override_settings(STATIC_ROOT=root, STORAGES=storages):
        page = Client().get("/markets/")
        assert page.status_code == 200
        assert "plotly" not in page.content.decode()


def test_without_a_manifest_the_plain_name_is_served(tmp_path):
    """A bare runserver before any collectstatic still renders its pages."""
    from arena import settings as project

    with override_settings(STATIC_ROOT=tmp_path, STORAGES=project.STORAGES, DEBUG=True):
        from django.contrib.staticfiles.storage import staticfiles_storage

        assert staticfiles_storage.url("arena/charts.js") == settings.STATIC_URL + "arena/charts.js"
