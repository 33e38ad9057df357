"""Fetching ``/metrics`` over HTTP(S): timeouts, bounded retries with backoff, bearer token, TLS.

Every failure becomes one :mod:`spectune.base.errors` exception with its own exit code.
The bearer token is held in a field excluded from ``repr``; every message goes through
:mod:`spectune.base.redact` (no credential in any encoding; no redirect to another host
with them).

Every request -- ``/metrics`` and the ``/version`` probe alike -- runs under one deadline:
``--timeout`` bounds the whole answer, headers and body bytes included (a server trickling
a body one byte a second is cut off at the deadline, however many bytes it promised), and
every body has a size cap (:data:`~spectune.base.limits.MAX_METRICS_BYTES`,
:data:`~spectune.base.limits.MAX_PROBE_BYTES`).

Retried (``retries`` more attempts, sleeping ``backoff * 2**i`` seconds, capped at 8 s):
connection refused/reset, timeouts, HTTP 5xx, 408 and 429. Not retried: DNS failures,
TLS failures, other 4xx, bodies that are not Prometheus text.
"""

from __future__ import annotations

import contextlib
import os
import socket
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import urlsplit, urlunsplit

from spectune.base.errors import (
    BadBodyFault,
    ConnectionFault,
    DNSFault,
    HTTPStatusFault,
    ObserveError,
    ObserveUsageError,
    TimeoutFault,
    TLSFault,
)
from spectune.base.limits import (
    DEFAULT_RETRIES,
    DEFAULT_TIMEOUT_SECONDS,
    DEFAULT_TOKEN_ENV,
    MAX_METRICS_BYTES,
    MAX_PROBE_BYTES,
)
from spectune.base.redact import protect, redact_url, scrub, server_text
from spectune.documents.exposition import Exposition, parse_exposition
from spectune.documents.inputs import input_file_problem, parse_json

MAX_BODY_BYTES = MAX_METRICS_BYTES
MAX_BACKOFF_SECONDS = 8.0
MAX_TOKEN_BYTES = 64 * 1024
_ACCEPT = "text/plain;version=0.0.4;q=0.9,*/*;q=0.1"


def normalize_url(url: str) -> str:
    """``host:port`` → ``http://host:port/metrics``; a URL without a path gets ``/metrics``."""
    raw = url.strip()
    if not raw:
        raise ObserveUsageError("empty metrics URL")
    if "://" not in raw:
        raw = "http://" + raw
    try:
        parts = urlsplit(raw)
    except ValueError as err:  # e.g. "Invalid IPv6 URL" for an unclosed "[::1"
        raise ObserveUsageError(f"metrics URL {redact_url(raw)!r} is not a valid URL ({err})") from None
    if parts.scheme not in ("http", "https"):
        raise ObserveUsageError(f"metrics URL must be http:// or https://, not {parts.scheme}://")
    if not parts.hostname:
        raise ObserveUsageError(f"metrics URL {redact_url(raw)!r} has no host")
    try:
        parts.port  # noqa: B018 - raises ValueError on a bad port
    except ValueError:
        raise ObserveUsageError(f"metrics URL {redact_url(raw)!r} has a bad port") from None
    path = parts.path if parts.path not in ("", "/") else "/metrics"
    return urlunsplit((parts.scheme, parts.netloc, path, parts.query, ""))


def _token_problem(token: str) -> str | None:
    """What makes ``token`` unusable in an ``Authorization: Bearer`` header (None: nothing).
    Names the kind of character and its position, never the token or the character."""
    for i, ch in enumerate(token):
        if "!" <= ch <= "~":
            continue
        if ch in "\r\n":
            what = "a line break"
        elif ch == " " or ch == "\t":
            what = "a space or tab"
        elif ord(ch) < 128:
            what = "a control character"
        else:
            what = "a non-ASCII character"
        return (f"the token has {what} at character {i + 1}; a bearer token is printable ASCII "
                "without spaces, on one line")
    return None


def _drop_newline(raw: str) -> str:
    """``raw`` without one trailing ``\\n`` or ``\\r\\n`` (what editors and ``echo`` add)."""
    return raw[:-2] if raw.endswith("\r\n") else raw[:-1] if raw.endswith("\n") else raw


