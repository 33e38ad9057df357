"""Test support for `spectune observe --prometheus`: a REAL Prometheus server (Debian's
``prometheus`` package, /usr/bin/prometheus) started on 127.0.0.1 with a generated config,
scraping loopback exporters that replay the real vLLM scrape of tests/fixtures with their
counters advanced over time (and, for one of them, reset by a restart)."""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import requests
from observe_support import SCRAPE, MetricsServer, Reply, closed_port, fixture_text

TICK = 0.5  # seconds between steps of the replayed counters
SPEC = ("vllm:spec_decode_num_drafts_total", "vllm:spec_decode_num_draft_tokens_total",
        "vllm:spec_decode_num_accepted_tokens_total", "vllm:spec_decode_num_accepted_tokens_per_pos_total")
HISTOGRAMS = ("vllm:request_prompt_tokens", "vllm:request_generation_tokens", "vllm:iteration_tokens_total",
              "vllm:inter_token_latency_seconds")


def prometheus_binary() -> str | None:
    """The Prometheus server binary (Debian's package puts it in /usr/bin)."""
    return shutil.which("prometheus") or ("/usr/bin/prometheus" if os.access("/usr/bin/prometheus", os.X_OK)
                                          else None)


@dataclass
class Traffic:
    """What one pod does per tick: drafts, draft tokens, accepted per position, one finished
    request (prompt, generation tokens), steps with their tokens, inter-token latency
    observations; running requests cycle through ``running``."""

    drafts: int
    draft_tokens: int
    per_pos: tuple[int, int, int]
    prompt: float
    generation: float
    steps: int
    step_tokens: float
    itl: float
    running: tuple[int, ...]


def _split(line: str) -> tuple[str, str, str]:
    """``name{labels} value`` -> (name, '{labels}' or '', value)."""
    head, _, value = line.rpartition(" ")
    name, brace, rest = head.partition("{")
    return name, (brace + rest) if brace else "", value


def _label(labels: str, key: str) -> str | None:
    needle = f'{key}="'
    i = labels.find(needle)
    if i < 0:
        return None
    j = labels.index('"', i + len(needle))
    return labels[i + len(needle):j]


@dataclass
class ReplayExporter:
    """A real HTTP server on 127.0.0.1 serving the real vLLM 0.32.0 scrape with ``model`` as
    model_name and its counters advanced by ``traffic`` every TICK seconds since ``t0``.
    ``restart_at`` (seconds after t0): the process restarts, its counters start again at 0.
    Every page served is recorded in ``served`` as (time, {(name, labels): value})."""

    model: str
    traffic: Traffic
    t0: float
    restart_at: float | None = None
    served: list[tuple[float, dict[tuple[str, str], float]]] = field(default_factory=list)

    def __post_init__(self) -> None:
        self._template = fixture_text(SCRAPE).replace('model_name="tiny-llama"', f'model_name="{self.model}"')
        self._lock = threading.Lock()
        self._server = MetricsServer(self._reply)

    def _reply(self, n: int) -> Reply:
        now = time.time()
        body, values = self.page(now)
        with self._lock:
            self.served.append((now, values))
        return Reply(body=body)

    @property
    def target(self) -> str:
        return self._server.url.removeprefix("http://").removesuffix("/metrics")

    def ticks(self, now: float) -> tuple[int, bool]:
        """Ticks since the (last) start and whether the process has restarted."""
        k = int((now - self.t0) / TICK)
        if self.restart_at is not None and now - self.t0 >= self.restart_at:
            return k - int(self.restart_at / TICK), True
        return k, False

    def page(self, now: float) -> tuple[str, dict[tuple[str, str], float]]:
        k, restarted = self.ticks(now)
        tr = self.traffic
        out, values = [], {}
        for line in self._template.splitlines():
            if not line or line.startswith("#"):
                out.append(line)
                continue
            name, labels, raw = _split(line)
            v = float(raw)
            base = 0.0 if restarted else v
            if name in SPEC:
                pos = _label(labels, "position")
                inc = {"vllm:spec_decode_num_drafts_total": tr.drafts,
                       "vllm:spec_decode_num_draft_tokens_total": tr.draft_tokens,
                       "vllm:spec_decode_num_accepted_tokens_total": sum(tr.per_pos)}.get(name) \
                    if pos is None else tr.per_pos[int(pos)]
                v = base + inc * k
            elif name.endswith("_created") or name == "process_start_time_seconds":
                v = v + (self.restart_at or 0.0) if restarted else v
            elif name == "vllm:num_requests_running":
                v = float(tr.running[k % len(tr.running)])
            else:
                for h, per, x in ((HISTOGRAMS[0], 1, tr.prompt), (HISTOGRAMS[1], 1, tr.generation),
                                  (HISTOGRAMS[2], tr.steps, tr.step_tokens),
                                  (HISTOGRAMS[3], tr.steps, tr.itl)):
                    if name == h + "_count":
                        v = base + per * k
                    elif name == h + "_sum":
                        v = base + per * x * k
                    elif name == h + "_bucket":
                        le = _label(labels, "le") or "+Inf"
                        v = base + (per * k if x <= float(le.replace("Inf", "inf")) else 0)
                    else:
                        continue
                    break
                else:
                    out.append(line)
                    continue
            values[(name, labels)] = v
            out.append(f"{name}{labels} {v!r}")
        return "\n".join(out) + "\n", values

    def __enter__(self) -> ReplayExporter:
        self._server.__enter__()
        return self

    def __exit__(self, *exc: object) -> None:
        self._server.__exit__(*exc)


