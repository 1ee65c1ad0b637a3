"""How figures read: the money rule, signed intervals, digits that separate rows, group letters from the
paired tests, unscored rows apart, the run's clock, leaders and headline scores on the lists,
the glossary, colours, chart annotations, and price charts on real time."""

import re
from datetime import timedelta
from decimal import Decimal

import pytest

from agents.models import Competitor
from cohorts.models import Cohort
from core.versions import data_changed
from markets.models import Market, PricePoint, ResolutionChange
from scoring.models import LeaderboardRow
from tests.site.conftest import T0, build_arena, save_details
from web import colours, glossary, standings
from web.templatetags.arena import ci, money, signed, version


def test_one_money_rule_for_portfolio_money_and_model_cost():
    assert money(Decimal("10000")) == "$10,000.00"
    assert money(Decimal("-12.5")) == "\u2212\u2060$12.50"
    assert money(Decimal("0.012000")) == "$0.012"
    assert money(Decimal("0.0123456")) == "$0.0123"
    assert money(Decimal("0.00001")) == "<$0.0001"
    assert money(0) == "$0.00" and money(None) == "—"


def test_signed_figures_keep_their_sign_but_a_zero_has_none():
    # No negative zero, and no sign on a zero: a column reads one zero (an interval that must
    # show it crosses zero is printed with the places that separate its ends from zero).
    assert ci(-0.0003, 0.0011, 3) == "[0.000, 0.001]"
    assert signed(-0.0001, 3) == "0.000" and signed(0.0004, 3) == "0.000"
    assert signed(-0.0006, 3) == "\u2212\u20600.001" and signed(0.0006, 3) == "+0.001"
    assert version("1") == "v1" and version("v1") == "v1"


def test_places_separate_neighbours_and_never_print_a_false_zero():
    # The top four all read 0.000 at three places.
    assert standings.places_to_separate([0.00044, 0.00041, 0.0001, 0.0], [], 3) == 5
    assert standings.places_to_separate([0.3, 0.2], [-0.0003, 0.0011], 3) == 4
    assert standings.places_to_separate([0.25, 0.13], [0.2, 0.3], 3) == 3
    assert standings.places_to_separate([1e-9, 0.0], [], 3) == standings.MAX_PLACES


def _rows(run, specs):
    """specs: (slug, skill, n_forecasts, n_resolved) in rank order."""
    rows = []
    for rank, (slug, skill, n_f, n_r) in enumerate(specs, start=1):
        comp = Competitor.objects.create(slug=slug, display_name=slug.title())
        rows.append(
            LeaderboardRow.objects.create(
                run=run,
                competitor=comp,
                rank=rank,
                skill_vs_market=skill,
                n_forecasts=n_f,
                n_resolved=n_r,
                provisional=n_r < 350,
                required_n=350,
                return_pct=0.0,
            )
        )
    return rows


def _pair(a, b, verdict):
    return {"a": a, "b": b, "n": 400, "p": 0.5, "level": 0.01, "verdict": verdict}


@pytest.mark.django_db
def test_letters_follow_the_paired_tests_and_unscored_rows_stand_apart(world):
    run = world.score_run("replay")
    run.rows.all().delete()
    rows = _rows(
        run,
        [
            ("fav", 0.00044, 500, 400),
            ("mkt", 0.00041, 500, 400),
            ("cash", 0.0001, 500, 400),
            ("rnd", -0.2, 500, 400),
            ("gpt", None, 0, 0),  # never answered: listed apart, no rank
        ],
    )
    run.details = {
        "headline": {"by_cohort": {"all": "brier_skill_vs_market"}},
        "dm": {
            "all": {
                "brier": [
                    _pair("fav", "mkt", "no_difference"),
                    _pair("cash", "mkt", "no_difference"),
                    _pair("fav", "cash", "no_difference"),
                    _pair("fav", "rnd", "a_better"),
                    _pair("mkt", "rnd", "no_difference"),
                    _pair("cash", "rnd", "a_better"),
                    _pair("gpt", "rnd", "a_better"),  # an unranked row changes nothing
                ]
            }
        },
    }
    save_details(run)
    board = standings.build(run, rows, details=run.stored_details)
    # Chained tiers would put Market with both Favorite and Random in one run of ties; the
    # letters say Market is inseparable from both while they differ from each other.
    assert [(s.row.competitor.slug, s.rank, s.letters) for s in board.scored] == [
        ("fav", 1, "a"),
        ("mkt", 2, "ab"),
        ("cash", 3, "a"),
        ("rnd", 4, "b"),
    ]
    assert board.scored[3].differs_from == ["Fav", "Cash"]
    assert [(s.row.competitor.slug, s.rank, s.reason) for s in board.unscored] == [
        ("gpt", None, "no forecast made yet")
    ]
    assert board.places["skill"] == 5 and board.n_groups == 2
    assert "350 resolved questions" in board.provisional_rule
    assert board.clock.simulated