def resolve_token(token_env: str | None = DEFAULT_TOKEN_ENV, token_file: str | None = None) -> str | None:
    """The bearer token: from ``token_file`` when given, else from environment ``token_env``.

    One trailing newline (``\\n`` or ``\\r\\n``) is dropped; an empty variable counts as unset.
    Anything else that is not printable ASCII (a space, a second line, ``’``) is an
    :class:`ObserveUsageError` naming the file or variable, never the token. Nothing here
    prints the token.
    """
    if token_file:
        problem = input_file_problem(token_file, stdin_ok=False)
        if problem:
            raise ObserveUsageError(f"cannot read --token-file: {problem}")
        try:
            with open(token_file, "rb") as fh:
                raw = fh.read(MAX_TOKEN_BYTES + 1)
        except OSError as err:
            raise ObserveUsageError(f"cannot read --token-file {token_file}: {err.strerror}") from None
        if len(raw) > MAX_TOKEN_BYTES:
            raise ObserveUsageError(f"--token-file {token_file} is larger than {MAX_TOKEN_BYTES >> 10} KiB: "
                                    "not a bearer token")
        token, source = _drop_newline(raw.decode("utf-8", errors="replace")), f"--token-file {token_file}"
        if not token:
            raise ObserveUsageError(f"{source} is empty")
    elif token_env:
        token, source = _drop_newline(os.environ.get(token_env, "")), f"${token_env}"
        if not token:
            return None
    else:
        return None
    problem = _token_problem(token)
    if problem:
        raise ObserveUsageError(f"{source}: {problem}")
    return token


@dataclass(frozen=True, repr=False)
class ScrapeOptions:
    """How to reach the server. ``timeout`` in seconds, for the whole answer of one attempt.
    ``repr`` shows neither the token nor a ``user:password@`` of the URL."""

    url: str
    timeout: float = DEFAULT_TIMEOUT_SECONDS
    retries: int = DEFAULT_RETRIES
    backoff: float = 0.5
    token: str | None = field(default=None, repr=False)
    ca_bundle: str | None = None
    insecure: bool = False

    def __post_init__(self) -> None:
        if self.timeout <= 0:
            raise ObserveUsageError("--timeout must be positive")
        if self.retries < 0:
            raise ObserveUsageError("--retries must be 0 or more")
        if self.ca_bundle and self.insecure:
            raise ObserveUsageError("--ca-bundle and --insecure exclude each other")
        if self.ca_bundle and not os.path.exists(self.ca_bundle):  # never raises, unlike Path
            raise ObserveUsageError(f"--ca-bundle {self.ca_bundle} does not exist")
        if self.ca_bundle and input_file_problem(self.ca_bundle, stdin_ok=False):
            raise ObserveUsageError(f"--ca-bundle: {input_file_problem(self.ca_bundle, stdin_ok=False)}")
        problem = _token_problem(self.token) if self.token else None
        if problem:
            raise ObserveUsageError(f"bearer token: {problem}")

    def __repr__(self) -> str:
        token = "***" if self.token else None
        return (f"ScrapeOptions(url={self.display_url!r}, timeout={self.timeout!r}, "
                f"retries={self.retries!r}, backoff={self.backoff!r}, token={token!r}, "
                f"ca_bundle={self.ca_bundle!r}, insecure={self.insecure!r})")

    @property
    def display_url(self) -> str:
        return redact_url(self.url)


@dataclass(frozen=True)
class Clock:
    """Where observe's time comes from: ``now()`` in Unix seconds, stamped on each scrape;
    ``monotonic()`` in seconds, pacing the window; ``sleep(seconds)`` between scrapes and
    between retries. Injectable so that a window passes without waiting in tests (a fake
    clock whose sleep moves it on). A request's deadline stays on the real clock: it waits
    for a real server."""

    now: Callable[[], float] = time.time
    monotonic: Callable[[], float] = time.monotonic
    sleep: Callable[[float], None] = time.sleep


SYSTEM_CLOCK = Clock()


