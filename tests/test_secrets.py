"""No credential reaches the terminal in any encoding (issue 19, item 4).

Real HTTP servers on 127.0.0.1 that echo what they were sent -- the Authorization header,
the bearer token, the URL password, ``user:password`` -- plain, base64, URL-encoded and hex,
in the reason phrase, in the body of an answer, in a redirect's Location and in a
Prometheus API error or label; ``observe URL``, ``recommend --metrics-url``,
``observe --prometheus``, ``recommend --prometheus`` and ``fleet`` must print none of it,
and exit with the documented code. A redirect to another host with credentials is refused
(the other host gets no request) and named.
"""

from __future__ import annotations

import base64
import json
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, quote, urlsplit

import pytest
from click.testing import CliRunner
from observe_support import PROM, Engine, vllm_text

from spectune.base import redact
from spectune.base.exit_codes import ExitCode
from spectune.cli.main import cli

TOKEN = "s3cret-Tok3n-0123456789abcdefXYZ"
USER, PASSWORD = "user", "SEKRET"  # the case: Basic dXNlcjpTRUtSRVQ=
PROFILE = "llama-3.1-70b-h100-eagle3"
JSON = "application/json"


def forms(secret: str) -> set[str]:
    """How a server could echo ``secret``: plain, URL-encoded, hex, base64 (standard and
    URL-safe; without the last character where it also depends on what follows)."""
    raw = secret.encode()
    b64 = base64.b64encode(raw).decode().rstrip("=")
    b64 = b64 if len(raw) % 3 == 0 else b64[:-1]
    return {secret, quote(secret, safe=""), raw.hex(), raw.hex().upper(), b64,
            b64.replace("+", "-").replace("/", "_")}


SECRET_FORMS = forms(TOKEN) | forms(PASSWORD) | forms(f"{USER}:{PASSWORD}")
SENT_FORMS = {base64.b64encode(f"{USER}:{PASSWORD}".encode()).decode(),  # dXNlcjpTRUtSRVQ=
              base64.b64encode(f"Bearer {TOKEN}".encode()).decode()}


def leaks(res: Any, part: int = 8) -> list[str]:
    """Every form of a secret, or any ``part`` characters of one (what a cut quote would
    keep), and every header value as sent, found in the output."""
    text = res.stdout + res.stderr + repr(res.exception or "")
    found = {f for f in SECRET_FORMS for i in range(max(1, len(f) - part + 1)) if f[i:i + part] in text}
    return sorted(found | {f for f in SENT_FORMS if f.rstrip("=")[:-1] in text})


def echo(headers: Any) -> str:
    """Everything a careless server could say back about the credentials it was sent."""
    auth = headers.get("Authorization") or ""
    scheme, _, cred = auth.partition(" ")
    secret = base64.b64decode(cred).decode().partition(":")[2] if scheme == "Basic" else cred
    return (f"Authorization: {auth}; you are {auth} b64={base64.b64encode(auth.encode()).decode()} "
            f"hex={secret.encode().hex()} url={quote(secret, safe='')} plain={secret} "
            f"again ?token={secret}&x=1")


# --------------------------------------------------------------------------- a real echoing server
@dataclass
class Answer:
    status: int = 200
    reason: str | None = None
    body: str = ""
    content_type: str = "text/plain"
    headers: dict[str, str] = field(default_factory=dict)


Route = Callable[[str, Any], Answer]  # (path, request headers) -> the answer


@contextmanager
def server(route: Route, host: str = "127.0.0.1") -> Iterator[tuple[int, list[dict[str, Any]]]]:
    """A real HTTP server on ``host``:<ephemeral port> answering GET and POST by ``route``
    (a POST's form is given as the path's query); yields the port and the requests it
    received (path and headers)."""
    seen: list[dict[str, Any]] = []

    class Handler(BaseHTTPRequestHandler):
        def _answer(self) -> None:
            n = int(self.headers.get("Content-Length") or 0)
            form = self.rfile.read(n).decode() if n else ""
            seen.append({"path": self.path, "headers": dict(self.headers)})
            a = route(f"{self.path}?{form}" if form else self.path, self.headers)
            data = a.body.encode()
            try:
                self.send_response(a.status, a.reason)
                self.send_header("Content-Type", a.content_type)
                self.send_header("Content-Length", str(len(data)))
                for k, v in a.headers.items():
                    self.send_header(k, v)
                self.end_headers()
                self.wfile.write(data)
            except (BrokenPipeError, ConnectionResetError):
                pass

        do_GET = do_POST = _answer

        def log_message(self, *args: Any) -> None:
            pass

    srv = ThreadingHTTPServer((host, 0), Handler)
    srv.daemon_threads = True
    thread = threading.Thread(target=srv.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)
    thread.start()
    try:
        yield srv.server_address[1], seen
    finally:
        srv.shutdown()
        srv.server_close()
        thread.join(timeout=5)


