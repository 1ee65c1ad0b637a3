"""Attack run, issue 26 (the web side) and issue 25's export numbers: cases run by bench/attack.py
after its own, against the same gunicorn and database, reported in the same table.

`kit` is the running bench/attack.py module (its helpers, its report): this file adds cases,
never a second set of processes or results.
"""

from __future__ import annotations

import contextlib
import functools
import json
import os
import shutil
import subprocess
import time
import urllib.error
import urllib.parse
import urllib.request

# Issue 26, the web side: cache poisoning, Vary, search flood, full disk, CSV formulas, long
# words, admin edits of running cohorts (and issue 25's exponent notation in exports) ---------

HTMX_ENCODED = {"HX-Request": "%74rue", "HX-Request-URI-AutoEncoded": "true"}
FORMULA_START = ("=", "+", "-", "@", "\t", "\r")
LONG_WORD = "Supercalifragilistic" * 15  # 300 characters


def seed_web_round_two(kit) -> dict:
    """Hostile text where the exports and pages show it: a formula as a market question and a
    model's reasoning, a 300-character word, a trade on that market."""
    from decimal import Decimal

    from cohorts.models import Cohort, Decision, Entry
    from cohorts.services import BetOrder, execute_orders
    from tests.factories import make_market

    link = '=HYPERLINK("http://evil.example/x","Click")'
    formula = make_market(link)
    long_word = make_market(f"Will {LONG_WORD} happen?", outcomes=[f"Yes{LONG_WORD}", "No"],
                            prices={f"Yes{LONG_WORD}": "0.5", "No": "0.5"})  # fmt: skip
    entry = Entry.objects.order_by("pk").first()
    execute_orders(entry, [BetOrder(formula.pk, "Yes", Decimal("60"))], [], None)
    decision = Decision.objects.filter(entry=entry).order_by("pk").first()
    Decision.objects.filter(pk=decision.pk).update(reasoning=link, cost_usd=Decimal("0E-10"))
    cohort = Cohort.objects.order_by("pk").first()
    return {"long_word_market": long_word.pk, "decision": decision.pk, "cohort": cohort.pk}


def case_partial_poisoning(kit, base: str, label: str) -> None:
    results = []
    for path, target in (("/?range=1M", "leaderboard-table"), ("/markets/?status=open",
                                                               "market-results")):  # fmt: skip
        path += ("&" if "?" in path else "?") + f"utm={label.replace(' ', '')}"  # a fresh key
        crafted = kit.get(base + path, headers={**HTMX_ENCODED, "HX-Target": target})
        after = [kit.get(base + path) for _ in range(3)]
        whole = all(b"<html" in a[1] for a in after)
        results.append((path, b"<html" in crafted[1], whole, [a[3].get("X-Cache") for a in after]))
    ok = all(not partial and whole for _, partial, whole, _ in results)
    kit.record("26.1", f"encoded HX-Request after a miss ({label})", ok,
           "; ".join(f"{p.split('&utm')[0].split('?utm')[0]}: crafted got "
                     f"{'the page' if partial else 'the partial'}, next 3 visitors whole page: "
                     f"{whole} (X-Cache {xc})" for p, partial, whole, xc in results))  # fmt: skip


def case_partial_vary(kit, base: str) -> None:
    full = kit.get(base + "/markets/")[3]
    htmx = {"HX-Request": "true", "HX-Target": "market-results"}
    part = kit.get(base + "/markets/", headers=htmx)[3]
    vary_full, vary_part = full.get("Vary", ""), part.get("Vary", "")
    ok = ("HX-Request" in vary_full and "HX-Request" in vary_part
          and "no-store" in part.get("Cache-Control", ""))  # fmt: skip
    kit.record("26.2", "partials vs Back: Vary and Cache-Control", ok,
           f"page Vary: {vary_full!r}; partial Vary: {vary_part!r}, "
           f"Cache-Control {part.get('Cache-Control')!r}")  # fmt: skip