@dataclass(frozen=True, eq=False)
class Scrape:
    """One successful scrape: wall-clock ``time`` (Unix seconds, when the answer was complete),
    the raw ``text``, its parsed ``exposition``, and the failed attempts before it."""

    time: float
    text: str
    exposition: Exposition
    attempts: int = 1
    retry_reasons: tuple[str, ...] = ()


class _Retryable(Exception):
    def __init__(self, fault: ObserveError) -> None:
        super().__init__(fault.message)
        self.fault = fault


def _chain(err: BaseException) -> list[BaseException]:
    seen: list[BaseException] = []
    cur: BaseException | None = err
    while cur is not None and cur not in seen and len(seen) < 20:
        seen.append(cur)
        cur = cur.__cause__ or cur.__context__
        if cur is None and seen[-1].args:
            nested = [a for a in seen[-1].args if isinstance(a, BaseException)]
            cur = nested[0] if nested else None
    return seen


def _classify_connection_error(err: BaseException, where: str) -> ObserveError:
    chain = _chain(err)
    text = " ".join(str(e) for e in chain).lower()
    if any(isinstance(e, socket.gaierror) for e in chain) or "name or service not known" in text \
            or "nodename nor servname" in text or "failed to resolve" in text \
            or "temporary failure in name resolution" in text or "nameresolutionerror" in text:
        host = urlsplit(where).hostname
        return DNSFault(f"cannot resolve host {host!r} of {where}")
    if any(isinstance(e, ConnectionRefusedError) for e in chain) or "connection refused" in text:
        return ConnectionFault(f"connection refused by {where} (is the server running on that port?)")
    if any(isinstance(e, ConnectionResetError) for e in chain) or "reset by peer" in text:
        return ConnectionFault(f"connection to {where} was reset")
    if "remotedisconnected" in text or "closed connection without response" in text:
        return ConnectionFault(f"{where} closed the connection without an answer")
    return ConnectionFault(f"cannot connect to {where} ({type(chain[-1]).__name__})")