# --------------------------------------------------------------------------- the commands
Creds = str  # "token": a bearer token from $SPECTUNE_METRICS_TOKEN; "userinfo": user:pass@ in the URL


def base_url(port: int, creds: Creds) -> str:
    return f"http://{USER}:{PASSWORD}@127.0.0.1:{port}" if creds == "userinfo" else f"http://127.0.0.1:{port}"


def run(args: list[str], creds: Creds) -> Any:
    env = {"SPECTUNE_METRICS_TOKEN": TOKEN if creds == "token" else ""}
    return CliRunner().invoke(cli, args, env=env)


def scrape(command: str, port: int, creds: Creds) -> Any:
    """``observe URL`` or ``recommend PROFILE --metrics-url URL`` against the server."""
    url = base_url(port, creds) + "/metrics"
    if command == "observe":
        return run(["observe", url, "--window", "0.4", "--interval", "0.2", "--retries", "0", "-q"], creds)
    return run(["recommend", PROFILE, "--metrics-url", url, "--window", "0.4", "--interval", "0.2"], creds)


def prometheus(command: str, port: int, creds: Creds, tmp_path: Path, *more: str) -> Any:
    """``observe --prometheus``, ``recommend --prometheus`` or ``fleet`` against the server."""
    url = base_url(port, creds)
    if command == "observe":
        return run(["observe", "--prometheus", url, "--window", "5m", "--timeout", "2", *more], creds)
    if command == "recommend":
        return run(["recommend", PROFILE, "--prometheus", url, "--window", "5m", *more], creds)
    fleet = tmp_path / "fleet.yaml"
    fleet.write_text(f"deployments: [{{match: {{model_name: m}}, profile: {PROFILE}}}]\n", encoding="utf-8")
    return run(["fleet", str(fleet), "--prometheus", url, "--window", "5m", "--timeout", "2", *more], creds)


def one_error(res: Any, code: int) -> str:
    """The single ``spectune: error:`` line, after checking the exit code and that nothing leaked."""
    assert res.exit_code == code, (res.exit_code, res.output)
    assert leaks(res) == [], res.output
    lines = res.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("spectune: error: "), res.stderr
    assert "Traceback" not in res.output
    return lines[0]


CREDS = ["token", "userinfo"]
SCRAPERS = ["observe", "recommend"]
PROMETHEUS = ["observe", "recommend", "fleet"]


# --------------------------------------------------------------------------- /metrics path
@pytest.mark.parametrize("creds", CREDS)
@pytest.mark.parametrize("command", SCRAPERS)
def test_reason_phrase_echoing_the_credentials(command: str, creds: Creds) -> None:
    """The issue's case: ``HTTP 403 Basic dXNlcjpTRUtSRVQ=`` was printed as it came."""
    with server(lambda p, h: Answer(403, echo(h))) as (port, seen):
        res = scrape(command, port, creds)
    assert seen[0]["headers"]["Authorization"] in (f"Bearer {TOKEN}", "Basic dXNlcjpTRUtSRVQ=")
    line = one_error(res, ExitCode.HTTP_STATUS)
    assert "HTTP 403 Authorization: ***" in line


