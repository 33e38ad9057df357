"""`observe --prometheus` faults and HTTP details against a real HTTP server on 127.0.0.1 that
answers as the Prometheus HTTP API would (the full path against the real Prometheus server
is tests/test_observe_prometheus.py, marked `prometheus`)."""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import parse_qs

import pytest
from click.testing import CliRunner
from observe_support import closed_port

from spectune.base.errors import ObserveUsageError
from spectune.cli.main import cli
from spectune.documents.durations import parse_duration
from spectune.observe.prometheus import (
    api_base,
    group_labels,
    parse_time,
    selector_matchers,
)

Answer = tuple[int, str, str]  # status, content type, body
EMPTY = json.dumps({"status": "success", "data": {"resultType": "vector", "result": []}})
EMPTY_RANGE = json.dumps({"status": "success", "data": {"resultType": "matrix", "result": []}})


@contextmanager
def fake_prometheus(answer: Callable[[str, dict[str, str]], Answer]) -> Iterator[tuple[str, list[Any]]]:
    """A real HTTP server; ``answer(path, form)`` gives each reply; requests are recorded."""
    seen: list[Any] = []

    class Handler(BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            n = int(self.headers.get("Content-Length") or 0)
            form = {k: v[0] for k, v in parse_qs(self.rfile.read(n).decode()).items()}
            seen.append((self.path, dict(self.headers), form))
            status, ctype, body = answer(self.path, form)
            data = body.encode()
            try:
                self.send_response(status)
                self.send_header("Content-Type", ctype)
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)
            except (BrokenPipeError, ConnectionResetError):
                pass  # the client gave up (the timeout test)

        def log_message(self, *args: Any) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    server.daemon_threads = True
    thread = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}", seen
    finally:
        server.shutdown()
        server.server_close()
        thread.join(timeout=5)


def empty(path: str, form: dict[str, str]) -> Answer:
    return 200, "application/json", EMPTY_RANGE if path.endswith("query_range") else EMPTY


def run(url: str, *args: str, env: dict[str, str] | None = None) -> Any:
    base = ["observe", "--prometheus", url, "--window", "5m", "--timeout", "2"]
    return CliRunner().invoke(cli, [*base, *args], env=env)


def test_durations_selectors_labels_and_urls() -> None:
    assert [parse_duration(x) for x in ("90", "20s", "5m", "1h30m", "500ms", "1d")] == \
        [90, 20, 300, 5400, 0.5, 86400]
    for bad in ("", "5x", "1h 5m", "-3s", "0"):
        with pytest.raises(ObserveUsageError):
            parse_duration(bad)
    assert selector_matchers(' {namespace="prod", app=~"vllm.*"} ') == 'namespace="prod", app=~"vllm.*"'
    with pytest.raises(ObserveUsageError):
        selector_matchers('namespace="prod"')
    assert group_labels(["deployment,pod", "model_name", "namespace"]) == \
        ("model_name", "deployment", "pod", "namespace")
    with pytest.raises(ObserveUsageError):
        group_labels(["__name__"])
    assert api_base("prom:9090") == "http://prom:9090"
    assert api_base("https://mimir/prometheus/api/v1/query") == "https://mimir/prometheus"
    r = CliRunner().invoke(cli, ["observe", "--prometheus", "x:1", "--window", "5x"])
    assert r.exit_code == 2 and "not a duration" in r.stderr
    assert parse_time("2026-11-23T14:00:00Z") == parse_time("1795442400") == 1795442400.0
    assert parse_time("2026-11-23T15:00:00+01:00") == 1795442400.0
    for bad in ("2026-11-23T14:00:00", "yesterday"):
        with pytest.raises(ObserveUsageError):
            parse_time(bad)


def test_empty_result_token_and_tenant_header() -> None:
    with fake_prometheus(empty) as (url, seen):
        r = run(url, "--selector", '{namespace="prod"}', "--org-id", "team-a",
                env={"SPECTUNE_METRICS_TOKEN": "s3cret-token"})
    assert r.exit_code == 7 and 'matching {namespace="prod"}' in r.stderr
    assert "s3cret-token" not in r.stderr + r.stdout
    path, headers, form = seen[0]
    assert path == "/api/v1/query" and headers["Authorization"] == "Bearer s3cret-token"
    assert headers["X-Scope-OrgID"] == "team-a"
    assert form["query"].startswith("increase(vllm:spec_decode_num_drafts_total{namespace=\"prod\"}[300s])")
    ranges = [f for p, _, f in seen if p.endswith("query_range")]
    assert ranges and float(ranges[0]["end"]) - float(ranges[0]["start"]) == pytest.approx(300)


@pytest.mark.parametrize(("answer", "code", "words"), [
    ((400, "application/json", json.dumps({"status": "error", "errorType": "bad_data",
                                           "error": "parse error: unexpected '('"})),
     2, "rejected the query"),
    ((422, "application/json", json.dumps({"status": "error", "errorType": "execution",
                                           "error": "query processing would load too many samples"})),
     4, "too many samples"),
    ((503, "text/plain", "Service Unavailable"), 4, "HTTP 503"),
    ((401, "text/plain", "Unauthorized"), 4, "check the token"),
    ((200, "text/html", "<html><body>Grafana</body></html>"), 5, "not answer as the Prometheus HTTP API"),
])
def test_query_errors(answer: Answer, code: int, words: str) -> None:
    with fake_prometheus(lambda p, f: answer) as (url, _):
        r = run(url, env={"SPECTUNE_METRICS_TOKEN": "s3cret-token"})
    assert r.exit_code == code and words in r.stderr, r.stderr
    assert "s3cret-token" not in r.stderr and "Traceback" not in r.stderr


def test_unreachable_and_slow() -> None:
    r = run(f"http://127.0.0.1:{closed_port()}")
    assert r.exit_code == 3 and "refused" in r.stderr

    def slow(path: str, form: dict[str, str]) -> Answer:
        time.sleep(3)
        return empty(path, form)

    with fake_prometheus(slow) as (url, _):
        r = run(url, "--timeout", "0.5")
    assert r.exit_code == 9 and "within 0.5 s" in r.stderr