@pytest.mark.django_db
def test_home_shows_letters_unscored_apart_and_the_simulated_clock(client, world):
    build_arena(world, kind=Cohort.Kind.REPLAY, n_competitors=3)
    run = world.score_run("replay")
    LeaderboardRow.objects.filter(run=run, competitor=world.competitors[2]).update(
        skill_vs_market=None, n_forecasts=0, n_resolved=0, rank=3, tokens=0, pnl=0
    )
    body = client.get("/?scope=replay").content.decode()
    assert "Scored on the simulated clock at 2026-11-08 00:00" in re.sub(r"<[^>]+>", "", body)
    assert "Scored as of" not in body
    assert "Not scored yet" in body and "no forecast made yet" in body
    # The fixture's tests separate every pair: one letter each.
    assert re.findall(r'class="tier group-letters"[^>]*>(\w+)<', body) == ["a", "b"]
    assert body.count('class="key rank"') == 2  # only scored rows are ranked
    assert 'href="/methodology/#g-skill"' in body and 'href="/methodology/#g-group"' in body


@pytest.mark.django_db
def test_lists_show_the_leader_with_its_margin_and_each_headline_score(client, arena_world):
    for row in LeaderboardRow.objects.filter(cohort__isnull=True):  # the cohort's own rows
        row.pk, row.cohort = None, arena_world.cohort_main
        row.save()
    body = client.get("/cohorts/").content.decode()
    leader = arena_world.competitors[0]
    assert leader.display_name in body and "by 0.025 skill over Beta Model" in body
    body = client.get("/competitors/").content.decode()
    assert "#1 of 3" in body and "+0.050 skill" in body


@pytest.mark.django_db
def test_glossary_has_every_term_and_about_is_linked(client):
    body = client.get("/methodology/").content.decode()
    for term in glossary.TERMS:
        assert f'id="g-{term.key}"' in body
    about = client.get("/about/").content.decode()
    assert "About the Forecasting Arena" in about
    assert 'href="/about/"' in client.get("/").content.decode()


@pytest.mark.django_db
def test_baseline_decision_says_no_model_was_called(client, world):
    world.competitor("market-baseline", kind=Competitor.Kind.BASELINE)
    build_arena(world, n_competitors=1)
    body = client.get(f"/decisions/{world.decisions[0].pk}/").content.decode()
    assert "No model was called" in body
    assert "Latency" not in body and "$0.000000" not in body and ">vv" not in body


def test_styles_are_handed_out_in_order_and_distinct_within_the_palette():
    # Issue 27: styles by id modulo the palette repeated for new competitors; by rank they are
    # distinct for as many competitors as there are (colour, dash) pairs.
    n = len(colours.PALETTE) * len(colours.DASHES)
    styles = {tuple(colours.style_at(i).values()) for i in range(n)}
    assert len(styles) == n


