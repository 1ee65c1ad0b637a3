"""Every dependency earns its place, and every vendored file says where it came from.

A runtime dependency is imported by a shipped package, or named where the project uses it
without an import (a settings string, a server the arena starts). A vendored file under
static/vendor/ is listed in static/vendor/SOURCES.json with its package, version and SHA-256,
and the bytes on disk are those.
"""

import hashlib
import json
import re
import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
SHIPPED = ["core", "markets", "agents", "cohorts", "scoring", "simulations", "web", "arena"]

# Distribution name -> the names its use shows up as in shipped code.
USED_AS = {
    "django": [r"^\s*(from|import) django\b"],
    "celery": [r"^\s*(from|import) celery\b"],
    "redis": [r"^\s*(from|import) redis\b"],
    "kombu": [r"\"filesystem://\""],  # the embedded broker's transport (arena/settings.py)
    # kombu's Redis transport imports it without declaring it: the broker of CELERY_BROKER_URL.
    "packaging": [r"CELERY_BROKER_URL"],
    "psycopg": [r"vendor == \"postgresql\""],  # the driver of Django's PostgreSQL backend
    "django-htmx": [r"\"django_htmx\""],
    "django-template-partials": [r"\"template_partials\""],
    "requests": [r"^\s*(from|import) requests\b"],
    "numpy": [r"^\s*(from|import) numpy\b"],
    "scipy": [r"^\s*(from|import) scipy\b"],
    "whitenoise": [r"\"whitenoise\."],
    "brotli": [r"HashedStaticStorage"],  # whitenoise's compressor writes .br copies with it
    "gunicorn": [r"\"gunicorn\""],  # `arena up` starts it (arena/up.py)
    "dj-database-url": [r"^\s*(from|import) dj_database_url\b"],
    "django-axes": [r"^\s*(from|import) axes\b", r"\"axes\""],
    "cryptography": [r"^\s*(from|import) cryptography\b"],
    "orjson": [r"^\s*(from|import) orjson\b"],
    "django-ratelimit": [r"^\s*(from|import) django_ratelimit\b"],
}


def _runtime_dependencies() -> list[str]:
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    return [re.split(r"[\[<>=!~; ]", d, maxsplit=1)[0].lower() for d in project["dependencies"]]


def _shipped_source() -> str:
    parts = []
    for pkg in SHIPPED:
        for f in (ROOT / pkg).rglob("*.py"):
            if "migrations" not in f.parts:
                parts.append(f.read_text(encoding="utf-8"))
    return "\n".join(parts)


def test_every_runtime_dependency_is_used_by_a_shipped_path():
    deps = _runtime_dependencies()
    assert set(deps) == set(USED_AS), "a dependency was added or removed: say here how it is used"
    source = _shipped_source()
    unused = [
        d for d in deps if not any(re.search(p, source, re.M) for p in USED_AS[d])
    ]
    assert unused == []


def test_the_python_plotly_package_is_not_a_dependency():
    # The site draws with plotly.js in the browser; the Python package was never imported.
    assert "plotly" not in _runtime_dependencies()


def test_vendored_files_match_their_recorded_source():
    vendor = ROOT / "static" / "vendor"
    sources = json.loads((vendor / "SOURCES.json").read_text())["files"]
    on_disk = {p.name for p in vendor.iterdir() if p.name != "SOURCES.json"}
    assert on_disk == set(sources), "every vendored file is listed, and every listed one exists"
    for name, info in sources.items():
        assert {"package", "version", "tarball", "sha256", "license"} <= set(info), name
        assert info["version"] in info["tarball"], name
        digest = hashlib.sha256((vendor / name).read_bytes()).hexdigest()
        assert digest == info["sha256"], f"{name} is not the recorded {info['package']}"
