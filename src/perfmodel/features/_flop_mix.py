"""The FLOP mix of a run and the fp32 peak it runs at: convolution and attention shares, ``fp32_mode``.

A run at ``precision`` fp32 runs its matmuls and convolutions at the TF32 peak or the full-fp32 one depending
on its ``fp32_mode`` (:data:`FP32_MODES`): ``tf32`` puts both at the TF32 peak, ``full`` both at full fp32,
and PyTorch's defaults (``""``) convolutions at TF32 (cuDNN allows it) and matmuls at full fp32. What share of
the FLOPs is convolutions comes from the op-level columns where a run has them, else from its family
(:data:`CONV_FAMILIES`). :mod:`perfmodel.features` re-exports the public names here and builds its columns
from them.
"""

from __future__ import annotations

import re

import numpy as np
import pandas as pd

from ..schema import OP_TRACED_CLASSES

__all__ = ["FP32_MODES", "CONV_FAMILIES", "per_distinct", "fp32_modes", "attention_share", "known_conv_share",
           "conv_share", "fp32_basis"]

#: Canonical values of a history's ``fp32_mode`` column ("" = PyTorch's defaults; module docstring).
FP32_MODES = ("tf32", "full", "")
#: Model families whose FLOPs are convolutions when a run has no op-level columns (every other family: matmuls).
CONV_FAMILIES = ("cnn",)
_CONV_OPS = ("op_conv_dense_flops", "op_conv_depthwise_flops", "op_conv_grouped_flops")
#: GEMM-class ops (cuBLAS): matmuls, attention, recurrent cells.
_MATMUL_OPS = ("op_matmul_flops", "op_attention_flops", "op_recurrent_flops")


def per_distinct(values, func) -> np.ndarray:
    """``func(value)`` for each row, computed once per distinct value."""
    codes, uniq = pd.factorize(pd.Series(values) if not isinstance(values, pd.Series) else values)
    out = np.asarray([func(u) for u in uniq], dtype=object)
    return out[codes] if len(out) else np.empty(0, dtype=object)


def fp32_modes(runs: pd.DataFrame) -> np.ndarray:
    """The canonical ``fp32_mode`` of each row (:data:`FP32_MODES`; ``""`` where the column is absent or empty).

    The first word decides: ``tf32`` -> ``"tf32"``; ``full``, ``fp32``, ``ieee`` or ``highest`` -> ``"full"``;
    ``default`` or anything else -> ``""`` (PyTorch's defaults).

    Parameters
    ----------
    runs : pandas.DataFrame
        Runs or query rows (its ``fp32_mode`` column, if any; case and punctuation are ignored).

    Returns
    -------
    numpy.ndarray of object, shape (len(runs),)
        ``"tf32"``, ``"full"`` or ``""`` per row.
    """
    if "fp32_mode" not in runs.columns:
        return np.full(len(runs), "", dtype=object)

    def one(v) -> str:
        text = "" if v is None or (isinstance(v, float) and np.isnan(v)) or v is pd.NA else str(v)
        words = re.split(r"[^a-z0-9]+", text.strip().lower())
        first = words[0] if words else ""
        if first == "tf32":
            return "tf32"
        if first in ("full", "fp32", "ieee", "highest"):
            return "full"
        return ""

    return per_distinct(runs["fp32_mode"].astype("string").fillna("").astype(object), one).astype(object)


def attention_share(runs: pd.DataFrame) -> np.ndarray:
    """Per row, the share of its FLOPs in attention's score and value products (``QKᵀ``, ``AV``), 0 to 1.

    ``op_attention_flops`` over the sum of the row's finite ``op_*_flops`` (the traced op classes,
    :data:`perfmodel.schema.OP_TRACED_CLASSES`); NaN where the row lacks a finite ``op_attention_flops`` or
    ``op_matmul_flops`` (a partial op split says nothing of the whole), where an op FLOPs column is negative, or
    where there are no op FLOPs. Attention kernels (FlashAttention, SDPA) reach a different fraction of the peak
    than the dense GEMMs around them, so the share of the work they take moves a transformer's utilisation with
    its sequence length.

    Notes
    -----
    Traced runs (:mod:`perfmodel.measure.opcount`) count a fused attention kernel's backward pass with its score
    recomputation (``4`` forward + ``10`` backward ``·h·L·S·E``); the analytic count of
    :mod:`perfmodel.plan` and of ``public_llmfoundry.csv`` is ``12·L·d·seq²`` (no recomputation). A query counted
    one way against runs counted the other puts its share about 14/12 off.

    Parameters
    ----------
    runs : pandas.DataFrame
        Runs or query rows (the ``op_*_flops`` columns where known).

    Returns
    -------
    numpy.ndarray of float, shape (len(runs),)
        The share per row, NaN where unknown.
    """
    if "op_attention_flops" not in runs.columns or "op_matmul_flops" not in runs.columns:
        return np.full(len(runs), np.nan)
    cols = [f"op_{c}_flops" for c in OP_TRACED_CLASSES if f"op_{c}_flops" in runs.columns]
    flops = np.column_stack([pd.to_numeric(runs[c], errors="coerce").to_numpy(dtype=float) for c in cols])
    attn = pd.to_numeric(runs["op_attention_flops"], errors="coerce").to_numpy(dtype=float)
    dense = pd.to_numeric(runs["op_matmul_flops"], errors="coerce").to_numpy(dtype=float)
    total = np.nansum(flops, axis=1)
    ok = np.isfinite(attn) & np.isfinite(dense) & np.isfinite(total) & (total > 0) & ~(flops < 0).any(axis=1)
    with np.errstate(divide="ignore", invalid="ignore"):
        return np.where(ok, attn / np.where(ok, total, 1.0), np.nan)


