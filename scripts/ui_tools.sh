#!/usr/bin/env bash
# What the tests that look at the project as a person does need, from Debian's packages, as root:
#   chromium  headless Chromium: tests/integration/daemon/console.rs loads the daemon's web console, clicks, and
#             takes screenshots (--headless --no-sandbox; no browser download of its own)
#   tmux      a real pseudo-terminal: tests/integration/cli/demo_tty.rs runs `migrate demo` in 80 columns
#   nodejs    runs tests/console/drive.mjs, which drives Chromium through the DevTools protocol
#             (over a pipe: Node 18 or later, no package)
#
#   scripts/ui_tools.sh install     apt-get what is missing (skipped when all are there)
set -euo pipefail

PACKAGES=(chromium tmux nodejs)

log() { echo "ui_tools: $*" >&2; }

case "${1:-}" in
  install)
    missing=()
    for p in "${PACKAGES[@]}"; do
      dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "ok installed" || missing+=("$p")
    done
    if [ ${#missing[@]} -eq 0 ]; then
      log "installed already: ${PACKAGES[*]}"
      exit 0
    fi
    export DEBIAN_FRONTEND=noninteractive
    apt-get update -qq
    apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
    log "installed ${missing[*]}"
    ;;
  *)
    echo "usage: $0 install" >&2
    exit 2
    ;;
esac
