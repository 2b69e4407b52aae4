"""Many queries as :func:`~perfmodel.predict.predict_many` reads them: each row filled in as
:func:`~perfmodel.predict.predict_training_time` fills in the same job (a named model's size, the precision, a
decoder's implied sequence length, a transformer job's default layout), in place, once per distinct row."""

from __future__ import annotations

import math
import warnings

import numpy as np
import pandas as pd

from .._rows import distinct_rows
from .._validation import row_label
from ..exceptions import ExtrapolationWarning, SchemaError, UnsupportedQueryError
from ..hardware import PRECISIONS, resolve_gpu_type
from ..layout import LayoutError, implied_micro_batch
from ..schema import step_global_batch
from ._job import SHAPE_NAMES, default_precision, dense_part, implied_sequence, is_given, query_layout_columns


# ---------------------------------------------------------------------------------------- given columns
def split_attention(q: pd.DataFrame, positions: np.ndarray) -> None:
    """Turn a queries' ``attention_flops_per_sample`` into the op split the mfu rule reads (``op_attention_flops``
    and ``op_matmul_flops``, the rest of ``flops_per_sample``), as in a model spec, in place; ``positions``: each
    row's 0-based place in the caller's queries, to name a refused one."""
    if "attention_flops_per_sample" not in q.columns:
        return
    both = [c for c in ("op_attention_flops", "op_matmul_flops") if c in q.columns]
    if both:
        raise ValueError(f"predict_many got 'attention_flops_per_sample' and {both[0]!r}: give the attention "
                         "FLOPs one way (the op columns, or attention_flops_per_sample with "
                         "flops_per_sample).")
    attn = pd.to_numeric(q.pop("attention_flops_per_sample"), errors="coerce").to_numpy(dtype=float)
    given = np.flatnonzero(~np.isnan(attn))
    wrong = given[~(np.isfinite(attn[given]) & (attn[given] >= 0))]
    if len(wrong):
        raise ValueError(f"predict_many: 'attention_flops_per_sample' must be a finite number >= 0 where "
                         f"given; {row_label(int(wrong[0]), positions + 1)} has {float(attn[wrong[0]])!r}.")
    fps = (pd.to_numeric(q["flops_per_sample"], errors="coerce").to_numpy(dtype=float)
           if "flops_per_sample" in q.columns else np.full(len(q), np.nan))
    dense = np.full(len(q), np.nan)
    dense[given] = dense_part(attn[given], fps[given], "predict_many's queries", positions[given] + 1)
    q["op_attention_flops"], q["op_matmul_flops"] = attn, dense


def resolve_query_devices(q: pd.DataFrame) -> None:
    """Make the ``gpu_type`` column the devices' canonical names (:func:`~perfmodel.hardware.resolve_gpu_type`),
    a categorical (no per-row string copies), in place."""
    if "gpu_type" not in q.columns:
        raise SchemaError("predict_many needs a 'gpu_type' column in the queries.")
    codes, uniq = pd.factorize(q["gpu_type"])
    if (codes < 0).any():
        raise SchemaError(f"predict_many: column 'gpu_type' is missing in {int((codes < 0).sum())} rows.")
    resolved = [resolve_gpu_type(str(g)) for g in uniq]
    names = list(dict.fromkeys(resolved))  # aliases may resolve to one device
    remap = np.asarray([names.index(r) for r in resolved])
    q["gpu_type"] = pd.Categorical.from_codes(remap[codes], categories=names)  # no per-row string copies


def fill_model_columns(q: pd.DataFrame, table: pd.DataFrame, positions: np.ndarray) -> None:
    """Give the rows that name a model of the history (the model ``table``) its size, family and op counts, in
    place: all of them from the table without a ``params`` column, else as :func:`_check_model_sizes` does."""
    if "params" not in q.columns:
        if "model" not in q.columns:
            raise SchemaError("predict_many needs a 'params' or a 'model' column in the queries.")
        unknown = sorted(set(map(str, pd.unique(q["model"]))) - set(table.index))
        if unknown:
            raise UnsupportedQueryError(f"predict_many: models not in the history: {', '.join(unknown[:5])}.")
        codes, uniq = pd.factorize(q["model"].astype(str))
        rows = table.loc[[str(u) for u in uniq]]
        for col in (c for c in rows.columns if c != "runs" and (c in ("params", "flops_per_sample")
                                                                or c not in q.columns)):
            q[col] = rows[col].to_numpy()[codes]
    elif "model" in q.columns:
        _check_model_sizes(q, table, positions)