def known_conv_share(runs: pd.DataFrame) -> np.ndarray:
    """:func:`conv_share` where a row says what its FLOPs are (a family or op-level columns), NaN where it does not
    (a model given by size alone): the baselines then pool it without an op class."""
    share = conv_share(runs)
    known = np.zeros(len(runs), dtype=bool)
    if "family" in runs.columns:
        known |= (runs["family"].astype("string").fillna("").str.strip() != "").to_numpy(dtype=bool)
    ops = [c for c in _CONV_OPS + _MATMUL_OPS if c in runs.columns]
    if ops:
        known |= runs[ops].apply(pd.to_numeric, errors="coerce").notna().any(axis=1).to_numpy(dtype=bool)
    return np.where(known, share, np.nan)


def conv_share(runs: pd.DataFrame) -> np.ndarray:
    """Per row, the convolution share of its convolution + matmul FLOPs (0 to 1).

    From the op-level columns where a row has them (convolutions: ``op_conv_*_flops``; matmuls: ``op_matmul``,
    ``op_attention`` and ``op_recurrent_flops``); else from the family: 1 for :data:`CONV_FAMILIES`, 0 for any
    other (transformers, decoders, encoders, MLPs, RNNs are matmuls).

    Parameters
    ----------
    runs : pandas.DataFrame
        Runs or query rows (``family`` and the ``op_*_flops`` columns where known).

    Returns
    -------
    numpy.ndarray of float, shape (len(runs),)
        The share per row, 0 to 1.
    """
    if "family" in runs.columns:
        fam = runs["family"].astype("string").fillna("").str.lower().to_numpy(dtype=object)
        share = np.isin(fam, CONV_FAMILIES).astype(float)
    else:
        share = np.zeros(len(runs))

    def col(name):
        return (pd.to_numeric(runs[name], errors="coerce").to_numpy(dtype=float) if name in runs.columns
                else np.full(len(runs), np.nan))

    if any(c in runs.columns for c in _CONV_OPS):
        conv = np.nansum(np.column_stack([col(c) for c in _CONV_OPS]), axis=1)
        mm = np.nansum(np.column_stack([col(c) for c in _MATMUL_OPS]), axis=1)
        have = np.isfinite(col(_CONV_OPS[0])) & np.isfinite(col(_MATMUL_OPS[0])) & (conv + mm > 0)
        share = np.where(have, conv / np.where(have, conv + mm, 1.0), share)
    return share


def fp32_basis(runs: pd.DataFrame) -> pd.DataFrame:
    """How each row's peak is decided (module docstring).

    Parameters
    ----------
    runs : pandas.DataFrame
        Runs or query rows (``precision``, default fp32; ``fp32_mode``, ``family`` and op columns where
        known).

    Returns
    -------
    pandas.DataFrame
        Indexed like ``runs``: ``fp32_mode`` (canonical; ``""`` for non-fp32 rows), ``conv_share``
        (:func:`conv_share`) and ``full_share``, the share of the run's conv + matmul FLOPs at the full-fp32
        peak (0 for non-fp32 rows and for ``tf32`` mode, 1 for ``full``, ``1 − conv_share`` under PyTorch's
        defaults).
    """
    precision = (runs["precision"].astype(str).to_numpy(dtype=object) if "precision" in runs.columns
                 else np.full(len(runs), "fp32", dtype=object))
    mode = fp32_modes(runs)
    conv = conv_share(runs)
    fp32 = precision == "fp32"
    full = np.where(~fp32, 0.0, np.where(mode == "tf32", 0.0, np.where(mode == "full", 1.0, 1.0 - conv)))
    return pd.DataFrame({"fp32_mode": np.where(fp32, mode, ""), "conv_share": conv, "full_share": full},
                        index=runs.index)
