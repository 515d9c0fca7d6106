"""Rows of spotroute's CSV data files: `# source` comment lines, a header, line-numbered errors."""

from __future__ import annotations

import csv
from collections.abc import Iterator, Sequence

from router.core.errors import BadInput


def csv_rows(
    text: str, name: str, columns: Sequence[str], *, optional: str = ""
) -> Iterator[tuple[int, dict[str, str]]]:
    """(line number, row) for each data row; a bad header or row raises BadInput naming the line.

    Blank lines and lines starting with `#` are skipped. The header must hold every one of
    `columns` (`optional` names extra columns the error message mentions as allowed).
    """
    header: list[str] | None = None
    for number, line in enumerate(text.splitlines(), start=1):
        if not line.strip() or line.lstrip().startswith("#"):
            continue
        cells = [cell.strip() for cell in next(csv.reader([line]))]
        if header is None:
            missing = [c for c in columns if c not in cells]
            if missing:
                raise BadInput(
                    f"{name} line {number}: header lacks {', '.join(missing)} — "
                    f"the columns are {','.join(columns)}{optional}"
                )
            header = cells
            continue
        if len(cells) != len(header):
            raise BadInput(
                f"{name} line {number}: {len(cells)} fields, the header has {len(header)} — "
                "fix the row (quote fields that contain commas)"
            )
        yield number, dict(zip(header, cells, strict=True))
    if header is None:
        raise BadInput(f"{name}: no header row — the columns are {','.join(columns)}{optional}")
