"""scripts/window_disturbance.py, which decides which windows of the real-vLLM closed loop
measure the server alone: other work read from /proc (a real busy process here), and a
stalled server read from a captured real window (tests/fixtures/closed-loop)."""

from __future__ import annotations

import importlib.util
import os
import subprocess
import sys
import time
from pathlib import Path

from spectune.documents.observation import load_observation

ROOT = Path(__file__).resolve().parents[1]
FIXTURES = ROOT / "tests" / "fixtures" / "closed-loop"


def _module():  # type: ignore[no-untyped-def]
    path = ROOT / "scripts" / "window_disturbance.py"
    spec = importlib.util.spec_from_file_location("window_disturbance", path)
    assert spec and spec.loader
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def test_other_work_is_counted_and_the_server_is_not() -> None:
    wd = _module()
    spin = "import time\nt = time.time()\nwhile time.time() - t < 2.5: pass\n"
    # a busy process outside the "server" group: about one core of other work
    server = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(30)"], start_new_session=True)
    try:
        probe = wd.OtherLoad(server.pid)
        hog = subprocess.Popen([sys.executable, "-c", spin])
        hog.wait(timeout=30)
        assert probe.cores() > 0.6
    finally:
        server.kill()
        server.wait()
    # the same spin inside the server's process group is the server's own work: read while it
    # runs (a process's ticks leave /proc when it is reaped)
    server = subprocess.Popen([sys.executable, "-c", spin], start_new_session=True)
    try:
        probe = wd.OtherLoad(server.pid)
        time.sleep(2.0)
        server_seconds = (probe._server() - probe.start[1]) / os.sysconf("SC_CLK_TCK")
    finally:
        server.wait(timeout=30)
    assert server_seconds > 1.0


def test_a_window_with_fewer_requests_in_decode_than_the_clients_held_is_a_stall() -> None:
    wd = _module()
    obs = load_observation(FIXTURES / "k3-c16.yaml")  # a clean window: 16 clients
    assert obs.steps is not None and obs.steps.mean_running is not None
    share = obs.steps.mean_running / 16
    assert wd.DECODING_SHARE < share <= 1.05
    assert wd.disturbance(0.0, obs, 16) is None
    assert "stall" in wd.disturbance(0.0, obs, 20)  # as if 20 clients had been held
    assert "other work" in wd.disturbance(1.0, obs, 16)


def test_a_window_is_measured_again_at_most_twice_and_within_the_run_budget() -> None:
    wd = _module()
    assert [wd.measure_again(a) for a in range(wd.ATTEMPTS)] == [True] * (wd.ATTEMPTS - 1) + [False]
    wd._retried[0] = wd.RETRY_BUDGET
    assert not wd.measure_again(0)
