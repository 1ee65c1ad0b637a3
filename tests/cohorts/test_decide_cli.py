"""`arena decide --sync` names every decision that did not end as done, with its reason, and
exits non-zero when any failed (before, it printed "1 failed, 1 skipped" and exited 0)."""

from io import StringIO

import pytest
from django.core.management import call_command
from django.core.management.base import CommandError

from cohorts.models import Decision
from tests.agents.helpers import (
    baseline_competitor,
    llm_competitor,
    make_cohort,
    make_markets,
)
from tests.fakes.openai_server import not_found

pytestmark = [
    pytest.mark.django_db,
    pytest.mark.model_server(
        extra_endpoints="{fake.base_url}|ARENA_DECIDE_CLI_MISSING_KEY",
        default_responder=lambda request: not_found("openai/typo"),
    ),
]


def test_decide_names_each_failure_and_skip_and_fails_when_one_failed(model_server):
    make_markets(10)
    cohort = make_cohort([
        baseline_competitor("cash"),
        llm_competitor(model_server, slug="typo", model_id="openai/typo"),
        llm_competitor(model_server, slug="no-key", api_key_env="ARENA_DECIDE_CLI_MISSING_KEY"),
    ])  # fmt: skip
    out = StringIO()

    with pytest.raises(CommandError, match=r"^1 decision failed \(listed above\)$"):
        call_command("arena", "decide", "--cohort", str(cohort.pk), "--week", "1", "--sync",
                     stdout=out)  # fmt: skip

    by_slug = {
        d.entry.competitor.slug: d for d in Decision.objects.select_related("entry__competitor")
    }
    lines = out.getvalue().splitlines()
    assert lines[0] == "decided 3 entries: 1 done, 1 failed, 1 skipped"
    failed, skipped = by_slug["typo"], by_slug["no-key"]
    assert (failed.status, skipped.status) == ("failed", "skipped")
    assert lines[1].startswith(
        f"failed: cohort={cohort.pk} week=1 competitor=typo decision={failed.pk} reason="
    )
    assert "404" in lines[1] and "No endpoints found for openai/typo" in lines[1]
    assert lines[2] == (
        f"skipped: cohort={cohort.pk} week=1 competitor=no-key decision={skipped.pk} "
        "reason=no API key: the env var ARENA_DECIDE_CLI_MISSING_KEY is not set"
    )
    assert len(lines) == 3


def test_decide_with_only_skips_lists_them_and_succeeds(model_server):
    make_markets(10)
    cohort = make_cohort([
        baseline_competitor("cash"),
        llm_competitor(model_server, slug="no-key", api_key_env="ARENA_DECIDE_CLI_MISSING_KEY"),
    ])  # fmt: skip
    out = StringIO()

    call_command("arena", "decide", "--cohort", str(cohort.pk), "--week", "1", "--sync",
                 stdout=out)  # fmt: skip

    lines = out.getvalue().splitlines()
    assert lines[0] == "decided 2 entries: 1 done, 1 skipped"
    assert lines[1].startswith("skipped: ") and "competitor=no-key" in lines[1]
