#!/usr/bin/env bash
# Issue 47: how long the test binaries take to build again after one file of src/ changed, for two
# trees side by side (git worktrees at /work/wt/before and /work/wt/after, each with its own warm
# target directory). Same machine, same run, one after the other.
for w in before after; do
  cd /work/wt/$w; export CARGO_TARGET_DIR=$PWD/target CARGO_INCREMENTAL=0
  cargo test --no-run -q >/dev/null 2>&1   # warm
  touch src/lib.rs
  s=$(date +%s.%N); cargo test --no-run -q >/dev/null 2>&1; e=$(date +%s.%N)
  echo "$w touch-one-file cargo test --no-run: $(echo "$e - $s" | bc) s; binaries: $(ls tests/*.rs tests/*/main.rs 2>/dev/null | wc -l)"
done
