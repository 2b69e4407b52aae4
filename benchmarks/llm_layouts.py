"""LLM jobs as they really run: the layout model against published runs that record their layouts (issue #35).

Sets (``data/``; see data/README.md), each held out once while the others are the history (leave-one-set-out):

* ``megatron_bridge``: NVIDIA Megatron-Bridge pre-training (Llama 3 8B–405B, mixtures of experts) on H100, B200,
  B300, GB200, GB300, fp8/bf16, with tensor/pipeline/context/expert degrees.
* ``llmfoundry``: MosaicML MPT 125M–70B on 8–512 A100/H100, bf16/fp8, FSDP.
* ``torchtitan`` and ``bigscience`` (the other sets of :data:`LLM_SETS`);
* measured here: ``data/runs_cpu_layouts.csv``, tensor/pipeline/data-parallel layouts of two small decoders run by
  ``perfmodel measure --sweep layouts`` on this project's 2-core CPU host (gloo), priced on a device registered
  from ``benchmarks/results/cpu_host_figures.json`` (``benchmarks/cpu_host_figures.py``): the model fitted on the
  published sets, and calibrated on the runs' other layouts (leave-one-layout-out);
* confirmation, with ``--confirm`` only: the MLPerf GPT-3 / Llama 3.1 405B rows of ``mlperf_steps.csv`` that carry
  their launch configs' layout (:func:`load_confirmation`).

Printed (each beside the baselines: ``6ND@0.4``, FLOPs / (devices × peak × 0.4) with the active parameters, and
``const-MFU``, the training sets' median model-FLOPs utilisation applied to every job):

1. leave-one-set-out and leave-one-model-out median APE, 90% coverage and median interval half-width;
2. layout ranking within groups of ≥ 3 layouts of one job (same model, sequence, global batch, devices, device
   type, precision): mean Spearman ρ and the share of groups whose predicted fastest layout is within 5% of the
   measured fastest (what a random pick gets is printed beside);
3. scaling: the measured and predicted throughput per device as the data-parallel degree grows (same model,
   sequence, device type, precision, micro-batch);
4. fp8 over bf16: predicted speed-up of matched configurations beside the measured one where a set has both;
5. memory: :func:`perfmodel.plan.estimate_memory` on every published, completed run (none may read "does not
   fit") and against published peak memory where a set gives it;
6. refusals: layouts of the sets the frameworks ran that :func:`perfmodel.layout.check_layout` refuses (target 0);
7. one answer per job: :func:`perfmodel.predict_training_time`, :func:`perfmodel.plan.plan_llm_job` and
   :func:`perfmodel.plan.recommend` out of the box on the sets' dense decoder jobs, their median APE, and how far
   apart they are for the same job; and the same jobs asked by size and FLOPs only (no sequence, no layout:
   :func:`sized_out_of_box`).

Usage::

    python benchmarks/llm_layouts.py [--quick] [--out benchmarks/results/llm_layouts]

Writes ``<out>.json`` and ``<out>.md``.
"""

from __future__ import annotations

import argparse
import json
import re
import sys
import time
import warnings
from pathlib import Path

import numpy as np
import pandas as pd
from _paths import ROOT, rel  # benchmarks/_paths.py (the scripts run from benchmarks/)
from scipy.stats import spearmanr

from perfmodel.exceptions import DoesNotFitError, LayoutError
from perfmodel.fitting import fit_history
from perfmodel.hardware import get_spec
from perfmodel.history import read_history
from perfmodel.importers.mlperf import BENCHMARKS
from perfmodel.io import load_runs
from perfmodel.layout import is_layout_job
from perfmodel.layout_features import job_problems, layout_jobs
from perfmodel.metrics import coverage, median_ape
from perfmodel.plan import estimate_memory
from perfmodel.transformer import transformer_flops

DATA = ROOT / "data"
CONFIDENCE = 0.9
#: the ``6ND`` calculators' utilisation
BASELINE_MFU = 0.4
_MLPERF_LLM = ("gpt3", "llama31_405b")
#: The public LLM pre-training sets that record layouts (``data/public_<name>.csv``; data/README.md), in the order
#: they were added. NeuSight's transformer rows are single-device forward + backward passes without an optimizer
#: step: not training jobs with a layout, so not among them.
LLM_SETS = ("megatron_bridge", "llmfoundry", "torchtitan", "megatron_lm", "bigscience")


#: Runs of the held-out set's other jobs the ranking's calibrated variant is fitted on (the calibration book's
#: largest count).
RANK_CALIBRATION_RUNS = 9


def load_sets(quick: bool) -> dict[str, pd.DataFrame]:
    """Every development set with layouts, its rows that are layout jobs, a ``set`` column naming it."""
    sets = {}
    for name in LLM_SETS:
        path = DATA / f"public_{name}.csv"
        if not path.is_file():
            continue
        runs = load_runs(path)
        keep = is_layout_job(runs)
        sets[name] = runs.loc[keep].reset_index(drop=True).assign(set=name)
    if quick:
        sets = {k: v.sample(min(len(v), 60), random_state=0).reset_index(drop=True) for k, v in sets.items()}
    return sets


def load_confirmation() -> pd.DataFrame:
    """The confirmation set: MLPerf Training's GPT-3 175B and Llama 3.1 405B pre-training runs whose launch
    configs state their layout (``mlperf_steps.csv``; vendor-tuned NeMo on H100/H200/B200/GB200), repeats of one
    submission collapsed to their median. Nothing was chosen on it: it is run once, with ``--confirm``."""
    ml = pd.read_csv(DATA / "mlperf_steps.csv", low_memory=False)
    # and the runs derived but set aside only because their global batch does not divide over the devices, which a
    # model-parallel job's need not (data/README.md): each device's share is then a fraction
    ex = pd.read_csv(DATA / "mlperf_steps_excluded.csv.gz", low_memory=False)
    ex = ex[ex["excluded_reason"].astype(str).str.startswith("global batch not divisible by the accelerator count")]
    ex = ex.assign(batch_size=ex["global_batch_size"] / ex["gpu_count"], excluded_reason=None)
    ml = pd.concat([ml, ex], ignore_index=True, sort=False)
    ml = ml[ml["benchmark"].isin(_MLPERF_LLM) & ml["tp"].notna()].copy()
    # the catalogue's sample: "one 2048-token sequence" (GPT-3), "one 8192-token sequence" (Llama 3.1 405B)
    ml["seq_len"] = ml["benchmark"].map({b: int(re.search(r"(\d+)-token", BENCHMARKS[b].sample).group(1))
                                         for b in _MLPERF_LLM}).astype("Int64")
    ml["family"] = "decoder"
    ml = load_runs(ml.drop(columns=["excluded_reason"]))
    ml = ml.loc[is_layout_job(ml)]
    keys = [c for c in ("round", "submitter", "system", "model", "gpu_type", "precision", "gpu_count",
                        "global_batch_size", "tp", "pp", "vp", "cp", "micro_batch_size") if c in ml.columns]
    med = ml.groupby(keys, dropna=False)["step_time_s"].transform("median")
    return ml.assign(step_time_s=med).drop_duplicates(subset=keys).reset_index(drop=True).assign(set="mlperf_llm")


