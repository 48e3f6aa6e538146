#!/usr/bin/env bash
# The README's screenshot from a real run: the five-minute example verified into its own report
# folder, its index.html photographed by headless chromium (`make browser` installs it), written
# to docs/figures/report_verify.png. The command is the README's, so picture and text agree.
#   make screenshot            (or scripts/screenshot.sh [REPORT_DIR])
set -u
cd "$(dirname "$0")/.."
out="${1:-reports/screenshot}"
browser="$(command -v chromium || command -v chromium-browser || command -v google-chrome || true)"
if [ -z "$browser" ]; then
  echo "screenshot: no chromium found; run make browser first" >&2
  exit 2
fi
.venv/bin/triton-verify verify --plugin examples/plugins/quickstart_rmsnorm.py --backend interpreter \
  --max-examples 5 --no-cache --report-dir "$out"
rc=$?
if [ "$rc" -ne 1 ]; then  # the example holds a deliberate bug: exit 1 is the run the README shows
  echo "screenshot: the example's verify exited $rc, not 1 (its deliberate bug found); no screenshot taken" >&2
  exit 2
fi
profile="$(mktemp -d)"
trap 'rm -rf "$profile"' EXIT
"$browser" --headless --no-sandbox --disable-gpu --no-first-run --disable-background-networking \
  --disable-component-update --disable-sync --disable-dev-shm-usage --user-data-dir="$profile" \
  --window-size=1280,1600 --hide-scrollbars --screenshot="$PWD/docs/figures/report_verify.png" \
  "file://$PWD/$out/index.html" 2>/dev/null || { echo "screenshot: chromium failed" >&2; exit 2; }
echo "screenshot: docs/figures/report_verify.png from $out/index.html"
