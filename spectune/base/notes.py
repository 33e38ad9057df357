"""The one sink for notes on stderr (``spectune: note: ...``): every command writes its
notes through :func:`note`, and ``-q`` / ``--quiet`` (accepted by every command, with this
one meaning) silences them. Warnings and errors are not notes: they always show.

No click here: ``import spectune`` must not import it.
"""

from __future__ import annotations

import sys
from collections.abc import Iterable

_state = {"quiet": False}


def set_quiet(on: bool) -> None:
    """Silence (True) or show (False) the notes from now on."""
    _state["quiet"] = bool(on)


def quiet() -> bool:
    return _state["quiet"]


def note(*texts: str) -> None:
    """Each text on stderr as ``spectune: note: TEXT``, unless quiet."""
    notes(texts)


def notes(texts: Iterable[str]) -> None:
    """Each of ``texts`` on stderr as ``spectune: note: TEXT``, unless quiet."""
    if _state["quiet"]:
        return
    for text in texts:
        print(f"spectune: note: {_gate(text)}", file=sys.stderr)


def warning(text: str) -> None:
    """``spectune: warning: TEXT`` on stderr, quiet or not (a warning may change the answer)."""
    print(f"spectune: warning: {_gate(text)}", file=sys.stderr)


def _gate(text: str) -> str:
    """``text`` through the secrets gate once a network client has run (it loads
    spectune.base.redact); commands that never touch the network do not import it."""
    redact = sys.modules.get("spectune.base.redact")
    return redact.gate(text) if redact is not None else text
