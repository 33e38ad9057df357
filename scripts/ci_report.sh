#!/usr/bin/env bash
# CI stage: the HTML report in a real headless browser (Debian's chromium, driven by the
# playwright Python client with executable_path=/usr/bin/chromium: no browser download).
# Runs in the spectune venv .ci/run activated; leaves screenshots in .ci/work/artifacts/.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"
if [ ! -x /usr/bin/chromium ]; then
    sudo=""
    [ "$(id -u)" = 0 ] || sudo=sudo
    $sudo apt-get update -q && $sudo apt-get install -y -q chromium
fi
python -m pip install -q '.[report,browser]'
export SPECTUNE_ARTIFACTS="$root/.ci/work/artifacts"
out=$(python -m pytest -m browser -v -rs tests/test_report_browser.py 2>&1) || { echo "$out"; exit 1; }
echo "$out"
# Every browser test must have run: a skip means the browser or a package is missing.
if grep -q SKIPPED <<<"$out"; then echo "ci_report: a browser test was skipped" >&2; exit 1; fi
ls -l "$SPECTUNE_ARTIFACTS"/report.png