def _spelling(word: str, i: int) -> str:
    """The i-th way of typing `word`: a case pattern, and spaces before and after."""
    cased = "".join(c.upper() if (i >> k) & 1 else c for k, c in enumerate(word))
    return " " * (i % 7) + cased + " " * (i // 256)


def case_search_flood(kit) -> None:
    if not shutil.which("redis-server"):
        return kit.record("26.3", "search flood into the cache", None, "redis-server not installed")
    import redis as redis_py

    port = kit.free_port()
    rdir = kit.VAR / "redis-cache"
    rdir.mkdir(exist_ok=True)
    server = kit.start(["redis-server", str(kit.ROOT / "deploy" / "redis" / "redis-cache.conf"), "--port",
                    str(port), "--pidfile", str(rdir / "pid"), "--logfile", "", "--dir", str(rdir),
                    "--daemonize", "no"], log="redis-cache")  # fmt: skip
    client = redis_py.Redis(port=port, socket_timeout=2)
    for _ in range(50):
        with contextlib.suppress(redis_py.RedisError):
            if client.ping():
                break
        time.sleep(0.1)
    base, web = kit.gunicorn(
        {"REDIS_CACHE_URL": f"redis://127.0.0.1:{port}/0"}, log="gunicorn-flood"
    )
    case_partial_poisoning(kit, base, "Redis")
    spellings = [_spelling("question", i) for i in range(800)]
    codes = [kit.get(base + "/markets/?" + urllib.parse.urlencode({"q": q}))[0] for q in spellings]
    pages = [k for k in client.scan_iter("*arena:page:*") if b"q=" in k]
    policy = client.config_get("maxmemory-policy")["maxmemory-policy"]
    limit = int(client.config_get("maxmemory")["maxmemory"]) // 2**20
    kit.stop(web)
    kit.stop(server)
    kit.record("26.3", "800 spellings of one search into Redis (shipped cache config)",
           len(pages) <= 2 and set(codes) == {200} and policy == "allkeys-lru",
           f"{len(pages)} cached search pages (statuses {sorted(set(codes))}); cache Redis "
           f"maxmemory {limit} MB, policy {policy}; the broker is a separate server "
           f"(deploy/redis/redis-broker.conf: noeviction)")  # fmt: skip


def case_disk_full(kit, ids: dict) -> None:
    mount = kit.VAR / "tiny-var"
    mount.mkdir(exist_ok=True)
    done = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=24m", "tmpfs", str(mount)],
                          capture_output=True, text=True, check=False)  # fmt: skip
    if done.returncode != 0:
        return kit.record("26.7", "disk full under the file cache", None,
                      f"cannot mount a tmpfs (needs root): {done.stderr.strip()}")  # fmt: skip
    try:
        shutil.copytree(kit.VAR / "staticfiles", mount / "staticfiles")
        filler = mount / "filler"
        fd = os.open(filler, os.O_WRONLY | os.O_CREAT)
        with contextlib.suppress(OSError):
            while True:
                os.write(fd, b"x" * 65536)
        with contextlib.suppress(OSError):
            while True:
                os.write(fd, b"x")
        os.close(fd)
        free = shutil.disk_usage(mount).free
        base, web = kit.gunicorn({"ARENA_VAR_DIR": str(mount)}, log="gunicorn-full")
        urls = ["/?range=1W", "/", "/methodology/", "/markets/", "/competitors/", "/exports/",
                "/cohorts/", f"/cohorts/{ids['cohort']}/",
                f"/markets/{ids['long_word_market']}/", f"/decisions/{ids['decision']}/",
                "/markets/?q=question", "/api/markets"]  # fmt: skip
        codes = [kit.get(base + u)[0] for u in urls for _ in range(3)]
        kit.stop(web)
        log = (kit.VAR / "gunicorn-full.log").read_text(errors="replace")
        warnings = log.count("file cache cannot")
        kit.record("26.7/41.8", "var/ full (ENOSPC) under the default file cache",
               all(c == 200 for c in codes),
               f"{len(codes)} requests on {len(urls)} pages with {free} bytes free: statuses "
               f"{sorted(set(codes))}; 'file cache cannot' logged {warnings}x by the workers")  # fmt: skip
    finally:
        subprocess.run(["umount", str(mount)], check=False)


def _keep(seen: list[str], text: str) -> float:
    seen.append(text)
    return float(text)


