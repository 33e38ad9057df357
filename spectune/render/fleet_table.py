"""Human tables of the fleet documents: ``FleetReport`` (``spectune fleet`` / ``recommend
--prometheus``) and ``CheckSet`` (``spectune check DIR --profiles MAP``); named in
:data:`spectune.render.formats.TABLES`."""

from __future__ import annotations

from spectune.documents.envelope import Document
from spectune.render.formats import grid, render


def _gammas(pairs: list[dict[str, int]]) -> str:
    """``3`` when one gamma serves every batch size, else ``b1: 3, b8: 2``."""
    values = {p["gamma"] for p in pairs}
    if len(values) == 1:
        return str(values.pop())
    return ", ".join(f"b{p['batch']}: {p['gamma']}" for p in pairs)


def fleet_report_table(doc: Document, fmt: str) -> str:
    """Summary across deployments, then each deployment's gamma table."""
    src = doc["source"]
    head = (f"Prometheus {src['prometheus']} {src.get('selector') or ''} window {src['window_seconds']:g} s "
            f"ending {src['end']}, grouped by {', '.join(src['by'])}")
    rows = []
    for g in doc["groups"]:
        cur = g["current"]
        mix = ", ".join(f"{m['batch']}: {m['weight']:.0%}" for m in g["batch_mix"])
        rows.append([", ".join(f"{k}={v}" for k, v in g["labels"].items()), g["profile"],
                     "n/a" if cur is None else _gammas(cur["gamma"]),
                     _gammas(g["recommended"]["gamma"]),
                     "n/a" if cur is None else f"{cur['speedup']:.3f}x",
                     f"{g['recommended']['speedup']:.3f}x",
                     "n/a" if g["gain"] is None else f"{g['gain']:+.1%}",
                     ", ".join(f"{a:.2f}" for a in g["acceptance"]["conditional"]), mix])
    out = [f"**{head}**" if fmt == "markdown" else head, "",
           grid(rows, ["deployment", "profile", "current gamma", "recommended gamma", "speedup now",
                       "speedup rec.", "gain", "acceptance a_i", "batch mix"], fmt)]
    for g in doc["groups"]:
        title = ", ".join(f"{k}={v}" for k, v in g["labels"].items())
        out.append(f"## {title}" if fmt == "markdown" else f"== {title} ==")
        out.append(render(g["recommendation"], fmt))
    for n in doc.get("notes") or []:
        out.append(f"note: {n}")
    return "\n".join(out) + "\n"


def check_set_table(doc: Document, fmt: str) -> str:
    """Each manifest's report under its name, then the summary."""
    out = []
    for c in doc["checks"]:
        title = f"{c['manifest']} (profile {c['profile']})"
        out.append(f"## {title}" if fmt == "markdown" else f"== {title} ==")
        out.append(render(c["report"], fmt))
    out.append(f"{doc['verdict'].upper()}: {doc['summary']}")
    return "\n".join(out) + "\n"
