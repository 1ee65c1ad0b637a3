"""gunicorn.conf.py's worker hook: what a worker has loaded is frozen out of the collector."""

import gc
import runpy

from django.conf import settings


def test_worker_init_freezes_what_the_worker_loaded():
    conf = runpy.run_path(str(settings.BASE_DIR / "gunicorn.conf.py"))
    gc.unfreeze()
    assert gc.get_freeze_count() == 0
    try:
        conf["post_worker_init"](worker=None)
        # Everything alive now (Django, the test run's modules) is out of the collector's
        # sight, so a full collection has nothing of it to walk.
        assert gc.get_freeze_count() > 10_000
        assert len(gc.get_objects(generation=2)) < gc.get_freeze_count() / 10
    finally:
        gc.unfreeze()