@dataclass
class PrometheusServer:
    """The real Prometheus server on 127.0.0.1:<free port>, scraping ``targets`` (address,
    target labels) every ``interval`` seconds; our own process (killed by PID at exit),
    storage in ``folder``."""

    binary: str
    folder: Path
    targets: list[tuple[str, dict[str, str]]]
    interval: float = 1.0
    port: int = 0
    proc: subprocess.Popen[bytes] | None = None
    rule_files: tuple[Path, ...] = ()  # loaded by the server (`spectune rules` output)
    evaluation_interval: float | None = None  # seconds between rule evaluations (default: 1m)
    metrics_path: str = "/metrics"  # the targets' exposition path (TensorRT-LLM: /prometheus/metrics)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def config(self) -> str:
        lines = ["global:", f"  scrape_interval: {self.interval:g}s", f"  scrape_timeout: {self.interval:g}s"]
        if self.evaluation_interval is not None:
            lines.append(f"  evaluation_interval: {self.evaluation_interval:g}s")
        if self.rule_files:
            lines += ["rule_files:", *(f"  - '{f}'" for f in self.rule_files)]
        lines += ["scrape_configs:", "  - job_name: vllm", f"    metrics_path: '{self.metrics_path}'",
                  "    static_configs:"]
        for address, labels in self.targets:
            lines.append(f"      - targets: ['{address}']")
            lines.append("        labels: {" + ", ".join(f"{k}: '{v}'" for k, v in labels.items()) + "}")
        return "\n".join(lines) + "\n"

    def __enter__(self) -> PrometheusServer:
        self.port = closed_port()
        conf = self.folder / "prometheus.yml"
        conf.write_text(self.config(), encoding="utf-8")
        self._log = open(self.folder / "prometheus.log", "wb")
        self.proc = subprocess.Popen(
            [self.binary, f"--config.file={conf}", f"--storage.tsdb.path={self.folder / 'data'}",
             f"--web.listen-address=127.0.0.1:{self.port}", "--log.level=warn"],
            stdout=self._log, stderr=subprocess.STDOUT, start_new_session=True)
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                log = (self.folder / "prometheus.log").read_text()
                raise RuntimeError(f"prometheus exited: {log[-2000:]}")
            try:
                if requests.get(f"{self.url}/-/ready", timeout=2).status_code == 200:
                    return self
            except requests.RequestException:
                pass
            time.sleep(0.2)
        self.__exit__()
        raise RuntimeError("prometheus did not become ready within 60 s")

    def __exit__(self, *exc: object) -> None:
        if self.proc is not None and self.proc.poll() is None:
            os.kill(self.proc.pid, signal.SIGTERM)
            try:
                self.proc.wait(timeout=15)
            except subprocess.TimeoutExpired:
                os.kill(self.proc.pid, signal.SIGKILL)
                self.proc.wait(timeout=10)
        self._log.close()

    def wait_for_targets(self, n: int, timeout: float = 60.0) -> None:
        """Until every one of ``n`` targets has been scraped successfully (``up == 1``)."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            r = requests.get(f"{self.url}/api/v1/query", params={"query": "sum(up)"}, timeout=5)
            result = r.json()["data"]["result"]
            if result and float(result[0]["value"][1]) >= n:
                return
            time.sleep(0.2)
        raise RuntimeError(f"Prometheus did not scrape all {n} targets within {timeout:g} s")

    def raw(self, expr: str, at: float) -> list[tuple[dict[str, str], list[tuple[int, float]]]]:
        """Raw samples of a range selector ``expr`` (e.g. ``x[20s]``) at ``at``: timestamps in ms."""
        r = requests.get(f"{self.url}/api/v1/query", params={"query": expr, "time": f"{at:.3f}"}, timeout=10)
        r.raise_for_status()
        data = r.json()["data"]
        assert data["resultType"] == "matrix", data
        return [(s["metric"], [(round(float(t) * 1000), float(v)) for t, v in s["values"]])
                for s in data["result"]]


def wait_until(t: float) -> None:
    while time.time() < t:
        time.sleep(min(0.25, max(0.0, t - time.time())))


def all_served(exporters: list[ReplayExporter]) -> Iterator[tuple[str, str, float]]:
    for e in exporters:
        for _, values in e.served:
            for (name, labels), v in values.items():
                yield name, labels, v


def prometheus_increase(samples: list[tuple[int, float]], start_ms: int, end_ms: int) -> float | None:
    """Prometheus 2.x increase() of one series from its raw samples in [start, end] (ms)."""
    if len(samples) < 2:
        return None
    result = samples[-1][1] - samples[0][1]
    last = 0.0
    for _, v in samples:  # a counter that falls restarted from 0: add what it had reached
        if v < last:
            result += last
        last = v
    to_start = (samples[0][0] - start_ms) / 1000
    to_end = (end_ms - samples[-1][0]) / 1000
    sampled = (samples[-1][0] - samples[0][0]) / 1000
    average = sampled / (len(samples) - 1)
    if result > 0 and samples[0][1] >= 0:
        to_zero = sampled * (samples[0][1] / result)
        to_start = min(to_start, to_zero)
    threshold = average * 1.1
    interval = sampled
    interval += to_start if to_start < threshold else average / 2
    interval += to_end if to_end < threshold else average / 2
    return result * (interval / sampled)