def confirmation(sets: dict) -> dict:
    """The layout model fitted on every development set, predicting the confirmation set (once)."""
    test = load_confirmation()
    train = pd.concat(sets.values(), ignore_index=True, sort=False)
    y = test["step_time_s"].to_numpy(dtype=float)
    model = _fit(train, "new_model")
    cell = {"layout": _cell(y, _predict(model, test)), "6ND@0.4": _cell(y, None, baseline_6nd(test)),
            "const-MFU": _cell(y, None, baseline_const_mfu(train, test))}
    cell["by_benchmark"] = {b: _cell(y[m], _predict(model, test[m])) for b in _MLPERF_LLM
                            for m in [(test["benchmark"] == b).to_numpy()] if m.any()}
    return cell


def _flops(runs: pd.DataFrame) -> np.ndarray:
    """Model FLOPs per sequence of each row, from its shape (one formula for every set)."""
    jobs = layout_jobs(runs)
    return np.array([np.nan if j.problem else transformer_flops(j.shape, j.seq_len).model for j in jobs])


def _ideal_step(runs: pd.DataFrame) -> np.ndarray:
    """Seconds per step at 100% of the peak: global batch × FLOPs per sequence / (devices × peak)."""
    jobs = layout_jobs(runs)
    peaks = np.array([get_spec(str(g)).peak_tflops(str(p)) or np.nan for g, p in zip(runs["gpu_type"],
                                                                                     runs["precision"])]) * 1e12
    gb = np.array([np.nan if j.problem else j.global_batch for j in jobs], dtype=float)
    return gb * _flops(runs) / (runs["gpu_count"].to_numpy(dtype=float) * peaks)


def baseline_6nd(runs: pd.DataFrame) -> np.ndarray:
    return _ideal_step(runs) / BASELINE_MFU


def baseline_const_mfu(train: pd.DataFrame, test: pd.DataFrame) -> np.ndarray:
    mfu = np.nanmedian(_ideal_step(train) / train["step_time_s"].to_numpy(dtype=float))
    return _ideal_step(test) / mfu


def _fit(train: pd.DataFrame, kind: str):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return fit_history(read_history(train.drop(columns=["set"])), "layout", kind=kind)


def _predict(model, test: pd.DataFrame) -> pd.DataFrame:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return model.predict_interval(test.drop(columns=["set"]), CONFIDENCE)


def _cell(y, pred: pd.DataFrame | None, point=None) -> dict:
    if pred is not None:
        point = pred["step_time_s"].to_numpy()
    ok = np.isfinite(point) & (point > 0)
    out = {"rows": int(ok.sum()), "median_ape": float(median_ape(y[ok], point[ok])) if ok.any() else None}
    if pred is not None:
        lo, hi = pred["step_lower"].to_numpy()[ok], pred["step_upper"].to_numpy()[ok]
        out["coverage"] = float(coverage(y[ok], lo, hi))
        with np.errstate(divide="ignore"):
            out["half_width"] = float(np.median(np.sqrt(hi / lo)) - 1)
    return out


def _set_errors(sets: dict, names) -> tuple[np.ndarray, np.ndarray]:
    """|log errors| of each set in ``names`` predicted by a fit on the others in ``names`` (and their groups)."""
    errs, groups = [], []
    for name in names:
        train = pd.concat([sets[k] for k in names if k != name], ignore_index=True, sort=False)
        model = _fit(train, "new_model")
        y = sets[name]["step_time_s"].to_numpy(dtype=float)
        errs.append(np.abs(np.log(_predict(model, sets[name])["step_time_s"].to_numpy() / y)))
        groups += [name] * len(y)
    return np.concatenate(errs), np.asarray(groups)


def leave_one_set_out(sets: dict, calibrate=(1, 3, 9), repeats: int = 10) -> dict:
    """Each set held out. The interval is what an out-of-the-box answer gets: at least the 90% quantile of the
    errors the model made on the *other* sets when each of them was held out in turn (the error book, built here
    without the held-out set). Then the same set calibrated on k of its own runs (the fit's coefficients as the
    prior), predicting its other runs."""
    from perfmodel.models import CALIBRATION_PRIOR_WEIGHT, TrainingTimeModel, balanced_scores
    from perfmodel.models._conformal import conformal_quantile

    out = {}
    rng = np.random.default_rng(0)
    for name, test in sets.items():
        others = [k for k in sets if k != name]
        train = pd.concat([sets[k] for k in others], ignore_index=True, sort=False)
        y = test["step_time_s"].to_numpy(dtype=float)
        model = _fit(train, "new_model")
        pred = _predict(model, test)
        e, g = _set_errors(sets, others)
        q = conformal_quantile(balanced_scores(e, g), CONFIDENCE)
        point = pred["step_time_s"].to_numpy()
        half = np.maximum(np.log(pred["step_upper"].to_numpy() / point), q)
        booked = pred.assign(step_lower=point * np.exp(-half), step_upper=point * np.exp(half))
        six, const = baseline_6nd(test), baseline_const_mfu(train, test)
        out[name] = {"layout": _cell(y, booked), "6ND@0.4": _cell(y, None, six),
                     "const-MFU": _cell(y, None, const)}
        moe = (test["family"].astype(str) == "moe").to_numpy() if "family" in test.columns else np.zeros(len(y), bool)
        if moe.any():  # dense decoders and mixtures of experts apart (6ND prices the two very differently)
            for part, m in (("dense", ~moe), ("moe", moe)):
                out[name][part] = {"layout": _cell(y[m], booked[m]), "6ND@0.4": _cell(y[m], None, six[m])}
        prior = dict(model.pipeline_.named_steps["regressor"].coef_)
        for k in calibrate:
            apes = []
            for _ in range(repeats):
                pick = rng.choice(len(test), size=k, replace=False)
                rest = np.setdiff1d(np.arange(len(test)), pick)
                with warnings.catch_warnings():
                    warnings.simplefilter("ignore")
                    cal = TrainingTimeModel(method="layout", conformal=False,
                                            regressor_params={"prior": prior, "prior_weight": CALIBRATION_PRIOR_WEIGHT})
                    cal.fit(test.iloc[pick].drop(columns=["set"]).reset_index(drop=True))
                    p = cal.predict(test.iloc[rest].drop(columns=["set"]))
                apes.append(median_ape(y[rest], p))
            out[name][f"calibrated on {k}"] = {"median_ape": float(np.median(apes)), "repeats": repeats}
    return out


