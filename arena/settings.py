"""The arena's one settings file. Everything that differs between machines comes from the env.

Defaults give a working single-machine install: SQLite under var/ and an embedded
filesystem Celery broker under var/broker/. Production sets DATABASE_URL, CELERY_BROKER_URL,
SECRET_KEY and DEBUG=0, and then refuses to start without a real SECRET_KEY.
"""

import os
from decimal import Decimal, InvalidOperation
from pathlib import Path

import dj_database_url
from django.core.exceptions import ImproperlyConfigured

from agents.endpoint_secrets import refuse_default_secret, refuse_secrets
from arena.logfmt import logging_dict

BASE_DIR = Path(__file__).resolve().parent.parent
VAR_DIR = Path(os.environ.get("ARENA_VAR_DIR", BASE_DIR / "var"))
VAR_DIR.mkdir(parents=True, exist_ok=True)


def env_bool(name: str, default: bool) -> bool:
    raw = os.environ.get(name)
    if raw is None or raw == "":
        return default
    if raw.lower() in {"1", "true", "yes", "on"}:
        return True
    if raw.lower() in {"0", "false", "no", "off"}:
        return False
    raise ImproperlyConfigured(f"{name} must be a boolean (1/0/true/false), got {raw!r}")


def env_decimal(name: str) -> Decimal | None:
    raw = os.environ.get(name, "").strip()
    if not raw:
        return None
    try:
        value = Decimal(raw)
    except InvalidOperation as exc:
        raise ImproperlyConfigured(f"{name} must be a number, got {raw!r}") from exc
    if not value.is_finite() or value < 0:
        raise ImproperlyConfigured(f"{name} must be a number of 0 or more, got {raw!r}")
    return value


def env_int(name: str, default: int) -> int:
    raw = os.environ.get(name)
    if raw is None or raw == "":
        return default
    try:
        return int(raw)
    except ValueError as exc:
        raise ImproperlyConfigured(f"{name} must be an integer, got {raw!r}") from exc


def env_list(name: str, default: list[str]) -> list[str]:
    raw = os.environ.get(name)
    if raw is None or raw == "":
        return default
    return [item.strip() for item in raw.split(",") if item.strip()]


DEBUG = env_bool("DEBUG", True)
# Debug pages show code and settings: with DEBUG on the site answers only loopback clients
# (arena.security.LoopbackOnlyWhenDebugMiddleware) and only loopback host names.
LOOPBACK_HOSTS = ["127.0.0.1", "localhost", "[::1]", "::1", "testserver"]
_DEV_SECRET = "dev-only-insecure-secret-key-do-not-use-in-production"
SECRET_KEY = os.environ.get("SECRET_KEY", "")
if not SECRET_KEY:
    if not DEBUG:
        raise ImproperlyConfigured("SECRET_KEY must be set when DEBUG is off")
    SECRET_KEY = _DEV_SECRET
ALLOWED_HOSTS = env_list("ALLOWED_HOSTS", LOOPBACK_HOSTS if DEBUG else [])
if DEBUG and set(ALLOWED_HOSTS) - set(LOOPBACK_HOSTS):
    raise ImproperlyConfigured(
        "DEBUG is on only for loopback hosts (127.0.0.1, localhost); set DEBUG=0 to serve "
        f"{', '.join(sorted(set(ALLOWED_HOSTS) - set(LOOPBACK_HOSTS)))}"
    )
CSRF_TRUSTED_ORIGINS = env_list("CSRF_TRUSTED_ORIGINS", [])

INSTALLED_APPS = [
    "django.contrib.admin",
    "django.contrib.auth",
    "django.contrib.contenttypes",
    "django.contrib.sessions",
    "django.contrib.messages",
    "django.contrib.staticfiles",
    "django.contrib.humanize",
    "django_htmx",
    "template_partials",
    "axes",
    "core",
    "arena",
    "markets",
    "agents",
    "cohorts",
    "scoring",
    "web",
]