@pytest.mark.parametrize("creds", CREDS)
@pytest.mark.parametrize("command", SCRAPERS)
def test_body_that_is_not_metrics_echoing_the_credentials(command: str, creds: Creds) -> None:
    """A series twice in one scrape: the message quotes it, cut to 120 characters, the cut in
    the middle of an encoded secret. The quote is scrubbed before it is cut."""
    def route(path: str, h: Any) -> Answer:
        secret = echo(h).split("plain=")[1].split()[0]
        auth = base64.b64encode(h.get("Authorization", "").encode()).decode()
        line = f'c_total{{a="{"x" * 60}{secret.encode().hex()}{auth}{quote(secret, safe="")}"}} 1\n'
        return Answer(200, body="# TYPE c counter\n" + line + line, content_type=PROM)

    with server(route) as (port, _):
        res = scrape(command, port, creds)
    one_error(res, ExitCode.BAD_BODY)


@pytest.mark.parametrize("creds", CREDS)
def test_error_body_and_content_type_echoing_the_credentials(creds: Creds) -> None:
    """A 401 with the credentials in its body (never quoted: a guard) and an HTML answer
    naming them in its Content-Type (quoted in the message)."""
    with server(lambda p, h: Answer(401, "Unauthorized", body=echo(h))) as (port, _):
        one_error(scrape("observe", port, creds), ExitCode.HTTP_STATUS)
    with server(lambda p, h: Answer(200, body="<html></html>",
                                    content_type=f"text/html; x={quote(echo(h), safe='')}")) as (port, _):
        one_error(scrape("observe", port, creds), ExitCode.BAD_BODY)


@pytest.mark.parametrize("creds", CREDS)
def test_model_name_and_version_echoing_the_credentials(creds: Creds) -> None:
    """Label values and /version are server text too: they reach the document on stdout."""
    def route(path: str, h: Any) -> Answer:
        secret = echo(h).split("plain=")[1].split()[0]
        if path.startswith("/version"):
            return Answer(200, body=json.dumps({"version": f"0.32.0+{secret}"}), content_type=JSON)
        e = Engine(drafts=10, draft_tokens=30, accepted=12, per_pos=(6, 4, 2), running=1, model=f"m-{secret}")
        return Answer(200, body=vllm_text(e), content_type=PROM)

    with server(route) as (port, _):
        res = scrape("observe", port, creds)
        res_yaml = run(["observe", base_url(port, creds) + "/metrics", "--window", "0.4", "--interval", "0.2",
                        "-q", "-o", "yaml"], creds)
    for r in (res, res_yaml):
        assert r.exit_code == ExitCode.NO_SPEC_TRAFFIC, r.output  # counters never move
        assert leaks(r) == [], r.output


@pytest.mark.parametrize("creds", CREDS)
@pytest.mark.parametrize("command", SCRAPERS)
def test_same_host_redirect_with_the_credentials_in_its_location(command: str, creds: Creds) -> None:
    """Followed (same origin, credentials kept), and the target's echo of the Location is scrubbed."""
    def route(path: str, h: Any) -> Answer:
        if path == "/metrics":
            secret = echo(h).split("plain=")[1].split()[0]
            return Answer(302, headers={"Location": f"/login?token={secret}&next={quote(echo(h), safe='')}"})
        return Answer(404, f"no such page {path}")

    with server(route) as (port, seen):
        res = scrape(command, port, creds)
    assert [r["path"].split("?")[0] for r in seen] == ["/metrics", "/login"]
    assert seen[1]["headers"].get("Authorization") == seen[0]["headers"]["Authorization"]
    assert "HTTP 404 no such page /login?token=***" in one_error(res, ExitCode.HTTP_STATUS)


@pytest.mark.parametrize("creds", CREDS)
@pytest.mark.parametrize("command", SCRAPERS)
def test_redirect_to_another_host_with_credentials_is_refused(command: str, creds: Creds) -> None:
    """127.0.0.1 sends to localhost on another port (with the secrets in the Location): no
    request reaches it, and the message names it without them."""
    with server(lambda p, h: Answer(404, echo(h)), host="localhost") as (other, reached):
        def route(path: str, h: Any) -> Answer:
            secret = echo(h).split("plain=")[1].split()[0]
            return Answer(302, headers={"Location": f"http://{USER}:{secret}@localhost:{other}/metrics"
                                                    f"?access_token={secret}"})

        with server(route) as (port, _):
            res = scrape(command, port, creds)
    assert reached == []
    line = one_error(res, ExitCode.HTTP_STATUS)
    assert f"another host, http://localhost:{other}:" in line and "not followed" in line