def leave_one_model_out(sets: dict, max_folds: int) -> dict:
    runs = pd.concat(sets.values(), ignore_index=True, sort=False)
    models = sorted(runs["model"].astype(str).unique())
    rng = np.random.default_rng(0)
    folds = np.array_split(rng.permutation(models), min(max_folds, len(models)))
    preds = pd.DataFrame(index=runs.index, columns=["step_time_s", "step_lower", "step_upper"], dtype=float)
    const = np.full(len(runs), np.nan)
    for fold in folds:
        test = runs["model"].astype(str).isin(fold).to_numpy()
        model = _fit(runs.loc[~test], "new_model")
        p = _predict(model, runs.loc[test])
        preds.loc[test, p.columns.intersection(preds.columns)] = p[preds.columns].to_numpy()
        const[test] = baseline_const_mfu(runs.loc[~test], runs.loc[test])
    out = {}
    for name in sets:
        m = (runs["set"] == name).to_numpy()
        y = runs.loc[m, "step_time_s"].to_numpy(dtype=float)
        out[name] = {"layout": _cell(y, preds.loc[m]), "6ND@0.4": _cell(y, None, baseline_6nd(runs.loc[m])),
                     "const-MFU": _cell(y, None, const[m])}
    return out


# a job: where a set states them, also its release and precision recipe (another release is not another layout)
_JOB = ["set", "model", "seq_len", "global_batch_size", "gpu_count", "gpu_type", "precision", "release",
        "precision_reported"]
_LAYOUT = ["tp", "pp", "vp", "cp", "ep", "micro_batch_size", "zero_stage", "recompute"]


def _calibrated(prior: dict, runs: pd.DataFrame):
    """The layout model calibrated on ``runs`` (``prior``: a fit's coefficients), as an organisation's own runs
    calibrate it."""
    from perfmodel.models import CALIBRATION_PRIOR_WEIGHT, TrainingTimeModel

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        cal = TrainingTimeModel(method="layout", conformal=False,
                                regressor_params={"prior": prior, "prior_weight": CALIBRATION_PRIOR_WEIGHT})
        return cal.fit(runs.drop(columns=["set"]).reset_index(drop=True))


def ranking(sets: dict, calibrate: int = RANK_CALIBRATION_RUNS, repeats: int = 5) -> dict:
    """Within groups of >= 3 distinct layouts of one job, predicted by leave-one-set-out fits; and by the same fit
    calibrated on ``calibrate`` runs of the held-out set drawn from its *other* jobs (``repeats`` draws), as a team
    that has run a few jobs on its stack would rank the layouts of a new one."""
    rows = []
    rng = np.random.default_rng(0)
    for name, test in sets.items():
        train = pd.concat([v for k, v in sets.items() if k != name], ignore_index=True, sort=False)
        cols = [c for c in _JOB if c in test.columns]
        lay = [c for c in _LAYOUT if c in test.columns]
        t = test.copy()
        t["_layout"] = t[lay].apply(lambda c: c.map(str)).agg("|".join, axis=1) if lay else ""
        groups = [g for _, g in t.groupby(cols, dropna=False) if g["_layout"].nunique() >= 3]
        if not groups:
            continue
        model = _fit(train, "new_model")
        prior = dict(model.pipeline_.named_steps["regressor"].coef_)
        for g in groups:
            one = g.groupby("_layout").agg(step_time_s=("step_time_s", "median"), idx=("step_time_s", "idxmin"))
            queries = test.loc[one["idx"]]
            pred = _predict(model, queries)["step_time_s"].to_numpy()
            y = one["step_time_s"].to_numpy()
            rho = spearmanr(pred, y).statistic if len(y) >= 3 else np.nan
            best = y[np.argmin(pred)] <= 1.05 * y.min()
            random_pick = float(np.mean(y <= 1.05 * y.min()))
            other_jobs = np.flatnonzero(~test.index.isin(g.index))
            cal_rho, cal_best = [], []
            for _ in range(repeats if len(other_jobs) >= calibrate else 0):
                own = test.iloc[rng.choice(other_jobs, size=calibrate, replace=False)]
                with warnings.catch_warnings():
                    warnings.simplefilter("ignore")
                    p = _calibrated(prior, own).predict(queries.drop(columns=["set"]))
                cal_rho.append(spearmanr(p, y).statistic)
                cal_best.append(y[np.argmin(p)] <= 1.05 * y.min())
            # and calibrated on every run of the set's other jobs: what a stack's whole history teaches
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                p_all = _calibrated(prior, test.iloc[other_jobs]).predict(queries.drop(columns=["set"]))
            rows.append({"set": name, "layouts": len(y), "rho": rho, "fastest_within_5pct": bool(best),
                         "random_pick": random_pick, "all_rho": spearmanr(p_all, y).statistic,
                         "all_best": bool(y[np.argmin(p_all)] <= 1.05 * y.min()), "all_runs": len(other_jobs),
                         "calibrated_rho": float(np.mean(cal_rho)) if cal_rho else np.nan,
                         "calibrated_best": float(np.mean(cal_best)) if cal_best else np.nan})
    if not rows:
        return {"groups": 0}
    r = pd.DataFrame(rows)
    return {"groups": int(len(r)), "mean_spearman": float(r["rho"].mean()),
            # the spread of the mean over jobs: how far apart two models' rho must be to tell them apart
            "mean_spearman_standard_error": float(r["rho"].std(ddof=1) / np.sqrt(len(r))),
            "fastest_within_5pct": float(r["fastest_within_5pct"].mean()),
            "random_pick_within_5pct": float(r["random_pick"].mean()),
            "const_mfu_spearman": "undefined: one time for every layout of a job",
            f"calibrated on {calibrate} runs of the set's other jobs": {
                "repeats": repeats, "mean_spearman": float(r["calibrated_rho"].mean()),
                "fastest_within_5pct": float(r["calibrated_best"].mean())},
            "calibrated on every run of the set's other jobs": {
                "median_runs": float(r["all_runs"].median()), "mean_spearman": float(r["all_rho"].mean()),
                "fastest_within_5pct": float(r["all_best"].mean())},
            "by_set": {k: {"groups": int(len(g)), "mean_spearman": float(g["rho"].mean()),
                           "fastest_within_5pct": float(g["fastest_within_5pct"].mean()),
                           "calibrated_mean_spearman": float(g["calibrated_rho"].mean()),
                           "calibrated_fastest_within_5pct": float(g["calibrated_best"].mean()),
                           "all_other_jobs_mean_spearman": float(g["all_rho"].mean()),
                           "all_other_jobs_fastest_within_5pct": float(g["all_best"].mean())}
                       for k, g in r.groupby("set")}}


