#!/usr/bin/env bash
# Issue 47: the test cycle a developer lives in, for two trees side by side (git worktrees given as
# BEFORE and AFTER, default /work/wt/before and /work/wt/after), same machine, one after the other:
#   1. `cargo test` (the README's test command: build and run) from an empty target directory;
#   2. `cargo test --no-run` after touching src/lib.rs (the application crate's root);
#   3. the same after touching a file of the client crate, where the tree has one.
# Run it on an idle machine; each tree's target directory is made anew under /tmp.
# Cargo's defaults (incremental builds of the workspace's crates, as the README's `cargo test` runs
# on a developer's machine) unless CARGO_INCREMENTAL=0 is set (as .ci/run does).
set -u
export CARGO_TERM_COLOR=never
echo "CARGO_INCREMENTAL=${CARGO_INCREMENTAL:-unset, cargo defaults}; $(nproc) cores; $(date -u +%FT%TZ)"
secs() { local s e; s=$(date +%s.%N); "$@" >/dev/null 2>&1; local rc=$?; e=$(date +%s.%N); printf '%.1f s (rc %d)' "$(echo "$e - $s" | bc)" "$rc"; }
for w in "${BEFORE:-/work/wt/before}" "${AFTER:-/work/wt/after}"; do
  cd "$w" || exit 1
  export CARGO_TARGET_DIR=/tmp/test-build-$(basename "$w")
  rm -rf "$CARGO_TARGET_DIR"
  echo "$w ($(git rev-parse --short HEAD)): test binaries $(ls tests/*.rs tests/*/main.rs 2>/dev/null | wc -l)"
  echo "  cargo test from an empty target: $(secs cargo test)"
  touch src/lib.rs
  echo "  cargo test --no-run after touching src/lib.rs: $(secs cargo test --no-run)"
  if [ -f crates/queue-migrate-client/src/slice.rs ]; then
    touch crates/queue-migrate-client/src/slice.rs
    echo "  cargo test --no-run after touching the client's slice.rs: $(secs cargo test --no-run)"
  fi
done
