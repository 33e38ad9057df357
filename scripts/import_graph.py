#!/usr/bin/env python3
"""Picture of spectune's import graph (read with ``ast`` by tests/test_architecture.py).

    python scripts/import_graph.py          # layers: each module above everything it imports
    python scripts/import_graph.py --dot    # Graphviz: ... | dot -Tsvg > imports.svg
    python scripts/import_graph.py --floors # the floors (docs/architecture.md) and the edges between them

Layer 0 imports no spectune module; a module's layer is one more than the highest layer it
imports. Modules on a cycle have no layer and are listed with the cycle.
"""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))

from test_architecture import FLOORS, find_cycle, floor, graph


def layers(g: dict[str, dict[str, object]]) -> dict[str, int]:
    level: dict[str, int] = {}
    changed = True
    while changed:
        changed = False
        for m, deps in g.items():
            if m not in level and all(d in level for d in deps):
                level[m] = 1 + max((level[d] for d in deps), default=-1)
                changed = True
    return level


def main() -> None:
    g = graph()
    if "--dot" in sys.argv:
        print("digraph spectune {\n  rankdir=BT; node [shape=box, fontsize=10];")
        for m, deps in sorted(g.items()):
            for d in sorted(deps):
                print(f'  "{m}" -> "{d}";')
        print("}")
        return
    if "--floors" in sys.argv:
        for f in reversed(FLOORS):
            mods = sorted(m for m in g if floor(m) == f)
            below: dict[str, int] = {}
            for m in mods:
                for d in g[m]:
                    if floor(d) != f:
                        below[floor(d)] = below.get(floor(d), 0) + 1
            order = sorted(below.items(), key=lambda kv: FLOORS.index(kv[0]))
            reach = ", ".join(f"{k} {v}" for k, v in order)
            print(f"{f:<10} {len(mods):>3} modules; imports into: {reach or 'nothing'}")
        return
    level = layers(g)
    for n in range(max(level.values(), default=-1), -1, -1):
        names = sorted(m.removeprefix("spectune.") or "spectune (the API face)"
                       for m, lv in level.items() if lv == n)
        print(f"{n:>2}  " + ", ".join(names))
    cycle = find_cycle(g)
    if cycle:
        print("cycle: " + " -> ".join(f"{e.source} ({e.where()})" for e in cycle) + f" -> {cycle[0].source}")
    print(f"{len(g)} modules, {sum(len(d) for d in g.values())} import edges, "
          f"{'a cycle' if cycle else 'no cycle'}")


if __name__ == "__main__":
    main()
