#!/usr/bin/env bash
# CI stage for `spectune observe --prometheus` (issue 14): a REAL Prometheus server.
# Installs Debian's `prometheus` package when the binary is missing (only the binary is
# used: the tests start their own server on 127.0.0.1 with a generated config and a temp
# storage path, and stop it by its process id), then runs the tests marked `prometheus`:
# four loopback exporters replaying the real vLLM scrape (two deployments x two replicas,
# one restarted mid-window), spectune's per-deployment results against an independent
# computation from the raw samples. The real-vLLM variant (tests/test_observe_prometheus_vllm.py)
# runs in the vLLM stage (scripts/run_vllm_integration.sh) once the binary is here.
# `spectune rules` (issue 24) is checked here too: `promtool check rules` / `promtool test
# rules` (tests/test_rules_promtool.py) and the rules loaded into the real server, whose
# acceptance alert must go pending for a collapsing deployment only (tests/test_rules_prometheus.py).
# Extra arguments go to pytest.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"
if ! command -v prometheus >/dev/null 2>&1 && [[ ! -x /usr/bin/prometheus ]]; then
    sudo=""
    if [[ $(id -u) -ne 0 ]]; then sudo="sudo"; fi
    export DEBIAN_FRONTEND=noninteractive
    $sudo apt-get update -q
    # policy-rc.d 101: the package's service must not start (no init here anyway; on a
    # machine with one, our tests must not share a port or storage with it)
    made_policy=""
    if [[ ! -e /usr/sbin/policy-rc.d ]]; then
        echo 'exit 101' | $sudo tee /usr/sbin/policy-rc.d >/dev/null
        $sudo chmod +x /usr/sbin/policy-rc.d
        made_policy=1
    fi
    $sudo apt-get install -y -q --no-install-recommends prometheus
    if [[ -n $made_policy ]]; then $sudo rm -f /usr/sbin/policy-rc.d; fi
fi
prometheus --version 2>&1 | head -n 1 || /usr/bin/prometheus --version 2>&1 | head -n 1
promtool --version 2>&1 | head -n 1 || true
# -rP prints the passing tests' numbers (spectune vs the independent computation)
python -m pytest -m "prometheus and not vllm" -v -rP "$@"