MIDDLEWARE = [
    # /healthz first: a local probe must not meet the host check or the HTTPS redirect.
    "arena.health.HealthzMiddleware",
    "arena.security.LoopbackOnlyWhenDebugMiddleware",
    "django.middleware.security.SecurityMiddleware",
    # Exports take their slot or get their 429 here, before sessions, auth and the page cache:
    # a flood of refused exports must cost next to nothing (web/exports/door.py).
    "web.exports.door.ExportDoorMiddleware",
    "whitenoise.middleware.WhiteNoiseMiddleware",
    # Every /api/ error as JSON, whichever layer below produced it.
    "web.api_errors.ApiErrorMiddleware",
    # Serves anonymous readers from the page cache; inner middleware (CSP, ...) headers are
    # stored with the page.
    "web.cache.PublicPageCacheMiddleware",
    "django.contrib.sessions.middleware.SessionMiddleware",
    "django.middleware.common.CommonMiddleware",
    "django.middleware.csrf.CsrfViewMiddleware",
    "django.contrib.auth.middleware.AuthenticationMiddleware",
    "django.contrib.messages.middleware.MessageMiddleware",
    "django.middleware.clickjacking.XFrameOptionsMiddleware",
    "django_htmx.middleware.HtmxMiddleware",
    "arena.security.ContentSecurityPolicyMiddleware",
    # A query parameter a view cannot honour becomes a one-line 400 (web/params.py).
    "web.params.BadParameterMiddleware",
    # A view whose database connection died under it answers 503, DEBUG or not (web/unavailable.py).
    "web.unavailable.DatabaseUnavailableMiddleware",
    # Turns a refused login (arena.login) into its 429 page; innermost so it sees the flag.
    "axes.middleware.AxesMiddleware",
]

# --- Login throttling (django-axes, made atomic by arena.login) --------------------------
AUTHENTICATION_BACKENDS = [
    "arena.login.AtomicAxesBackend",
    "django.contrib.auth.backends.ModelBackend",
]
ARENA_LOGIN_MAX_FAILURES = env_int("ARENA_LOGIN_MAX_FAILURES", 5)  # per account + IP pair
ARENA_LOGIN_MAX_FAILURES_PER_IP = env_int("ARENA_LOGIN_MAX_FAILURES_PER_IP", 20)
ARENA_LOGIN_LOCKOUT_SECONDS = env_int("ARENA_LOGIN_LOCKOUT_SECONDS", 900)
# How many reverse proxies sit in front of us; 0 means X-Forwarded-For is ignored.
ARENA_TRUSTED_PROXIES = env_int("ARENA_TRUSTED_PROXIES", 0)
# How many leading bits name one client for login limits and export limits (core/clients.py).
ARENA_CLIENT_IPV4_PREFIX = env_int("ARENA_CLIENT_IPV4_PREFIX", 32)
ARENA_CLIENT_IPV6_PREFIX = env_int("ARENA_CLIENT_IPV6_PREFIX", 64)
AXES_HANDLER = "arena.login.AtomicAxesHandler"
AXES_LOCKOUT_PARAMETERS = [["username", "ip_address"], "ip_address"]
AXES_FAILURE_LIMIT = "arena.login.failure_limit"
AXES_COOLOFF_TIME = "arena.login.cool_off"
AXES_LOCKOUT_CALLABLE = "arena.login.lockout_response"
# Counted by network: an IPv6 host holds a whole /64 (core/clients.py).
AXES_CLIENT_IP_CALLABLE = "core.clients.client_network"
# Success forgives that account's failures from that address only (arena.login, not axes).
AXES_RESET_ON_SUCCESS = False
# A refused attempt during a lock must not push its end out: the page states when it ends.
AXES_RESET_COOL_OFF_ON_FAILURE_DURING_LOCKOUT = False
AXES_HTTP_RESPONSE_CODE = 429
AXES_VERBOSE = False

# Debug pages and error reports mask connection URLs and the process environment too.
DEFAULT_EXCEPTION_REPORTER_FILTER = "arena.security.SecretsFilter"

ROOT_URLCONF = "arena.urls"
WSGI_APPLICATION = "arena.wsgi.application"

TEMPLATES = [
    {
        "BACKEND": "django.template.backends.django.DjangoTemplates",
        "DIRS": [BASE_DIR / "templates"],
        "APP_DIRS": True,
        "OPTIONS": {
            "context_processors": [
                "django.template.context_processors.request",
                "django.contrib.auth.context_processors.auth",
                "django.contrib.messages.context_processors.messages",
            ],
        },
    }
]

DATABASE_URL = os.environ.get("DATABASE_URL") or f"sqlite:///{VAR_DIR / 'arena.sqlite3'}"
DATABASES = {
    "default": dj_database_url.parse(
        DATABASE_URL,
        conn_max_age=env_int("DB_CONN_MAX_AGE", 60),
        # A persistent connection the server dropped (restart, pg_terminate_backend, a proxy's
        # idle cut) is replaced at the start of the next request instead of failing it.
        conn_health_checks=True,
    )
}
if DATABASES["default"]["ENGINE"] == "django.db.backends.sqlite3":
    # WAL lets the web process read while the worker writes; the timeout turns brief
    # writer contention into waiting instead of "database is locked".
    DATABASES["default"]["OPTIONS"] = {
        "timeout": 30,
        "transaction_mode": "IMMEDIATE",
        "init_command": "PRAGMA journal_mode=WAL; PRAGMA synchronous=NORMAL;",
    }
