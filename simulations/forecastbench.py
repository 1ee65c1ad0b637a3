"""ForecastBench question and resolution sets: reading them (files, folders, URLs) and
validating their market questions, with no database.

Bad rows are skipped with a reason, never guessed at; what survives becomes a ReplaySet that
simulations.replay writes into the arena. Why every set gets its own copy of a market: see
simulations.replay.
"""

from __future__ import annotations

import json
import re
from collections import Counter, defaultdict
from collections.abc import Iterable
from dataclasses import dataclass, field
from datetime import UTC, date, datetime, time
from decimal import ROUND_HALF_EVEN, Decimal
from pathlib import Path
from urllib.parse import urlsplit

import requests
from django.conf import settings
from requests.adapters import HTTPAdapter
from urllib3.util.retry import Retry

from markets.models import http_url
from markets.pricing import PRICE_PLACES, to_price

MARKET_PLATFORMS = ("polymarket", "manifold", "metaculus", "infer")
OUTCOMES = ["Yes", "No"]
QUESTION_FILE = re.compile(r"(\d{4}-\d{2}-\d{2})-llm\.json")
RESOLUTION_FILE = re.compile(r"(\d{4}-\d{2}-\d{2})_resolution_set\.json")
# The public repository's raw files, for `arena replay-forecastbench <url> --due ...`.
PUBLIC_BASE_URL = (
    "https://raw.githubusercontent.com/forecastingresearch/forecastbench-datasets/main/datasets"
)
EXTERNAL_ID_MAX = 120


class ReplayError(Exception):
    """A set cannot be read (missing file, bad JSON, wrong shape): one line for the CLI."""


# --- reading ------------------------------------------------------------------------------


@dataclass(frozen=True)
class SetFiles:
    """One question set and its resolution set (None when not published yet), as parsed JSON."""

    questions: dict
    resolutions: dict | None
    origin: str


def load_sets(location: str, dues: Iterable[date] = ()) -> list[SetFiles]:
    """Read the sets at a file, a directory of sets, or an http(s) URL, oldest first.

    A directory is the dataset root (question_sets/ and resolution_sets/ inside), one of those
    two folders, or a flat folder holding both kinds of file. A URL is a question-set file or
    the root (PUBLIC_BASE_URL); a root URL cannot be listed, so it needs `dues` (default: the
    root's latest-llm.json).
    """
    dues = sorted(set(dues))
    if urlsplit(location).scheme in ("http", "https"):
        sets = _load_url(location.rstrip("/"), dues)
    else:
        sets = _load_local(Path(location), dues)
    return sorted(sets, key=lambda s: str(s.questions.get("forecast_due_date")))


def _load_local(path: Path, dues: list[date]) -> list[SetFiles]:
    if path.is_file():
        questions_path = path
        match = RESOLUTION_FILE.fullmatch(path.name)
        if match:  # given the resolution set: find its question set
            questions_path = _first_existing(_local_partners(path, match.group(1), "questions"))
            if questions_path is None:
                raise ReplayError(f"no question set found for {path}")
        questions = _read_local(questions_path)
        due = _doc_due(questions, str(questions_path))
        _check_wanted(due, dues, str(questions_path))
        res_path = _first_existing(_local_partners(questions_path, due.isoformat(), "resolutions"))
        resolutions = _read_local(res_path) if res_path else None
        return [SetFiles(questions, resolutions, str(questions_path))]
    if not path.is_dir():
        raise ReplayError(f"{path} does not exist")
    qdir, rdir = _local_dirs(path)
    found = {
        date.fromisoformat(m.group(1)): p
        for p in sorted(qdir.glob("*-llm.json"))
        if (m := QUESTION_FILE.fullmatch(p.name))
    }
    missing = [d.isoformat() for d in dues if d not in found]
    if missing:
        raise ReplayError(f"no question set for {', '.join(missing)} in {qdir}")
    if not found:
        raise ReplayError(f"no question sets (YYYY-MM-DD-llm.json) in {qdir}")
    sets = []
    for due in dues or sorted(found):
        res_path = rdir / f"{due.isoformat()}_resolution_set.json"
        resolutions = _read_local(res_path) if res_path.is_file() else None
        sets.append(SetFiles(_read_local(found[due]), resolutions, str(found[due])))
    return sets