def _check_model_sizes(q: pd.DataFrame, table: pd.DataFrame, positions: np.ndarray) -> None:
    """A row naming a model of the history gets that model's size, as :func:`predict_training_time` gives it: an
    empty ``params`` (and an empty ``flops_per_sample`` beside the model's own ``params``) is filled from the
    history; a different ``params`` is refused (it would predict the history's model, not that size). Text that
    is not a number is left for :func:`~perfmodel.schema.check_queries` to refuse."""
    names = q["model"].astype(str)
    known = names.isin(table.index).to_numpy()
    if not known.any():
        return
    hist = table.reindex(names)
    empty = q["params"].isna().to_numpy()
    given = pd.to_numeric(q["params"], errors="coerce").to_numpy(dtype=float)
    ref = hist["params"].to_numpy(dtype=float)
    clash = known & np.isfinite(given) & ~np.isclose(given, ref, rtol=1e-3)
    if clash.any():
        i = int(np.flatnonzero(clash)[0])
        n = int(clash.sum())
        raise ValueError(f"predict_many: row {int(positions[i]) + 1} (counting from 1) names model "
                         f"{names.iloc[i]!r}, which the history has with params {ref[i]:g}, but gives params "
                         f"{given[i]:g}. Leave 'params' empty to predict the history's model, or name the row "
                         f"something the history lacks to predict a model of that size ({n} "
                         f"row{'' if n == 1 else 's'} clash{'es' if n == 1 else ''}).")
    fill = known & empty
    own_size = known & (empty | (np.isfinite(given) & np.isclose(given, ref, rtol=1e-3)))
    if fill.any():  # only the empty cells: text that is not a number stays, for check_queries to name
        q["params"] = q["params"].mask(fill, ref)
    hist_fps = hist["flops_per_sample"].to_numpy(dtype=float)
    if "flops_per_sample" in q.columns:
        fps_empty = q["flops_per_sample"].isna().to_numpy()
        if (own_size & fps_empty).any():
            q["flops_per_sample"] = q["flops_per_sample"].mask(own_size & fps_empty, hist_fps)
    elif own_size.any():
        q["flops_per_sample"] = np.where(own_size, hist_fps, np.nan)
    # the model's family and op counts, as its runs had them, where the row does not give its own
    for col in (c for c in table.columns if c not in ("params", "flops_per_sample", "runs")):
        ref_col = hist[col].to_numpy()
        if col not in q.columns:
            if own_size.any() and pd.notna(ref_col[own_size]).any():
                q[col] = pd.Series(np.where(own_size, ref_col, None), index=q.index).astype(table[col].dtype)
            continue
        empty_cell = q[col].isna().to_numpy()
        if (own_size & empty_cell).any():
            q[col] = q[col].mask(own_size & empty_cell, pd.Series(ref_col, index=q.index))


def check_positive_columns(q: pd.DataFrame, positions: np.ndarray) -> None:
    """Refuse queries without ``params``, ``batch_size``, ``gpu_count`` and ``steps`` finite and positive."""
    for col in ("params", "batch_size", "gpu_count", "steps"):
        if col not in q.columns:
            raise SchemaError(f"predict_many needs a {col!r} column in the queries.")
        vals = pd.to_numeric(q[col], errors="coerce").to_numpy(dtype=float)
        bad = ~(np.isfinite(vals) & (vals > 0))
        if bad.any():
            raise ValueError(f"predict_many: column {col!r} must be finite and positive; {int(bad.sum())} "
                             f"rows are not (first: row {int(positions[np.flatnonzero(bad)[0]]) + 1}, "
                             "counting from 1).")


