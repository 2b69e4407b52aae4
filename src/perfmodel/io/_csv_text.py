"""The CSV text of a run history: reading it field by field as text, and writing it with per-row checks.

:mod:`perfmodel.io` reads and writes CSV histories through these (its module docstring describes the format:
round-trip fidelity, the ``row_crc32`` row checks, unknown columns); nothing here touches a file's lock or
writes a file.
"""

from __future__ import annotations

import csv
import os
import re
import zlib
from pathlib import Path

import numpy as np
import pandas as pd

from ..exceptions import SchemaError
from ..schema import COLUMNS

__all__ = ["ROW_CHECK", "row_check", "read_csv_text", "csv_bytes"]

#: Name of the per-row check column perfmodel writes last in every CSV row (see :mod:`perfmodel.io`).
ROW_CHECK = "row_crc32"
_SEP = "\x1f"


def row_check(fields) -> str:
    """The ``row_crc32`` value of a row.

    Parameters
    ----------
    fields : iterable of str
        The row's other fields, as the text written, in file order.

    Returns
    -------
    str
        The CRC-32 of the fields joined by ``\\x1f`` and encoded as UTF-8, as a decimal integer.
    """
    return str(zlib.crc32(_SEP.join(fields).encode("utf-8", "surrogatepass")))


_INT_TEXT = re.compile(r"^-?(?:0|[1-9][0-9]*)$")
#: Longest CSV field read (the csv module's own default is 128 KiB, which refused a long ``error`` text).
_FIELD_LIMIT = 2**31 - 1


def _lossless_column(values: list) -> pd.Series:
    """An unknown CSV column: numbers when every non-empty value is written back as the same text, else text.

    Integers must be in canonical form (``"-0"``, ``"+1"`` and ``"007"`` stay text) and floats must be their own
    ``repr`` and not NaN (``"nan"`` would be written back as an empty field), so a rewrite changes nothing."""
    filled = [v for v in values if v != ""]
    if filled and all(_INT_TEXT.match(v) for v in filled):
        ints = [int(v) for v in filled]
        if all(-(2**62) < i < 2**62 and str(i) == v for i, v in zip(ints, filled)):
            return pd.array([int(v) if v != "" else None for v in values], dtype="Int64")
    if filled:
        try:
            floats = [float(v) for v in filled]
        except ValueError:
            floats = None
        if floats is not None and all(f == f and repr(f) == v for f, v in zip(floats, filled)):
            return pd.array([float(v) if v != "" else None for v in values], dtype="Float64").astype("float64")
    return pd.array([v if v != "" else None for v in values], dtype="string")


def _is_utf8(row: list) -> bool:
    try:
        _SEP.join(row).encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True




def _ends_with_newline(path: Path) -> bool:
    """Whether the file's last byte ends a line (an empty file counts as ending one)."""
    with open(path, "rb") as raw:
        raw.seek(0, os.SEEK_END)
        size = raw.tell()
        if size:
            raw.seek(size - 1)
            return raw.read(1) in (b"\n", b"\r")
        return True


def _check_header(path: Path, header: list) -> None:
    """Refuse a header with an empty, repeated or byte-order-marked column name."""
    seen: set = set()
    for i, name in enumerate(header):
        if name.strip() == "":
            raise SchemaError(f"Run history {str(path)!r}: column {i + 1} of the header has no name "
                              "(a trailing comma?).")
        if name in seen:
            raise SchemaError(f"Run history {str(path)!r}: the header names column {name!r} twice.")
        if name.startswith("\ufeff"):
            raise SchemaError(f"Run history {str(path)!r}: header name {name!r} starts with a byte-order "
                              "mark (a file saved with two BOMs?); remove it so the column keeps its name.")
        seen.add(name)


def _row_problem(row: list, n: int, check_at: int | None, recovering: bool) -> str:
    """Why a row of a header with ``n`` fields is bad ("" for a good row): its field count, its text (only
    when ``recovering``, where bytes that are not UTF-8 were read as lone surrogates) or its
    :data:`ROW_CHECK`."""
    why = ""
    if len(row) != n:
        hint = " (a trailing comma?)" if len(row) == n + 1 and row[-1] == "" else ""
        if check_at is not None and len(row) < n:
            hint = " (cut short?)"
        why = f"has {len(row)} fields but the header has {n}{hint}"
    elif recovering and not _is_utf8(row):
        why = "is not valid UTF-8 text (cut inside a character?)"
    elif check_at is not None and row[check_at] != "":
        others = row[:check_at] + row[check_at + 1:]
        if row[check_at] != row_check(others):
            why = (f"does not match its {ROW_CHECK} check (it was cut short or changed after it was "
                   f"written; if you edited the row on purpose, empty its {ROW_CHECK} cell)")
    return why


def _text_frame(header: list, rows: list) -> pd.DataFrame:
    """The rows as a frame: known columns as text ('' -> missing), unknown ones by
    :func:`_lossless_column`."""
    known = {c.name for c in COLUMNS}
    data = {}
    for j, name in enumerate(header):
        values = [r[j] for r in rows]
        if name in known:
            data[name] = pd.array([v if v != "" else None for v in values], dtype="string")
        else:
            data[name] = _lossless_column(values)
    return pd.DataFrame(data, columns=header) if data else pd.DataFrame(columns=header)