def test_redirect_to_another_host_without_credentials_is_refused_too() -> None:
    """It used to be followed, and a failure there was blamed on the host the user named."""
    def there(p: str, h: Any) -> Answer:
        return Answer(302, headers={"Location": f"http://localhost:{other}/m"})

    with server(lambda p, h: Answer(404, "Not Found"), host="localhost") as (other, reached), \
            server(there) as (port, _):
        res = scrape("observe", port, "none")
    assert reached == []
    line = one_error(res, ExitCode.HTTP_STATUS)
    assert f"http://127.0.0.1:{port}/metrics answered HTTP 302, a redirect to another host, " \
           f"http://localhost:{other}: not followed" in line


@pytest.mark.parametrize(("location", "shown"), [("http://[::1", "an invalid URL"),
                                                 ("http://localhost:99999/x", "an invalid URL"),
                                                 ("ftp://files.example/x", "ftp://files.example")])
def test_redirect_to_what_is_not_an_http_url(location: str, shown: str) -> None:
    """Was exit 70 (ValueError), "invalid metrics URL" naming the user's URL (exit 2), or
    "request failed (InvalidSchema)" (exit 3)."""
    with server(lambda p, h: Answer(302, headers={"Location": location})) as (port, _):
        res = scrape("observe", port, "none")
    assert f"a redirect to {shown}, which is not an http(s) URL" in one_error(res, ExitCode.HTTP_STATUS)


def test_credentials_nobody_gave_spectune_are_scrubbed_too() -> None:
    """Someone else's credentials in the answer: anything that looks like one goes."""
    foreign = ("Bearer ghp_F0reignT0ken123", "access_token=ya29.Foreign-Acc3ss", "password=Hunter2Hunter2",
               "http://bob:B0bPa55@internal:80/", "Basic Ym9iOkIwYlBhNTU=")
    with server(lambda p, h: Answer(403, " ".join(foreign))) as (port, _):
        res = scrape("observe", port, "none")
    line = one_error(res, ExitCode.HTTP_STATUS)
    for secret in ("ghp_F0reignT0ken123", "ya29.Foreign-Acc3ss", "Hunter2Hunter2", "B0bPa55",
                   "Ym9iOkIwYlBhNTU"):
        assert secret not in res.output
    assert "http://internal:80/" in line and "access_token=***" in line


def test_terminal_escapes_in_a_reason_phrase_are_not_printed() -> None:
    with server(lambda p, h: Answer(403, "Forbidden\x1b[2J\x1b]0;owned\x07")) as (port, _):
        res = scrape("observe", port, "none")
    line = one_error(res, ExitCode.HTTP_STATUS)
    assert "\x1b" not in res.output and "\x07" not in res.output and "Forbidden?[2J" in line


def test_a_token_in_the_url_query_is_never_shown(tmp_path: Path) -> None:
    with server(lambda p, h: Answer(403, f"you asked for {p}")) as (port, _):
        res = run(["observe", f"http://127.0.0.1:{port}/metrics?token={TOKEN}", "--retries", "0", "-q"],
                  "none")
    line = one_error(res, ExitCode.HTTP_STATUS)
    assert "metrics?token=***" in line


# --------------------------------------------------------------------------- Prometheus path
def prom_error(kind: str) -> Route:
    def route(path: str, h: Any) -> Answer:
        doc = {"status": "error", "errorType": kind, "error": echo(h)}
        return Answer(400 if kind == "bad_data" else 422, body=json.dumps(doc), content_type=JSON)
    return route


@pytest.mark.parametrize("creds", CREDS)
@pytest.mark.parametrize("command", PROMETHEUS)
@pytest.mark.parametrize(("kind", "code"), [("execution", ExitCode.HTTP_STATUS),
                                            ("bad_data", ExitCode.USAGE)])
def test_prometheus_error_answer_echoing_the_credentials(command: str, creds: Creds, kind: str, code: int,
                                                         tmp_path: Path) -> None:
    with server(prom_error(kind)) as (port, seen):
        res = prometheus(command, port, creds, tmp_path)
    assert seen[0]["path"] == "/api/v1/query" and seen[0]["headers"].get("Authorization")
    assert "Authorization: ***" in one_error(res, code)


