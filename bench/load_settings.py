"""Settings for the page-cache experiment of the load test (LOAD_CACHE=1 bench/load.sh): the
arena's own settings plus bench/load_cache.VersionedPageCache. Not used by the site."""

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from arena.settings import *  # noqa: E402,F403
from arena.settings import MIDDLEWARE  # noqa: E402

# Inside whitenoise (statics stay as they are), before sessions: a hit skips the rest.
MIDDLEWARE = [*MIDDLEWARE[:2], "load_cache.VersionedPageCache", *MIDDLEWARE[2:]]
