"""No credential reaches the terminal, in any encoding: the one gate for every network path.

Whatever a server sends back (a reason phrase, a body fragment quoted by a parser, a
Prometheus API error, a label value, a version string, a redirect target) and every URL
spectune prints passes through :func:`scrub` before it reaches a message or a document.

Two kinds of redaction, both replacing with ``***``:

* **the secrets this process was given** (:func:`remember`, called by every HTTP client
  spectune builds): the bearer token, the password and ``user:password`` of a URL, the
  value of a ``token=``-like query parameter -- each plain, URL-encoded (either case),
  hex (either case) and base64 (standard and URL-safe, at each of the three alignments it
  can take inside a longer encoded text, so ``Basic dXNlcjpTRUtSRVQ=`` and the base64 of
  ``Bearer TOKEN`` both lose it);
* **anything that looks like a credential**: URL userinfo (``//user:pass@``),
  ``Basic xxx`` / ``Bearer xxx``, ``Authorization: ...``, and the value after ``token=``,
  ``access_token=``, ``password=`` (and the like) in a query string or a JSON text.

Text is scrubbed *before* it is cut to length, so that a truncated quote cannot keep half a
secret (:func:`clip`). Secrets shorter than :data:`MIN_SECRET_CHARS` are only removed where
their place says what they are (userinfo, ``Basic``, ``token=``): four characters is the
least that cannot blank ordinary words out of a message.

The CLI's last gate (:func:`gate`, :func:`gate_doc`) scrubs every error, note and document
once a network client ran in the process (:func:`active`), so text that reached a message
by a path not listed above is still covered.

Redirects (:func:`guard_redirects`): a redirect to another origin (where ``requests`` would
strip the ``Authorization`` header) is refused, naming the host it pointed to, so that no
credential -- a token in the URL included -- goes anywhere but the server the user named,
and no answer comes from elsewhere; so is a redirect to something that is not an http(s) URL.
A redirect within the server is followed with the credentials.
"""

from __future__ import annotations

import base64
import re
from typing import Any
from urllib.parse import quote, quote_plus, unquote, urljoin, urlsplit, urlunsplit

from spectune.base.errors import HTTPStatusFault

MASK = "***"
MIN_SECRET_CHARS = 4
#: query / JSON keys whose value is a credential (lower case)
SECRET_KEYS = ("access_token", "id_token", "refresh_token", "auth_token", "private_token", "token",
               "api_key", "apikey", "api-key", "client_secret", "secret", "password", "passwd", "pwd",
               "x-amz-signature", "x-goog-signature", "signature", "sig")

_USERINFO_ANY = re.compile(r"(?i)\b([a-z][a-z0-9+.\-]*://)[^\s/?#@]*@")  # dropped, as redact_url does
_HEADER = re.compile(r"(?i)\b((?:proxy-)?authorization\"?\s*[:=])(?!\s*\"?\*\*\*)(\s*\"?)[^\"\r\n]*")
# Basic/Bearer credentials: 6+ characters with a digit, capital or symbol (not "bearer token")
_SCHEME = re.compile(r"\b((?i:basic|bearer))\s+(?=[A-Za-z0-9._~+/-]{6})"
                     r"(?=[A-Za-z0-9._~+/-]*[0-9A-Z._~+/-])[A-Za-z0-9._~+/-]+=*")
_PARAM = re.compile(r"(?<![A-Za-z0-9_-])([A-Za-z0-9_-]+)=([^&\s#\"'<>]+)")  # key=value, any key
_JSON = re.compile(r"(\"([A-Za-z0-9_-]+)\"\s*:\s*\")([^\"]*)")  # "key": "value"
_B64_TAIL = re.compile(r"\*\*\*[A-Za-z0-9+/_-]{0,2}=+")
_CONTROL = re.compile(r"[\x00-\x1f\x7f-\x9f]")

_secrets: set[str] = set()
_variants: list[str] = []  # every encoding of every secret, longest first
_active = {"on": False}


# --------------------------------------------------------------------------- the secrets
def remember(*secrets: str | None) -> None:
    """Note the secrets this process was given (None and empty are skipped) and that it talks
    to a server: from now on :func:`gate` scrubs every message and document."""
    _active["on"] = True
    new = {s for s in secrets if s and len(s) >= MIN_SECRET_CHARS} - _secrets
    if not new:
        return
    _secrets.update(new)
    found = set(_variants)
    for s in new:
        found.update(v for v in _encodings(s) if len(v) >= MIN_SECRET_CHARS)
    _variants[:] = sorted(found, key=len, reverse=True)


