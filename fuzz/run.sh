#!/usr/bin/env bash
# Fuzz every target for a while: fuzz/run.sh [SECONDS_PER_TARGET] (default 20).
# fuzz/run.sh --build-only builds the targets and stops (.ci/run builds them early, on idle CPU).
#
# Installs cargo-fuzz when it is missing, builds all targets once (release, debug assertions and
# overflow checks on, AddressSanitizer), then runs each target in turn for SECONDS_PER_TARGET
# from the seeds in fuzz/corpus/<target>. New corpus entries go to fuzz/target/corpus/<target>
# (kept between runs, never committed), so fuzz/corpus stays the seeds. Crash inputs go to
# fuzz/artifacts/<target>/. Exits non-zero when any target crashed, after running all of them.
#
# cargo-fuzz needs nightly rustc flags: it uses `cargo +nightly` when rustup has a nightly
# toolchain, otherwise the default toolchain with RUSTC_BOOTSTRAP=1. Set QM_FUZZ_TARGETS to run
# only some targets (e.g. QM_FUZZ_TARGETS="plan envelope"), QM_FUZZ_JOBS=N to run N targets at
# a time.
set -euo pipefail

here="$(cd "$(dirname "$0")" && pwd)"
cd "$here"

build_only=
seconds="${1:-20}"
if [ "$seconds" = --build-only ]; then
  build_only=1
elif ! [[ "$seconds" =~ ^[0-9]+$ ]] || [ "$seconds" -lt 1 ]; then
  echo "usage: fuzz/run.sh [SECONDS_PER_TARGET | --build-only]" >&2
  exit 2
fi
read -r -a targets <<< "${QM_FUZZ_TARGETS:-plan exposition promql envelope}"
if ! [[ "${QM_FUZZ_JOBS:-1}" =~ ^[1-9][0-9]*$ ]]; then
  echo "fuzz/run.sh: QM_FUZZ_JOBS must be a whole number of targets at a time, not '$QM_FUZZ_JOBS'" >&2
  exit 2
fi

# Largest input per target: plans are small files; the others are HTTP bodies or export lines.
max_len() {
  case "$1" in
    plan) echo 65536 ;;
    exposition) echo 262144 ;;
    promql | envelope) echo 65536 ;;
    *) echo 65536 ;;
  esac
}

if ! cargo fuzz --version > /dev/null 2>&1; then
  echo "== installing cargo-fuzz"
  cargo install cargo-fuzz --locked
fi

cargo_fuzz=(cargo)
if command -v rustup > /dev/null 2>&1 && rustup toolchain list | grep -q '^nightly'; then
  cargo_fuzz=(cargo +nightly)
elif ! rustc --version | grep -q nightly; then
  echo "== no nightly toolchain: using the default one with RUSTC_BOOTSTRAP=1"
  export RUSTC_BOOTSTRAP=1
fi
echo "== toolchain: $("${cargo_fuzz[@]}" --version)"
cargo_fuzz+=(fuzz)

# The same flags for build and run, so that run does not rebuild.
# QM_FUZZ_SANITIZER=none builds faster (CI); the default is AddressSanitizer.
build_flags=(--debug-assertions --sanitizer "${QM_FUZZ_SANITIZER:-address}" --target-dir "$here/target")

echo "== building ${targets[*]}"
if [ -z "${QM_FUZZ_TARGETS:-}" ]; then
  "${cargo_fuzz[@]}" build "${build_flags[@]}"
else
  for t in "${targets[@]}"; do
    "${cargo_fuzz[@]}" build "${build_flags[@]}" "$t"
  done
fi

if [ -n "$build_only" ]; then
  echo "== built ${targets[*]}"
  exit 0
fi

mkdir -p "$here/target/logs"
# Fuzz target $1 for $seconds; its summary (or its crash) on stdout; non-zero when it crashed.
fuzz_one() {
  local t=$1
  local grown="$here/target/corpus/$t"
  local seeds="$here/corpus/$t"
  if [ ! -d "$seeds" ]; then
    # libFuzzer exits 1 on a missing corpus directory, which would read as a crash.
    echo "!! $t: no seed directory $seeds (the seeds are committed: is this a partial checkout?)"
    return 1
  fi
  mkdir -p "$grown" "$here/artifacts/$t"
  local log="$here/target/logs/$t.log"
  local dict=()
  if [ -f "$here/dict/$t.dict" ]; then
    dict=(-dict="$here/dict/$t.dict")
  fi
  echo "== fuzzing $t for ${seconds}s (log: $log)"
  # The first corpus directory receives new entries; the seeds are only read.
  if "${cargo_fuzz[@]}" run "${build_flags[@]}" "$t" "$grown" "$seeds" -- \
    -max_total_time="$seconds" -max_len="$(max_len "$t")" -timeout=25 \
    -print_final_stats=1 "${dict[@]}" > "$log" 2>&1; then
    grep -E '^stat::number_of_executed_units|^Done [0-9]+ runs' "$log" | tail -n 2 || true
  else
    tail -n 40 "$log"
    local artifact
    artifact="$(grep -oE 'Test unit written to [^ ]+' "$log" | tail -n 1 | sed 's/.* written to //' || true)"
    echo "!! $t crashed; input: ${artifact:-see $here/artifacts/$t/}"
    echo "!! reproduce: (cd fuzz && ${cargo_fuzz[*]} run ${build_flags[*]} $t ${artifact:-ARTIFACT})"
    return 1
  fi
}

# QM_FUZZ_JOBS targets at a time (default 1; .ci/run uses one per core), each one's summary
# printed whole, in the targets' order.
jobs="${QM_FUZZ_JOBS:-1}"
failed=()
for ((i = 0; i < ${#targets[@]}; i += jobs)); do
  batch=("${targets[@]:i:jobs}")
  pids=()
  for t in "${batch[@]}"; do
    fuzz_one "$t" > "$here/target/logs/$t.summary" 2>&1 &
    pids+=($!)
  done
  for k in "${!batch[@]}"; do
    wait "${pids[$k]}" || failed+=("${batch[$k]}")
    cat "$here/target/logs/${batch[$k]}.summary"
  done
done

if [ "${#failed[@]}" -gt 0 ]; then
  echo "== crashes in: ${failed[*]} (inputs under $here/artifacts/)"
  exit 1
fi
echo "== no crash in ${targets[*]} (${seconds}s each)"