def _local_dirs(path: Path) -> tuple[Path, Path]:
    if (path / "question_sets").is_dir():
        return path / "question_sets", path / "resolution_sets"
    if path.name in ("question_sets", "resolution_sets"):
        return path.parent / "question_sets", path.parent / "resolution_sets"
    return path, path


def _local_partners(path: Path, due: str, want: str) -> list[Path]:
    """Where the other file of a set lives: the sibling folder, else the same folder."""
    name = f"{due}-llm.json" if want == "questions" else f"{due}_resolution_set.json"
    folder = "question_sets" if want == "questions" else "resolution_sets"
    return [path.parent.parent / folder / name, path.parent / name]


def _first_existing(paths: list[Path]) -> Path | None:
    return next((p for p in paths if p.is_file()), None)


def _read_local(path: Path) -> dict:
    try:
        return _parse_json(path.read_bytes(), str(path))
    except OSError as exc:
        raise ReplayError(f"cannot read {path}: {exc.strerror or exc}") from exc


def _load_url(url: str, dues: list[date]) -> list[SetFiles]:
    session = http_session()
    if url.endswith(".json"):
        match = RESOLUTION_FILE.search(url.rsplit("/", 1)[-1])
        if match:
            base = url.rsplit("/", 1)[0].removesuffix("/resolution_sets")
            url = f"{base}/question_sets/{match.group(1)}-llm.json"
        question_urls = [url]
    else:
        base = url.removesuffix("/question_sets").removesuffix("/resolution_sets")
        names = [f"{d.isoformat()}-llm.json" for d in dues] or ["latest-llm.json"]
        question_urls = [f"{base}/question_sets/{name}" for name in names]
    sets = []
    for q_url in question_urls:
        questions = _fetch_json(session, q_url, required=True)
        due = _doc_due(questions, q_url)
        if url.endswith(".json"):
            _check_wanted(due, dues, q_url)
        resolutions = _fetch_json(session, _resolution_url(q_url, due))
        sets.append(SetFiles(questions, resolutions, q_url))
    return sets


def _resolution_url(question_url: str, due: date) -> str:
    """The resolution set next to a question set: ../resolution_sets/, else the same folder."""
    folder = question_url.rsplit("/", 1)[0]
    if folder.endswith("/question_sets"):
        folder = folder.removesuffix("/question_sets") + "/resolution_sets"
    return f"{folder}/{due.isoformat()}_resolution_set.json"


def http_session() -> requests.Session:
    """requests with retries (backoff on 429/5xx and connection errors) and our User-Agent."""
    retry = Retry(
        total=settings.ARENA_HTTP_RETRIES,
        backoff_factor=0.5,
        status_forcelist=(429, 500, 502, 503, 504),
        allowed_methods=("GET",),
        raise_on_status=False,
    )
    session = requests.Session()
    session.mount("http://", HTTPAdapter(max_retries=retry))
    session.mount("https://", HTTPAdapter(max_retries=retry))
    session.headers["User-Agent"] = settings.ARENA_USER_AGENT
    return session


def _fetch_json(session: requests.Session, url: str, *, required: bool = False) -> dict | None:
    """The parsed JSON at `url`; None on 404 unless `required` (a resolution set may not exist)."""
    try:
        response = session.get(url, timeout=(10, settings.ARENA_HTTP_TIMEOUT * 3))
    except requests.RequestException as exc:
        raise ReplayError(f"cannot fetch {url}: {type(exc).__name__}") from exc
    if response.status_code == 404 and not required:
        return None
    if response.status_code != 200:
        raise ReplayError(f"cannot fetch {url}: HTTP {response.status_code}")
    return _parse_json(response.content, url)


def _parse_json(data: bytes, origin: str) -> dict:
    try:
        doc = json.loads(data)
    except ValueError as exc:
        raise ReplayError(f"{origin} is not valid JSON: {exc}") from exc
    if not isinstance(doc, dict):
        raise ReplayError(f"{origin}: expected a JSON object at the top level")
    return doc


def _doc_due(doc: dict, origin: str) -> date:
    due = parse_date(doc.get("forecast_due_date"))
    if due is None:
        raise ReplayError(f"{origin}: missing or bad forecast_due_date")
    return due.date()