def scaling(sets: dict) -> list[dict]:
    """Throughput per device against the data-parallel degree, measured and predicted (leave-one-set-out)."""
    out = []
    for name, test in sets.items():
        if "dp" not in test.columns:
            continue
        cols = [c for c in ("model", "seq_len", "gpu_type", "precision", "micro_batch_size", "tp", "pp", "cp")
                if c in test.columns]
        groups = [g for _, g in test.groupby(cols, dropna=False) if g["dp"].nunique() >= 3]
        if not groups:
            continue
        train = pd.concat([v for k, v in sets.items() if k != name], ignore_index=True, sort=False)
        model = _fit(train, "new_model")
        for g in groups:
            g = g.sort_values("gpu_count")
            pred = _predict(model, g)["step_time_s"].to_numpy()
            per_dev = lambda t: (g["global_batch_size"].to_numpy(float) * g["seq_len"].to_numpy(float)  # noqa
                                 / (t * g["gpu_count"].to_numpy(float)))
            meas, predicted = per_dev(g["step_time_s"].to_numpy(float)), per_dev(pred)
            out.append({"set": name, "model": str(g["model"].iloc[0]), "gpu_type": str(g["gpu_type"].iloc[0]),
                        "devices": g["gpu_count"].astype(int).tolist(),
                        "measured_tokens_per_s_per_device": [round(float(v)) for v in meas],
                        "predicted_tokens_per_s_per_device": [round(float(v)) for v in predicted],
                        "measured_last_over_first": float(meas[-1] / meas[0]),
                        "predicted_last_over_first": float(predicted[-1] / predicted[0])})
    return out


def scaling_summary(series: list[dict]) -> dict:
    """Across the scaling series: the measured and predicted throughput per device at the most devices over the
    fewest (their means), how far apart the two are per series, and in how many series each falls."""
    if not series:
        return {"series": 0}
    meas = np.array([s["measured_last_over_first"] for s in series])
    pred = np.array([s["predicted_last_over_first"] for s in series])
    return {"series": len(series), "measured_mean_last_over_first": float(meas.mean()),
            "predicted_mean_last_over_first": float(pred.mean()),
            "mean_abs_difference": float(np.abs(meas - pred).mean()),
            "measured_falls": int((meas < 1).sum()), "predicted_falls": int((pred < 1).sum()),
            "both_fall": int(((meas < 1) & (pred < 1)).sum())}


def fp8_speedup(sets: dict) -> dict:
    out = {"measured": [], "predicted": []}
    for name, test in sets.items():
        cols = [c for c in _JOB + _LAYOUT if c in test.columns and c not in ("precision", "precision_reported")]
        pairs = [g for _, g in test.groupby(cols, dropna=False) if set(g["precision"]) >= {"bf16", "fp8"}]
        if not pairs:
            continue
        train = pd.concat([v for k, v in sets.items() if k != name], ignore_index=True, sort=False)
        model = _fit(train, "new_model")
        for g in pairs:
            b, f = g[g["precision"] == "bf16"].iloc[[0]], g[g["precision"] == "fp8"].iloc[[0]]
            out["measured"].append(float(b["step_time_s"].iloc[0] / f["step_time_s"].iloc[0]))
            out["predicted"].append(float(_predict(model, b)["step_time_s"].iloc[0]
                                          / _predict(model, f)["step_time_s"].iloc[0]))
    return {k: {"pairs": len(v), "median": float(np.median(v)) if v else None,
                "range": [float(min(v)), float(max(v))] if v else None} for k, v in out.items()}


def memory_and_refusals(sets: dict) -> dict:
    """Every published run: its layout's refusals, and its memory estimate against the device and against the
    published peak. A run whose recomputation its source does not state is estimated with full recomputation for
    the "does not fit" count (the frameworks' most memory-saving setting: the run may have used it)."""
    out = {}
    for name, test in sets.items():
        jobs = layout_jobs(test)
        refused = [j for j in jobs if job_problems(j)]
        rec_known = (test["recompute"].notna().to_numpy() if "recompute" in test.columns
                     else np.zeros(len(test), dtype=bool))
        not_fit, may_not, errors = 0, 0, []
        for j, (_, row), known in zip(jobs, test.iterrows(), rec_known):
            if j.problem:
                continue
            lay = j.layout if known else j.layout.with_(recompute="full")
            mem = estimate_memory(shape=j.shape, layout=lay, seq_len=j.seq_len, precision=j.precision,
                                  gpu_type=j.gpu_type, global_batch=j.global_batch)
            not_fit += mem.fits is False
            may_not += mem.fits is None
            published = row.get("peak_mem_bytes")
            if known and published is not None and np.isfinite(float(published)) and float(published) > 0:
                exact = estimate_memory(shape=j.shape, layout=j.layout, seq_len=j.seq_len, precision=j.precision,
                                        gpu_type=j.gpu_type, global_batch=j.global_batch)
                errors.append(exact.total_bytes / float(published) - 1)
        e = np.abs(errors)
        out[name] = {"rows": len(jobs), "refused": len(refused),
                     "refusal_reasons": sorted({"; ".join(job_problems(j)) for j in refused})[:5],
                     "recompute_unstated": int((~rec_known).sum()),
                     "completed_called_does_not_fit": int(not_fit), "completed_may_not_fit": int(may_not),
                     "published_peak_memory_rows": len(errors),
                     "memory_median_error": float(np.median(e)) if len(e) else None,
                     "memory_median_signed_error": float(np.median(errors)) if len(e) else None}
    return out


