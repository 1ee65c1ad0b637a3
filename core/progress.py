"""A small progress bar for long CLI verbs: drawn on a terminal, silent otherwise."""

import sys
import time


class Progress:
    def __init__(self, total: int, label: str = "", stream=None, force: bool = False):
        self.total = max(int(total), 0)
        self.label = label
        self.stream = stream or sys.stderr
        self.enabled = force or (hasattr(self.stream, "isatty") and self.stream.isatty())
        self.done = 0
        self.started = time.monotonic()
        self._last_draw = 0.0

    def advance(self, n: int = 1) -> None:
        self.done += n
        now = time.monotonic()
        if self.enabled and (now - self._last_draw > 0.1 or self.done >= self.total):
            self._last_draw = now
            self._draw()

    def _draw(self) -> None:
        width = 30
        frac = self.done / self.total if self.total else 1.0
        filled = int(width * min(frac, 1.0))
        elapsed = time.monotonic() - self.started
        bar = "#" * filled + "-" * (width - filled)
        self.stream.write(f"\r{self.label} [{bar}] {self.done}/{self.total} {elapsed:5.1f}s")
        self.stream.flush()

    def close(self) -> None:
        if self.enabled:
            self._draw()
            self.stream.write("\n")
            self.stream.flush()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()


class Notes:
    """Remarks a verb would otherwise repeat for every item it handles: each is said once at
    the end, with how many items it applied to."""

    def __init__(self, unit: str = "times") -> None:
        self.unit = unit
        self.counts: dict[str, int] = {}

    def add(self, text: str) -> None:
        self.counts[text] = self.counts.get(text, 0) + 1

    def lines(self) -> list[str]:
        return [text if n == 1 else f"{n} {self.unit}: {text}" for text, n in self.counts.items()]
