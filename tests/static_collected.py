"""A staticfiles finder over the collected folder, for the browser tests' live server.

Pages name static files by their content-hashed names (the manifest storage). The live server
serves /static/ through Django's StaticFilesHandler, which only asks the finders, and the
finders know the source names (`site.css`), not the hashed ones (`site.e0df7912dc19.css`) that
exist only in STATIC_ROOT after collectstatic. This finder, added after collection
(tests/conftest.py), answers from STATIC_ROOT, as whitenoise does in a deploy.
"""

from __future__ import annotations

from pathlib import Path

from django.conf import settings
from django.contrib.staticfiles.finders import BaseFinder


class CollectedFinder(BaseFinder):
    def check(self, **kwargs):
        return []

    def find(self, path, find_all=False, **kwargs):
        root = Path(settings.STATIC_ROOT).resolve()
        candidate = (root / path).resolve()
        if root not in candidate.parents or not candidate.is_file():
            return [] if find_all else None
        return [str(candidate)] if find_all else str(candidate)

    def list(self, ignore_patterns):
        return []  # never a source for collectstatic itself
