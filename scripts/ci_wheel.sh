#!/usr/bin/env bash
# CI stage: spectune as `pip install` delivers it. Builds the wheel from this tree, installs
# it (with the report extra, from local wheels only) into a fresh venv in a temporary
# directory and runs every help-text example, shipped examples and documents by name, and
# completion of profile names from an empty directory (tests/test_wheel.py, marker `wheel`).
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"
out=$(python -m pytest -m wheel -v -rs tests/test_wheel.py 2>&1) || { echo "$out"; exit 1; }
echo "$out"
if grep -q SKIPPED <<<"$out"; then echo "ci_wheel: a wheel test was skipped" >&2; exit 1; fi
