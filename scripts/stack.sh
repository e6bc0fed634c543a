#!/usr/bin/env bash
# A local stack in one command: nats-server (JetStream), abi-discovery, the
# example modules, and a two-module rollout v1 -> v2, with registry events
# printed live (`abictl watch`) and a status table after each step.
#
# Usage: scripts/stack.sh [--duration SECS] [--bin-dir DIR] [--release] [--traces]
#   --duration SECS  after the demo, keep the stack up SECS seconds, then stop
#                    (default: until Ctrl-C; 10 s when stdin is not a terminal)
#   --bin-dir DIR    take abi-discovery, abictl and the examples from DIR
#                    instead of building them (env ABI_STACK_BIN_DIR)
#   --release        build optimized binaries (a longer first build, faster
#                    binaries; target/release)
#   --traces         every process exports its spans (OpenTelemetry, OTLP) to
#                    `abictl traces`, a receiver printing each trace as a tree,
#                    and the demo shows one: abictl invoke -> the dispatch agent
#                    -> the digest workflow -> the consumer's shout job -> the
#                    document service
#
# Needs Rust and Python 3; nats-server comes from ./scripts/setup.sh. Nothing
# is left behind: modules get SIGTERM and drain, then abi-discovery, then
# nats-server stop, and the temp dir (store, secret, logs) is removed.
# Exit 0 after a clean run and stop, 1 when a step fails (with its logs).
set -euo pipefail
cd "$(dirname "$0")/.."
root=$PWD

duration=""
bin_dir="${ABI_STACK_BIN_DIR:-}"
release=0
traces=0
while [ $# -gt 0 ]; do
  case "$1" in
    --duration) duration="${2:?--duration needs seconds}"; shift 2 ;;
    --duration=*) duration="${1#*=}"; shift ;;
    --bin-dir) bin_dir="${2:?--bin-dir needs a directory}"; shift 2 ;;
    --bin-dir=*) bin_dir="${1#*=}"; shift ;;
    --release) release=1; shift ;;
    --traces) traces=1; shift ;;
    -h|--help) sed -n '2,23p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
    *) echo "stack: unknown argument $1 (see --help)" >&2; exit 2 ;;
  esac
done
if [ -z "$duration" ] && [ ! -t 0 ]; then
  duration=10
fi
case "$duration" in
  ""|[0-9]*) ;;
  *) echo "stack: --duration takes whole seconds" >&2; exit 2 ;;
esac

project=demo
lease_seconds=8
steps=$((16 + traces))
step_no=0
step() { step_no=$((step_no + 1)); printf '\n==> [%d/%d] %s\n' "$step_no" "$steps" "$*"; }
ok() { printf '    ok: %s\n' "$*"; }

# --- 1. nats-server ---------------------------------------------------------
step "setup: nats-server (./scripts/setup.sh)"
ABI_SETUP_BROWSER=0 ./scripts/setup.sh
nats_server="${ABI_NATS_SERVER:-$root/.venv/bin/nats-server}"
ok "$("$nats_server" --version)"

# --- 2. binaries ------------------------------------------------------------
if [ -n "$bin_dir" ]; then
  step "binaries from $bin_dir (no build)"
else
  profile=debug
  profile_flag=()
  if [ "$release" = 1 ]; then profile=release; profile_flag=(--release); fi
  step "build: cargo build ${profile_flag[*]} -p abi-discovery -p abi-documents -p abi-cli -p abi-examples"
  if [ ! -x "${CARGO_TARGET_DIR:-$root/target}/$profile/abi-discovery" ]; then
    printf '    the first build compiles ~350 crates: 10-25 minutes on 2 cores (later ones take seconds);
'
    printf '    cargo shows its progress below
'
  fi
  cargo build "${profile_flag[@]}" -p abi-discovery -p abi-documents -p abi-cli -p abi-examples
  bin_dir="${CARGO_TARGET_DIR:-$root/target}/$profile"
fi
for b in abi-discovery abi-documents abictl provider consumer rollout-a rollout-b; do
  if [ ! -x "$bin_dir/$b" ]; then
    echo "stack: $bin_dir/$b is missing (build it, or drop --bin-dir)" >&2
    exit 1
  fi
done
ok "binaries in $bin_dir"