class Scraper:
    """Fetches and parses ``/metrics`` with the retry, timeout, token and TLS policy of
    :class:`ScrapeOptions`. ``clock`` stamps each scrape and sleeps between retries
    (``sleep``, when given, sleeps instead); ``parse`` reads each body (an engine's reader of
    a JSON ``/metrics``; default: the Prometheus text parser)."""

    def __init__(self, options: ScrapeOptions, sleep: Callable[[float], None] | None = None, *,
                 clock: Clock = SYSTEM_CLOCK,
                 parse: Callable[[str, str | None], Exposition] = parse_exposition) -> None:
        self.options = options
        self._parse = parse
        self._clock = clock
        self._sleep = sleep or clock.sleep
        self._session = self._new_session()
        if options.insecure:
            import urllib3

            urllib3.disable_warnings(urllib3.exceptions.InsecureRequestWarning)

    def _new_session(self) -> Any:
        import requests

        session = requests.Session()
        session.trust_env = False  # no proxy from the environment for a /metrics scrape
        session.headers["Accept"] = _ACCEPT
        session.headers["User-Agent"] = "spectune-observe"
        if self.options.token:
            session.headers["Authorization"] = f"Bearer {self.options.token}"
        protect(session, self.options.url, self.options.token, self.options.display_url)
        return session

    def __repr__(self) -> str:  # never show headers (the token)
        return f"Scraper({self.options.display_url!r})"

    def close(self) -> None:
        self._session.close()

    def __enter__(self) -> Scraper:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # ------------------------------------------------------------------ one attempt
    def _guarded(self, work: Callable[[dict[str, Any]], Any], seconds: float) -> Any:
        """``work(box)`` in a worker thread, given ``seconds`` in all; past them the request
        is abandoned (its socket shut, the session replaced) and ``_Deadline`` raised. The
        worker puts its response in ``box["resp"]`` so that it can be shut."""
        box: dict[str, Any] = {}

        def run() -> None:
            try:
                box["result"] = work(box)
            except BaseException as err:  # re-raised in the caller's thread
                box["error"] = err

        worker = threading.Thread(target=run, name="spectune-scrape", daemon=True)
        worker.start()
        worker.join(seconds)
        if worker.is_alive():
            _shut(box.get("resp"))
            old, self._session = self._session, self._new_session()
            with contextlib.suppress(Exception):
                old.close()
            raise _Deadline
        if "error" in box:
            raise box["error"]
        return box["result"]

    def _attempt(self) -> tuple[str, str | None]:
        opt = self.options
        try:
            result: tuple[str, str | None] = self._guarded(self._attempt_inner, opt.timeout)
        except _Deadline:
            raise _Retryable(TimeoutFault(f"{opt.display_url} did not finish its answer within "
                                          f"--timeout {opt.timeout:g} s")) from None
        return result

    def _attempt_inner(self, box: dict[str, Any]) -> tuple[str, str | None]:
        import requests

        opt = self.options
        where = opt.display_url
        verify: bool | str = opt.ca_bundle or not opt.insecure
        deadline = time.monotonic() + opt.timeout
        try:
            resp = self._session.get(opt.url, timeout=(opt.timeout, opt.timeout), verify=verify,
                                     stream=True, allow_redirects=True)
            box["resp"] = resp
        except requests.exceptions.SSLError as err:
            reason = _tls_reason(err)
            raise TLSFault(f"TLS failure talking to {where}: {reason} "
                           "(use --ca-bundle FILE for a private CA, or --insecure)") from None
        except requests.exceptions.Timeout:
            raise _Retryable(TimeoutFault(f"no answer from {where} within --timeout "
                                          f"{opt.timeout:g} s")) from None
        except requests.exceptions.ConnectionError as err:
            fault = _classify_connection_error(err, where)
            if isinstance(fault, DNSFault):
                raise fault from None
            raise _Retryable(fault) from None
        except requests.exceptions.InvalidURL:
            raise ObserveUsageError(f"invalid metrics URL {where!r}") from None
        except requests.exceptions.RequestException as err:
            raise _Retryable(ConnectionFault(f"request to {where} failed "
                                             f"({type(err).__name__})")) from None
        with resp:
            status = resp.status_code
            if status >= 400:
                reason = server_text(resp.reason)
                hint = ""
                if status in (401, 403):
                    hint = (f" (a bearer token is needed: set ${DEFAULT_TOKEN_ENV}, --token-env "
                            "or --token-file)" if not opt.token else " (the bearer token was refused)")
                elif status == 404:
                    hint = " (is the path right? vLLM and SGLang serve /metrics)"
                fault = HTTPStatusFault(f"{where} answered HTTP {status} {reason}{hint}".rstrip())
                if status >= 500 or status in (408, 429):
                    raise _Retryable(fault)
                raise fault
            declared = resp.headers.get("Content-Length") or ""
            if declared.isdigit() and int(declared) > MAX_BODY_BYTES:
                raise BadBodyFault(f"{where} announces a {int(declared) >> 20} MiB body, more than the "
                                   f"{MAX_BODY_BYTES >> 20} MiB a /metrics page may have")
            try:
                body = _read_capped(resp, MAX_BODY_BYTES)
                if body is None:
                    raise BadBodyFault(f"{where} sent more than {MAX_BODY_BYTES >> 20} MiB; "
                                       "not a /metrics page")
                if time.monotonic() > deadline:
                    raise _Retryable(TimeoutFault(f"{where} did not finish its answer within "
                                                  f"--timeout {opt.timeout:g} s"))
            except requests.exceptions.RequestException as err:
                if isinstance(err, requests.exceptions.Timeout) or "timed out" in str(err).lower():
                    raise _Retryable(TimeoutFault(f"{where} stalled mid-answer beyond --timeout "
                                                  f"{opt.timeout:g} s")) from None
                raise _Retryable(ConnectionFault(f"{where} broke the connection mid-answer")) from None
            # The exposition format is UTF-8; requests would assume ISO-8859-1 for a text/plain
            # answer that names no charset, so only an explicit charset overrides UTF-8.
            ctype_header = resp.headers.get("Content-Type") or ""
            encoding = (resp.encoding or "utf-8") if "charset" in ctype_header.lower() else "utf-8"
            try:
                text = body.decode(encoding, errors="strict")
            except (UnicodeDecodeError, LookupError):
                raise BadBodyFault(f"{where} sent bytes that are not text (not Prometheus metrics)") \
                    from None
            return text, resp.headers.get("Content-Type")

    # ------------------------------------------------------------------ with retries
    def scrape(self) -> Scrape:
        """One scrape, retried on transient faults; raises the last fault when all attempts fail."""
        opt = self.options
        reasons: list[str] = []
        attempts = 1 + opt.retries
        for i in range(attempts):
            try:
                text, ctype = self._attempt()
                when = self._clock.now()
                try:
                    expo = self._parse(text, ctype)
                except BadBodyFault as err:
                    raise BadBodyFault(f"{opt.display_url}: {err.message}") from None
                return Scrape(when, text, expo, i + 1, tuple(reasons))
            except _Retryable as r:
                reasons.append(self._clean(r.fault.message))
                if i + 1 < attempts:
                    self._sleep(min(opt.backoff * 2 ** i, MAX_BACKOFF_SECONDS))
                    continue
                fault = r.fault
                more = f" ({attempts} attempts)" if attempts > 1 else ""
                raise type(fault)(self._clean(fault.message) + more) from None
            except ObserveError as err:
                raise type(err)(self._clean(err.message)) from None
        raise AssertionError("unreachable")  # pragma: no cover

    def _clean(self, message: str) -> str:
        return scrub(message)

    def get_json(self, path: str) -> Any:
        """Best-effort GET of another path on the same server (``/version``): at most
        :data:`~spectune.base.limits.MAX_PROBE_BYTES` within min(--timeout, 3 s), whole request
        included; None on any failure."""
        import requests

        parts = urlsplit(self.options.url)
        url = urlunsplit((parts.scheme, parts.netloc, path, "", ""))
        verify: bool | str = self.options.ca_bundle or not self.options.insecure
        seconds = min(self.options.timeout, 3.0)

        def work(box: dict[str, Any]) -> bytes | None:
            resp = self._session.get(url, timeout=seconds, verify=verify, stream=True,
                                     headers={"Accept": "application/json"})
            box["resp"] = resp
            with resp:
                return _read_capped(resp, MAX_PROBE_BYTES) if resp.status_code == 200 else None

        try:
            body = self._guarded(work, seconds)
            return parse_json(body.decode("utf-8")) if body is not None else None
        except (_Deadline, requests.exceptions.RequestException, ObserveError, ValueError):
            return None  # a refused redirect too; JsonProblem and bad UTF-8 are ValueErrors