def forget() -> None:
    """Forget every remembered secret and that a client ran (for tests of one process)."""
    _secrets.clear()
    _variants.clear()
    _active["on"] = False


def active() -> bool:
    """Whether a network client ran in this process (the CLI then scrubs all it prints)."""
    return _active["on"]


def _encodings(secret: str) -> set[str]:
    """``secret`` plain, URL-encoded, hex and base64 (the parts of the base64 of any text
    holding it that depend on it alone, at its three alignments)."""
    raw = secret.encode("utf-8", errors="surrogatepass")
    out = {secret, quote(secret, safe=""), quote(secret), quote_plus(secret)}
    out |= {re.sub(r"%[0-9A-F]{2}", lambda m: m.group(0).lower(), v) for v in list(out)}
    out |= {raw.hex(), raw.hex().upper()}
    n = len(raw)
    for k in range(3):  # k bytes before the secret in the encoded text
        enc = base64.b64encode(b"\0" * k + raw).decode("ascii")
        first, last = -(-8 * k // 6), 8 * (k + n) // 6  # characters that depend on the secret only
        part = enc[first:last]
        out |= {part, part.translate(str.maketrans("+/", "-_"))}
    return out


def credentials_in_url(url: str) -> tuple[str, ...]:
    """The secrets a URL carries: its password and ``user:password`` (as written and
    decoded) and the values of ``token=``-like query parameters."""
    try:
        parts = urlsplit(url)
    except ValueError:
        return ()
    found: list[str] = []
    netloc = parts.netloc
    if "@" in netloc:
        userinfo = netloc.rpartition("@")[0]
        user, _, password = userinfo.partition(":")
        for text in (password, userinfo, unquote(password), f"{unquote(user)}:{unquote(password)}"):
            if password and text:
                found.append(text)
        if not password and user:  # a token given as the user name alone
            found += [user, unquote(user)]
    for pair in parts.query.split("&"):
        key, sep, value = pair.partition("=")
        if sep and value and unquote(key).lower() in SECRET_KEYS:
            found += [value, unquote(value)]
    return tuple(found)


# --------------------------------------------------------------------------- scrubbing
def scrub(text: str) -> str:
    """``text`` without any secret :func:`remember` was given (in any encoding) and without
    anything that looks like a credential."""
    hit = False
    for v in _variants:
        if v in text:
            text, hit = text.replace(v, MASK), True
    if hit:  # the last base64 character or two of a masked secret, and its padding
        text = _B64_TAIL.sub(MASK, text)
    return _looks_like_credentials(text)


def _looks_like_credentials(text: str) -> str:
    """``text`` without userinfo, an Authorization header's value, Basic/Bearer credentials
    and the values of :data:`SECRET_KEYS`. Each pattern runs only when the text holds what
    it needs (a document has many strings and most hold nothing)."""
    low = text.lower()
    if "@" in text:
        text = _USERINFO_ANY.sub(r"\1", text)
    if "authorization" in low:
        text = _HEADER.sub(rf"\1\2{MASK}", text)
    if "basic" in low or "bearer" in low:
        text = _SCHEME.sub(rf"\1 {MASK}", text)
    if "=" in text:
        text = _PARAM.sub(lambda m: f"{m[1]}={MASK}" if m[1].lower() in SECRET_KEYS else m[0], text)
    if '"' in text and ":" in text:
        text = _JSON.sub(lambda m: f"{m[1]}{MASK}" if m[2].lower() in SECRET_KEYS else m[0], text)
    return text


def clip(text: str, limit: int) -> str:
    """``text`` scrubbed, then cut to ``limit`` characters (``...`` marks a cut)."""
    text = scrub(text)
    return text if len(text) <= limit else text[:max(0, limit - 3)] + "..."


def server_text(text: str | None, limit: int = 200) -> str:
    """What a server sent, fit for one line: scrubbed, control characters (line breaks,
    terminal escapes) shown as ``?``, cut to ``limit`` characters."""
    return clip(_CONTROL.sub("?", scrub(text or "")).strip(), limit)


def gate(text: str) -> str:
    """The CLI's last gate: ``text`` scrubbed once a network client ran, else as it is."""
    return scrub(text) if _active["on"] else text


def gate_doc(doc: Any) -> Any:
    """Every string (keys included) of a document scrubbed once a network client ran; numbers
    are never touched."""
    if not _active["on"]:
        return doc
    return _scrub_doc(doc)


def _scrub_doc(value: Any, seen: dict[str, str] | None = None) -> Any:
    seen = {} if seen is None else seen  # a document repeats its strings (keys, notes, labels)
    if isinstance(value, str):
        if value not in seen:
            seen[value] = scrub(value)
        return seen[value]
    if isinstance(value, dict):
        return {_scrub_doc(k, seen): _scrub_doc(v, seen) for k, v in value.items()}
    if isinstance(value, list):
        return [_scrub_doc(v, seen) for v in value]
    if isinstance(value, tuple):
        return tuple(_scrub_doc(v, seen) for v in value)
    return value


def redact_url(url: str) -> str:
    """The URL for messages, documents and ``repr``: ``user:password@`` dropped, the value of
    a ``token=``-like query parameter replaced by ``***``, known secrets scrubbed.

    Also for text that does not parse as a URL: whatever sits between ``//`` and the last
    ``@`` before the path is dropped."""
    try:
        parts = urlsplit(url)
    except ValueError:
        return scrub(_USERINFO.sub("//", url, count=1))
    if "@" in parts.netloc:
        netloc = parts.netloc.rpartition("@")[2]  # host[:port] exactly as written ([::1] stays bracketed)
        url = urlunsplit((parts.scheme, netloc, parts.path, parts.query, parts.fragment))
    return scrub(url)


_USERINFO = re.compile(r"//[^/?#]*@")


# --------------------------------------------------------------------------- redirects
def origin(url: str) -> str:
    """``scheme://host[:port]`` of ``url``, without userinfo, path or query, scrubbed."""
    try:
        parts = urlsplit(url)
        netloc = parts.netloc.rpartition("@")[2]
        return server_text(f"{parts.scheme}://{netloc}", 120) if parts.scheme else "(no host)"
    except ValueError:
        return "(an invalid URL)"


class CrossHostRedirect(HTTPStatusFault):
    """A redirect spectune does not follow: to another host, or to a URL that is not
    http(s)://host[:port]."""


def guard_redirects(session: Any, where: str) -> None:
    """Check each redirect before ``requests`` follows it; refused as
    :class:`CrossHostRedirect` (exit 4), naming where it pointed (scheme, host and port only):

    * to another origin: exactly where ``requests`` would drop the Authorization header
      (another host, port or scheme, except http->https on default ports). A token in the
      URL it would send anyway, and the answer would come from a server the user did not
      name: spectune reads only the server it was given;
    * to a URL without an http(s) scheme, a host or a valid port (``requests`` would fail on
      it with a message blaming the URL the user gave, or with an internal error)."""

    def check_redirect(resp: Any, *args: Any, **kwargs: Any) -> Any:
        target = session.get_redirect_target(resp)
        if target is None:
            return resp
        said = f"{where} answered HTTP {resp.status_code}, a redirect to"
        try:
            new = urljoin(resp.url, target)
            parts = urlsplit(new)
            parts.port  # noqa: B018 - raises ValueError on a bad port
            usable = parts.scheme in ("http", "https") and bool(parts.hostname)
        except ValueError:
            usable, new = False, ""
        if not usable:
            resp.close()
            raise CrossHostRedirect(f"{said} {origin(new) if new else 'an invalid URL'}, which is "
                                    "not an http(s) URL spectune can follow")
        if session.should_strip_auth(resp.url, new):
            resp.close()
            raise CrossHostRedirect(f"{said} another host, {origin(new)}: not followed (spectune "
                                    "reads only the server it is given and sends credentials nowhere "
                                    "else); give that URL if you trust it")
        return resp

    session.hooks["response"].append(check_redirect)


def protect(session: Any, url: str, token: str | None, where: str) -> None:
    """What every HTTP client of spectune does with its ``requests`` session: remember the
    token and the URL's credentials (:func:`remember`), and check every redirect
    (:func:`guard_redirects`)."""
    remember(token, *credentials_in_url(url))
    guard_redirects(session, where)
