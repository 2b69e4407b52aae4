"""Run records to store rows and back: known columns typed, every other field in one JSON object per row.

The schema (:mod:`perfmodel.schema`) owns the columns, their kinds and their coercion; this module only moves
values between a frame and the rows of a table. A field the schema does not know keeps its exact type and value:
text, integers of any size, floats (``repr`` precision, infinities included), booleans and bytes are written into
the row's JSON object and read back as they were written, one value at a time, so an unknown column whose values
change type between appends (``1``, then ``1.5``) keeps each run's own value (``1`` stays the integer ``1``).
A missing value (None, NaN, ``pd.NA``) is left out of the object. Other values (lists, dicts, timestamps) are
refused with a :class:`~perfmodel.exceptions.SchemaError` naming the column: convert them to text first.
"""

from __future__ import annotations

import base64
import json
import uuid
from collections.abc import Iterable, Mapping

import numpy as np
import pandas as pd

from ..exceptions import SchemaError
from ..schema import COLUMNS

__all__ = ["KINDS", "as_frame", "with_run_ids", "column_values", "encode_extras", "decode_extras",
           "known_array", "BYTES_TAG"]

#: Kind of each known column (``str``, ``int`` or ``float``), as the schema defines it.
KINDS = {c.name: c.kind for c in COLUMNS}
#: How a bytes value is written in a row's JSON object: ``{"$bytes": "<base64>"}``.
BYTES_TAG = "$bytes"
_INT64 = 2**63


def as_frame(records, where: str = "append_runs") -> pd.DataFrame:
    """Records as a frame: a DataFrame as it is, one mapping as one row, an iterable of mappings as rows.

    Parameters
    ----------
    records : dict, iterable of dict, or pandas.DataFrame
        The runs.
    where : str, default="append_runs"
        The caller's name, for the message.

    Returns
    -------
    pandas.DataFrame
        One row per record.

    Raises
    ------
    TypeError
        For anything else.
    """
    if isinstance(records, pd.DataFrame):
        return records
    if isinstance(records, Mapping):
        return pd.DataFrame([dict(records)])
    if isinstance(records, Iterable) and not isinstance(records, (str, bytes)):
        return pd.DataFrame([dict(r) for r in records])
    raise TypeError(f"{where} expects a record dict, a list of dicts or a DataFrame. Got {type(records).__name__}.")


def with_run_ids(new: pd.DataFrame) -> pd.DataFrame:
    """Give every record without a ``run_id`` a unique one (not ``row-<i>``, which would repeat across appends).

    Parameters
    ----------
    new : pandas.DataFrame
        The records (not changed).

    Returns
    -------
    pandas.DataFrame
        ``new``, or a copy whose missing run ids are random 12-digit hex strings.
    """
    missing = new["run_id"].isna().to_numpy() if "run_id" in new.columns else np.ones(len(new), dtype=bool)
    if not missing.any():
        return new
    new = new.copy()
    ids = pd.array([uuid.uuid4().hex[:12] if m else None for m in missing], dtype="string")
    if "run_id" in new.columns:
        new["run_id"] = new["run_id"].astype("string").mask(missing, ids)
    else:
        new.insert(0, "run_id", ids)
    return new


def column_values(col: pd.Series, kind: str) -> list:
    """A known column (already coerced to its schema dtype) as Python values for the database, None = missing."""
    if kind == "float":
        return [None if v != v else v for v in col.to_numpy(dtype=float, na_value=np.nan).tolist()]
    return col.to_numpy(dtype=object, na_value=None).tolist()


def known_array(values: list, kind: str):
    """The column a list of database values (None = missing) makes, in the schema's dtype for ``kind``."""
    if kind == "float":
        return np.array(values, dtype=float)  # None -> NaN
    if kind == "int":
        return pd.array(values, dtype="Int64")
    return _text_array(values)