@pytest.mark.django_db
def test_series_carry_colours_and_staff_corrections_where_they_moved_the_chart(client, arena_world):
    cohort = arena_world.cohort_main
    market = arena_world.markets[1]  # held by every entry (week 1 bets)
    ResolutionChange.objects.create(
        market=market,
        source=Market.ResolvedBy.ADMIN,
        from_status="resolved",
        from_outcome="Yes",
        to_status="open",
        reason="<script>bad</script>",
    )
    rc = ResolutionChange.objects.get(market=market, source=Market.ResolvedBy.ADMIN)
    ResolutionChange.objects.filter(pk=rc.pk).update(changed_at=T0 + timedelta(minutes=50))
    data = client.get(f"/api/cohorts/{cohort.pk}/series").json()
    by_comp = {e["competitor"]: e for e in data["entries"]}
    for comp in arena_world.competitors[:3]:
        assert by_comp[comp.slug]["color"] == colours.colour_for(comp)
    staff = [a for a in data["annotations"] if a["kind"] == "correction"]
    assert staff and staff[0]["x"] == "2026-11-01 00:50" and staff[0]["label"] == "staff: reopened"
    page = client.get(f"/cohorts/{cohort.pk}/").content.decode()
    assert "Staff corrections" in page and "&lt;script&gt;bad" in page and "<script>bad" not in page
    # Another cohort that never held the market is not marked.
    other = arena_world.cohort(weeks_ago=-1)
    arena_world.snapshots(arena_world.entry(other, arena_world.competitors[0]))
    data = client.get(f"/api/cohorts/{other.pk}/series").json()
    assert data["x"]
    assert not [a for a in data["annotations"] if a["kind"] == "correction"]


@pytest.mark.django_db
def test_home_chart_has_ranges_colours_and_cohort_events(client, arena_world):
    data = client.get("/api/overview?scope=live&range=1H").json()
    assert data["range"] == "1H" and data["series"]
    assert all(s["color"].startswith("#") for s in data["series"])
    assert client.get("/api/overview?scope=nope").status_code == 400
    body = client.get("/?scope=live").content.decode()
    assert 'data-series-url="/api/overview?scope=live"' in body
    assert 'class="range-btn"' in body


@pytest.mark.django_db
def test_a_market_quoted_once_draws_its_price_over_its_real_life(client, world):
    market = world.market(status=Market.Status.RESOLVED, resolved_outcome="Yes")
    PricePoint.objects.filter(market=market).delete()
    PricePoint.objects.create(market=market, outcome="Yes", ts=T0, price=Decimal("0.97"))
    Market.objects.filter(pk=market.pk).update(resolved_at=T0 + timedelta(days=60))
    data = client.get(f"/api/markets/{market.pk}/prices").json()
    (line,) = data["lines"]
    assert line["x"] == ["2026-11-01 00:00", "2026-12-31 00:00"] and line["y"] == [0.97, 0.97]
    assert data["annotations"][0]["label"] == "resolved Yes"
    week = client.get(f"/api/markets/{market.pk}/prices?range=1W").json()
    # The range starts with the price in force then, not with nothing.
    assert week["lines"][0]["x"][0] == "2026-12-24 00:00" and week["lines"][0]["y"][0] == 0.97


@pytest.mark.django_db
def test_all_spans_a_long_history_thinned_evenly_and_ends_on_the_latest_quote(client, world):
    market = world.market()
    PricePoint.objects.filter(market=market).delete()
    hours = 3 * 24 * 60  # 60 days of hourly quotes per outcome: 2,880 each, thinned to <= 400
    PricePoint.objects.bulk_create(
        PricePoint(market=market, outcome=o, ts=T0 + timedelta(hours=h),
                   price=Decimal(f"{(0.2 if o == 'Yes' else 0.8) + (h % 7) / 100:.2f}"))
        for h in range(hours) for o in ("Yes", "No")
    )  # fmt: skip
    Market.objects.filter(pk=market.pk).update(last_priced_at=T0 + timedelta(hours=hours - 1))
    data = client.get(f"/api/markets/{market.pk}/prices?range=ALL").json()
    for line in data["lines"]:
        assert 300 < len(line["x"]) <= 402
        # The first quote of the history, not of its last days, and the latest one at the end.
        assert line["x"][0] == "2026-11-01 00:00", line["x"][:3]
        assert line["x"][-1] == (T0 + timedelta(hours=hours - 1)).strftime("%Y-%m-%d %H:%M")
        days = {x[:10] for x in line["x"]}
        assert len(days) >= 80  # spread over the whole range, not bunched at one end


