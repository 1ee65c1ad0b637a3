"""The file cache, once full, removes expired files first and then the least recently written,
never a version token: Django's own cull removed a third of the files at random, tokens
included (every page depending on one a miss at once) and hot pages (no previous version left to
serve while one renders again, so each of its visitors rendered it)."""

import os

from arena.cache_backend import ResilientFileBasedCache
from core.versions import KEYS


def _cache(tmp_path, entries: int) -> ResilientFileBasedCache:
    return ResilientFileBasedCache(str(tmp_path), {"OPTIONS": {"MAX_ENTRIES": entries}})


def _written(cache, key: str, when: float, timeout: float | None = 300) -> None:
    cache.set(key, f"value of {key}", timeout)
    os.utime(cache._key_to_file(key), (when, when))  # an order the test decides, no sleeps


def test_the_tokens_survive_and_the_oldest_written_go_first(tmp_path):
    cache = _cache(tmp_path, 12)
    for n, key in enumerate(KEYS):
        _written(cache, key, 1_000 + n, None)  # written first: the oldest files of all
    for n in range(30):
        _written(cache, f"page-{n}", 2_000 + n)
    assert all(cache.get(key) == f"value of {key}" for key in KEYS)
    kept = [n for n in range(30) if cache.get(f"page-{n}") is not None]
    assert len(cache._list_cache_files()) <= 12
    assert kept == list(range(30 - len(kept), 30)) and 29 in kept  # the newest, in one run


def test_expired_files_go_before_any_live_one(tmp_path):
    cache = _cache(tmp_path, 10)
    for n in range(6):
        _written(cache, f"live-{n}", 1_000 + n)  # older than the locks, but live
    for n in range(3):
        _written(cache, f"lock-{n}", 5_000 + n, timeout=0)  # expired at once
    _written(cache, "one-more", 6_000)  # the tenth file: the cull runs on the next write
    _written(cache, "page", 7_000)
    assert all(cache.get(f"live-{n}") is not None for n in range(6))
    assert not any(os.path.exists(cache._key_to_file(f"lock-{n}")) for n in range(3))
    assert cache.get("page") is not None and cache.get("one-more") is not None


def test_one_add_wins_however_many_race_for_a_key(tmp_path):
    """A render lock is taken once: threads (as processes do) racing to add the same key see
    exactly one True, and an expired lock can be taken again."""
    import threading

    cache = _cache(tmp_path, 2000)
    threads, keys = 6, 150
    gates = [threading.Barrier(threads) for _ in range(keys)]
    won = [[0] * keys for _ in range(threads)]

    def race(me: int) -> None:
        for k in range(keys):
            gates[k].wait()
            won[me][k] = int(cache.add(f"lock-{k}", me, 5))

    workers = [threading.Thread(target=race, args=(me,)) for me in range(threads)]
    for w in workers:
        w.start()
    for w in workers:
        w.join(60)
    assert [sum(won[me][k] for me in range(threads)) for k in range(keys)] == [1] * keys
    _written(cache, "old-lock", 1_000, timeout=0)  # expired
    assert cache.add("old-lock", "mine", 5) and cache.get("old-lock") == "mine"
    assert not cache.add("old-lock", "theirs", 5)


def test_a_write_lists_the_folder_only_when_it_could_have_filled_the_room(tmp_path):
    """Counting the folder is a listing of every file; a worker's write takes a render lock per
    hot page. With room for 2,000 files, 400 writes list it a handful of times, not 400; and
    near the limit every write counts again, so a full folder is still culled."""
    listings = []

    class Counting(ResilientFileBasedCache):
        def _list_cache_files(self):
            files = super()._list_cache_files()
            listings.append(len(files))
            return files

    roomy = Counting(str(tmp_path / "roomy"), {"OPTIONS": {"MAX_ENTRIES": 2000}})
    for n in range(400):
        roomy.add(f"lock-{n}", 1, 5)
    assert len(roomy._list_cache_files()) == 400
    assert 1 <= len(listings) - 1 <= 5, listings  # (the count just above is one of them)

    listings.clear()
    tight = Counting(str(tmp_path / "tight"), {"OPTIONS": {"MAX_ENTRIES": 40}})
    for n in range(100):
        tight.set(f"page-{n}", n, 300)
    assert len(tight._list_cache_files()) <= 40
    assert len(listings) > 50  # within ROOM_SHARE files of the limit, each write counts