class _Deadline(Exception):
    """A guarded request did not finish in time."""


def _read_capped(resp: Any, cap: int) -> bytes | None:
    """The body of a streamed response, or None once it passes ``cap`` bytes (the rest is
    never read)."""
    chunks: list[bytes] = []
    size = 0
    for chunk in resp.iter_content(chunk_size=65536):
        chunks.append(chunk)
        size += len(chunk)
        if size > cap:
            return None
    return b"".join(chunks)


def _shut(resp: Any) -> None:
    """Best effort: shut the socket under a streamed ``requests`` response so that a worker
    blocked reading it wakes up (urllib3 2.x holds it at ``raw._connection.sock``, the
    http.client response at ``raw._fp.fp.raw._sock``)."""
    if resp is None:
        return
    raw = getattr(resp, "raw", None)
    for path in (("_connection", "sock"), ("_fp", "fp", "raw", "_sock")):
        obj: Any = raw
        for attr in path:
            obj = getattr(obj, attr, None)
        if isinstance(obj, socket.socket):
            with contextlib.suppress(OSError):
                obj.shutdown(socket.SHUT_RDWR)
            return


def _tls_reason(err: BaseException) -> str:
    text = " ".join(str(e) for e in _chain(err))
    for needle, say in (("CERTIFICATE_VERIFY_FAILED", "certificate verification failed"),
                        ("certificate verify failed", "certificate verification failed"),
                        ("WRONG_VERSION_NUMBER", "the server does not speak TLS on that port"),
                        ("wrong version number", "the server does not speak TLS on that port"),
                        ("hostname mismatch", "certificate does not match the host name"),
                        ("doesn't match", "certificate does not match the host name")):
        if needle in text:
            return say
    return "handshake failed"
