#!/usr/bin/env bash
# Runs every test: installs what the tests need (scripts/setup.sh), then the
# whole Rust workspace's tests, examples and doctests. End-to-end tests start
# their own nats-server processes from .venv/bin on free loopback ports.
set -euo pipefail
cd "$(dirname "$0")/.."

# The toolchain parts the checks below use, named with the fix when missing.
for component in fmt clippy; do
  if ! cargo "$component" --version >/dev/null 2>&1; then
    name=$([ "$component" = fmt ] && echo rustfmt || echo clippy)
    printf 'test: cargo %s is not installed\n  fix: rustup component add %s\n' "$component" "$name" >&2
    exit 1
  fi
done

./scripts/setup.sh
export PATH="$PWD/.venv/bin:$PATH"
export ABI_PYTHON="$PWD/.venv/bin/python"
# One full build of the suite gains nothing from incremental caches, which would double the
# workspace crates' share of the disk on a fresh CI machine.
export CARGO_INCREMENTAL="${CARGO_INCREMENTAL:-0}"

cargo fmt --all -- --check
cargo clippy --workspace --all-targets --locked -- -D warnings
# No module of the SDK names a module that names it back (see the script).
python3 scripts/module-cycles.py abi-sdk-core abi-jobs abi-agents abi-models abi-workflows
cargo test --workspace --all-targets --locked
cargo test --workspace --doc --locked