# ------------------------------------------------------------------------------------------- filled rows
def _row_groups(q: pd.DataFrame, rows: np.ndarray, cols: list) -> list[tuple[dict, np.ndarray]]:
    """The distinct values of ``cols`` among ``rows`` (positions), each as a dict of given values (None where
    missing) with the positions that hold it."""
    if not len(rows):
        return []
    sub = q.iloc[rows][cols]
    try:
        first, inverse = distinct_rows([sub[c] for c in cols])
    except TypeError:  # unhashable cells: each row on its own
        first, inverse = np.arange(len(rows)), np.arange(len(rows))
    out = []
    for k, f in enumerate(first):
        row = {c: (v if is_given(v) else None) for c, v in sub.iloc[int(f)].items()}
        out.append((row, rows[np.flatnonzero(inverse == k)]))
    return out


def _set_cells(q: pd.DataFrame, positions: np.ndarray, values: dict) -> None:
    """Set the cells of ``values``' columns at ``positions`` (by position: the index may repeat)."""
    for c, v in values.items():
        if c not in q.columns:
            q[c] = pd.Series(pd.NA, index=q.index, dtype="string" if isinstance(v, str) else "Float64")
        elif isinstance(v, str) and not pd.api.types.is_string_dtype(q[c]) and not pd.api.types.is_object_dtype(q[c]):
            q[c] = q[c].astype("object")
        col = q.columns.get_loc(c)
        q.iloc[positions, col] = v


def sized_decoders(q: pd.DataFrame, gpu: np.ndarray) -> np.ndarray:
    """Per row: a GPU row that is a decoder with params and FLOPs but no sequence length (a candidate for
    :func:`implied_sequence`, which decides)."""
    if "family" not in q.columns or "flops_per_sample" not in q.columns or "params" not in q.columns:
        return np.zeros(len(q), dtype=bool)
    dec = gpu & (q["family"].astype("string").str.lower().fillna("") == "decoder").to_numpy(dtype=bool)
    if "seq_len" in q.columns:
        dec &= q["seq_len"].isna().to_numpy()
    return dec


def fill_implied_sequences(q: pd.DataFrame, gpu: np.ndarray) -> None:
    """Give the GPU rows that are dense decoders by size and FLOPs alone the sequence length their FLOPs imply
    (:func:`implied_sequence`), in place, once per distinct row; say how many once."""
    rows = np.flatnonzero(sized_decoders(q, gpu))
    if not len(rows):
        return
    cols = [c for c in ("family", "params", "flops_per_sample", "seq_len", *SHAPE_NAMES) if c in q.columns]
    filled = 0
    for row, at in _row_groups(q, rows, cols):
        seq = implied_sequence(row)[0]
        if seq is not None:
            if "seq_len" not in q.columns:
                q["seq_len"] = pd.Series(pd.NA, index=q.index, dtype="Int64")
            _set_cells(q, at, {"seq_len": seq})
            filled += len(at)
    if filled:
        warnings.warn(f"predict_many: {filled} decoder rows without seq_len get the sequence length their "
                      "flops_per_sample implies for a dense decoder of their size (give seq_len to say otherwise).",
                      ExtrapolationWarning, stacklevel=3)


#: A query's layout columns and the :func:`perfmodel.layout.job_layout` field each states.
_LAYOUT_FIELDS = {"tp": "tp", "pp": "pp", "vp": "vp", "cp": "cp", "ep": "ep", "micro_batch_size": "micro_batch",
                  "zero_stage": "zero_stage", "sequence_parallel": "sequence_parallel", "recompute": "recompute"}


