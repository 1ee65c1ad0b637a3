"""Static files as every way of running the site serves them: content-hashed names, compressed
(gzip and brotli) by collectstatic, cached for a year as immutable.

Django's manifest storage names files by their hash only when DEBUG is off, so `./run up`
(DEBUG on, loopback only) sent plotly.js under its plain name, which whitenoise must serve with
max-age=0: every visit revalidated it and parsed it again. Here the hashed name is used
whenever collectstatic has written the manifest (`arena up` runs it on every start), with DEBUG
on or off; whitenoise then marks those files immutable. Without a manifest (a bare `manage.py
runserver` before any collectstatic) the plain name is served from the source folders, as
Django does.

collectstatic keeps only the hashed copies and compresses each once: a hashed name is its
content, so a .br or .gz beside it from an earlier start is still right. Brotli at its best
quality costs seconds for plotly.js alone; compressing every file again (and the plain copies
too, as whitenoise does by default) on every `arena up` cost a minute on a loaded 2-core machine.
"""

from __future__ import annotations

import os

from whitenoise.compress import Compressor
from whitenoise.storage import CompressedManifestStaticFilesStorage


class _OnceCompressor(Compressor):
    def compress(self, path: str) -> list[str]:
        done = [path + suffix for suffix in (".br", ".gz") if os.path.exists(path + suffix)]
        if done:
            return done
        return super().compress(path)


class HashedStaticStorage(CompressedManifestStaticFilesStorage):
    keep_only_hashed_files = True

    def create_compressor(self, **kwargs) -> Compressor:
        return _OnceCompressor(**kwargs)

    def url(self, name: str | None, force: bool = False) -> str:
        if name is None:
            return super().url(name, force)
        try:
            return super().url(name, force=True)
        except ValueError:
            # Not collected (no manifest, or a file added since): the plain name.
            return super().url(name, force)
