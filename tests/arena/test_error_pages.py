"""The production 404 and 500 pages are the site's own (its header, stylesheet and links),
not Django's bare text."""

import json

import pytest
from django.db import OperationalError, connection
from django.test import Client, RequestFactory
from django.views.defaults import server_error

from web import unavailable

pytestmark = pytest.mark.django_db


def _in_the_sites_style(html: str) -> None:
    assert 'class="site-header"' in html and "Forecasting Arena" in html
    assert "/static/arena/site." in html and ".css" in html
    assert 'href="/"' in html


def test_the_404_page_is_the_sites(client, settings):
    settings.DEBUG = False
    response = client.get("/no-such-page/")
    assert response.status_code == 404
    html = response.content.decode()
    _in_the_sites_style(html)
    assert "<title>Not found · Forecasting Arena</title>" in html
    assert "Not Found</h1>" not in html  # Django's bare page


def test_the_500_page_is_the_sites_and_needs_no_request_context(settings):
    settings.DEBUG = False
    response = server_error(RequestFactory().get("/"))
    assert response.status_code == 500
    html = response.content.decode()
    _in_the_sites_style(html)
    assert "Something went wrong" in html


def _raised(exc: Exception, path: str):
    # As Django calls handler500: from inside the `except` of the request's exception.
    try:
        raise exc
    except Exception:
        return unavailable.server_error(RequestFactory().get(path))


def test_a_locked_database_is_a_503_to_retry_and_a_bug_stays_a_500(settings):
    settings.DEBUG = False
    page = _raised(OperationalError("database is locked"), "/markets/")
    assert page.status_code == 503 and page["Retry-After"] == "5"
    _in_the_sites_style(page.content.decode())
    api = _raised(OperationalError("database is locked"), "/api/agent/v1/week")
    assert api.status_code == 503 and json.loads(api.content)["error"].startswith(
        "the database is unavailable"
    )
    assert _raised(OperationalError("no such table: markets_market"), "/").status_code == 500
    assert _raised(ValueError("a bug"), "/api/markets").status_code == 500


@pytest.mark.postgres
@pytest.mark.django_db(transaction=True)
@pytest.mark.parametrize("debug", [False, True])  # handler500, or the middleware under DEBUG
def test_a_connection_terminated_under_a_request_is_a_503_then_the_next_one_is_served(
    settings, debug
):
    import psycopg

    settings.DEBUG = debug
    client = Client(raise_request_exception=False)
    assert client.get("/api/markets").status_code == 200
    db = connection.settings_dict
    with psycopg.connect(host=db["HOST"], port=db["PORT"] or 5432, user=db["USER"],
                         password=db["PASSWORD"] or None, dbname=db["NAME"], autocommit=True) as other:  # fmt: skip
        other.execute("SELECT pg_terminate_backend(%s)", [connection.connection.info.backend_pid])
    # The test client keeps its connection between requests (no health check), as a request
    # whose backend is killed mid-way finds it.
    response = client.get("/api/markets")
    assert response.status_code == 503, response.content
    assert response["Retry-After"] == "5" and "unavailable" in response.json()["error"]
    connection.close()
    assert client.get("/api/markets").status_code == 200