def case_export_cells(kit, base: str) -> None:
    import csv
    import io
    import re

    exponent = re.compile(r"[+-]?(?:[0-9]+\.?[0-9]*|\.[0-9]+)[eE][+-]?[0-9]+")
    number = re.compile(r"[+-]?[0-9]+(?:\.[0-9]+)?")
    formulas, exponents, cells, found = [], [], 0, {}
    for what in ("decisions", "trades", "snapshots", "forecasts", "scores"):
        text = kit.get(base + f"/exports/{what}.csv?since=2000-01-01", timeout=60)[1].decode()
        rows = list(csv.reader(io.StringIO(text)))
        for row in rows[1:]:
            for cell in row:
                cells += 1
                if cell.startswith(FORMULA_START) and not number.fullmatch(cell):
                    formulas.append(f"{what}: {cell[:30]!r}")
                nested = cell[:1] in "{[" and re.search(r"[0-9][eE][+-]?[0-9]", cell)
                if exponent.fullmatch(cell) or nested:
                    exponents.append(f"{what}.csv: {cell[:20]!r}")
                if cell.startswith("'="):
                    found[what] = found.get(what, 0) + 1
        raw = kit.get(base + f"/exports/{what}.json?since=2000-01-01", timeout=60)[1]
        floats: list[str] = []
        doc = json.loads(raw, parse_float=functools.partial(_keep, floats))
        exponents += [f"{what}.json: {t}" for t in floats if "e" in t.lower()]
        exponents += [f"{what}.json: {v!r}" for row in doc["rows"] for v in row.values()
                      if isinstance(v, str) and exponent.fullmatch(v)]  # fmt: skip
    kit.record("26.8", "CSV formula cells in every export (reasoning, question, ...)",
           not formulas and bool(found.get("decisions")) and bool(found.get("trades")),
           f"{cells} cells: {len(formulas)} live formulas {formulas[:3]}; defused with a "
           f"leading quote: {found}")  # fmt: skip
    kit.record("25.8", "exponent notation in every export (CSV and JSON)", not exponents,
           f"{len(exponents)} numbers with an exponent {exponents[:3]}")  # fmt: skip


def case_long_word(kit, base: str, market_id: int) -> None:
    try:
        from playwright.sync_api import sync_playwright

        from tests.site.conftest import CHROMIUM_ARGS, chromium_executable
    except ImportError as exc:
        return kit.record("26.10", "300-character word at 390 px", None, f"no playwright: {exc}")
    widths = {}
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=chromium_executable(), args=CHROMIUM_ARGS)
        page = browser.new_page(viewport={"width": 390, "height": 844})
        for path in (f"/markets/{market_id}/", "/markets/?q=supercalifragilistic", "/"):
            page.goto(base + path)
            widths[path] = page.evaluate("document.documentElement.scrollWidth")
        browser.close()
    kit.record("26.10", "300-character word in a question and an outcome, phone width (390 px)",
           all(w <= 390 for w in widths.values()),
           "page scrollWidth " + ", ".join(f"{p}: {w} px" for p, w in widths.items()))  # fmt: skip


def case_admin_running_cohort(kit, base: str, cohort_id: int) -> None:
    import re

    from axes.models import AccessAttempt
    from django.contrib.auth import get_user_model
    from django.contrib.auth.models import Permission

    from cohorts.models import Cohort

    AccessAttempt.objects.all().delete()
    user = get_user_model().objects.get(username="ops")
    user.user_permissions.add(*Permission.objects.filter(codename__in=["change_cohort",
                                                                         "view_cohort"]))  # fmt: skip
    session = kit.LoginSession(base)
    session.post("correct horse battery")
    url = f"{base}/admin/cohorts/cohort/{cohort_id}/change/"
    before = Cohort.objects.get(pk=cohort_id)
    answers = []
    for field, value in (("status", "tracking" if before.status == "active" else "active"),
                         ("decision_weeks", str(before.decision_weeks + 2))):  # fmt: skip
        with session.opener.open(url, timeout=30) as response:
            page = response.read().decode()
        data = dict(re.findall(r'<input type="hidden" name="([^"]+)" value="([^"]*)"', page))
        data.update({"status": before.status, "decision_weeks": str(before.decision_weeks),
                     "label": before.label, "notes": before.notes, field: value})  # fmt: skip
        request = urllib.request.Request(url, data=urllib.parse.urlencode(data).encode(),
                                         method="POST")  # fmt: skip
        try:
            with session.opener.open(request, timeout=30) as response:
                status, text = response.status, response.read().decode()
        except urllib.error.HTTPError as exc:
            status, text = exc.code, exc.read().decode()
        refused = "errorlist" in text and ("snapshot job" in text or "cannot change" in text)
        answers.append((field, status, refused))
    after = Cohort.objects.get(pk=cohort_id)
    unchanged = (after.status, after.decision_weeks) == (before.status, before.decision_weeks)
    AccessAttempt.objects.all().delete()
    kit.record("26.11", "admin edits of a running cohort (status, decision weeks)",
           unchanged and all(s == 200 and r for _, s, r in answers),
           "; ".join(f"{f}: {s}, refused with the reason: {r}" for f, s, r in answers)
           + f"; cohort unchanged: {unchanged}")  # fmt: skip