def memory_of_failed_runs() -> dict:
    """The published runs that ran out of memory (status ``oom``): how many the estimate calls "does not fit"."""
    out = {}
    for name in LLM_SETS:
        path = DATA / f"public_{name}.csv"
        if not path.is_file():
            continue
        runs = load_runs(path, include_failed=True)
        oom = runs[(runs["status"] == "oom") & is_layout_job(runs)].reset_index(drop=True)
        verdicts = []
        for j in layout_jobs(oom):
            if j.problem:
                continue
            verdicts.append(estimate_memory(shape=j.shape, layout=j.layout, seq_len=j.seq_len,
                                            precision=j.precision, gpu_type=j.gpu_type,
                                            global_batch=j.global_batch).fits)
        if verdicts:
            out[name] = {"oom_runs": len(verdicts), "does_not_fit": sum(v is False for v in verdicts),
                         "may_not_fit": sum(v is None for v in verdicts), "fits": sum(v is True for v in verdicts)}
    return out


def out_of_box(sets: dict, limit: int) -> dict:
    """predict_training_time and plan_llm_job with no history, on the dense decoder jobs: IN-SAMPLE (the bundled fit
    has these rows; the held-out figures are leave-one-set-out's). The layout is given whole (with the attention
    kernels the row states), and again with only its degrees (``predict_training_time`` and ``plan_llm_job`` then
    take the same defaults: their gap)."""
    import perfmodel
    from perfmodel.plan import plan_llm_job

    rows = []
    for name, test in sets.items():
        dense = test[(test["family"].astype(str) == "decoder")] if "family" in test.columns else test
        if len(dense) > limit:
            dense = dense.sample(limit, random_state=0)
        for j, (_, row) in zip(layout_jobs(dense), dense.iterrows()):
            if j.problem:
                continue
            lay = j.layout
            layout = {"tp": lay.tp, "pp": lay.pp, "cp": lay.cp, "vp": lay.vp, "micro_batch": lay.micro_batch,
                      "zero_stage": lay.zero_stage, "recompute": lay.recompute,
                      "sequence_parallel": lay.sequence_parallel}
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                try:
                    p = perfmodel.predict_training_time({"shape": j.shape, "params": float(row["params"]),
                                                         "flash_attention": j.flash},
                                                        seq_len=j.seq_len, global_batch=j.global_batch,
                                                        gpu_count=lay.devices, gpu_type=j.gpu_type, steps=100,
                                                        precision=j.precision, layout=layout,
                                                        gpus_per_node=j.gpus_per_node)
                    plan = plan_llm_job(shape=j.shape, params=float(row["params"]), seq_len=j.seq_len,
                                        global_batch=j.global_batch, gpu_count=lay.devices, gpu_type=j.gpu_type,
                                        steps=100, precision=j.precision, tensor_parallel=lay.tp,
                                        pipeline_parallel=lay.pp, context_parallel=lay.cp,
                                        virtual_stages=lay.vp, micro_batch=lay.micro_batch,
                                        zero_stage=lay.zero_stage, recompute=lay.recompute,
                                        sequence_parallel=lay.sequence_parallel, gpus_per_node=j.gpus_per_node,
                                        flash_attention=j.flash, allow_no_fit=True)
                except (LayoutError, DoesNotFitError, ValueError) as exc:
                    rows.append({"set": name, "error": str(exc)[:120]})
                    continue
                try:  # the degrees only: each entry point fills the rest with its defaults
                    degrees = {"tp": lay.tp, "pp": lay.pp, "cp": lay.cp}
                    p2 = perfmodel.predict_training_time({"shape": j.shape, "params": float(row["params"])},
                                                         seq_len=j.seq_len, global_batch=j.global_batch,
                                                         gpu_count=lay.devices, gpu_type=j.gpu_type, steps=100,
                                                         precision=j.precision, layout=degrees,
                                                         gpus_per_node=j.gpus_per_node)
                    plan2 = plan_llm_job(shape=j.shape, params=float(row["params"]), seq_len=j.seq_len,
                                         global_batch=j.global_batch, gpu_count=lay.devices, gpu_type=j.gpu_type,
                                         steps=100, precision=j.precision, tensor_parallel=lay.tp,
                                         pipeline_parallel=lay.pp, context_parallel=lay.cp,
                                         gpus_per_node=j.gpus_per_node, allow_no_fit=True)
                    gap2 = abs(plan2.prediction.step_seconds / p2.step_seconds - 1)
                except (LayoutError, DoesNotFitError, ValueError):
                    gap2 = np.nan
            rows.append({"set": name, "y": float(row["step_time_s"]), "predict": p.step_seconds,
                         "plan": plan.prediction.step_seconds, "6ND@0.4": float(baseline_6nd(dense.loc[[_]])[0]),
                         "gap_defaults": gap2})
    r = pd.DataFrame(rows)
    ok = r.dropna(subset=["y"]) if "y" in r.columns else r.iloc[0:0]
    res = {"jobs": int(len(ok)), "errors": int(r["error"].notna().sum()) if "error" in r.columns else 0}
    if len(ok):
        y = ok["y"].to_numpy()
        res.update({"predict_median_ape": float(median_ape(y, ok["predict"].to_numpy())),
                    "plan_median_ape": float(median_ape(y, ok["plan"].to_numpy())),
                    "6ND@0.4_median_ape": float(median_ape(y, ok["6ND@0.4"].to_numpy())),
                    "max_predict_plan_gap": float(np.max(np.abs(ok["plan"] / ok["predict"] - 1))),
                    "max_predict_plan_gap_degrees_only": float(np.nanmax(ok["gap_defaults"])),
                    "in_sample": "the bundled fit has these rows"})
        res["by_set"] = {k: {"jobs": int(len(g)), "predict": float(median_ape(g["y"], g["predict"])),
                             "6ND@0.4": float(median_ape(g["y"], g["6ND@0.4"]))} for k, g in ok.groupby("set")}
    return res