COUNTS = {"num_drafts_total": 10, "num_draft_tokens_total": 30, "num_accepted_tokens_total": 12}


def prom_group_named_by_the_credentials(path: str, h: Any) -> Answer:
    """One vLLM group (K=3) whose model_name and pod labels hold the credentials (plain, base64)."""
    secret = echo(h).split("plain=")[1].split()[0]
    labels = {"model_name": f"m-{secret}", "pod": base64.b64encode(secret.encode()).decode()}
    params = parse_qs(urlsplit(path).query)
    query = params.get("query", [""])[0]
    at = float(params.get("time", ["0"])[0])  # a sample is for the time asked (spectune checks it)
    result: list[dict[str, Any]] = []
    if query.startswith("increase(vllm:spec_decode_"):
        name = query.split("spec_decode_")[1].split("{")[0]
        if name == "num_accepted_tokens_per_pos_total":
            result = [{"metric": {**labels, "position": str(i)}, "value": [at, str(v)]}
                      for i, v in enumerate((6, 4, 2))]
        elif name in COUNTS:
            result = [{"metric": labels, "value": [at, str(COUNTS[name])]}]
    kind = "matrix" if path.startswith("/api/v1/query_range") else "vector"
    return Answer(200, body=json.dumps({"status": "success", "data": {"resultType": kind, "result": result}}),
                  content_type=JSON)


@pytest.mark.parametrize("creds", CREDS)
@pytest.mark.parametrize("command", PROMETHEUS)
def test_prometheus_labels_echoing_the_credentials(command: str, creds: Creds, tmp_path: Path) -> None:
    """Label values are server text too: they reach the table, the document and the notes."""
    with server(prom_group_named_by_the_credentials) as (port, _):
        res = prometheus(command, port, creds, tmp_path, "--by", "pod")
        res_yaml = prometheus(command, port, creds, tmp_path, "--by", "pod", "-o", "yaml")
    for r in (res, res_yaml):
        assert r.exit_code == 0, r.output
        assert leaks(r) == [], r.output
    assert "m-***" in res_yaml.stdout


@pytest.mark.parametrize("creds", CREDS)
@pytest.mark.parametrize("command", PROMETHEUS)
def test_prometheus_redirect_to_another_host_is_refused(command: str, creds: Creds, tmp_path: Path) -> None:
    with server(prom_error("execution"), host="localhost") as (other, reached):
        route = lambda p, h: Answer(307, headers={"Location": f"http://localhost:{other}{p}"})  # noqa: E731
        with server(route) as (port, _):
            res = prometheus(command, port, creds, tmp_path)
    assert reached == []
    assert f"another host, http://localhost:{other}:" in one_error(res, ExitCode.HTTP_STATUS)


# --------------------------------------------------------------------------- the module itself
def test_every_encoding_of_a_remembered_secret_is_scrubbed() -> None:
    redact.remember(TOKEN, *redact.credentials_in_url(f"http://{USER}:{PASSWORD}@h/"))
    for secret in (TOKEN, PASSWORD, f"{USER}:{PASSWORD}"):
        for form in forms(secret):
            for around in ("{}", "x{}y", "Forbidden: {} (again {})"):
                assert redact.scrub(around.format(form, form)).count("***") >= 1
                assert form not in redact.scrub(around.format(form, form))
    inside = base64.b64encode(f"header: Bearer {TOKEN}; more".encode()).decode()  # any alignment
    assert not any(f in redact.scrub(inside) for f in forms(TOKEN))
    for own in ("the bearer token was refused", 'WWW-Authenticate: Basic realm="metrics"',
                "set $SPECTUNE_METRICS_TOKEN, --token-env or --token-file"):  # spectune's words stay
        assert redact.scrub(own) == own


def test_a_quote_is_scrubbed_before_it_is_cut() -> None:
    """Cut first, a quote would keep half a secret that no longer matches it."""
    redact.remember(TOKEN)
    text = "x" * 100 + TOKEN
    assert TOKEN[:10] not in redact.clip(text, 110)
    assert redact.clip(text, 110).endswith("***")