def read_csv_text(path: Path, *, skip_bad: list | None = None) -> pd.DataFrame:
    """Read a CSV history field by field, keeping every value as text ('' -> missing).

    Checks each row's field count and, where the file has a :data:`ROW_CHECK` column, each row's check (then
    drops the column). With ``skip_bad`` (a list), bad rows are skipped and ``(line, why, text)`` appended to it
    instead of raising; a last row of a file without row checks that has no line end is reported there too."""
    try:
        ends_with_newline = _ends_with_newline(path)
        # recovering: bytes that are not UTF-8 (a file cut inside a character) become lone surrogates, and their
        # row is dropped below
        errors = "strict" if skip_bad is None else "surrogateescape"
        csv.field_size_limit(_FIELD_LIMIT)  # the csv module's default refuses a field over 128 KiB
        with open(path, newline="", encoding="utf-8-sig", errors=errors) as fh:
            reader = csv.reader(fh, strict=skip_bad is None)
            try:
                header = next(reader)
            except StopIteration:
                raise SchemaError(f"Run history {str(path)!r} is empty (no header, no rows).") from None
            _check_header(path, header)
            n = len(header)
            check_at = header.index(ROW_CHECK) if ROW_CHECK in header else None
            rows: list = []
            last_line = 0
            for row in reader:
                if not row:  # a blank line
                    continue
                last_line = reader.line_num
                why = _row_problem(row, n, check_at, skip_bad is not None)
                if why:
                    if skip_bad is not None:
                        skip_bad.append((reader.line_num, why, ",".join(row)[:80]))
                        continue
                    raise SchemaError(
                        f"Run history {str(path)!r} cannot be parsed as CSV: line {reader.line_num} {why}. "
                        "perfmodel.io.recover_runs reads the other rows.")
                if check_at is not None:
                    del row[check_at]
                rows.append(row)
            if skip_bad is not None and check_at is None and rows and not ends_with_newline:
                skip_bad.append((last_line, "kept, but it has no line end: the file may have been cut inside "
                                 f"this row's last field, which a file without a {ROW_CHECK} column cannot "
                                 "check", ",".join(rows[-1])[:80]))
    except UnicodeDecodeError as exc:
        raise SchemaError(f"Run history {str(path)!r} is not UTF-8 text ({exc.reason} at byte {exc.start}).") from None
    except csv.Error as exc:
        raise SchemaError(f"Run history {str(path)!r} cannot be parsed as CSV: {exc} (line {reader.line_num}; "
                          "a file cut inside a quoted field?). perfmodel.io.recover_runs reads the other "
                          "rows.") from None
    if check_at is not None:
        del header[check_at]
    return _text_frame(header, rows)


def _quote(text: str) -> str:
    return '"' + text.replace('"', '""') + '"'


def _float_text(v) -> str:
    f = float(v)
    return "" if f != f else repr(f)


def _cell(name: str, v) -> tuple[str, bool]:
    """One value of an object/text column as ``(text, quoted)``."""
    if v is None or v is pd.NA or v is pd.NaT:
        return "", False
    if isinstance(v, str):
        return v, True
    if isinstance(v, (bool, np.bool_)):
        return str(bool(v)), False
    if isinstance(v, (int, np.integer)):
        return str(int(v)), False
    if isinstance(v, (float, np.floating)):
        return _float_text(v), False
    if isinstance(v, (bytes, bytearray, memoryview)):
        raise SchemaError(f"Column {name!r} holds binary (bytes) values, which a CSV history cannot store as "
                          "they are; store text (or use a .parquet history).")
    return str(v), True


def _column_cells(name: str, col: pd.Series) -> list[tuple[str, bool]]:
    dtype = col.dtype
    if pd.api.types.is_bool_dtype(dtype) and not col.isna().any():
        return [(str(bool(v)), False) for v in col.to_numpy()]
    if pd.api.types.is_integer_dtype(dtype):
        return [("", False) if v is pd.NA else (str(int(v)), False) for v in col.astype("Int64")]
    if pd.api.types.is_float_dtype(dtype):
        return [("" if v != v else repr(v), False) for v in col.to_numpy(dtype=float, na_value=np.nan).tolist()]
    return [_cell(name, v) for v in col.to_numpy(dtype=object)]


def csv_bytes(df: pd.DataFrame, *, checks: bool = True) -> bytes:
    """The CSV text of a history: text quoted, numbers bare (``repr`` precision), missing empty, and each row
    sealed with its :data:`ROW_CHECK` (a quoted ``'\\r'`` or ``','`` inside text cannot split a row); without
    ``checks``, a plain CSV (what :func:`export_history` writes)."""
    names = [str(c) for c in df.columns]
    cols = [_column_cells(name, df[c]) for name, c in zip(names, df.columns)]
    for name, cells in zip(names, cols):
        for text, _ in cells:
            try:
                text.encode("utf-8")
            except UnicodeEncodeError:
                raise SchemaError(f"Column {name!r} holds text that is not valid Unicode (lone surrogates).") from None
    lines = [",".join(_quote(n) for n in names + ([ROW_CHECK] if checks else []))]
    for row in zip(*cols) if cols else ():
        texts = [t for t, _ in row]
        lines.append(",".join(_quote(t) if q else t for t, q in row) + ("," + row_check(texts) if checks else ""))
    if not cols and checks:
        lines += [row_check([])] * len(df)
    return ("\n".join(lines) + "\n").encode("utf-8")
