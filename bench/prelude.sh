# Sourced from the repository's root by the bench scripts that run `migrate` against servers of
# their own (soak.sh, hostile_store.sh, hostile.sh): MIGRATE (as given, else the release build,
# built here; made absolute), a work directory `$work`, and `pids`, the processes killed, and the
# directory removed, at exit.
export CARGO_TARGET_DIR=${CARGO_TARGET_DIR:-target}
if [ -z "${MIGRATE:-}" ]; then
  cargo build --release --bin migrate >&2
  MIGRATE="$CARGO_TARGET_DIR/release/migrate"
fi
[ -x "$MIGRATE" ] || { echo "no migrate binary at $MIGRATE" >&2; exit 1; }
MIGRATE=$(realpath "$MIGRATE")

work=$(mktemp -d)
pids=()
cleanup() {
  for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done
  wait 2>/dev/null || true
  rm -rf "$work"
}
trap cleanup EXIT