tmp=$(mktemp -d "${TMPDIR:-/tmp}/abi-stack.XXXXXX")
mkdir -p "$tmp/logs" "$tmp/jetstream"
secret_file="$tmp/jwt-secret"
ctl() { ABI_JWT_SECRET_FILE="$secret_file" "$bin_dir/abictl" "$@"; }

# Every process we start, in start order, as "pid name".
procs=()
failed=0

# Starts a process in its own session, so that a Ctrl-C on the terminal
# reaches only this script, which then stops everything in order.
spawn() { # name cmd... (env before, logs in $tmp/logs/name.log)
  local name=$1; shift
  # The log exists before this returns: the background job opens it later,
  # and a caller reading it at once must not find it missing.
  : >>"$tmp/logs/$name.log"
  python3 -c 'import os, sys; os.setsid(); os.execvp(sys.argv[1], sys.argv[1:])' "$@" \
    >>"$tmp/logs/$name.log" 2>&1 </dev/null &
  procs+=("$! $name")
  last_pid=$!
}

# Waits up to $2 seconds for pid $1 to exit; its status in $exit_status.
await_exit() {
  local pid=$1 secs=$2 i=0
  while kill -0 "$pid" 2>/dev/null && [ "$i" -lt $((secs * 10)) ]; do
    sleep 0.1; i=$((i + 1))
  done
  if kill -0 "$pid" 2>/dev/null; then
    kill -KILL "$pid" 2>/dev/null || true
    wait "$pid" 2>/dev/null || true
    exit_status=137
    return 1
  fi
  exit_status=0
  wait "$pid" 2>/dev/null || exit_status=$?
  return 0
}

stop_proc() { # pid name secs
  kill -TERM "$1" 2>/dev/null || true
  if await_exit "$1" "$3"; then
    printf '    stopped %-22s exit %s\n' "$2" "$exit_status"
    [ "$exit_status" = 0 ] || [ "$exit_status" = 143 ] || failed=1
  else
    printf '    killed  %-22s (did not stop within %ss)\n' "$2" "$3"
    failed=1
  fi
}