# One cache shared by every process: Redis when configured, else files under var/ (one machine).
REDIS_CACHE_URL = os.environ.get("REDIS_CACHE_URL", "")
if REDIS_CACHE_URL:
    CACHES = {
        "default": {
            # Redis unreachable = every read a miss and every write skipped (pages render
            # uncached), never an error; short socket timeouts so a hung Redis cannot hold a
            # request either. One Redis client per connection pool, not one per operation.
            "BACKEND": "arena.cache_backend.ResilientRedisCache",
            "LOCATION": REDIS_CACHE_URL,
            "OPTIONS": {"socket_connect_timeout": 0.5, "socket_timeout": 1.0},
        }
    }
else:
    CACHES = {
        "default": {
            # A full or read-only var/ = pages served uncached, never a 500.
            "BACKEND": "arena.cache_backend.ResilientFileBasedCache",
            "LOCATION": str(VAR_DIR / "cache"),
            # Django's 300 is less than a site's pages with their variants and render locks:
            # past it every write culls (expired files, then the oldest; cache_backend._cull).
            # 2,000 pages of 20-80 kB are at most about 160 MB of var/.
            "OPTIONS": {"MAX_ENTRIES": 2000},
        }
    }

DEFAULT_AUTO_FIELD = "django.db.models.BigAutoField"

LANGUAGE_CODE = "en-us"
TIME_ZONE = "UTC"
USE_I18N = False
USE_TZ = True

STATIC_URL = "/static/"
STATICFILES_DIRS = [BASE_DIR / "static"]
STATIC_ROOT = VAR_DIR / "staticfiles"
STATIC_ROOT.mkdir(parents=True, exist_ok=True)
STORAGES = {
    "default": {"BACKEND": "django.core.files.storage.FileSystemStorage"},
    # Content-hashed, compressed names (collectstatic writes the manifest), so static files can
    # be cached for ever by browsers and proxies, with DEBUG on too (arena/static_storage.py).
    "staticfiles": {"BACKEND": "arena.static_storage.HashedStaticStorage"},
}
WHITENOISE_USE_FINDERS = DEBUG

# --- Celery -----------------------------------------------------------------------------
BROKER_DIR = VAR_DIR / "broker"
CELERY_BROKER_URL = os.environ.get("CELERY_BROKER_URL", "filesystem://")
CELERY_BROKER_TRANSPORT_OPTIONS = {}
if CELERY_BROKER_URL.startswith("filesystem"):
    for sub in ("in", "processed", "control"):
        (BROKER_DIR / sub).mkdir(parents=True, exist_ok=True)
    CELERY_BROKER_TRANSPORT_OPTIONS = {
        "data_folder_in": str(BROKER_DIR / "in"),
        "data_folder_out": str(BROKER_DIR / "in"),
        "processed_folder": str(BROKER_DIR / "processed"),
        # Fanout (worker control) messages; kombu's default is ./control in the working dir.
        "control_folder": str(BROKER_DIR / "control"),
        "store_processed": False,
        # How often a worker looks for new messages (kombu's default: every second). A write's
        # hot-page round (web/prerender.py) waited up to that long while visitors of the new
        # version rendered the pages themselves; a look at an empty folder costs microseconds.
        "polling_interval": 0.1,
    }
CELERY_RESULT_BACKEND = None
CELERY_TASK_IGNORE_RESULT = True
CELERY_TASK_ALWAYS_EAGER = env_bool("CELERY_TASK_ALWAYS_EAGER", False)
CELERY_TASK_ACKS_LATE = True
CELERY_TASK_REJECT_ON_WORKER_LOST = True
CELERY_WORKER_PREFETCH_MULTIPLIER = 1
CELERY_TIMEZONE = "UTC"
CELERY_BEAT_SCHEDULER = "arena.beat:SingleBeatScheduler"
CELERY_BEAT_SCHEDULE_FILENAME = str(VAR_DIR / "celerybeat-schedule")

