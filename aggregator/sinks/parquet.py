"""An export of every window document as a Parquet file, in a directory that pandas, polars
and DuckDB read as one dataset (docs/aggregator.md, "Exports"):

    ROOT/<campaign>/window_unix=<window start, unix seconds>/part-0.parquet

One file per (campaign, window), holding the rows of `ldptel report NAME --window W --csv`
(parquet_export.window_table: every config and level of the window, typed alike in every
window). The campaign is a plain directory, not `campaign=<name>`: the rows already have a
`campaign` column, and pyarrow (so pandas) refuses a dataset whose partition key repeats a
column. A window without rows (not enough reports) has no file.

A write is atomic and idempotent: the table goes to a hidden temporary file beside the
target (readers skip names starting with "." and names not ending in .parquet), is synced,
then renamed over the target (os.replace, atomic on one filesystem). A reader sees the old
file or the new one, never a part; writing a window again replaces its file, so files are
never duplicated however often a window is delivered."""

from __future__ import annotations

import os
import tempfile
from pathlib import Path

from ldptel.aggregator.model import WindowDocument
from ldptel.aggregator.parquet_export import pyarrow, window_table

#: The one file of a window's directory.
PART = "part-0.parquet"
#: Temporary files of a write in progress (a crash may leave one; the next write removes it).
_TEMPORARY = (f".{PART}.", ".tmp")


class ParquetSink:
    """Writes each window's rows under `root` (created when first written to)."""

    def __init__(self, root: Path | str) -> None:
        pyarrow()  # ParquetUnavailableError at start, not at the first window
        self.root = Path(root).absolute()

    @property
    def name(self) -> str:
        return f"parquet:{self.root}"

    def path(self, campaign: str, window: int) -> Path:
        """Where the rows of a campaign's window are written."""
        return self.root / campaign / f"window_unix={window}" / PART

    def write(self, document: WindowDocument) -> None:
        table = window_table(document)
        target = self.path(document["campaign"], document["window"]["start_unix"])
        if table.num_rows == 0:
            target.unlink(missing_ok=True)
            return
        target.parent.mkdir(parents=True, exist_ok=True)
        prefix, suffix = _TEMPORARY
        for stale in target.parent.glob(f"{prefix}*{suffix}"):
            stale.unlink(missing_ok=True)  # left by a crash (one writer per window: its lock)
        fd, temporary = tempfile.mkstemp(prefix=prefix, suffix=suffix, dir=target.parent)
        try:
            with os.fdopen(fd, "wb") as out:
                pyarrow().parquet.write_table(table, out)
                out.flush()
                os.fsync(out.fileno())
            os.replace(temporary, target)
        except BaseException:
            Path(temporary).unlink(missing_ok=True)
            raise
        _sync_directory(target.parent)


def _sync_directory(path: Path) -> None:
    """Make the rename durable (POSIX: fsync the directory; not possible on Windows)."""
    if os.name != "posix":
        return
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)
