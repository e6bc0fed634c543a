#!/usr/bin/env bash
# Instructions per put or per get of abi-documents, counted by valgrind's
# callgrind over a few seconds of `abi-bench documents`' throughput phase.
# Unlike CPU time, the count does not move with the VM's speed or its
# neighbours, so a change of a few per cent shows in one run of each build.
#
# Usage: scripts/instructions-per-op.sh [put|get|job-put] [ABI_DOCUMENTS_BINARY]
#   put|get               the phase counted (default put)
#   job-put               the puts of job runs' records, from `abi-bench jobs`'
#                         max_concurrency 64 cell (bigger documents, and most of
#                         them updates, which index the old row and the new)
#   job-host              our job host's instructions per job run in that cell
#                         (the whole process, counted per run of the bench's job)
#   ABI_DOCUMENTS_BINARY  the build measured (default target/release/abi-documents;
#                         for job-host, the abi-bench build whose host is counted)
#
# Needs valgrind (Debian: apt-get install valgrind) and the release build of
# abi-bench (cargo build --release -p abi-bench -p abi-documents). Under
# valgrind the service runs ~20x slower and on one thread at a time, so
# compare counts with counts, never with `abi-bench`'s CPU figures.
set -euo pipefail

phase=${1:-put}
root=$(cd "$(dirname "$0")/.." && pwd)
if [ "$phase" = job-host ]; then
    binary=$(realpath "${2:-$root/target/release/abi-bench}")
else
    binary=$(realpath "${2:-$root/target/release/abi-documents}")
fi
case $phase in
put | job-put) counted='writer::write_document' ;;
get) counted='ops::Shared::get(_encoded)?' ;;
job-host) counted='JobHandler>::call' ;;
*)
    echo "usage: $0 [put|get|job-put|job-host] [ABI_DOCUMENTS_BINARY]" >&2
    exit 2
    ;;
esac
for tool in valgrind callgrind_control callgrind_annotate; do
    command -v "$tool" >/dev/null || {
        echo "$tool not found: install valgrind" >&2
        exit 1
    }
done

work=$(mktemp -d)
bench=
cleanup() {
    [ -n "$bench" ] && kill "$bench" 2>/dev/null || true
    rm -rf "$work"
}
trap cleanup EXIT

# The bench starts the service (for job-host, its own host, given the
# binary and the host's flags) through this wrapper, instrumentation off
# until the phase is under way.
skip=
[ "$phase" = job-host ] && skip='shift'
cat >"$work/wrapper" <<EOF
#!/bin/sh
$skip
exec valgrind --tool=callgrind --instr-atstart=no --callgrind-out-file=$work/cg.%p "$binary" "\$@"
EOF
chmod +x "$work/wrapper"

if [ "$phase" = job-host ]; then
    started='JobHost (Rust): throughput at max_concurrency 64'
    # Enough triggers that the cell, run uninstrumented until counting
    # starts, outlasts the count (a faster host ends 3,000 within a second).
    "$binary" jobs --quick --skip-reference --triggers 6000 \
        --repeats 1 --ours-wrapper "$work/wrapper" \
        >"$work/bench.out" 2>"$work/bench.err" &
elif [ "$phase" = job-put ]; then
    started='JobHost (Rust): throughput at max_concurrency 64'
    "$root/target/release/abi-bench" jobs --quick --skip-reference --triggers 3000 \
        --repeats 1 --documents-bin "$work/wrapper" \
        >"$work/bench.out" 2>"$work/bench.err" &
else
    started="$phase throughput"
    "$root/target/release/abi-bench" documents --quick --skip-postgres --skip-reference \
        --duration-secs 6 --repeats 1 --documents-bin "$work/wrapper" \
        >"$work/bench.out" 2>"$work/bench.err" &
fi
bench=$!
until grep -q "$started" "$work/bench.err" 2>/dev/null; do
    kill -0 "$bench" 2>/dev/null || {
        echo "abi-bench stopped early:" >&2
        tail -5 "$work/bench.err" >&2
        exit 1
    }
    sleep 0.2
done
# Half a second into the phase, four seconds counted.
sleep 0.5
callgrind_control -i on >/dev/null 2>&1
sleep 4
callgrind_control -d >/dev/null 2>&1
callgrind_control -i off >/dev/null 2>&1
wait "$bench"
bench=

profile=$(ls "$work"/cg.*.1)
total=$(awk '/^totals:/ {print $2}' "$profile")
# KEEP_PROFILE=<file> keeps the callgrind profile for callgrind_annotate.
[ -n "${KEEP_PROFILE:-}" ] && cp "$profile" "$KEEP_PROFILE"
ops=$(callgrind_annotate --inclusive=yes --tree=calling "$profile" 2>/dev/null |
    grep -E "> .*$counted \(" | sed -E 's/.*\(([0-9,]+)x\).*/\1/' | tr -d , | sort -n | tail -1)
unit=${phase#job-}
[ "$phase" = job-host ] && unit=run
echo "$phase: $total instructions over $ops operations: $((total / ops)) per $unit ($binary)"
