"""Query shapes built once per thread: a QuerySet whose subqueries cost more to build and
resolve than the database spends running them, kept and copied (`.all()`, `.filter()`) by
each request instead of rebuilt.

Per thread, not per process: a copy of a QuerySet shares its annotations' subqueries with the
original, and compiling a subquery changes its alias counts for the length of the compile.
gunicorn runs several threads per worker (`--threads 4`), and two of them compiling one shared
subquery at once could leave those counts wrong for every later request. A thread never
compiles two queries at once, so a shape of its own is safe; a worker builds each shape once
per thread, a few milliseconds in its life.
"""

from __future__ import annotations

import functools
import threading
from collections.abc import Callable
from typing import ParamSpec, TypeVar

P = ParamSpec("P")
R = TypeVar("R")


def per_thread(build: Callable[P, R]) -> Callable[P, R]:
    """Cache `build`'s answer per thread and per (hashable) arguments."""
    local = threading.local()

    @functools.wraps(build)
    def shape(*args: P.args, **kwargs: P.kwargs) -> R:
        try:
            kept = local.kept
        except AttributeError:
            kept = local.kept = {}
        key = (args, tuple(sorted(kwargs.items())))
        try:
            return kept[key]
        except KeyError:
            kept[key] = value = build(*args, **kwargs)
            return value

    return shape
