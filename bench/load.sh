#!/usr/bin/env bash
# Load test: gunicorn (arena.wsgi) on PostgreSQL with the 2.5M-snapshot database of bench/pages.py,
# driven by wrk over loopback: a static file (the floor), then the pages with the page cache off
# and on, under a heavy-page loop and during snapshot ticks (bench/load_run.py lists the runs and
# targets). Every run is bounded (DURATION seconds, TICK_DURATION for the tick runs; about 6 min).
#
#   bench/load.sh                                   # build the data once, then measure
#   DURATION=20 CONNECTIONS=32 WORKERS=3 THREADS=4 bench/load.sh
#   TICK_INTERVAL=60 bench/load.sh                  # ticks every 60 s (default 600: the real one)
#   PHASES=off bench/load.sh                        # only some runs: off, on, heavy, ticks
#   LOAD_DATABASE_URL=postgres://postgres@127.0.0.1:5432/other bench/load.sh
#
# Settings are production's (DEBUG=0, persistent database connections, whitenoise statics);
# only HTTPS redirects are off because wrk talks plain HTTP on loopback. Needs wrk on PATH.
# Prints every figure with its ratio to the floor and exits 1 if any target is missed.
set -euo pipefail
cd "$(dirname "$0")/.."

command -v wrk >/dev/null || { echo "wrk is not installed (apt-get install wrk)" >&2; exit 2; }
# The project's interpreter: .venv's (any ./run command installs it), else through uv.
py() {
  if [ -x .venv/bin/python ]; then .venv/bin/python "$@"; else uv run --frozen python "$@"; fi
}

export DATABASE_URL="${LOAD_DATABASE_URL:-postgres://postgres@127.0.0.1:5432/arena_bench_load}"
export DEBUG=0
export SECRET_KEY="${SECRET_KEY:-load-test-only-secret-key-not-for-production-0123456789abcdef}"
export ALLOWED_HOSTS="127.0.0.1,localhost"
export SECURE_SSL_REDIRECT=0 SECURE_COOKIES=0 SECURE_HSTS_SECONDS=0
export LOG_LEVEL=WARNING
export DB_CONN_MAX_AGE="${DB_CONN_MAX_AGE:-600}"   # production should keep connections too
export ARENA_VAR_DIR="${ARENA_VAR_DIR:-/tmp/arena-load-var}"
mkdir -p "$ARENA_VAR_DIR"

dbname="${DATABASE_URL##*/}"
psql "${DATABASE_URL%/*}/postgres" -tc "SELECT 1 FROM pg_database WHERE datname='$dbname'" | grep -q 1 \
  || psql "${DATABASE_URL%/*}/postgres" -qc "CREATE DATABASE $dbname"

echo "== data (built once; --rebuild via: .venv/bin/python bench/load_data.py --rebuild)"
urls="$(py bench/load_data.py)"
cohort_url="$(awk '$1 == "cohort" {print $2}' <<<"$urls")"
series_url="$(awk '$1 == "series" {print $2}' <<<"$urls")"
entry_url="${cohort_url}entries/bench-0/"
py manage.py collectstatic --noinput -v0

# The page cache (web/cache.py) must be shared by the gunicorn workers and the ticker.
export REDIS_CACHE_URL="${REDIS_CACHE_URL:-redis://127.0.0.1:6379/12}"

echo "== load (${DURATION:-15} s per run)"
py bench/load_run.py \
  --cohort-url "$cohort_url" --series-url "$series_url" --dbname "$dbname" \
  --candidates "$series_url" "$entry_url" /competitors/bench-0/ /cohorts/ /markets/ /methodology/ \
  --duration "${DURATION:-15}" --connections "${CONNECTIONS:-16}" \
  --workers "${WORKERS:-2}" --threads "${THREADS:-4}" --port "${PORT:-8391}" \
  --tick-interval "${TICK_INTERVAL:-600}" --tick-duration "${TICK_DURATION:-45}" \
  --phases "${PHASES:-off,on,heavy,ticks}"
