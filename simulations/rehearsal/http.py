"""What a rehearsal does over HTTP, as outsiders would: a probe polling /healthz, staff logging
in through the admin's login form (with its CSRF token) to correct resolutions, and a reader
saving every page of /api/seals."""

from __future__ import annotations

import json
import re
import threading
from dataclasses import asdict, dataclass
from pathlib import Path

import requests

from core import clock

HTTP_TIMEOUT = 10.0
PROBE_INTERVAL = 0.5  # seconds between two /healthz requests
CSRF_FIELD = re.compile(r'name="csrfmiddlewaretoken" value="([^"]+)"')
MESSAGE = re.compile(r'<li class="(success|warning|error)">(.*?)</li>', re.S)
TAGS = re.compile(r"<[^>]+>|\s+")


@dataclass
class HealthSample:
    wall: float  # clock.wall().timestamp() when the request was sent
    arena: str
    http: int  # 0: no answer
    status: str
    broker: str = ""
    database: str = ""
    worker: str = ""
    # When the answer came back: a fault injected while the request was in flight (a backend
    # killed under its query) shows in an answer to a request sent before the fault began.
    answered: float = 0.0

    def overlaps(self, start: float, end: float) -> bool:
        """Whether this request was in flight at some moment of [start, end]."""
        return self.wall <= end and max(self.answered, self.wall) >= start


class HealthProbe:
    """Polls /healthz in a thread and keeps every answer: the status timeline of the run."""

    def __init__(self, base_url: str):
        self.url = base_url + "/healthz"
        self.samples: list[HealthSample] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="healthz-probe", daemon=True)

    def start(self) -> HealthProbe:
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(timeout=HTTP_TIMEOUT + 2)

    def _run(self) -> None:
        session = requests.Session()
        while not self._stop.is_set():
            self.samples.append(self.sample(session))
            self._stop.wait(PROBE_INTERVAL)

    def sample(self, session: requests.Session) -> HealthSample:
        at, arena = clock.wall().timestamp(), clock.now().isoformat(timespec="minutes")
        try:
            response = session.get(self.url, timeout=HTTP_TIMEOUT)
        except requests.RequestException:
            return HealthSample(at, arena, 0, "no answer", answered=clock.wall().timestamp())
        answered = clock.wall().timestamp()
        try:
            body = response.json()
        except ValueError:
            return HealthSample(at, arena, response.status_code, "not JSON", answered=answered)
        return HealthSample(
            at, arena, response.status_code, str(body.get("status")),
            str(body.get("broker")), str(body.get("database")),
            str((body.get("worker") or {}).get("status")), answered,
        )  # fmt: skip

    def timeline(self) -> list[dict]:
        """The samples with consecutive equal states folded: [{from, to, arena, state}]."""
        folded: list[dict] = []
        for s in self.samples:
            state = f"{s.http} {s.status} broker={s.broker} db={s.database} worker={s.worker}"
            if folded and folded[-1]["state"] == state:
                folded[-1]["to"] = s.wall
                folded[-1]["samples"] += 1
            else:
                folded.append({"from": s.wall, "to": s.wall, "arena": s.arena, "state": state,
                               "samples": 1})  # fmt: skip
        return folded

    def raw(self) -> list[dict]:
        return [asdict(s) for s in self.samples]


class StaffSession:
    """A staff member in a browser: the real login form, CSRF tokens, the correction forms."""

    def __init__(self, base_url: str, username: str, password: str):
        self.base = base_url
        self.session = requests.Session()
        self.username, self.password = username, password

    def _token(self, path: str) -> str:
        response = self.session.get(self.base + path, timeout=HTTP_TIMEOUT)
        response.raise_for_status()
        found = CSRF_FIELD.search(response.text)
        if not found:
            raise RuntimeError(f"no CSRF token in the form at {path}")
        return found.group(1)

    def login(self) -> None:
        path = "/admin/login/?next=/admin/"
        token = self._token(path)
        response = self.session.post(
            self.base + path,
            data={"csrfmiddlewaretoken": token, "username": self.username,
                  "password": self.password, "next": "/admin/"},
            headers={"Referer": self.base + path}, timeout=HTTP_TIMEOUT,
        )  # fmt: skip
        if response.status_code != 200 or "/admin/login/" in response.url:
            raise RuntimeError(f"staff login failed (HTTP {response.status_code})")

    def correct(self, market_id: int, action: str, reason: str, outcome: str = "") -> str:
        """Post one correction through the market's confirmation form; what the admin said
        (the messages on its result page, or the form's errors)."""
        path = f"/admin/markets/market/{market_id}/correct/{action}/"
        token = self._token(path)
        data = {"csrfmiddlewaretoken": token, "reason": reason, "apply": "1", "action": action,
                "_selected_action": str(market_id), "select_across": "0"}  # fmt: skip
        if outcome:
            data["outcome"] = outcome
        response = self.session.post(
            self.base + path, data=data, headers={"Referer": self.base + path},
            timeout=HTTP_TIMEOUT,
        )  # fmt: skip
        said = [f"{kind}: {TAGS.sub(' ', text).strip()}"
                for kind, text in MESSAGE.findall(response.text)]  # fmt: skip
        return f"HTTP {response.status_code}; " + ("; ".join(said) or "no message")


def save_seals(base_url: str, path: Path) -> int:
    """Every page of /api/seals, following `next`, saved as a JSON list of the responses; the
    number of week roots saved."""
    pages, url, roots = [], "/api/seals?limit=200", 0
    session = requests.Session()
    while url:
        response = session.get(base_url + url, timeout=HTTP_TIMEOUT)
        response.raise_for_status()
        page = response.json()
        pages.append(page)
        roots += len(page.get("seals") or [])
        url = page.get("next")
    path.write_text(json.dumps(pages, indent=1), encoding="utf-8")
    return roots


def get_json(base_url: str, path: str) -> tuple[int, object]:
    response = requests.get(base_url + path, timeout=HTTP_TIMEOUT)
    try:
        return response.status_code, response.json()
    except ValueError:
        return response.status_code, None
