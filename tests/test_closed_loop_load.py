"""The closed loop's clients (scripts/closed_loop.py ``Load``) against a real HTTP server on
127.0.0.1 that records the prompts it is sent: after ``align`` the clients start the prompt
sequence afresh, so every setting's window serves the same prompts."""

from __future__ import annotations

import importlib.util
import json
import sys
import threading
import time
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest

SCRIPTS = Path(__file__).resolve().parents[1] / "scripts"


def _closed_loop() -> Any:
    sys.path.insert(0, str(SCRIPTS))  # closed_loop imports its sibling window_disturbance
    try:
        spec = importlib.util.spec_from_file_location("closed_loop", SCRIPTS / "closed_loop.py")
        assert spec and spec.loader
        mod = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(mod)
        return mod
    finally:
        sys.path.remove(str(SCRIPTS))


@pytest.fixture()
def server() -> Iterator[tuple[str, list[tuple[float, str]]]]:
    seen: list[tuple[float, str]] = []  # (arrival, prompt)

    class Handler(BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
            seen.append((time.monotonic(), body["prompt"]))
            time.sleep(0.05)  # a request takes a while, as a served one does
            out = json.dumps({"choices": [{"text": "ok"}]}).encode()
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(out)))
            self.end_headers()
            self.wfile.write(out)

        def log_message(self, *args: object) -> None:
            pass

    httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=httpd.serve_forever, daemon=True).start()
    try:
        yield f"http://127.0.0.1:{httpd.server_address[1]}", seen
    finally:
        httpd.shutdown()
        httpd.server_close()


@pytest.mark.parametrize("c", [1, 4])
def test_align_restarts_the_prompt_sequence(server: tuple[str, list[tuple[float, str]]], c: int) -> None:
    cl = _closed_loop()
    base, seen = server
    ps = cl.prompts(64)
    load = cl.Load(base, c, max_tokens=4)
    try:
        load.warm_up(1.0)
        before = len(seen)
        assert before > c  # the warm-up went past the sequence's start
        t0 = time.monotonic()
        load.align(bound=5.0)
        time.sleep(0.5)
    finally:
        load.stop()
    assert not load.errors
    after = [p for t, p in seen if t >= t0]
    # the restarted sequence's first 2c prompts all arrive among the first 4c after the call: up
    # to c requests sent before it arrive first, and c clients racing to send reorder their
    # arrivals by up to c - 1 places (the warm-up sent far more than 4c, so prompts from the old
    # sequence's position cannot pass for them)
    assert before > 4 * c
    assert set(ps[:2 * c]) <= set(after[:4 * c])
    if c == 1:  # one client: the restarted sequence arrives in order
        restarted = after[after.index(ps[0]):]
        assert restarted[:2] == ps[:2]