def _check_wanted(due: date, dues: list[date], origin: str) -> None:
    if dues and due not in dues:
        raise ReplayError(
            f"{origin} is the {due} set, not one of --due {', '.join(map(str, dues))}"
        )


# --- parsing and validation ----------------------------------------------------------------


@dataclass(frozen=True)
class Resolution:
    """A resolution row: the outcome (resolved, value 0/1) or a later price (not resolved)."""

    on: date
    resolved: bool
    value: Decimal


@dataclass(frozen=True)
class ReplayQuestion:
    qid: str
    platform: str
    question: str
    description: str
    url: str
    open_time: datetime | None
    close_time: datetime | None
    freeze_time: datetime | None
    freeze_value: Decimal
    resolutions: tuple[Resolution, ...]  # by date; nothing after the first resolved row
    raw: dict

    @property
    def outcome(self) -> str | None:
        """ "Yes"/"No" once resolved, else None."""
        final = self.resolutions[-1] if self.resolutions else None
        if final is None or not final.resolved:
            return None
        return OUTCOMES[0] if final.value == 1 else OUTCOMES[1]


@dataclass
class ReplaySet:
    due: date
    origin: str
    questions: list[ReplayQuestion]
    skipped: list[tuple[str, str]] = field(default_factory=list)  # (question, reason)
    warnings: list[str] = field(default_factory=list)
    other_sources: int = 0  # dataset questions (no market price): not replayed
    has_resolution_set: bool = False
    without_resolution: int = 0

    @property
    def label(self) -> str:
        return f"ForecastBench {self.due.isoformat()}"

    @property
    def slug(self) -> str:
        return f"forecastbench-{self.due.isoformat()}"

    def external_id(self, q: ReplayQuestion) -> str:
        return f"{self.due.isoformat()}:{q.platform}:{q.qid}"

    def skip_summary(self) -> Counter:
        return Counter(_reason_kind(reason) for _, reason in self.skipped)


def _reason_kind(reason: str) -> str:
    return reason.split(":", 1)[0]


def parse_set(files: SetFiles) -> ReplaySet:
    """Validate a set's market questions; bad rows are skipped with a reason, never guessed at."""
    doc = files.questions
    due = _doc_due(doc, files.origin)
    rows = doc.get("questions")
    if not isinstance(rows, list):
        raise ReplayError(f"{files.origin}: 'questions' is not a list")
    result = ReplaySet(due=due, origin=files.origin, questions=[])
    result.has_resolution_set = files.resolutions is not None
    resolutions = _resolution_rows(files.resolutions, result)
    seen: set[tuple[str, str]] = set()
    for index, row in enumerate(rows):
        if not isinstance(row, dict):
            result.skipped.append((f"#{index}", "malformed: not an object"))
            continue
        platform = str(row.get("source") or "")
        if platform not in MARKET_PLATFORMS:
            result.other_sources += 1
            continue
        qid = _text(row.get("id"))
        name = f"{platform}:{qid or '#' + str(index)}"
        key = (qid, platform)
        if key in seen:
            result.skipped.append((name, "duplicate: the same (id, source) appears twice"))
            continue
        try:
            question = _question(row, qid, platform, due, resolutions.get(key, []), result)
        except _RowError as exc:
            result.skipped.append((name, str(exc)))
            continue
        seen.add(key)
        if key not in resolutions:
            result.without_resolution += 1
        result.questions.append(question)
    return result


class _RowError(Exception):
    pass


