"""What a fitted model can answer and what its answer rests on: the queries it refuses
(:func:`check_support`), those outside its fitted range (:func:`domain_warnings`), and the notes a prediction
carries (:func:`prior_note`, :func:`warn_notes`)."""

from __future__ import annotations

import warnings

import numpy as np
import pandas as pd

from ..exceptions import DataQualityWarning, ExtrapolationWarning, UnsupportedQueryError
from ..fitting import PRECISION_TRANSFER_METHOD
from ..hardware import PRECISIONS, get_spec
from ..history import BUNDLED_PREFIX
from ..layout import is_layout_job
from ..layout_features import layout_priceable
from ..models import TrainingTimeModel
from ._job import WHERE

#: The method that answers transformer training with a layout on a device whose figures price it
#: (:func:`perfmodel.layout_features.layout_priceable`) under ``method="auto"``: :class:`perfmodel.models.LayoutRegressor`.
LAYOUT_METHOD = "layout"


# ------------------------------------------------------------------------------------------- guarding
def outside(fitted: TrainingTimeModel, q: pd.DataFrame) -> dict[str, np.ndarray]:
    """Per checked column, a boolean mask of the queries outside the fitted [min, max]."""
    out = {}
    dom = fitted.domain_
    for col in ("params", "batch_size", "gpu_count", "flops_per_sample"):
        if col not in q.columns or col not in dom.index or pd.isna(dom.loc[col, "min"]):
            continue
        vals = pd.to_numeric(q[col], errors="coerce").to_numpy(dtype=float)
        out[col] = (vals < dom.loc[col, "min"]) | (vals > dom.loc[col, "max"])
    return out


def domain_warnings(fitted: TrainingTimeModel, q: pd.DataFrame) -> list[list[str]]:
    out: list[list[str]] = [[] for _ in range(len(q))]
    dom = fitted.domain_
    for col, mask in outside(fitted, q).items():
        vals = pd.to_numeric(q[col], errors="coerce").to_numpy(dtype=float)
        lo, hi = dom.loc[col, "min"], dom.loc[col, "max"]
        for i in np.flatnonzero(mask):
            out[i].append(f"{col}={vals[i]:g} is outside the fitted range [{lo:g}, {hi:g}]")
    return out


def _peaks_known(g: str) -> str:
    spec = get_spec(g)
    return ", ".join(x for x in PRECISIONS if spec.peak_tflops(x) is not None) or "none"


def check_support(fitted: TrainingTimeModel, q: pd.DataFrame, numbers=None) -> list[str]:
    """Refuse what ``fitted`` cannot answer for the queries ``q`` (``numbers``: each row's 1-based number in the
    caller's queries, for messages); return notes on what it answers by carrying across devices."""
    notes = []
    if fitted.method == LAYOUT_METHOD:  # it prices a transformer's step, which needs the sequence length
        seq = pd.to_numeric(q["seq_len"], errors="coerce") if "seq_len" in q.columns else pd.Series(np.nan,
                                                                                                    index=q.index)
        if seq.isna().any():
            i = int(np.flatnonzero(seq.isna().to_numpy())[0])
            fam = q["family"].iloc[i] if "family" in q.columns else None
            which = "the query" if numbers is None else f"row {int(np.asarray(numbers)[i])} (counting from 1)"
            raise UnsupportedQueryError(
                f"The layout model answers this history's queries, from each transformer job's sequence length "
                f"(seq_len), and {which} gives none"
                f"{'' if fam is None or pd.isna(fam) else f' (family {fam!r})'}. Give the job's seq_len; a model "
                "that is not transformer training needs a history with runs of models like it.")
    feats = fitted.pipeline_.named_steps["features"]
    carries = bool(getattr(feats, "hardware_features_", False))
    configs = fitted.configs_
    ran = (set(zip(configs["gpu_type"].astype(str), configs["precision"].astype(str)))
           if "precision" in configs.columns else None)
    # a GPU device at a precision the runs never used on it is carried through its peak there: it must have one
    for (g, p), _ in q.groupby([q["gpu_type"].astype(str), q["precision"].astype(str)], observed=True):
        if g == "cpu" or (ran is not None and (g, p) in ran and fitted.method != LAYOUT_METHOD):
            continue
        if get_spec(g).peak_tflops(p) is None:
            how = ("the layout model prices GEMMs at the device's peak for the precision" if
                   fitted.method == LAYOUT_METHOD else "step times are carried to it through the device's peaks")
            raise UnsupportedQueryError(
                f"gpu_type {g!r} has no {p} peak in the spec table (it has: {_peaks_known(g)}) and the history has "
                f"no {p} runs on it: {how}. Query a precision the device has, or add runs at {p} on it."
            )
    for g in sorted(map(str, pd.unique(q["gpu_type"]))):
        if g not in fitted.gpu_types_:
            if not carries:
                raise UnsupportedQueryError(
                    f"The history has no runs on gpu_type {g!r} (it has: {', '.join(fitted.gpu_types_)}), and "
                    "with one device type (or devices whose datasheet figures are all the same) the fit cannot "
                    "carry step times across devices. Fit on a history with runs on that device, or on two or "
                    "more devices with known and different peaks."
                )
            notes.append(f"gpu_type {g!r} is not in the history; predicted through hardware peaks")
    for p in sorted(map(str, pd.unique(q["precision"]))):
        if p in fitted.precisions_:
            continue
        have = ", ".join(fitted.precisions_)
        if not carries:
            raise UnsupportedQueryError(
                f"The history has no runs at precision {p!r} (it has: {have}), and its fit does not carry step "
                "times through the devices' peaks (one device type, or devices whose datasheet figures are all "
                "the same). Add runs at that precision, or fit on two or more devices with known peaks."
            )
        how = (f"; gbm's trees do not extrapolate past the peaks of its runs (method='auto' answers it by the "
               f"{PRECISION_TRANSFER_METHOD} rule)" if fitted.method == "gbm" else "")
        notes.append(f"precision {p!r} is not in the history (it has: {have}): a new-device query, answered by "
                     f"{fitted.method} through the devices' peaks at {p}{how}")
    return notes