def bundled_coefficients(sets: dict) -> dict:
    """The layout model fitted on every set (as the bundled fit is): each coefficient, and whether it sits on a
    bound of :data:`perfmodel.models.LayoutRegressor`'s ``COEFFICIENTS``."""
    from perfmodel.models._layout import COEFFICIENTS

    model = _fit(pd.concat(sets.values(), ignore_index=True, sort=False), "seen")
    coef = model.pipeline_.named_steps["regressor"].coef_
    out = {}
    for name, value in coef.items():
        _, lo, hi, _ = COEFFICIENTS[name]
        bound = "lower bound" if np.isclose(value, lo, rtol=1e-3) else "upper bound" if np.isclose(value, hi, rtol=1e-3) \
            else ""
        out[name] = {"value": float(value), "bound": bound}
    return out


def sized_out_of_box(sets: dict) -> dict:
    """Dense decoder jobs asked the way a user without their shape asks: ``params``, ``flops_per_sample`` and
    ``family="decoder"``, devices, batch and precision, no sequence length and no layout. Out of the box the
    sequence their FLOPs imply routes them to the layout model (IN-SAMPLE: the bundled fit has these rows);
    beside it the route they took before, the bundled GPU history (``history="gpu"``, MLPerf: not in-sample for
    these sets), and 6·N·D at 0.4. Also how close the implied sequence is to the published one."""
    import perfmodel
    from perfmodel.transformer import sequence_for_flops, standard_shape

    out = {}
    cols = ["params", "flops_per_sample", "family", "batch_size", "gpu_count", "gpu_type", "precision"]
    for name, test in sets.items():
        dense = test[(test["family"].astype(str) == "decoder") & (test["n_experts"].fillna(0) == 0 if "n_experts"
                                                                  in test.columns else True)]
        dense = dense[dense["flops_per_sample"].notna() & np.isclose(dense["batch_size"], dense["batch_size"].round())]
        if not len(dense):
            continue
        # the batch as the set states it: per device, and the accumulation where the set gives one
        q = dense[cols + [c for c in ("grad_accum",) if c in dense.columns]].assign(steps=1).reset_index(drop=True)
        y = dense["step_time_s"].to_numpy(dtype=float)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            new = perfmodel.predict_many(q)
            old = perfmodel.predict_many(q, history="gpu")
        implied = np.array([sequence_for_flops(standard_shape(p), f) or np.nan for p, f in
                            zip(dense["params"], dense["flops_per_sample"])], dtype=float)
        ratio = implied / dense["seq_len"].to_numpy(dtype=float)
        out[name] = {"jobs": int(len(q)), "implied_seq_within_5pct": float(np.mean(np.abs(ratio - 1) <= 0.05)),
                     "out of the box (layout, in-sample)": float(median_ape(y, new["step_time_s"].to_numpy())),
                     "coverage": float(coverage(y, new["step_lower"].to_numpy(), new["step_upper"].to_numpy())),
                     "the GPU history (the route before)": float(median_ape(y, old["step_time_s"].to_numpy())),
                     "6ND@0.4": float(median_ape(y, baseline_6nd(dense)))}
    return out


def extrapolation(sets: dict) -> dict:
    """An organisation's own small runs asked about much larger jobs: LLM Foundry's runs of models up to 3B
    parameters on at most 8 GPUs as the own history, its 7B–70B runs on 64–512 GPUs as the questions. The layout
    model calibrated on the small runs as :func:`perfmodel.predict_many` with ``history=`` does it (the prior's
    weight, the error book's floor on the interval), except that its prior is fitted on the *other* sets (the
    bundled one has seen LLM Foundry's large runs); beside the generic ``auto`` fit on the same runs (the own-history
    answer before the layout model) and 6ND@0.4."""
    from perfmodel.models import CALIBRATION_PRIOR_WEIGHT

    lf = sets.get("llmfoundry")
    if lf is None:
        return {}
    small = lf[(lf["params"] <= 3.5e9) & (lf["gpu_count"] <= 8)].drop(columns=["set"]).reset_index(drop=True)
    large = lf[(lf["params"] >= 6e9) & (lf["gpu_count"] >= 64)].drop(columns=["set"]).reset_index(drop=True)
    y = large["step_time_s"].to_numpy(dtype=float)
    train = pd.concat([v for k, v in sets.items() if k != "llmfoundry"], ignore_index=True, sort=False)
    prior = dict(_fit(train, "seen").pipeline_.named_steps["regressor"].coef_)
    out = {"own_runs": int(len(small)), "questions": int(len(large)),
           "note": "the interval's floor is the bundled error book's, whose calibrated entries include LLM Foundry's "
                   "own errors"}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        cal = fit_history(read_history(small), "layout", kind="new_model",
                          regressor_params={"prior": prior, "prior_weight": CALIBRATION_PRIOR_WEIGHT})
        cal.calibration_runs_ = len(small)  # a fit calibrated on these own runs: the book's calibrated floor
        pred = cal.predict_interval(large, CONFIDENCE)
        generic = fit_history(read_history(small), "auto", kind="new_model")
        gen = generic.predict_interval(large, CONFIDENCE)
    for label, p in (("layout, calibrated on the small runs", pred), (f"auto ({generic.method})", gen)):
        ratio = p["step_time_s"].to_numpy() / y
        out[label] = {**_cell(y, p), "worst_ratio": float(np.max(np.maximum(ratio, 1 / ratio)))}
    out["6ND@0.4"] = _cell(y, None, baseline_6nd(large))
    return out


CPU_HOST = "cpu-host"
_CPU_GROUP = ["model", "micro_batch_size", "global_batch_size"]
_CPU_LAYOUT = ["tp", "pp", "dp", "sequence_parallel"]


