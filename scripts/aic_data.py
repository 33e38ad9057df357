"""Shared by the dev scripts that read aiconfigurator-core's per-operation tables
(scripts/fit_kernels.py, scripts/fit_comm.py): the data folder argument and parquet rows."""

from __future__ import annotations

import sys
from pathlib import Path


def data_folder(argv: list[str], usage: str | None) -> Path | int:
    """The ``systems/data`` folder named by ``argv[0]``, or an exit code: 2 (usage printed)
    without arguments, 0 (quietly, one line on stderr) when the folder is absent."""
    if not argv:
        print(usage)
        return 2
    data = Path(argv[0])
    if not data.is_dir():
        print(f"no aiconfigurator data at {data}; nothing to fit", file=sys.stderr)
        return 0
    return data


def parquet_rows(path: Path | None) -> list[dict]:
    """Every row of a parquet table as a dict (none for ``None``); needs pyarrow."""
    if path is None:
        return []
    import pyarrow.parquet as pq
    return pq.read_table(path).to_pylist()