def run(kit, base: str, ids: dict) -> None:
    """Issue 26 (web side) and issue 25's export numbers, after the earlier cases."""
    more = seed_web_round_two(kit)
    case_partial_poisoning(kit, base, "file cache")
    case_partial_vary(kit, base)
    case_export_cells(kit, base)
    case_long_word(kit, base, more["long_word_market"])
    case_admin_running_cohort(kit, base, more["cohort"])
    case_search_flood(kit)
    case_disk_full(kit, more)
    case_stale_rerun(kit)


def case_stale_rerun(kit) -> None:
    """A decision re-run hours after its universe froze, while the market moved from the frozen
    0.40 to 0.95: it must trade at the current marked price (or not at all), never at 0.40."""
    from datetime import UTC, datetime, timedelta
    from decimal import Decimal

    from django.test.utils import override_settings

    from cohorts.decisions.run import UNIVERSE_PRICE_WINDOW, run_decision
    from cohorts.models import Trade
    from cohorts.services import open_cohort
    from cohorts.universe import freeze_universe
    from tests.agents.helpers import KEY_ENV, allowed_endpoints, answer, llm_competitor
    from tests.factories import make_market
    from tests.fakes.openai_server import FakeOpenAIServer, success

    week = datetime(2031, 1, 5, tzinfo=UTC)  # a Sunday no other case uses
    frozen_at = week + timedelta(minutes=5)
    later = frozen_at + UNIVERSE_PRICE_WINDOW + timedelta(hours=2)
    os.environ[KEY_ENV] = "sk-or-v1-attack"
    with FakeOpenAIServer() as model, override_settings(
        ARENA_LLM_ENDPOINTS=allowed_endpoints(model), ARENA_LLM_TIMEOUT=5
    ):
        market = make_market("Stale-price re-run target", prices={"Yes": "0.40", "No": "0.60"},
                             volume=10**9, close_time=week + timedelta(days=30), source="polymarket",
                             last_priced_at=frozen_at, last_synced_at=frozen_at)  # fmt: skip
        cohort, _ = open_cohort(week, competitors=[llm_competitor(model, slug="stale-rerun")],
                                at=week)  # fmt: skip
        universe = freeze_universe(cohort, 1, frozen_at)
        market.last_prices, market.last_priced_at = {"Yes": "0.95", "No": "0.05"}, later
        market.save()
        bet = {"market_id": str(market.pk), "outcome": "Yes", "amount": 2000, "probability": 0.97}
        model.enqueue(success(answer(universe, bets=[bet])))
        decision = run_decision(cohort.entries.get().pk, 1, later)
    trade = Trade.objects.filter(decision=decision, position__market=market).first()
    price = trade.price if trade else None
    ok = trade is None or price == Decimal("0.95")
    kit.record("26.12", "stale-price re-run (hours after the freeze, market 0.40 -> 0.95)", ok,
               f"decision {decision.status}/{decision.action}; traded at "
               f"{price if trade else 'nothing'} (frozen 0.40, current 0.95); quote "
               f"{trade.quote if trade else '-'}")  # fmt: skip