def fill_default_layouts(q: pd.DataFrame, rows: np.ndarray, positions: np.ndarray) -> None:
    """Complete the layout of the transformer jobs among ``rows`` as :func:`predict_training_time` does for the same
    job (:func:`query_layout_columns`: what a row states is kept, :func:`perfmodel.layout.job_layout`'s defaults fill the
    rest), in place, once per distinct job: one answer per job, one row or many. A layout the frameworks would not
    run is refused naming the row (``positions``: each row's 0-based place in the caller's queries)."""
    rows = np.flatnonzero(rows)
    if not len(rows) or "batch_size" not in q.columns:
        return
    stated = [c for c in _LAYOUT_FIELDS if c in q.columns]
    cols = [c for c in ("family", "params", "active_params", "seq_len", "gpu_count", "batch_size", "grad_accum",
                        "global_batch_size", *SHAPE_NAMES, *stated) if c in q.columns]
    for row, at in _row_groups(q, rows, cols):
        given = {_LAYOUT_FIELDS[c]: row[c] for c in stated if row.get(c) is not None}
        try:
            count = int(row.get("gpu_count") or 1)
            accum = row.get("grad_accum")
            gb = float(step_global_batch({**row, "gpu_count": count})[0])  # the schema's step
            if not math.isclose(gb, round(gb)):
                continue
            if accum is not None and "micro_batch" not in given:
                # a stated accumulation states the micro-batch, as in a history's row (layout.implied_micro_batch)
                split = math.prod(int(given.get(k) or 1) for k in ("tp", "pp", "cp"))
                if count % split == 0:
                    given["micro_batch"] = implied_micro_batch(round(gb) // (count // split),
                                                               accum=int(float(accum)),
                                                               pp=int(given.get("pp") or 1))[0]
            given = {k: (str(v) if k == "recompute" else bool(v) if k == "sequence_parallel" else int(v))
                     for k, v in given.items()}
            lay = query_layout_columns({**row, "gpu_count": count}, seq_len=row.get("seq_len"), global_batch=int(round(gb)),
                                 layout=given or None, where="predict_many")
        except LayoutError as exc:
            raise LayoutError(f"predict_many: {row_label(int(at[0]), positions + 1)}: {exc}") from None
        except (ValueError, TypeError, KeyError, OverflowError):
            continue  # the row's own checks say what is wrong
        lay.pop("_assumed")
        _set_cells(q, at, lay)


def fill_precision(q: pd.DataFrame, by_device: dict, positions: np.ndarray) -> None:
    """Fill the ``precision`` column: what was given (lower case), else what most runs on that device used."""
    given = q["precision"] if "precision" in q.columns else pd.Series(pd.NA, index=q.index, dtype=object)
    codes, uniq = pd.factorize(q["gpu_type"])
    per_type = [default_precision(by_device, str(g))[0] for g in uniq]
    levels = list(dict.fromkeys(per_type))
    defaults = pd.Series(pd.Categorical.from_codes(np.asarray([levels.index(p) for p in per_type])[codes],
                                                   categories=levels), index=q.index)
    if given.notna().all():
        q["precision"] = given.astype(str).str.lower()
    elif given.isna().all():
        q["precision"] = defaults
    else:
        q["precision"] = given.where(given.notna(), defaults).astype(str).str.lower()
    bad_p = ~q["precision"].isin(PRECISIONS)
    if bad_p.any():
        raise ValueError(f"predict_many: column 'precision' must be one of {', '.join(PRECISIONS)}; got "
                         f"{q['precision'][bad_p].iloc[0]!r} (row "
                         f"{int(positions[np.flatnonzero(bad_p.to_numpy())[0]]) + 1}, counting from 1).")


def distinct_query_rows(q: pd.DataFrame, skip: tuple = ()) -> tuple[np.ndarray, np.ndarray]:
    """``first, inverse``: the position of the first of each distinct row of ``q`` (ignoring ``skip``), and each
    row's index into ``first``. 100,000 queries over a grid of a few hundred configurations are predicted once per
    configuration; unhashable cells fall back to one group per row."""
    try:
        first, inverse = distinct_rows([q[col] for col in q.columns if col not in skip] or [np.zeros(len(q))])
    except TypeError:
        return np.arange(len(q)), np.arange(len(q))
    return first, inverse