def _question(
    row: dict, qid: str, platform: str, due: date, res_rows: list[dict], result: ReplaySet
) -> ReplayQuestion:
    if not qid:
        raise _RowError("malformed: missing id")
    if len(f"{due.isoformat()}:{platform}:{qid}") > EXTERNAL_ID_MAX:
        raise _RowError("malformed: id too long")
    question = _text(row.get("question"))
    if not question:
        raise _RowError("malformed: missing question text")
    value = parse_price(row.get("freeze_datetime_value"))
    if value is None:
        raise _RowError(f"bad freeze value: {row.get('freeze_datetime_value')!r} is not a number")
    if not (0 < value < 1):
        raise _RowError(f"bad freeze value: {value} is not strictly between 0 and 1")
    times = {}
    for key in ("market_info_open_datetime", "market_info_close_datetime", "freeze_datetime"):
        raw = row.get(key)
        times[key] = parse_date(raw)
        if times[key] is None and _text(raw) not in ("", "N/A"):
            raise _RowError(f"bad date: {key} {raw!r}")
    history = _history(res_rows, due, f"{platform}:{qid}", result)
    if history and history[-1].resolved and history[-1].on < due:
        raise _RowError("resolved before the due date: nothing left to forecast")
    background = _text(row.get("background"))
    criteria = _text(row.get("resolution_criteria"))
    description = "\n\n".join(p for p in (background, f"Resolution criteria: {criteria}") if p)
    return ReplayQuestion(
        qid=qid,
        platform=platform,
        question=question,
        description=description if criteria else background,
        url=http_url(_text(row.get("url")))[:500],  # a javascript: URL is no source
        open_time=times["market_info_open_datetime"],
        close_time=times["market_info_close_datetime"],
        freeze_time=times["freeze_datetime"],
        freeze_value=value,
        resolutions=tuple(history),
        raw={"question": row, "resolutions": res_rows},
    )


def _resolution_rows(doc: dict | None, result: ReplaySet) -> dict[tuple[str, str], list[dict]]:
    if doc is None:
        return {}
    rows = doc.get("resolutions")
    if not isinstance(rows, list):
        raise ReplayError(f"resolution set {result.due}: 'resolutions' is not a list")
    if str(doc.get("forecast_due_date")) != result.due.isoformat():
        result.warnings.append(
            f"resolution set says due {doc.get('forecast_due_date')!r}, question set {result.due}"
        )
    by_key: dict[tuple[str, str], list[dict]] = defaultdict(list)
    for row in rows:
        if isinstance(row, dict) and row.get("source") in MARKET_PLATFORMS:
            by_key[(_text(row.get("id")), str(row["source"]))].append(row)
    return by_key


def _history(rows: list[dict], due: date, name: str, result: ReplaySet) -> list[Resolution]:
    """Valid resolution rows by date, cut after the first resolved one; bad rows are warned."""
    good: list[Resolution] = []
    for row in rows:
        on = parse_date(row.get("resolution_date"))
        resolved = row.get("resolved")
        value = parse_price(row.get("resolved_to"))
        problem = None
        if on is None:
            problem = f"bad resolution_date {row.get('resolution_date')!r}"
        elif not isinstance(resolved, bool):
            problem = f"'resolved' is {resolved!r}, not true/false"
        elif value is None:
            problem = f"resolved_to {row.get('resolved_to')!r} is not a number"
        elif resolved and value not in (0, 1):
            problem = f"resolved to {value}, not 0 or 1"
        elif not resolved and not (0 < value < 1):
            problem = f"later price {value} is not strictly between 0 and 1"
        elif not resolved and on.date() < due:
            problem = f"later price dated {on.date()}, before the due date"
        if problem:
            result.warnings.append(f"{name}: resolution row ignored: {problem}")
            continue
        good.append(Resolution(on=on.date(), resolved=resolved, value=value))
    good.sort(key=lambda r: (r.on, r.resolved))
    for i, res in enumerate(good):
        if res.resolved:
            return good[: i + 1]
    return good


def parse_price(raw) -> Decimal | None:
    """A number (string or JSON number) rounded to the 6 places prices are stored with."""
    value = to_price(raw)
    return None if value is None else value.quantize(PRICE_PLACES, rounding=ROUND_HALF_EVEN)


def parse_date(raw) -> datetime | None:
    """An aware UTC datetime from "YYYY-MM-DD" or an ISO datetime; None if unparseable."""
    text = _text(raw)
    if not text:
        return None
    try:
        if len(text) == 10:
            d = date.fromisoformat(text)
            return datetime.combine(d, time(0), tzinfo=UTC)
        value = datetime.fromisoformat(text.replace("Z", "+00:00"))
    except ValueError:
        return None
    if value.tzinfo is None:
        value = value.replace(tzinfo=UTC)
    return value.astimezone(UTC)


def _text(raw) -> str:
    if raw is None or isinstance(raw, (dict, list)):
        return ""
    return str(raw).strip()
