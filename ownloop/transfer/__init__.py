"""Bringing runs in and handing them out: harness result folders and Parquet.

``import_dir(store, "results/", "uitars")`` turns result folders written by a plain harness into
events; ``export_run(store, run_id, "session-dir", "out/")`` writes a run back in that layout, and
``export_run(store, run_id, "parquet", "out/")`` writes every SQL view as a Parquet file.
"""

from __future__ import annotations

from ownloop.transfer.batches import ExportResult
from ownloop.transfer.exporter import FORMATS, export_run, export_session_dirs
from ownloop.transfer.importer import ImportResult, import_dir

__all__ = [
    "FORMATS",
    "ExportResult",
    "ImportResult",
    "export_run",
    "export_session_dirs",
    "import_dir",
]
