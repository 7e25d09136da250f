"""Plain-text tables for people: a header, a rule, aligned columns."""

from __future__ import annotations

from collections.abc import Sequence


def format_table(headers: Sequence[str], rows: Sequence[Sequence[str]]) -> str:
    """Columns padded to their widest cell; numbers (and '-') align right, text left."""
    widths = [max(len(str(c)) for c in column) for column in zip(headers, *rows, strict=True)]
    numeric = [
        all(_is_number(row[i]) for row in rows) if rows else False for i in range(len(headers))
    ]

    def line(cells: Sequence[str]) -> str:
        padded = (
            c.rjust(w) if right else c.ljust(w)
            for c, w, right in zip(cells, widths, numeric, strict=True)
        )
        return "  ".join(padded).rstrip()

    rule = "  ".join("-" * w for w in widths)
    return "\n".join([line(headers), rule, *(line(row) for row in rows)])


def _is_number(cell: str) -> bool:
    text = cell.replace(",", "").replace("%", "")
    if text in ("-", ""):
        return True
    try:
        float(text)
    except ValueError:
        return False
    return True