def _register_cpu_host() -> dict | None:
    """Register this host (from ``results/cpu_host_figures.json``) as a device the layout model can price."""
    from perfmodel.hardware import register_device

    path = ROOT / "benchmarks" / "results" / "cpu_host_figures.json"
    if not path.is_file():
        return None
    f = json.loads(path.read_text())
    bus = f["gloo_allreduce_bus_gbps"]["median"]
    register_device(name=CPU_HOST, vendor="host", source=f"measured: {rel(path)} (benchmarks/cpu_host_figures.py)",
                    fp32_tflops=f["fp32_matmul_gflops"]["median"] / 1e3,
                    memory_bandwidth_gbps=f["copy_gbps"]["median"], interconnect_gbps=2 * bus, network_gbps=bus,
                    interconnect="gloo (loopback)", nvlink_domain=f["cores"] * 2, replace=True)
    return f


def _rank_groups(runs: pd.DataFrame, pred: np.ndarray) -> dict:
    """Within each model × micro-batch × global batch: Spearman ρ over its layouts (repeats at their median), and
    whether the predicted fastest layout is within 5% of the measured fastest (beside a random pick)."""
    t = runs.assign(_pred=pred, _layout=runs[_CPU_LAYOUT].astype(str).agg("|".join, axis=1))
    rows = []
    for _, g in t.groupby(_CPU_GROUP, dropna=False):
        one = g.groupby("_layout").agg(y=("step_time_s", "median"), p=("_pred", "median"))
        if len(one) < 3:
            continue
        y, p = one["y"].to_numpy(), one["p"].to_numpy()
        rows.append({"rho": spearmanr(p, y).statistic, "best": y[np.argmin(p)] <= 1.05 * y.min(),
                     "random": float(np.mean(y <= 1.05 * y.min()))})
    r = pd.DataFrame(rows)
    return {"groups": int(len(r)), "mean_spearman": float(r["rho"].mean()),
            "fastest_within_5pct": float(r["best"].mean()), "random_pick_within_5pct": float(r["random"].mean())}


def measured_here(sets: dict) -> dict:
    """The layout runs measured on this project's CPU host: the fit on the published sets, then the same model
    calibrated on the runs of every other layout (leave-one-layout-out, the fit's coefficients as the prior),
    beside 6ND@0.4 and const-MFU (median utilisation of the other layouts' runs)."""
    from perfmodel.models import CALIBRATION_PRIOR_WEIGHT, TrainingTimeModel

    path = DATA / "runs_cpu_layouts.csv"
    figures = _register_cpu_host()
    if figures is None or not path.is_file():
        return {"skipped": "no data/runs_cpu_layouts.csv or benchmarks/results/cpu_host_figures.json"}
    runs = load_runs(path)
    runs = runs.loc[is_layout_job(runs)].assign(gpu_type=CPU_HOST).reset_index(drop=True)
    y = runs["step_time_s"].to_numpy(dtype=float)
    train = pd.concat(sets.values(), ignore_index=True, sort=False)
    published = _fit(train, "new_model")
    pred_pub = _predict(published, runs.assign(set="cpu"))
    prior = dict(published.pipeline_.named_steps["regressor"].coef_)
    lay = runs[_CPU_LAYOUT].astype(str).agg("|".join, axis=1)
    lolo, const = np.full(len(runs), np.nan), np.full(len(runs), np.nan)
    for key in lay.unique():
        test = (lay == key).to_numpy()
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            cal = TrainingTimeModel(method="layout", conformal=False,
                                    regressor_params={"prior": prior, "prior_weight": CALIBRATION_PRIOR_WEIGHT})
            cal.fit(runs.loc[~test].reset_index(drop=True))
            lolo[test] = cal.predict(runs.loc[test])
        const[test] = baseline_const_mfu(runs.loc[~test], runs.loc[test])
    six = baseline_6nd(runs)
    with warnings.catch_warnings():  # the host's latencies, calibrated on every run
        warnings.simplefilter("ignore")
        every = TrainingTimeModel(method="layout", conformal=False,
                                  regressor_params={"prior": prior, "prior_weight": CALIBRATION_PRIOR_WEIGHT})
        host_coef = every.fit(runs).pipeline_.named_steps["regressor"].coef_
    # the noise floor: each run against the median of its configuration's other repeats
    cfg = _CPU_GROUP + _CPU_LAYOUT
    others = runs.groupby(cfg, dropna=False)["step_time_s"].transform(
        lambda s: [float(np.median(s.drop(i))) if len(s) > 1 else np.nan for i in s.index])
    ok = others.notna().to_numpy()
    return {"runs": int(len(runs)), "layouts": int(lay.nunique()), "host": figures,
            "repeat_noise_median_ape": float(median_ape(y[ok], others.to_numpy(dtype=float)[ok])),
            "layout, fitted on the published sets": {**_cell(y, pred_pub),
                                                     **_rank_groups(runs, pred_pub["step_time_s"].to_numpy())},
            "layout, calibrated leave-one-layout-out": {**_cell(y, None, lolo), **_rank_groups(runs, lolo)},
            "6ND@0.4": {**_cell(y, None, six), **_rank_groups(runs, six)},
            "const-MFU (other layouts)": _cell(y, None, const),
            "calibrated on every run: seconds per collective call and per kernel launched": {
                "collective_s": host_coef["collective_s"], "launch_s": host_coef["launch_s"]}}