def prior_note(provenance: list, q: pd.DataFrame, own_devices: set | None = None) -> list[str]:
    """A warning when a GPU prediction rests on the bundled public history: alone (no runs of the user's), or for
    a device type the user's own runs (``own_devices``) do not have."""
    if provenance and all(p.startswith(BUNDLED_PREFIX + "public_") for p in provenance):
        return ["learned from perfmodel's bundled public LLM pre-training history (published runs of tuned "
                "frameworks: NVIDIA Megatron-Bridge, MosaicML LLM Foundry, PyTorch torchtitan, BigScience; "
                "data/README.md); your stack and cluster may be slower. Calibrate with a few runs of your own: history=['my_llm_runs.csv', 'llm']"]
    if not provenance or "bundled:mlperf_steps.csv" not in provenance or set(map(str, q["gpu_type"])) <= {"cpu"}:
        return []
    if all(p.startswith("bundled:") for p in provenance):
        return ["learned from perfmodel's bundled public GPU history (MLPerf Training results: tuned vendor "
                "software, mostly bf16/fp8, plus perfmodel's own measured GPU runs); your stack may be slower. "
                "Calibrate with a few runs of your own: history=['my_runs.csv', 'gpu']"]
    new = sorted(set(map(str, q["gpu_type"])) - set(own_devices or ()) - {"cpu"})
    if not new:
        return []
    return [f"your own runs have no {', '.join(new)}: its speed comes from perfmodel's bundled public GPU history "
            "(tuned vendor software) fitted together with your runs; a run of your own there would settle it"]


def unpriced_layout_note(q: pd.DataFrame, methods) -> list[str]:
    """A warning when rows describe transformer training split across devices (a tensor, pipeline, context or
    expert degree above 1; :func:`perfmodel.layout.is_layout_job`) that a method other than the layout model
    answered because their device's figures lack what it divides by
    (:func:`perfmodel.layout_features.layout_priceable`): that answer does not see the layout."""
    if "gpu_type" not in q.columns:
        return []
    split = np.zeros(len(q), dtype=bool)  # a device holds part of a replica: the layout decides the time
    for col in ("tp", "pp", "cp", "ep"):
        if col in q.columns:
            split |= (pd.to_numeric(q[col], errors="coerce") > 1).fillna(False).to_numpy(dtype=bool)
    unpriced = (split & is_layout_job(q) & ~layout_priceable(q)
                & (np.asarray(methods, dtype=object) != LAYOUT_METHOD))
    if not unpriced.any():
        return []
    devices = ", ".join(repr(d) for d in sorted(set(q["gpu_type"].astype(str).to_numpy()[unpriced])))
    rows = "a row is" if len(q) == 1 else f"{int(unpriced.sum())} of the rows are"
    return [f"{rows} transformer training split across devices on {devices}, whose figures "
            "give no peak at their precision or no memory bandwidth: the layout model cannot price them, and the "
            "method that answered them does not see the layout (its tensor, pipeline or data degrees). Register the "
            "device's measured figures (perfmodel.hardware.register_device, e.g. a host's fp32_tflops and "
            "memory_bandwidth_gbps), name it in the runs' and queries' gpu_type, and the layout model prices them"]


def warn_notes(notes: list[str], prior_notes: list[str], *, stacklevel: int) -> None:
    """Warn of a prediction's ``notes`` (:class:`~perfmodel.exceptions.ExtrapolationWarning`) and of its
    ``prior_notes`` (:class:`~perfmodel.exceptions.DataQualityWarning`), at ``stacklevel`` as the caller counts."""
    for note in notes:
        warnings.warn(f"{WHERE}: {note}.", ExtrapolationWarning, stacklevel=stacklevel + 1)
    for note in prior_notes:
        warnings.warn(f"{WHERE}: {note}.", DataQualityWarning, stacklevel=stacklevel + 1)