def _text_array(values: list):
    """``string`` column from str/None values; built through Arrow directly where pandas keeps text in Arrow."""
    if pd.StringDtype().storage == "pyarrow":
        try:
            import pyarrow as pa

            return pd.arrays.ArrowStringArray(pa.chunked_array([pa.array(values, pa.large_string())]))
        except (ImportError, TypeError, ValueError):
            pass
    return pd.array(values, dtype="string")


_MISSING = object()


def _encode(name: str, v):
    if v is None or v is pd.NA or v is pd.NaT:
        return _MISSING
    if isinstance(v, (bool, np.bool_)):
        return bool(v)
    if isinstance(v, (int, np.integer)):
        return int(v)
    if isinstance(v, (float, np.floating)):
        f = float(v)
        return _MISSING if f != f else f
    if isinstance(v, str):
        return v
    if isinstance(v, (bytes, bytearray, memoryview)):
        return {BYTES_TAG: base64.b64encode(bytes(v)).decode("ascii")}
    raise SchemaError(f"Column {name!r} holds a {type(v).__name__} value ({str(v)[:40]!r}); a run history keeps "
                      "text, numbers, booleans and bytes in the columns it does not know. Convert it to text "
                      "(e.g. json.dumps) first.")


def _series_values(name: str, col: pd.Series) -> list:
    dtype = col.dtype
    if dtype.kind in "mM" or isinstance(dtype, pd.DatetimeTZDtype):
        raise SchemaError(f"Column {name!r} holds {dtype} values; a run history keeps text, numbers, booleans and "
                          "bytes in the columns it does not know. Store them as text (ISO-8601) or as seconds.")
    if pd.api.types.is_complex_dtype(dtype):
        raise SchemaError(f"Column {name!r} holds complex numbers, which a run history cannot store.")
    return col.to_numpy(dtype=object).tolist()


def encode_extras(frame: pd.DataFrame, names: list) -> list:
    """One JSON text per row with the row's values of the unknown columns ``names`` (None: the row has none).

    Raises
    ------
    SchemaError
        For a value of a type a history does not store (naming the column).
    """
    if not names:
        return [None] * len(frame)
    columns = []
    for name in names:
        values = _series_values(name, frame[name])
        columns.append([_encode(name, v) for v in values])
    out = []
    for row in zip(*columns):
        obj = {n: v for n, v in zip(names, row) if v is not _MISSING}
        # ensure_ascii: lone surrogates and NUL characters travel as \\u escapes and come back exactly
        out.append(json.dumps(obj, ensure_ascii=True, allow_nan=True, separators=(",", ":")) if obj else None)
    return out


def _decode(v):
    if isinstance(v, dict):
        if set(v) == {BYTES_TAG}:
            return base64.b64decode(v[BYTES_TAG])
        raise SchemaError(f"A run's stored field holds an object this version cannot read: {str(v)[:60]!r}.")
    return v


def _unknown_array(values: list):
    present = [v for v in values if v is not None]
    types = {type(v) for v in present}
    if not present or types == {str}:
        return _text_array(values)
    if types == {bool}:
        return pd.array(values, dtype="boolean")
    if types == {int} and all(-_INT64 <= v < _INT64 for v in present):
        return pd.array(values, dtype="Int64")
    if types == {float}:
        return np.array(values, dtype=float)
    out = np.empty(len(values), dtype=object)  # several types, bytes, or integers beyond int64: each as it was
    out[:] = values
    return out


def decode_extras(texts: list, names: list) -> dict:
    """The unknown columns ``names`` from the rows' JSON texts, each value with the type it was written with.

    Returns
    -------
    dict
        Column name -> array: ``string``, ``Int64``, ``boolean`` or float64 when every value has that type,
        else an object array holding each value as it was written (None where missing).
    """
    columns = {name: [None] * len(texts) for name in names}
    for i, text in enumerate(texts):
        if text is None:
            continue
        for name, v in json.loads(text).items():
            col = columns.get(name)
            if col is not None:
                col[i] = _decode(v)
    return {name: _unknown_array(values) for name, values in columns.items()}