def _md(res: dict) -> str:
    lines = ["# LLM layouts (issue #35)", "", f"Sets: {', '.join(f'{k} ({v} rows)' for k, v in res['sets'].items())}.",
             "", "## Leave-one-set-out (median APE %, 90% coverage, median half-width)", "",
             "| set | layout | coverage | half-width | 6ND@0.4 | const-MFU |", "|---|---|---|---|---|---|"]
    for k, v in res["leave_one_set_out"].items():
        lay = v["layout"]
        lines.append(f"| {k} | {lay['median_ape']:.1f} | {lay['coverage']:.2f} | {lay['half_width']:.2f} | "
                     f"{v['6ND@0.4']['median_ape']:.1f} | {v['const-MFU']['median_ape']:.1f} |")
        for part in ("dense", "moe"):
            if part in v:
                lp = v[part]["layout"]
                lines.append(f"| {k}, {part} only ({lp['rows']}) | {lp['median_ape']:.1f} | {lp['coverage']:.2f} | "
                             f"{lp['half_width']:.2f} | {v[part]['6ND@0.4']['median_ape']:.1f} | |")
    lines += ["", "Calibrated on k of the held-out set's own runs (median APE % on its other runs, median of the "
              "random draws):", "", "| set | k = 1 | k = 3 | k = 9 |", "|---|---|---|---|"]
    for k, v in res["leave_one_set_out"].items():
        lines.append(f"| {k} | " + " | ".join(f"{v[f'calibrated on {n}']['median_ape']:.1f}" for n in (1, 3, 9))
                     + " |")
    lines += ["", "## Leave-one-model-out", "", "| set | layout | coverage | half-width | 6ND@0.4 | const-MFU |",
              "|---|---|---|---|---|---|"]
    for k, v in res["leave_one_model_out"].items():
        lay = v["layout"]
        lines.append(f"| {k} | {lay['median_ape']:.1f} | {lay['coverage']:.2f} | {lay['half_width']:.2f} | "
                     f"{v['6ND@0.4']['median_ape']:.1f} | {v['const-MFU']['median_ape']:.1f} |")
    rk = res["ranking"]
    lines += ["", "## Own small runs → a much larger job", "", "```", json.dumps(res["extrapolation"], indent=1),
              "```"]
    lines += ["", "## Layout ranking", "", "```", json.dumps(rk, indent=1), "```", "", "## Scaling", "", "```"]
    lines += [json.dumps(s) for s in res["scaling"]]
    lines += ["```", "", "Summary:", "", "```", json.dumps(res["scaling_summary"], indent=1)]
    lines += ["```", "", "## fp8 over bf16", "", "```", json.dumps(res["fp8"], indent=1), "```", "",
              "## Memory and refusals", "", "```", json.dumps(res["memory"], indent=1),
              json.dumps(res["memory_oom"], indent=1), "```", "",
              "## Out of the box: one answer per job (in-sample)", "", "```", json.dumps(res["out_of_box"], indent=1), "```"]
    if "bundled_coefficients" in res:
        lines += ["", "## The coefficients fitted on every set (as the bundled fit)", "", "| coefficient | value | |",
                  "|---|---|---|"]
        lines += [f"| {k} | {v['value']:.4g} | {v['bound']} |" for k, v in res["bundled_coefficients"].items()]
    if "sized_out_of_box" in res:
        lines += ["", "## Out of the box, a decoder given by its size and FLOPs only (no sequence, no layout)", "",
                  "```", json.dumps(res["sized_out_of_box"], indent=1), "```"]
    lines += ["", "## Measured here: CPU layout runs (data/runs_cpu_layouts.csv)", "", "```",
              json.dumps(res.get("measured_here"), indent=1), "```"]
    if "confirmation" in res:
        lines += ["", "## Confirmation set (MLPerf GPT-3 / Llama 3.1 405B; nothing chosen on it)", "", "```",
                  json.dumps(res["confirmation"], indent=1), "```"]
    return "\n".join(lines) + "\n"


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="subsample each set to 60 rows (a smoke test, not a result)")
    ap.add_argument("--folds", type=int, default=10, help="leave-one-model-out refits")
    ap.add_argument("--confirm", action="store_true",
                    help="also predict the confirmation set (MLPerf GPT-3 / Llama 3.1 405B with layouts), once")
    ap.add_argument("--reconfirm", action="store_true",
                    help="predict the confirmation set again after a change of the model: labelled a second look "
                         "(no longer clean), the first run's figures kept beside")
    ap.add_argument("--out", type=Path, default=ROOT / "benchmarks" / "results" / "llm_layouts")
    args = ap.parse_args(argv)
    t0 = time.time()
    sets = load_sets(args.quick)
    res = {"sets": {k: len(v) for k, v in sets.items()}}
    print("sets:", res["sets"], flush=True)
    res["leave_one_set_out"] = leave_one_set_out(sets)
    print(json.dumps(res["leave_one_set_out"], indent=1), flush=True)
    res["leave_one_model_out"] = leave_one_model_out(sets, args.folds)
    print(json.dumps(res["leave_one_model_out"], indent=1), flush=True)
    res["ranking"] = ranking(sets)
    print("ranking:", json.dumps(res["ranking"]), flush=True)
    res["scaling"] = scaling(sets)
    res["scaling_summary"] = scaling_summary(res["scaling"])
    res["extrapolation"] = extrapolation(sets)
    print("extrapolation:", json.dumps(res["extrapolation"]), flush=True)
    res["fp8"] = fp8_speedup(sets)
    print("fp8:", json.dumps(res["fp8"]), flush=True)
    res["memory"] = memory_and_refusals(sets)
    res["memory_oom"] = memory_of_failed_runs()
    print("memory:", json.dumps(res["memory"]), json.dumps(res["memory_oom"]), flush=True)
    res["out_of_box"] = out_of_box(sets, limit=15 if args.quick else 60)
    print("out of box:", json.dumps(res["out_of_box"]), flush=True)
    res["bundled_coefficients"] = bundled_coefficients(sets)
    print("coefficients:", json.dumps(res["bundled_coefficients"]), flush=True)
    res["sized_out_of_box"] = sized_out_of_box(sets)
    print("sized out of box:", json.dumps(res["sized_out_of_box"]), flush=True)
    res["measured_here"] = measured_here(sets)
    print("measured here:", json.dumps(res["measured_here"]), flush=True)
    before = json.loads(Path(f"{args.out}.json").read_text()) if Path(f"{args.out}.json").is_file() else {}
    if args.confirm:
        res["confirmation"] = confirmation(sets)
        print("confirmation:", json.dumps(res["confirmation"]), flush=True)
    elif args.reconfirm:
        old = before.get("confirmation", {})
        first = old.get("first_run") or {k: v for k, v in old.items() if k not in ("carried_over", "rerun")}
        res["confirmation"] = {**confirmation(sets), "rerun": "a second look after a change of the model (no "
                               "longer a clean confirmation); first_run holds the clean run's figures",
                               "first_run": first}
        print("confirmation (rerun):", json.dumps(res["confirmation"]), flush=True)
    elif "confirmation" in before:  # the confirmation is run once: a later run keeps its figures
        res["confirmation"] = {**before["confirmation"], "carried_over": "from an earlier run (not rerun)"}
    res["seconds"] = round(time.time() - t0, 1)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    Path(f"{args.out}.json").write_text(json.dumps(res, indent=1, default=float) + "\n")
    Path(f"{args.out}.md").write_text(_md(res))
    print(f"wrote {rel(Path(f'{args.out}.json'))} and .md in {res['seconds']} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
