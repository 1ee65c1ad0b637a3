"""/api/openapi.json (web/openapi.py): a valid OpenAPI document, served the same to everyone, and
in step with the URL map: an /api/ route it does not describe, or a path it describes that no
route serves, fails here."""

from __future__ import annotations

import json
import re

import pytest
from django.urls import URLPattern, URLResolver, get_resolver

from web.openapi import document

pytestmark = pytest.mark.django_db
METHODS = {"get", "post", "put", "patch", "delete", "head", "options"}


def _routes(resolver: URLResolver, prefix: str = "") -> list[tuple[str, object]]:
    """Every route of the URL map as (path template with {name} parameters, callback)."""
    out = []
    for item in resolver.url_patterns:
        route = prefix + str(item.pattern)
        if isinstance(item, URLResolver):
            out += _routes(item, route)
        elif isinstance(item, URLPattern):
            template = re.sub(r"<(?:\w+:)?(\w+)>", r"{\1}", route.lstrip("^").rstrip("$"))
            out.append(("/" + template, item.callback))
    return out


def _api_routes() -> dict[str, object]:
    return {path: view for path, view in _routes(get_resolver()) if path.startswith("/api/")}


def test_the_document_is_valid_openapi():
    # Imported here, not by every xdist worker's collection (0.4 s).
    from openapi_spec_validator import validate
    from openapi_spec_validator.validation.exceptions import OpenAPIValidationError

    doc = document()
    assert doc["openapi"].startswith("3.1")
    validate(doc)
    broken = json.loads(json.dumps(doc))
    # OpenAPI 3 has no body parameters (Swagger 2 had): the validator refuses one.
    broken["paths"]["/api/markets"]["get"]["parameters"][0]["in"] = "body"
    with pytest.raises(OpenAPIValidationError):  # the validator does reject a broken document
        validate(broken)


def test_every_api_route_is_documented_and_every_documented_path_exists():
    routes = _api_routes()
    documented = set(document()["paths"])
    assert set(routes) - documented == set(), "undocumented /api/ routes"
    assert documented - set(routes) == set(), "documented paths no route serves"
    # Not only the paths: each path's parameters are the route's, by name.
    for path, item in document()["paths"].items():
        in_route = set(re.findall(r"{(\w+)}", path))
        for method, op in item.items():
            assert method in METHODS
            params = {p["name"] for p in op.get("parameters", []) if p["in"] == "path"}
            assert params == in_route, (path, method)


def test_documented_methods_are_the_ones_served_and_others_are_405(client):
    for path, item in document()["paths"].items():
        concrete = re.sub(r"{\w+}", "1", path)
        for method in {"get", "post"} - set(item):
            response = client.generic(method.upper(), concrete)
            # The agent API checks the method before the token: undocumented is 405 there too.
            assert response.status_code == 405, (method, path, response.status_code)
            assert "error" in response.json()


def test_served_as_json_to_everyone_alike(client, django_user_model):
    response = client.get("/api/openapi.json")
    assert response.status_code == 200 and response["Content-Type"] == "application/json"
    assert response["Cache-Control"] == "public, max-age=300"
    assert "Vary" not in response or "Cookie" not in response["Vary"]
    assert response.json() == json.loads(json.dumps(document()))
    staff = django_user_model.objects.create_superuser("staff", "s@example.org", "pw-12345-long")
    client.force_login(staff)
    assert client.get("/api/openapi.json").content == response.content