stopped=0
cleanup() {
  [ "$stopped" = 1 ] && return
  stopped=1
  trap '' INT TERM
  printf '\n==> shutdown: modules (SIGTERM, they drain), then abi-documents, abi-discovery, nats-server\n'
  local i entry pid name
  # Modules first: those that depend on others (the consumer, rollout-b),
  # then the rest, newest first, so no dependent sees its dependency leave
  # (DEGRADED) while it stops; the watch keeps printing them leave.
  local pass
  for pass in dependents others; do
    for ((i = ${#procs[@]} - 1; i >= 0; i--)); do
      entry=${procs[$i]}; pid=${entry%% *}; name=${entry#* }
      case "$name" in nats-server|abi-discovery|abi-documents|watch) continue ;; esac
      case "$pass:$name" in
        dependents:consumer|dependents:rollout-b-*) ;;
        dependents:*) continue ;;
      esac
      kill -0 "$pid" 2>/dev/null && stop_proc "$pid" "$name" 30
    done
  done
  for name in watch abi-documents abi-discovery nats-server; do
    for entry in "${procs[@]}"; do
      pid=${entry%% *}
      if [ "${entry#* }" = "$name" ] && kill -0 "$pid" 2>/dev/null; then
        stop_proc "$pid" "$name" 30
      fi
    done
  done
  if [ "$failed" = 1 ]; then
    for log in "$tmp"/logs/*.log; do
      printf '\n--- last lines of %s ---\n' "$(basename "$log")"
      tail -n 15 "$log"
    done
  fi
  rm -rf "$tmp"
  printf '    removed %s\n' "$tmp"
}
trap cleanup EXIT
interrupted=0
trap 'interrupted=1' INT TERM

fail() {
  if [ "$interrupted" = 1 ]; then
    printf '\n==> interrupted\n'
    exit 0
  fi
  printf '\nstack: FAILED: %s\n' "$*"
  failed=1
  exit 1
}

# Runs an abictl wait and reports it.
expect() { # description, abictl wait args...
  local what=$1; shift
  ctl wait "$@" >/dev/null || fail "$what"
  ok "$what"
}

table() { ctl ls | sed 's/^/    /'; }

# --- 3. nats-server ---------------------------------------------------------
port=$(python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
export NATS_URL="nats://127.0.0.1:$port" ABI_PROJECT="$project"
step "nats-server with JetStream on $NATS_URL (store $tmp/jetstream)"
spawn nats-server "$nats_server" -js -a 127.0.0.1 -p "$port" -sd "$tmp/jetstream"
for _ in $(seq 1 100); do
  (exec 3<>"/dev/tcp/127.0.0.1/$port") 2>/dev/null && break
  sleep 0.1
done
(exec 3<>"/dev/tcp/127.0.0.1/$port") 2>/dev/null || fail "nats-server did not listen on $port"
ok "nats-server listening"

# --- 3b. traces (--traces) -----------------------------------------------------
if [ "$traces" = 1 ]; then
  spawn traces "$bin_dir/abictl" traces --listen "${ABI_STACK_TRACES_LISTEN:-127.0.0.1:0}"
  otlp=""
  for _ in $(seq 1 100); do
    otlp=$(sed -n 's|.*(OTEL_EXPORTER_OTLP_ENDPOINT=\(http://[^)]*\)).*|\1|p' "$tmp/logs/traces.log" | head -1)
    [ -n "$otlp" ] && break
    sleep 0.1
  done
  [ -n "$otlp" ] || fail "abictl traces did not start"
  # Every process started from here on exports its spans there.
  export OTEL_EXPORTER_OTLP_ENDPOINT="$otlp"
  ok "spans go to $otlp (abictl traces prints each trace as a tree)"
fi

# --- 4. abi-discovery -------------------------------------------------------
step "abi-discovery (project $project, lease ${lease_seconds}s, secret in a 0600 temp file)"
(umask 077 && od -An -N32 -tx1 /dev/urandom | tr -d ' \n' >"$secret_file")
ABI_JWT_SECRET_FILE="$secret_file" ABI_LEASE_SECONDS="$lease_seconds" \
  spawn abi-discovery "$bin_dir/abi-discovery"
served=0
for _ in $(seq 1 100); do
  if ctl ls >/dev/null 2>&1; then served=1; break; fi
  kill -0 "$last_pid" 2>/dev/null || break
  sleep 0.2
done
[ "$served" = 1 ] || fail "abi-discovery did not serve"
ok "abi-discovery serves abi.discovery.$project.v1.*"
# --- 4b. abi-documents ------------------------------------------------------
step "abi-documents (abi.svc.document.v1, SQLite in $tmp/documents)"
ABI_JWT_SECRET_FILE="$secret_file" ABI_DOCUMENTS_DATA_DIR="$tmp/documents" \
  spawn abi-documents "$bin_dir/abi-documents"
for _ in $(seq 1 100); do
  grep -q "document service serving" "$tmp/logs/abi-documents.log" 2>/dev/null && break
  kill -0 "$last_pid" 2>/dev/null || break
  sleep 0.1
done
grep -q "document service serving" "$tmp/logs/abi-documents.log" 2>/dev/null \
  || fail "abi-documents did not serve"
ok "abi-documents serves abi.svc.document.v1.* (documents in $tmp/documents/documents.sqlite)"
printf '    live events (abictl watch) follow, one line each:\n'
# `$!` of `cmd > >(filter) &` is cmd's own pid, so the watch stops cleanly.
python3 -c 'import os, sys; os.setsid(); os.execvp(sys.argv[1], sys.argv[1:])' \
  "$bin_dir/abictl" watch 2>>"$tmp/logs/watch.log" </dev/null \
  > >(trap '' INT; while IFS= read -r line; do printf '    | %s\n' "$line"; done) &
procs+=("$! watch")


# --- 5. provider ------------------------------------------------------------
step "provider: demo-provider (jobs, an agent, a chat model, periodic work)"
ABI_MODULE_KEY=$(ctl key demo-provider) spawn provider "$bin_dir/provider"
expect "demo-provider READY" demo-provider --status READY --for 60
table

# --- 6. consumer ------------------------------------------------------------
step "consumer: demo-consumer (needs demo-provider@1, looks it up once initialized)"
ABI_MODULE_KEY=$(ctl key demo-consumer) spawn consumer "$bin_dir/consumer"
expect "demo-consumer READY" demo-consumer --status READY --for 60
table

# --- 6b. documents ------------------------------------------------------------
step "documents: the provider records its progress in its namespace (abictl docs)"
recorded=0
for _ in $(seq 1 100); do
  n=$(ctl docs count demo-provider work 2>/dev/null || echo 0)
  if [ "${n:-0}" -ge 1 ]; then recorded=1; break; fi
  sleep 0.2
done
[ "$recorded" = 1 ] || fail "the provider recorded no progress document"
ok "demo-provider/work holds one document per provider instance"
ctl docs collections demo-provider | sed 's/^/    /'
ctl docs find demo-provider work | sed 's/^/    /'

# --- 6c. jobs ---------------------------------------------------------------
step "jobs: a scheduled job (tick, every 2 s), a triggered one (echo), a cancelled one (sleepy)"
ticked=0
for _ in $(seq 1 150); do
  if ctl runs demo-provider tick --status SUCCEEDED --json 2>/dev/null | grep -q '"run_id"'; then
    ticked=1; break
  fi
  sleep 0.2
done
[ "$ticked" = 1 ] || fail "the scheduled job tick never ran"
ok "demo-provider tick ran on its schedule"
ctl runs demo-provider tick --limit 3 | sed 's/^/    /'
ctl trigger demo-provider echo --payload '{"hello":"stack"}' --wait 30 >"$tmp/echo.json" \
  || fail "the triggered job echo did not succeed"
grep -Eq '"status": ?"SUCCEEDED"' "$tmp/echo.json" || fail "echo did not end SUCCEEDED"
ok "demo-provider echo triggered and SUCCEEDED (result: $(tr -d ' \n' <"$tmp/echo.json" | grep -o '"result":{[^}]*}'))"
sleepy=$(ctl trigger demo-provider sleepy) || fail "could not trigger sleepy"
for _ in $(seq 1 150); do
  ctl run demo-provider "$sleepy" 2>/dev/null | grep -Eq '"status": ?"RUNNING"' && break
  sleep 0.1
done
ctl cancel demo-provider "$sleepy" | sed 's/^/    /'
cancelled=0
for _ in $(seq 1 150); do
  if ctl run demo-provider "$sleepy" 2>/dev/null | grep -Eq '"status": ?"CANCELLED"'; then
    cancelled=1; break
  fi
  sleep 0.1
done
[ "$cancelled" = 1 ] || fail "sleepy was not cancelled"
ok "demo-provider $sleepy cancelled while running"

# --- 6c'. workflows -----------------------------------------------------------
step "workflows: demo-provider digest (count, a call of demo-consumer's shout job, summarize)"
ctl start demo-provider digest --input '{"words": ["hello", "from", "the", "stack"]}' --wait 60 \
  >"$tmp/digest.json" || fail "the digest workflow did not succeed"
grep -q '4 words: HELLO FROM THE STACK' "$tmp/digest.json" || fail "the digest's summary is not the expected one"
digest_run=$(grep -Eo '"run_id": ?"digest:[0-9]+"' "$tmp/digest.json" | head -1 | grep -Eo 'digest:[0-9]+')
[ -n "$digest_run" ] || fail "the digest's record names no run id"
ok "demo-provider $digest_run SUCCEEDED: 4 words: HELLO FROM THE STACK; its step timeline:"
ctl steps demo-provider "$digest_run" | sed 's/^/    /'

# --- 6d. agents and chat models ----------------------------------------------
step "agents and models: the consumer called the provider's echo agent and echo-chat model; abictl does too"
called=0
for _ in $(seq 1 150); do
  if grep -q "the provider's agent answered" "$tmp/logs/consumer.log" \
    && grep -q "the provider's chat model answered" "$tmp/logs/consumer.log"; then
    called=1; break
  fi
  sleep 0.2
done
[ "$called" = 1 ] || fail "the consumer did not get answers from the provider's agent and chat model"
ok "demo-consumer got answers from the echo agent and the echo-chat model"
ctl agents demo-provider | sed 's/^/    /'
ctl models demo-provider | sed 's/^/    /'
ctl invoke demo-provider echo "streamed word by word" >"$tmp/invoke.txt" \
  || fail "abictl invoke of the echo agent failed"
sed 's/^/    /' "$tmp/invoke.txt"
grep -q "word" "$tmp/invoke.txt" || fail "the echo agent's events did not arrive"
ok "demo-provider echo agent streamed its events"
ctl chat demo-provider echo-chat "hello from abictl" >"$tmp/chat.txt" \
  || fail "abictl chat with echo-chat failed"
grep -q "hello from abictl" "$tmp/chat.txt" || fail "echo-chat did not answer with the message"
ok "demo-provider echo-chat answered: $(head -1 "$tmp/chat.txt")"

# --- 6e. a web app over NATS ---------------------------------------------------
step "apps: the provider serves the web app status; abictl serve-apps makes it a URL"
ctl apps demo-provider | sed 's/^/    /'
ABI_JWT_SECRET_FILE="$secret_file" \
  spawn gateway "$bin_dir/abictl" serve-apps --listen "${ABI_STACK_APPS_LISTEN:-127.0.0.1:0}"
apps_url=""
for _ in $(seq 1 100); do
  apps_url=$(sed -n 's|^serving apps on \(http://[^/]*\)/.*|\1|p' "$tmp/logs/gateway.log" | head -1)
  [ -n "$apps_url" ] && break
  sleep 0.1
done
[ -n "$apps_url" ] || fail "abictl serve-apps did not start"
status_url="$apps_url/apps/demo-provider/status/"
python3 - "$status_url" <<'PY' >"$tmp/app.txt" || fail "the status app did not answer through the gateway"
import sys, urllib.request
page = urllib.request.urlopen(sys.argv[1], timeout=30).read().decode()
api = urllib.request.urlopen(sys.argv[1] + "api/hello", timeout=30).read().decode()
assert "<h1>demo-provider</h1>" in page, page
print(api)
PY
ok "the status app answered at $status_url: $(cat "$tmp/app.txt")"

# --- 6f. the web console ------------------------------------------------------
step "console: abictl console serves the live web console (modules, jobs, runs, agents)"
ABI_JWT_SECRET_FILE="$secret_file" \
  spawn console "$bin_dir/abictl" console --allow-actions --listen "${ABI_STACK_CONSOLE_LISTEN:-127.0.0.1:0}"
console_url=""
for _ in $(seq 1 100); do
  console_url=$(sed -n 's|^console on \(http://[^/]*\)/.*|\1|p' "$tmp/logs/console.log" | head -1)
  [ -n "$console_url" ] && break
  sleep 0.1
done
[ -n "$console_url" ] || fail "abictl console did not start"
python3 - "$console_url" <<'PY' >"$tmp/console.txt" || fail "the console did not answer"
import json, sys, urllib.request
page = urllib.request.urlopen(sys.argv[1] + "/", timeout=30).read().decode()
assert "abi console" in page, page
view = json.load(urllib.request.urlopen(sys.argv[1] + "/api/modules", timeout=30))
print(", ".join(f"{m['module_id']} {m['best_status']}" for m in view["modules"]))
PY
ok "the console at $console_url/ shows: $(cat "$tmp/console.txt")"

# --- 7. readiness follows dependencies --------------------------------------
step "stop the provider: the consumer goes DEGRADED; start it again: READY"
for entry in "${procs[@]}"; do
  [ "${entry#* }" = provider ] && stop_proc "${entry%% *}" provider 30
done
expect "demo-consumer DEGRADED" demo-consumer --status DEGRADED --for 60
ABI_MODULE_KEY=$(ctl key demo-provider) spawn provider-2 "$bin_dir/provider"
expect "demo-consumer READY again" demo-consumer --status READY --for 60

# --- 8. rollout v1 ----------------------------------------------------------
cohort=demo-rollout-a,demo-rollout-b
step "rollout v1: demo-rollout-a + demo-rollout-b (ABI_ROLLOUT_ID=v1 ABI_ROLLOUT_MODULES=$cohort)"
ABI_ROLLOUT_ID=v1 ABI_ROLLOUT_MODULES=$cohort ABI_MODULE_KEY=$(ctl key demo-rollout-a) \
  spawn rollout-a-v1 "$bin_dir/rollout-a"
a_v1=$last_pid
ABI_ROLLOUT_ID=v1 ABI_ROLLOUT_MODULES=$cohort ABI_MODULE_KEY=$(ctl key demo-rollout-b) \
  spawn rollout-b-v1 "$bin_dir/rollout-b"
b_v1=$last_pid
expect "demo-rollout-a v1 READY" demo-rollout-a --rollout v1 --status READY --for 60
expect "demo-rollout-b v1 READY" demo-rollout-b --rollout v1 --status READY --for 60
table

# --- 9. rollout v2 ----------------------------------------------------------
step "rollout v2: half of it is STAGED, all of it is READY, then v1 DRAINING -> gone"
ABI_ROLLOUT_ID=v2 ABI_ROLLOUT_MODULES=$cohort ABI_MODULE_KEY=$(ctl key demo-rollout-a) \
  spawn rollout-a-v2 "$bin_dir/rollout-a"
expect "demo-rollout-a v2 STAGED (v1 still serves)" demo-rollout-a --rollout v2 --status STAGED --for 60
ctl rollouts | sed 's/^/    /'
ABI_ROLLOUT_ID=v2 ABI_ROLLOUT_MODULES=$cohort ABI_MODULE_KEY=$(ctl key demo-rollout-b) \
  spawn rollout-b-v2 "$bin_dir/rollout-b"
expect "demo-rollout-a v2 READY" demo-rollout-a --rollout v2 --status READY --for 60
expect "demo-rollout-b v2 READY" demo-rollout-b --rollout v2 --status READY --for 60
expect "demo-rollout-a v1 gone" demo-rollout-a --rollout v1 --gone --for 60
expect "demo-rollout-b v1 gone" demo-rollout-b --rollout v1 --gone --for 60
for pid in $a_v1 $b_v1; do
  await_exit "$pid" 30 && [ "$exit_status" = 0 ] || fail "a v1 process did not exit 0 after draining"
done
ok "v1 processes drained and exited 0"
table
ctl rollouts | sed 's/^/    /'

# --- traces: one call chain as one trace ------------------------------------------
if [ "$traces" = 1 ]; then
  step "traces: abictl invoke -> agent dispatch -> workflow digest -> job shout -> documents, one trace"
  OTEL_SERVICE_NAME=abictl ctl invoke demo-provider dispatch one traced call --no-stream \
    >"$tmp/dispatch.txt" || fail "abictl invoke demo-provider dispatch failed"
  ok "dispatch answered: $(tail -1 "$tmp/dispatch.txt")"
  # The receiver prints a trace once no span of it came for a moment.
  # The receiver prints a trace again, whole, when late spans of it come:
  # the last print of the dispatch's trace.
  chain() { awk -v RS='trace ' '/agent\/submit  abictl/ && /job shout/ {last = "trace " $0} END {printf "%s", last}' "$tmp/logs/traces.log"; }
  for _ in $(seq 1 150); do
    [ -n "$(chain)" ] && break
    sleep 0.2
  done
  [ -n "$(chain)" ] || fail "the dispatch's trace did not reach the shout job"
  chain | sed 's/^/    /' | head -60
  ok "one trace from abictl through the agent, the workflow and the job to the document service"
fi

# --- up -----------------------------------------------------------------------
printf '\n==> stack is up: NATS_URL=%s ABI_PROJECT=%s\n' "$NATS_URL" "$project"
printf '    the demo web app: %s\n' "$status_url"
printf '    the web console:  %s/ (modules, rollouts, jobs, runs, agents; live)\n' "$console_url"
printf '    try: NATS_URL=%s ABI_PROJECT=%s ABI_JWT_SECRET_FILE=%s %s/abictl tree\n' \
  "$NATS_URL" "$project" "$secret_file" "$bin_dir"
if [ -n "$duration" ]; then
  printf '    stopping in %ss (or Ctrl-C)\n' "$duration"
  end=$((SECONDS + duration))
  # `|| true`: a Ctrl-C also ends the sleep (exit 130), which must not end the script.
  while [ "$interrupted" = 0 ] && [ "$SECONDS" -lt "$end" ]; do sleep 0.2 || true; done
else
  printf '    Ctrl-C to stop\n'
  while [ "$interrupted" = 0 ]; do sleep 0.2 || true; done
fi
cleanup
[ "$failed" = 0 ] || exit 1
printf '==> stack: stopped cleanly\n'
exit 0
