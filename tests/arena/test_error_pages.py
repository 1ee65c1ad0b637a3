"""The production 404 and 500 pages are the site's own (its header, stylesheet and links),
not Django's bare text."""

import pytest
from django.test import RequestFactory
from django.views.defaults import server_error

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