@pytest.mark.django_db
def test_cohort_page_ranks_its_competitors_with_letters_and_intervals(client, world):
    cohort = build_arena(world, kind=Cohort.Kind.LIVE, n_competitors=3)
    run = world.score_run("live")
    # The run's rows for this cohort: the third competitor never forecast (unscored).
    for row in LeaderboardRow.objects.filter(run=run):
        row.pk, row.cohort = None, cohort
        if row.competitor == world.competitors[2]:
            row.skill_vs_market, row.n_forecasts, row.n_resolved, row.rank = None, 0, 0, 3
            row.tokens, row.pnl = 0, 0
        row.save()
    details = run.details
    details["dm"][str(cohort.pk)] = {"brier": [_pair(c.slug, d.slug, "no_difference")
        for c, d in [(world.competitors[0], world.competitors[1])]]}  # fmt: skip
    run.details = details
    save_details(run)
    body = client.get(f"/cohorts/{cohort.pk}/").content.decode()
    table = body[body.index('id="standing-h"') : body.index('id="value-h"')]
    first, second, idle = (c.display_name for c in world.competitors[:3])
    # Ranked as the cohorts page names the leader (rank 1 first), letters from this cohort's
    # own paired test (no difference: one shared letter), intervals printed.
    assert table.index(first) < table.index(second)
    assert re.findall(r'class="tier group-letters"[^>]*>(\w+)<', table) == ["a", "a"]
    assert "[" in table and "Skill vs market" in table
    assert f"{idle} (no forecast made yet)" in re.sub(r"<[^>]+>", "", table)
    lead = client.get("/cohorts/").content.decode()
    # The cohorts page names the same leader, and calls the shared letter a tie.
    assert re.search(
        rf"{first}</a></span> <span class=\"muted\">by [^<]* over {second}, a statistical tie", lead
    )


@pytest.mark.django_db
def test_home_embeds_the_overview_apis_chart_with_and_without_staff_corrections(
    client, arena_world
):
    """`/` reads whether any staff correction exists with its score run (HomeFacts) and hands
    that to the chart; the API's chart reads it itself. Both must give the same bytes."""

    def embedded() -> str:
        page = client.get("/?scope=live").content.decode()
        return page.split('<script id="overview-data" type="application/json">')[1].split(
            "</script>"
        )[0]

    assert embedded() == client.get("/api/overview?scope=live").content.decode()
    assert '"kind":"correction"' not in embedded()
    ResolutionChange.objects.create(
        market=arena_world.markets[1],  # held by every entry
        source=Market.ResolvedBy.ADMIN,
        from_status="resolved",
        from_outcome="Yes",
        to_status="open",
        reason="reopened for the test",
    )
    rc = ResolutionChange.objects.get(source=Market.ResolvedBy.ADMIN)
    ResolutionChange.objects.filter(pk=rc.pk).update(changed_at=T0 + timedelta(minutes=50))
    data_changed()  # what the correction service does: pages read anew
    with_correction = embedded()
    assert '"kind":"correction"' in with_correction
    assert with_correction == client.get("/api/overview?scope=live").content.decode()


def test_term_links_escape_their_label_and_refuse_unknown_terms():
    from django import template
    from django.utils.safestring import mark_safe

    from web.templatetags.arena import term

    plain = term("brier", "<b>Brier</b>")
    assert 'href="/methodology/#g-brier"' in plain and "&lt;b&gt;Brier&lt;/b&gt;" in plain
    # The same text already marked safe is kept as it is (its own cache entry).
    assert "<b>Brier</b>" in term("brier", mark_safe("<b>Brier</b>"))
    assert term("brier", "<b>Brier</b>") == plain
    with pytest.raises(template.TemplateSyntaxError, match="no glossary entry 'nope'"):
        term("nope")