# --- Arena ------------------------------------------------------------------------------
ARENA_GAMMA_URL = os.environ.get("ARENA_GAMMA_URL", "https://gamma-api.polymarket.com").rstrip("/")
ARENA_CLOB_URL = os.environ.get("ARENA_CLOB_URL", "https://clob.polymarket.com").rstrip("/")
# The largest Gamma answer read (markets/gamma.py); a page of 100 markets is a few megabytes.
ARENA_HTTP_MAX_BYTES = env_int("ARENA_HTTP_MAX_BYTES", 32_000_000)
ARENA_LLM_BASE_URL = os.environ.get("ARENA_LLM_BASE_URL", "https://openrouter.ai/api/v1").rstrip(
    "/"
)
ARENA_LLM_API_KEY = (
    os.environ.get("OPENROUTER_API_KEY") or os.environ.get("ARENA_LLM_API_KEY") or ""
)
# The only endpoints a competitor may use besides the default one: comma-separated entries
# `URL` (no key) or `URL|KEY_VAR` (the key is read from env var KEY_VAR). Staff pick from this
# list in the admin; they can never type a URL or a variable name (agents/endpoints.py).
ARENA_LLM_ENDPOINTS = os.environ.get("ARENA_LLM_ENDPOINTS", "")
try:  # every process refuses a key written into a URL that is shown and sealed
    refuse_secrets(ARENA_LLM_ENDPOINTS)
    refuse_default_secret(ARENA_LLM_BASE_URL)
except ValueError as exc:
    raise ImproperlyConfigured(str(exc)) from None
# Whole-page cache for anonymous readers (web/cache.py); off only to debug a page.
ARENA_PAGE_CACHE = env_bool("ARENA_PAGE_CACHE", True)
# Hot pages rendered again by a worker after each committed write (web/prerender.py).
ARENA_PRERENDER = env_bool("ARENA_PRERENDER", True)
# Exports read at once per web process, and per client network (web/exports/gate.py); beyond
# them a 429. One per process keeps a CPU-heavy export from crowding a worker's other threads.
ARENA_EXPORTS_CONCURRENT = env_int("ARENA_EXPORTS_CONCURRENT", 1)
ARENA_EXPORTS_PER_CLIENT = env_int("ARENA_EXPORTS_PER_CLIENT", 1)
# And across every web process of the machine (0: no such limit): the per-process limits add
# up over gunicorn's workers, and three CPU-heavy exports on two cores starve the cached pages.
ARENA_EXPORTS_MACHINE = env_int("ARENA_EXPORTS_MACHINE", 0)
# Which scope this deployment's live path writes to: "live", or "rehearsal" for `arena rehearse`,
# whose web, worker and beat run the real sync, decisions and scoring against stand-ins on an
# accelerated clock and must never write into (or be mixed with) live results.
ARENA_SCOPE = os.environ.get("ARENA_SCOPE", "live").strip().lower() or "live"
if ARENA_SCOPE not in ("live", "rehearsal"):
    raise ImproperlyConfigured(f"ARENA_SCOPE must be live or rehearsal, not {ARENA_SCOPE!r}")
# Rehearsal scope only: an outside agent's submission window in arena minutes, instead of the
# methodology's (0: the methodology's). At an accelerated clock's rate the methodology's 30
# minutes are a fraction of a wall second (docs/rehearsal.md, "The outside agent"); a live
# deployment refuses the setting, so no live week is ever judged by another window.
ARENA_REHEARSAL_SUBMISSION_WINDOW_MINUTES = env_int("ARENA_REHEARSAL_SUBMISSION_WINDOW_MINUTES", 0)
if ARENA_REHEARSAL_SUBMISSION_WINDOW_MINUTES and ARENA_SCOPE != "rehearsal":
    raise ImproperlyConfigured(
        "ARENA_REHEARSAL_SUBMISSION_WINDOW_MINUTES is for ARENA_SCOPE=rehearsal only: a live "
        "outside agent's window is the methodology's outside_submission_window_minutes"
    )
