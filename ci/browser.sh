#!/usr/bin/env bash
# The HTML report's real-browser test (tests/pipeline/test_html_report.py) renders the page in Debian's
# chromium. CI is root on Debian: install it there. Elsewhere (no root, no apt) say so: the test then
# skips, naming the package. $CHROMIUM points the test at another browser binary.
set -uo pipefail
browser="${CHROMIUM:-/usr/bin/chromium}"
[ -x "$browser" ] && exit 0
if [ "$(id -u)" != 0 ] || ! command -v apt-get > /dev/null; then
  echo "browser: $browser absent and apt-get unavailable here: the real-browser test will skip"
  exit 0
fi
log="${TMPDIR:-/tmp}/xtrain-apt-chromium.log"
echo "browser: installing chromium for the real-browser test (log: $log)"
export DEBIAN_FRONTEND=noninteractive
apt-get install -y -q --no-install-recommends chromium > "$log" 2>&1 \
  || { apt-get update -q >> "$log" 2>&1 && apt-get install -y -q --no-install-recommends chromium >> "$log" 2>&1; } \
  || echo "browser: warning: chromium could not be installed (see $log): the real-browser test will skip"
exit 0
