"""`spectune observe`: the bearer token (from the environment or a file) is sent and never shown,
TLS verification, usage errors, and the review fixes around them (a real HTTP server on 127.0.0.1)."""

from __future__ import annotations

import json
import time
from pathlib import Path

import pytest
from observe_support import (
    CLI_FAST,
    MetricsServer,
    Reply,
    cli_run,
    closed_port,
    fast,
    growing,
    ok,
    one_line_error,
    self_signed,
    sglang_text,
)

from spectune.base.errors import (
    EXIT_BAD_BODY,
    EXIT_CONNECTION,
    EXIT_HTTP_STATUS,
    EXIT_TLS,
    ObserveUsageError,
)
from spectune.observe import observe_url

# --------------------------------------------------------------------------- token and TLS
TOKEN = "s3cret-Token-0123456789abcdef"


def _all_output(res) -> str:  # type: ignore[no-untyped-def]
    return res.stdout + res.stderr + repr(res.exception or "")


def test_token_from_env_is_sent_and_never_echoed(tmp_path: Path) -> None:
    with MetricsServer(lambda n: ok(growing(n))) as srv:
        res = cli_run([srv.url, *CLI_FAST, "-o", "yaml"], env={"SPECTUNE_METRICS_TOKEN": TOKEN})
        got = [r["headers"].get("Authorization") for r in srv.requests]
    assert res.exit_code == 0, res.output
    assert got and all(h == f"Bearer {TOKEN}" for h in got)
    assert TOKEN not in _all_output(res)


def test_token_from_file_and_custom_env(tmp_path: Path) -> None:
    tok = tmp_path / "token"
    tok.write_text(TOKEN + "\n")
    with MetricsServer(lambda n: ok(growing(n))) as srv:
        res = cli_run([srv.url, *CLI_FAST, "--token-file", str(tok)])
        res2 = cli_run([srv.url, *CLI_FAST, "--token-env", "MY_TOKEN"], env={"MY_TOKEN": TOKEN + "2"})
        got = {r["headers"].get("Authorization") for r in srv.requests}
    assert res.exit_code == 0 and res2.exit_code == 0
    assert got == {f"Bearer {TOKEN}", f"Bearer {TOKEN}2"}
    assert TOKEN not in _all_output(res) + _all_output(res2)


@pytest.mark.parametrize("reply", [
    Reply(401, "unauthorized", "text/plain"),
    Reply(200, f"Authorization: Bearer {TOKEN}\n", "text/plain"),  # a server echoing headers
    Reply(200, f"<html>your token is {TOKEN}</html>", "text/html"),
])
def test_token_absent_from_error_messages(reply: Reply) -> None:
    with MetricsServer(lambda n: reply) as srv:
        res = cli_run([srv.url, *CLI_FAST], env={"SPECTUNE_METRICS_TOKEN": TOKEN})
        assert srv.requests[0]["headers"].get("Authorization") == f"Bearer {TOKEN}"
    assert res.exit_code in (EXIT_HTTP_STATUS, EXIT_BAD_BODY)
    assert TOKEN not in _all_output(res)
    from spectune.observe.scrape import ScrapeOptions, Scraper

    opts = ScrapeOptions("http://127.0.0.1:9/metrics", token=TOKEN)
    assert TOKEN not in repr(opts) and TOKEN not in repr(Scraper(opts))


def test_401_hints_at_the_token() -> None:
    with MetricsServer(lambda n: Reply(401, "unauthorized", "text/plain")) as srv:
        res = cli_run([srv.url, *CLI_FAST], env={"SPECTUNE_METRICS_TOKEN": ""})
    assert "bearer token is needed" in one_line_error(res, EXIT_HTTP_STATUS)


def test_tls_verification(tmp_path: Path) -> None:
    pair = self_signed(tmp_path)
    if pair is None:
        pytest.skip("openssl CLI not available to make a test certificate")
    with MetricsServer(lambda n: ok(growing(n)), tls=pair) as srv:
        res = cli_run([srv.url, *CLI_FAST])
        assert "certificate verification failed" in one_line_error(res, EXIT_TLS)
        good = cli_run([srv.url, *CLI_FAST, "--ca-bundle", pair[0], "-o", "json"])
        insecure = cli_run([srv.url, *CLI_FAST, "--insecure", "-o", "json"])
    assert good.exit_code == 0, good.output
    assert insecure.exit_code == 0, insecure.output
    assert json.loads(good.stdout)["speculation"]["drafts"] > 0


def test_https_to_a_plain_http_port() -> None:
    with MetricsServer(lambda n: ok(growing(n))) as srv:
        res = cli_run([srv.url.replace("http://", "https://"), *CLI_FAST, "--insecure"])
    assert "TLS" in one_line_error(res, EXIT_TLS)


def test_usage_errors() -> None:
    assert "one of them" in one_line_error(cli_run(["-q"]), 2)
    assert "one of them" in one_line_error(cli_run(["localhost:1", "--log", "x.log"]), 2)
    assert "exclude each other" in one_line_error(
        cli_run(["localhost:1", "--insecure", "--ca-bundle", __file__]), 2)
    assert "does not exist" in one_line_error(cli_run(["localhost:1", "--ca-bundle", "/no/such.pem"]), 2)
    assert "ftp://" in one_line_error(cli_run(["ftp://x/metrics"]), 2)
    res = cli_run(["localhost:1", "--token-file", "/no/tok"])
    assert "cannot read --token-file" in one_line_error(res, 2)


