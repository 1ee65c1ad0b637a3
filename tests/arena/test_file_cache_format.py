"""The file cache stores values uncompressed (a page hit reads four files; inflating the page
was a third of its CPU), still reads files Django's own writer compressed, and touch keeps a
value as it is."""

import pickle
import time
import zlib

import pytest
from django.core.cache.backends.filebased import FileBasedCache

from arena.cache_backend import ResilientFileBasedCache

PAGE = (200, [("Content-Type", "text/html; charset=utf-8")], b"<p>page</p>" * 3000)


@pytest.fixture
def caches(tmp_path):
    ours = ResilientFileBasedCache(str(tmp_path), {})
    djangos = FileBasedCache(str(tmp_path), {})
    return ours, djangos


def test_values_are_stored_as_plain_pickles(caches):
    ours, _ = caches
    ours.set("page", PAGE, 60)
    with open(ours._key_to_file("page"), "rb") as f:
        expiry = pickle.load(f)
        assert expiry > time.time()
        assert pickle.load(f) == PAGE  # no zlib stream after the expiry
    assert ours.get("page") == PAGE


def test_files_compressed_by_djangos_writer_are_read(caches):
    ours, djangos = caches
    djangos.set("old", PAGE, 60)
    with open(djangos._key_to_file("old"), "rb") as f:
        pickle.load(f)
        assert zlib.decompress(f.read())  # what Django wrote is deflated
    assert ours.get("old") == PAGE
    assert ours.get_many(["old", "absent"]) == {"old": PAGE}


def test_touch_extends_a_value_and_keeps_it(caches):
    ours, djangos = caches
    ours.set("page", PAGE, 1)
    assert ours.touch("page", 600)
    with open(ours._key_to_file("page"), "rb") as f:
        assert pickle.load(f) > time.time() + 500
    assert ours.get("page") == PAGE
    djangos.set("old", PAGE, 1)
    assert ours.touch("old", 600) and ours.get("old") == PAGE
    assert not ours.touch("absent", 600)


def test_an_expired_value_is_gone_for_touch_and_get(caches):
    ours, _ = caches
    ours.set("page", PAGE, 60)
    path = ours._key_to_file("page")
    with open(path, "r+b") as f:  # rewrite its expiry into the past
        f.read()
        f.seek(0)
        f.write(pickle.dumps(time.time() - 1, pickle.HIGHEST_PROTOCOL))
        f.write(pickle.dumps(PAGE, pickle.HIGHEST_PROTOCOL))
        f.truncate()
    assert not ours.touch("page", 600)
    assert ours.get("page") is None
