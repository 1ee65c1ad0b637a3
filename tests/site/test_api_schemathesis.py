"""Property-based requests to a running server (schemathesis, from /api/openapi.json as served):
every operation of the public read API and of the agent API, with generated valid and invalid
parameters and bodies, over real HTTP to Django's live server on 127.0.0.1, on a small demo
arena plus an outside agent with a token. No answer may be a 5xx, and every answer must match
the document: its status, content type, headers and body schema.

Bounded so it runs in a minute or two: a fixed number of examples per operation and mode, no
deadline (the machine is shared), derandomized so a failure reproduces on the next run.
"""

from __future__ import annotations

import hypothesis
import pytest
import requests
import schemathesis
from hypothesis import HealthCheck, Phase, given
from schemathesis import GenerationMode
from schemathesis.checks import not_a_server_error
from schemathesis.specs.openapi.checks import (
    content_type_conformance,
    negative_data_rejection,
    response_headers_conformance,
    response_schema_conformance,
    status_code_conformance,
)

from tests import demo_snapshot
from tests.cohorts.agent_helpers import outside_agents
from tests.replay.test_demo import SMALL
from web.openapi import document

pytestmark = pytest.mark.django_db(transaction=True)
EXAMPLES = 25
CONFORMANCE = [
    not_a_server_error,
    status_code_conformance,
    content_type_conformance,
    response_headers_conformance,
    response_schema_conformance,
]
# Invalid input must be refused with a 4xx, never served as if it were valid.
REJECTION = [*CONFORMANCE, negative_data_rejection]


@pytest.fixture
def arena(settings):
    """The demo's cohorts, markets, decisions, seals and scores, and an outside agent (unsigned,
    so generated bodies reach the answer's checks) in this week's live cohort."""
    settings.ARENA_LLM_API_KEY = ""
    demo_snapshot.demo(**SMALL)
    (agent,) = outside_agents(signed=False, markets=4)
    # A generous rate: the test is about the answers, not the limit (test_agent_api.py is).
    agent.competitor.tokens.update(rate_per_minute=30_000)
    return agent


def _fuzz(operation, mode: GenerationMode, base: str, headers: dict[str, str]) -> str | None:
    """Run one operation's examples in one mode; the first failure as text, or None."""
    checks = CONFORMANCE if mode == GenerationMode.POSITIVE else REJECTION
    session = requests.Session()

    @given(case=operation.as_strategy(generation_mode=mode))
    @hypothesis.settings(
        max_examples=EXAMPLES,
        deadline=None,
        derandomize=True,
        database=None,
        phases=[Phase.explicit, Phase.generate, Phase.shrink],
        suppress_health_check=list(HealthCheck),
    )
    def run(case) -> None:
        case.call_and_validate(base_url=base, session=session, headers=headers, checks=checks,
                               timeout=30)  # fmt: skip

    try:
        run()
    except (Exception, BaseExceptionGroup) as exc:  # schemathesis' FailureGroup is the latter
        return f"{operation.label} [{mode.value}]: {exc}"
    finally:
        session.close()
    return None


def test_the_public_and_agent_apis_match_their_description_under_generated_requests(
    arena, live_server
):
    schema = schemathesis.openapi.from_url(f"{live_server.url}/api/openapi.json")
    schema.config.generation.update(
        # Unknown query parameters are ignored by design (links carry tracking tags), so a
        # request with one is not invalid input.
        allow_extra_parameters=False,
        # The token goes in every agent request; its absence and forms are test_agent_api.py's.
        with_security_parameters=False,
    )
    auth = {"Authorization": f"Bearer {arena.token}"}
    failures, ran = [], []
    for result in schema.get_all_operations():
        operation = result.ok()
        headers = auth if operation.path.startswith("/api/agent/") else {}
        for mode in (GenerationMode.POSITIVE, GenerationMode.NEGATIVE):
            ran.append(operation.label)
            failure = _fuzz(operation, mode, live_server.url, headers)
            if failure:
                failures.append(failure)
    documented = {f"{m.upper()} {p}" for p, item in document()["paths"].items() for m in item}
    # Every documented operation was exercised (schemathesis leaves out the document's own
    # path when it loads the document from it; test_openapi.py reads that one).
    assert set(ran) == documented - {"GET /api/openapi.json"}
    assert not failures, "\n\n".join(failures)