# --------------------------------------------------------------------------- review fixes
@pytest.mark.parametrize("source", ["env", "file"])
@pytest.mark.parametrize("bad", ["left’right", "left\nright", "left right", "left\x01right"])
def test_token_that_is_not_printable_ascii_is_a_usage_error(tmp_path: Path, source: str, bad: str) -> None:
    """A curly quote used to end in a UnicodeEncodeError traceback (exit 1), a second line in
    the file in "connection refused" (exit 3) after seconds of retries. Now: exit 2 at once,
    naming the variable or file, never the token, and nothing is sent."""
    tok = tmp_path / "token"
    tok.write_text(bad + "\n", encoding="utf-8")
    args, env = ([], {"SPECTUNE_METRICS_TOKEN": bad})
    if source == "file":
        args, env = ["--token-file", str(tok)], {}
    with MetricsServer(lambda n: ok(growing(n))) as srv:
        start = time.monotonic()
        res = cli_run([srv.url, *CLI_FAST, *args], env=env)
        elapsed = time.monotonic() - start
        sent = list(srv.requests)
    line = one_line_error(res, 2)
    assert (str(tok) if source == "file" else "$SPECTUNE_METRICS_TOKEN") in line
    assert "printable ASCII" in line
    assert "left" not in _all_output(res) and "right" not in _all_output(res)
    assert sent == [] and elapsed < 2.0


def test_token_library_callers_are_checked_too() -> None:
    from spectune.observe.scrape import ScrapeOptions

    with pytest.raises(ObserveUsageError, match="non-ASCII") as err:
        observe_url("http://127.0.0.1:9/metrics", token="se’cret", **fast())
    assert "cret" not in err.value.message
    with pytest.raises(ObserveUsageError, match="line break"):
        ScrapeOptions("http://127.0.0.1:9/metrics", token="a\nb")


@pytest.mark.parametrize("ending", ["\n", "\r\n", ""])
def test_token_one_trailing_newline_is_dropped(tmp_path: Path, ending: str) -> None:
    tok = tmp_path / "token"
    tok.write_bytes((TOKEN + ending).encode())
    with MetricsServer(lambda n: ok(growing(n))) as srv:
        res = cli_run([srv.url, *CLI_FAST, "--token-file", str(tok)])
        res2 = cli_run([srv.url, *CLI_FAST], env={"SPECTUNE_METRICS_TOKEN": TOKEN + ending})
        got = {r["headers"].get("Authorization") for r in srv.requests}
    assert res.exit_code == 0 and res2.exit_code == 0, res.output + res2.output
    assert got == {f"Bearer {TOKEN}"}


@pytest.mark.parametrize("url", ["http://[::1", "[::1:8000", "http://alice:hunter2@[::1/metrics"])
def test_url_that_does_not_parse_is_a_usage_error(url: str) -> None:
    """urlsplit's ValueError ("Invalid IPv6 URL") used to escape as a traceback."""
    line = one_line_error(cli_run([url, *CLI_FAST]), 2)
    assert "not a valid URL" in line and "hunter2" not in line and "alice" not in line
    with pytest.raises(ObserveUsageError, match="not a valid URL"):
        observe_url(url, **fast())


def test_scrape_options_repr_hides_url_credentials() -> None:
    from spectune.observe.scrape import ScrapeOptions, Scraper, redact_url

    opts = ScrapeOptions("http://alice:hunter2@127.0.0.1:9/metrics", token=TOKEN)
    for text in (repr(opts), str(opts), repr(Scraper(opts))):
        assert "hunter2" not in text and "alice" not in text and TOKEN not in text
        assert "http://127.0.0.1:9/metrics" in text
    assert "token='***'" in repr(opts) and "timeout=10.0" in repr(opts)
    assert redact_url("http://u:p@[::1]:8000/metrics") == "http://[::1]:8000/metrics"
    assert redact_url("http://u:p@[::1") == "http://[::1"


def test_engine_metrics_are_checked_once(monkeypatch: pytest.MonkeyPatch) -> None:
    """The first scrape decides the engine's flavour (fail fast); analyse does not redo it."""
    from spectune.engines.sglang import metrics as sglang  # where the checks are looked up
    from spectune.engines.vllm import observation as vllm

    calls: list[str] = []
    real_flavour, real_check = vllm.flavour, sglang.check_metrics
    monkeypatch.setattr(vllm, "flavour", lambda *a: calls.append("vllm") or real_flavour(*a))
    monkeypatch.setattr(sglang, "check_metrics", lambda *a: calls.append("sglang") or real_check(*a))
    with MetricsServer(lambda n: ok(growing(n))) as srv:
        observe_url(srv.url, **fast())
    with MetricsServer(lambda n: Reply(200, sglang_text(2.2, 0.4))) as srv:
        observe_url(srv.url, **fast())
    assert calls == ["vllm", "sglang"]


def test_progress_bar_on_a_terminal(monkeypatch: pytest.MonkeyPatch) -> None:
    from spectune.cli import observe as command

    monkeypatch.setattr(command, "_stderr_is_terminal", lambda: True)
    with MetricsServer(lambda n: ok(growing(n))) as srv:
        res = cli_run([srv.url, "--window", "0.6", "--interval", "0.2", "-o", "json"])
    assert res.exit_code == 0, res.output
    assert "observing 0.6 s" in res.stderr and json.loads(res.stdout)["speculation"]["drafts"] > 0
    failed = cli_run([f"127.0.0.1:{closed_port()}", "--window", "0.6", "--retries", "0"])
    assert failed.exit_code == EXIT_CONNECTION
    assert failed.stderr.strip().splitlines()[-1].startswith("spectune: error: connection refused")