ARENA_MARKETS_PER_PROMPT = env_int("ARENA_MARKETS_PER_PROMPT", 500)
ARENA_SYNC_LIMIT = env_int("ARENA_SYNC_LIMIT", 500)
ARENA_HTTP_TIMEOUT = float(os.environ.get("ARENA_HTTP_TIMEOUT", "20"))
# How long a correction's preview may spend on its dry run (settlements always; the scores
# when a dry run of them fits): markets/correction_views.py.
ARENA_CORRECTION_PREVIEW_S = float(os.environ.get("ARENA_CORRECTION_PREVIEW_S", "4"))
ARENA_HTTP_RETRIES = env_int("ARENA_HTTP_RETRIES", 4)
ARENA_LLM_TIMEOUT = float(os.environ.get("ARENA_LLM_TIMEOUT", "180"))
ARENA_LLM_MAX_RETRIES = env_int("ARENA_LLM_MAX_RETRIES", 3)
ARENA_LLM_BACKOFF_BASE = float(os.environ.get("ARENA_LLM_BACKOFF_BASE", "1.0"))
ARENA_LLM_MAX_BACKOFF = float(os.environ.get("ARENA_LLM_MAX_BACKOFF", "30.0"))
ARENA_DECISION_WEEKS = env_int("ARENA_DECISION_WEEKS", 5)
ARENA_CLAIM_TIMEOUT_SECONDS = env_int("ARENA_CLAIM_TIMEOUT_SECONDS", 1800)
# Rounds a decision gets when its model calls all fail on a provider outage (cohorts/decisions/retry.py).
ARENA_DECISION_MAX_ROUNDS = env_int("ARENA_DECISION_MAX_ROUNDS", 4)
# At most this long per model-call phase (0: only the bound derived from the claim timeout,
# agents/endpoints.phase_seconds, which always applies).
ARENA_LLM_PHASE_SECONDS = float(os.environ.get("ARENA_LLM_PHASE_SECONDS", "0")) or None
ARENA_USER_AGENT = os.environ.get(
    "ARENA_USER_AGENT", "forecasting-arena/0.1 (+https://github.com/; paper trading research)"
)
# Sealing (docs/verification.md): how long a week's decisions may stay unfinished before the week
# is sealed with placeholders, and where new roots are published (empty: nowhere, the default).
ARENA_SEAL_GRACE_MINUTES = env_int("ARENA_SEAL_GRACE_MINUTES", 60)
ARENA_SEAL_PUBLISH_URL = os.environ.get("ARENA_SEAL_PUBLISH_URL", "")
ARENA_SEAL_PUBLISH_TOKEN = os.environ.get("ARENA_SEAL_PUBLISH_TOKEN", "")
ARENA_SEAL_PUBLISH_TIMEOUT = float(os.environ.get("ARENA_SEAL_PUBLISH_TIMEOUT", "10"))
ARENA_SEAL_PUBLISH_RETRIES = env_int("ARENA_SEAL_PUBLISH_RETRIES", 3)

# The weekly lineup review (docs/lineup-review.md): the catalogs read (`name=URL`, the name being
# the competitors' provider), and which new models are proposed to staff: model id prefixes
# (empty: any), a minimum context, a maximum USD price per million tokens (prompt and completion
# alike; empty: none). A catalog's read is bounded in total time and body size.
ARENA_LINEUP_CATALOGS = os.environ.get(
    "ARENA_LINEUP_CATALOGS", "openrouter=https://openrouter.ai/api/v1"
)
ARENA_LINEUP_PREFIXES = os.environ.get("ARENA_LINEUP_PREFIXES", "")
ARENA_LINEUP_MIN_CONTEXT = env_int("ARENA_LINEUP_MIN_CONTEXT", 32000)
ARENA_LINEUP_MAX_PRICE_PER_M = env_decimal("ARENA_LINEUP_MAX_PRICE_PER_M")
ARENA_LINEUP_TIMEOUT = float(os.environ.get("ARENA_LINEUP_TIMEOUT", "30"))
ARENA_LINEUP_MAX_BYTES = env_int("ARENA_LINEUP_MAX_BYTES", 20_000_000)

# One key=value line per record in every process (web, worker, beat, CLI): arena/logfmt.py.
LOGGING = logging_dict(os.environ.get("LOG_LEVEL", "INFO"))

if not DEBUG:
    SESSION_COOKIE_SECURE = env_bool("SECURE_COOKIES", True)
    CSRF_COOKIE_SECURE = env_bool("SECURE_COOKIES", True)
    SECURE_HSTS_SECONDS = env_int("SECURE_HSTS_SECONDS", 31536000)
    SECURE_HSTS_INCLUDE_SUBDOMAINS = True
    SECURE_HSTS_PRELOAD = True
    SECURE_SSL_REDIRECT = env_bool("SECURE_SSL_REDIRECT", True)
    SECURE_CONTENT_TYPE_NOSNIFF = True
    if env_bool("BEHIND_PROXY", False):
        SECURE_PROXY_SSL_HEADER = ("HTTP_X_FORWARDED_PROTO", "https")
