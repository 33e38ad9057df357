"""Issue 10: the network under one deadline and size caps, exit codes a CI job can trust
(70 for a bug, the gate's verdict through a closed pipe), and observe -> recommend round
trips. Real HTTP servers on 127.0.0.1 and real processes."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

import pytest
from click.testing import CliRunner
from observe_support import Engine, FakeClock, MetricsServer, Reply, vllm_text

from spectune.base.errors import BadBodyFault, TimeoutFault
from spectune.base.exit_codes import ExitCode
from spectune.cli.main import cli
from spectune.documents.exposition import parse_exposition
from spectune.observe import observe_url

ROOT = Path(__file__).resolve().parent.parent
CI = ROOT / "examples" / "ci"
FAST = {"window": 0.4, "interval": 0.2, "backoff": 0.02, "ask_version": False}
MEMORY = 300 * 2**20


def growing(step: int) -> Engine:
    return Engine(drafts=100 + 10 * step, draft_tokens=250 + 25 * step, accepted=150 + 15 * step,
                  per_pos=(80 + 8 * step, 50 + 5 * step, 20 + 2 * step), running=2,
                  prompt=(4 + step, 68 + 17 * step), generation=(4 + step, 256 + 64 * step))


def spectune_process(*args: str, stdout: int | None = subprocess.PIPE) -> subprocess.Popen[bytes]:
    """`spectune ARGS` as a real process under a 300 MB address-space limit."""
    def limit() -> None:
        import resource

        resource.setrlimit(resource.RLIMIT_AS, (MEMORY, MEMORY))

    env = {**os.environ, "OPENBLAS_NUM_THREADS": "1"}
    return subprocess.Popen([sys.executable, "-m", "spectune", *args], cwd=ROOT, env=env, stdout=stdout,
                            stderr=subprocess.PIPE, stdin=subprocess.DEVNULL, preexec_fn=limit)


# --------------------------------------------------------------------------- one deadline
def test_a_trickling_body_is_cut_at_the_deadline() -> None:
    """1 byte every 50 ms of a page with its Content-Length: each read succeeds, so only a
    deadline over the whole answer stops it (it ran past 120 s with --timeout 3)."""
    body = vllm_text(growing(0))
    with MetricsServer(lambda n: Reply(200, body, trickle=0.05)) as srv:
        t0 = time.monotonic()
        with pytest.raises(TimeoutFault, match=r"did not finish its answer within --timeout 1 s"):
            observe_url(srv.url, timeout=1.0, retries=0, **FAST)  # type: ignore[arg-type]
        assert time.monotonic() - t0 < 6.0  # 1 s deadline; the page alone would take minutes
        proc = spectune_process("observe", srv.url, "--timeout", "1", "--retries", "0", "-q")
        _, err = proc.communicate(timeout=20)
    assert proc.returncode == ExitCode.TIMEOUT, err
    assert len(err.decode().strip().splitlines()) == 1


@pytest.mark.parametrize("declared", [None, 400 * 2**20])
def test_a_huge_body_is_refused_within_300_mb(declared: int | None) -> None:
    """300 MB of comment lines (or a Content-Length announcing 400 MB): refused at the cap,
    exit 5, in a process limited to 300 MB of address space."""
    with MetricsServer(lambda n: Reply(200, stream=300 * 2**20, declared=declared)) as srv:
        proc = spectune_process("observe", srv.url, "--retries", "0", "--timeout", "20", "-q")
        _, err = proc.communicate(timeout=60)
    text = err.decode()
    assert proc.returncode == ExitCode.BAD_BODY, text
    assert "MiB" in text and "Traceback" not in text and len(text.strip().splitlines()) == 1


@pytest.mark.parametrize("version", [Reply(200, stream=300 * 2**20, content_type="application/json"),
                                     Reply(200, '{"version": "0.32.0"}' + " " * 400, trickle=0.05,
                                           content_type="application/json")],
                         ids=["huge", "trickling"])
def test_the_version_probe_is_capped_and_bounded_in_time(version: Reply) -> None:
    """The /version probe took a 300 MB body whole (664 MB resident) and had no deadline."""
    with MetricsServer(lambda n: Reply(200, vllm_text(growing(n))), other={"/version": version}) as srv:
        t0 = time.monotonic()
        obs = observe_url(srv.url, timeout=2.0, retries=0, window=0.4, interval=0.2, ask_version=True,
                          clock=FakeClock().clock())  # the probe's deadline stays real
        assert time.monotonic() - t0 < 10.0
    assert obs.engine.version is None
    assert any("version endpoint did not answer" in n for n in obs.notes)


# --------------------------------------------------------------------------- what a body may say
def test_position_labels_are_bounded() -> None:
    """One sample with position="99999999" allocated gigabytes."""
    page = vllm_text(growing(0)).replace('position="2"', 'position="99999999"')
    with MetricsServer(lambda n: Reply(200, page)) as srv, \
            pytest.raises(BadBodyFault, match=r"position='99999999'; expected a whole number from 0 to 63"):
        observe_url(srv.url, retries=0, **FAST)  # type: ignore[arg-type]


def test_duplicate_series_are_refused_not_summed() -> None:
    page = vllm_text(growing(0))
    line = next(x for x in page.splitlines() if x.startswith("vllm:spec_decode_num_drafts_total{"))
    with pytest.raises(BadBodyFault, match="appears twice"):
        parse_exposition(page.replace(line, line + "\n" + line))


def test_non_finite_counters_are_refused() -> None:
    page = vllm_text(growing(0))
    line = next(x for x in page.splitlines() if x.startswith("vllm:spec_decode_num_drafts_total{"))
    with pytest.raises(BadBodyFault, match="not a finite count"):
        parse_exposition(page.replace(line, line.rsplit(" ", 1)[0] + " NaN"))


# --------------------------------------------------------------------------- exit codes
@pytest.mark.parametrize("fmt", ["table", "yaml", "markdown"])
def test_check_keeps_its_verdict_through_a_closed_pipe(fmt: str) -> None:
    """`spectune check bad.yaml --profile p.yaml | head` exited 0 in some runs."""
    proc = spectune_process("check", str(CI / "vllm-bad.yaml"), "--profile", str(CI / "profile.yaml"),
                            "-o", fmt)
    assert proc.stdout is not None
    proc.stdout.close()  # the reader is gone before spectune writes a byte
    _, err = proc.communicate(timeout=60)
    assert proc.returncode == ExitCode.GATE_FAILED, err.decode()
    assert "Traceback" not in err.decode() and "check failed" in err.decode()


def test_a_closed_pipe_is_not_an_error_elsewhere() -> None:
    proc = spectune_process("recommend", str(CI / "profile.yaml"))
    assert proc.stdout is not None
    proc.stdout.close()
    _, err = proc.communicate(timeout=60)
    assert proc.returncode == ExitCode.OK and "Traceback" not in err.decode() and "error" not in err.decode()


def test_a_bug_exits_70_in_one_line(monkeypatch: pytest.MonkeyPatch) -> None:
    """An internal error must never exit 1, which `check` uses for a failed gate."""
    import spectune.core.recommend

    def broken(*_: object) -> None:
        raise ZeroDivisionError("float division by zero")

    monkeypatch.setattr(spectune.core.recommend, "recommend", broken)
    monkeypatch.delenv("SPECTUNE_DEBUG", raising=False)
    res = CliRunner().invoke(cli, ["recommend", str(CI / "profile.yaml")])
    assert res.exit_code == ExitCode.INTERNAL == 70
    lines = res.stderr.strip().splitlines()
    assert len(lines) == 1 and "internal error" in lines[0] and "ZeroDivisionError" in lines[0]
    assert "Traceback" not in res.output


def test_usage_errors_are_one_line_exit_2() -> None:
    res = CliRunner().invoke(cli, ["check", "x.yaml", "--profile", "p.yaml", "--tolerance", "nan"])
    assert res.exit_code == ExitCode.USAGE
    lines = res.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith(
        "spectune: error: Invalid value for '--tolerance': 'nan' is not a finite number.")
    assert lines[0].endswith("check --help)")


def test_exit_codes_are_documented_in_the_readme() -> None:
    readme = (ROOT / "README.md").read_text()
    for code in ExitCode:
        assert f"| {int(code)} |" in readme, code
