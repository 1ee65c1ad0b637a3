"""Public pages, the JSON API and exports: the URLs other sites link to, kept stable."""

from django.urls import path

from web import agent_api, api, doc_pages, leaderboard_api, method, openapi, pages
from web.exports import files as exports

urlpatterns = [
    path("", pages.home, name="home"),
    path("cohorts/", pages.cohort_list, name="cohort-list"),
    path("cohorts/<int:cohort_id>/", pages.cohort_detail, name="cohort-detail"),
    path(
        "cohorts/<int:cohort_id>/entries/<slug:slug>/",
        pages.entry_detail,
        name="entry-detail",
    ),
    path("competitors/", pages.competitor_list, name="competitor-list"),
    path("competitors/<slug:slug>/", pages.competitor_detail, name="competitor-detail"),
    path("markets/", pages.market_list, name="market-list"),
    path("markets/<int:market_id>/", pages.market_detail, name="market-detail"),
    path("decisions/<int:decision_id>/", pages.decision_detail, name="decision-detail"),
    path("methodology/", pages.methodology, name="methodology"),
    path("methodology/spec.md", method.methodology_spec, name="methodology-spec"),
    path("about/", pages.about, name="about"),
    path("enter/", doc_pages.enter, name="enter"),
    path("api/openapi.json", openapi.openapi_json, name="api-openapi"),
    path("api/cohorts/", api.cohorts, name="api-cohorts"),
    path("api/cohorts/<int:cohort_id>", api.cohort, name="api-cohort"),
    path("api/cohorts/<int:cohort_id>/series", api.cohort_series, name="api-cohort-series"),
    path("api/decisions/<int:decision_id>", api.decision, name="api-decision"),
    path("api/leaderboard", leaderboard_api.leaderboard_api, name="api-leaderboard"),
    # Not under /api/leaderboard: the page cache keys that prefix on the scores version only,
    # and this series moves with every snapshot.
    path("api/overview", api.overview_series, name="api-overview"),
    path("api/markets", api.markets, name="api-markets"),
    path("api/markets/<int:market_id>", api.market, name="api-market"),
    path("api/markets/<int:market_id>/prices", api.market_prices, name="api-market-prices"),
    path("exports/", pages.exports_page, name="exports"),
    path("api/seals", api.seals, name="api-seals"),
    path("method/", method.method_index, name="method"),
    path("method/<path:name>", method.method_file, name="method-file"),
    path("exports/<slug:what>.<slug:fmt>", exports.export_view, name="export"),
    path("api/agent/v1/week", agent_api.week, name="agent-week"),
    path("api/agent/v1/decision", agent_api.decision, name="agent-decision"),
    path(
        "api/agent/v1/decisions/<int:decision_id>",
        agent_api.decision_record,
        name="agent-decision-record",
    ),
]
