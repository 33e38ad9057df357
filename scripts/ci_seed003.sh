#!/usr/bin/env bash
# CI stage for seed 003 (issue 12): the new commands as a user runs them on the shipped
# example. The claims themselves are derived in tests/test_widthdepth.py, test_ragged.py,
# test_slo.py and test_routing.py (run by pytest).
set -euo pipefail
cd "$(dirname "$0")/.."
ex=examples/qwen3.6-35b-a3b-b200-mtp.yaml
spectune widthdepth "$ex" --positions 22 --batch 11 --alpha 0.9
spectune widthdepth "$ex" --positions 22 --batch 11 --alpha 0.9 -o json \
  | python -c 'import json,sys; d=json.load(sys.stdin); assert d["winner"] in ("width","depth"); print("winner:", d["winner"])'
spectune recommend "$ex" --ragged --tpot-slo 25ms
spectune cost --profile "$ex" --batch 11 --tokens 2 --context 2048
