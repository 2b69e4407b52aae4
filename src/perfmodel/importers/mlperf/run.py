"""One run record from a result log's text, its system description and its launch config (:func:`summarize_run`)."""

from __future__ import annotations

import statistics
from collections.abc import Mapping
from datetime import datetime, timezone

import numpy as np

from ...exceptions import MLPerfFormatError
from ...hardware import get_spec
from .catalogue import BENCHMARKS, CHECK_HIGH, CHECK_LOW, DEFAULT_TIMING, STAMP_CHECK_ORDER, Benchmark
from .configs import implementation_precision
from .devices import peak_flops, resolve_device
from .layout import layout_columns
from .log import (
    USED_KEYS,
    as_int,
    block_segments,
    eval_point_segments,
    eval_segments,
    first_value,
    log_precision,
    number,
    parse_mllog,
    tracked_stats,
)

__all__ = ["summarize_run"]

#: Log values every run record reads (``None`` where the log does not state one).
_LOG_SETTINGS = ("global_batch_size", "max_sequence_length", "train_samples", "samples_per_epoch",
                 "gradient_accumulation_steps", "seed")


def summarize_run(text: str, system_info: Mapping | None = None, *, benchmark: str | None = None,
                  source_path: str = "", implementation: Mapping[str, str] | None = None, **provenance) -> dict:
    """Derive one run record from a result log's text and its system description.

    Parameters
    ----------
    text : str
        The whole ``result_<n>.txt``.
    system_info : mapping or None
        The parsed ``systems/<system>.json`` (None when missing: ``gpu_count`` is then NaN).
    benchmark : str, optional
        Benchmark name when the log lacks ``submission_benchmark`` (taken from the folder name).
    source_path : str
        Where the log came from (recorded as it is).
    implementation : mapping of str to str, optional
        The files of the submission's ``<submitter>/benchmarks/<benchmark>/implementations/`` (path -> text;
        see :func:`is_implementation_file`). Where neither the log nor the system description states the
        precision, or the log states only a generic 16-bit switch (``16-bits training: True``, ``amp=True``,
        ``precision=16``: mixed precision on, fp8 not ruled out), the launch config of the run's system
        (``provenance["system"]``) is read for it (:func:`implementation_precision`); its fp8 counts only on a
        device with an fp8 peak in :mod:`perfmodel.hardware`, and where it overrides such a log line the
        evidence keeps the line (``log: 16-bits training: true; <config evidence>``).
    **provenance
        Extra columns recorded as they are (``round``, ``source_commit``, ``submitter``, ``system``).

    Returns
    -------
    dict
        One record; see the module docstring and data/README.md for the columns.

    Raises
    ------
    MLPerfFormatError
        If the text has no ``:::MLLOG`` events.
    """
    events = parse_mllog(text, keys=USED_KEYS)
    if not events:
        raise MLPerfFormatError(f"{source_path or 'the text'} holds no ':::MLLOG' lines: not an MLPerf result log.")
    bench_name = str(first_value(events, "submission_benchmark") or benchmark or "").strip().lower()
    if bench_name == "ssd" and benchmark == "retinanet":
        bench_name = "retinanet"
    bench = BENCHMARKS.get(bench_name)
    cfg, early = _log_settings(events)
    gbs = cfg["global_batch_size"]
    system = dict(system_info) if isinstance(system_info, Mapping) else {}
    accel, per_node, nodes, gpu_count = _system_counts(system)
    starts = [e["time_ms"] for e in events if e["key"] == "run_start"]
    stops = [e for e in events if e["key"] == "run_stop"]
    ttt = (stops[-1]["time_ms"] - starts[0]) / 1000.0 if starts and stops else None
    mlperf_status = str(stops[-1]["metadata"].get("status", "")).lower() if stops else "missing"
    timing = _step_time(events, bench, cfg, starts, stops)
    gpu_type = resolve_device(accel)
    reported, prec_src, evidence, precision = _run_precision(events, text, system, accel, gpu_type, implementation,
                                                             provenance.get("system"))
    division = first_value(events, "submission_division") or system.get("division")
    reasons = _exclusions(early, bench, bench_name, timing, gpu_count, gpu_type, accel, gbs, division)
    per_device = gbs / gpu_count if gbs and gpu_count else None
    timestamp = (datetime.fromtimestamp(starts[0] / 1000.0, tz=timezone.utc).isoformat(timespec="seconds")
                 if starts else None)
    status = "ok" if mlperf_status == "success" else "error"
    return {
        "status": status,
        "error": None if status == "ok" else f"MLPerf run_stop status {mlperf_status!r}",
        "model": bench.model if bench else bench_name,
        "family": bench.family if bench else None,
        "params": bench.params if bench else None,
        "flops_per_sample": bench.flops_per_sample if bench else None,
        "flops_method": "analytic" if bench and bench.flops_per_sample else None,
        "batch_size": int(per_device) if per_device is not None and per_device == int(per_device) else None,
        "gpu_count": gpu_count,
        "gpu_type": gpu_type,
        "precision": precision,
        **_timing_columns(timing, gbs),
        "nodes": nodes,
        "source": "mlperf",
        "protocol": f"MLPerf Training result log; step time by {timing['method']}",
        "timestamp": timestamp,
        "benchmark": bench_name,
        "accelerator_name": accel,
        "accelerators_per_node": per_node,
        "global_batch_size": gbs,
        "batch_size_per_device": per_device,
        "gradient_accumulation_steps": cfg["gradient_accumulation_steps"],
        "step_time_method": timing["method"],
        "time_to_train_s": ttt,
        "mlperf_status": mlperf_status,
        "throughput_check_ratio": timing["check"],
        "precision_reported": reported,
        "precision_source": prec_src,
        "precision_evidence": evidence,
        "framework": system.get("framework"),
        "division": division,
        "excluded_reason": "; ".join(reasons) or None,
        "source_path": source_path,
        **provenance,
        **layout_columns(bench_name, implementation, provenance.get("system"), system, gpu_type, gbs,
                         cfg["gradient_accumulation_steps"]),
    }


def _system_counts(system: Mapping) -> tuple:
    """``(accelerator name, accelerators per node, nodes, device count)`` of a system description (None where it
    does not say, or says something no system has)."""
    accel = system.get("accelerator_model_name")
    accel = accel.strip() or None if isinstance(accel, str) else None
    per_node = as_int(system.get("accelerators_per_node"))
    nodes = as_int(system.get("number_of_nodes"))
    gpu_count = per_node * nodes if per_node and nodes and per_node > 0 and nodes > 0 else None
    return accel, per_node, nodes, gpu_count


def _timing_columns(timing: dict, gbs: float | None) -> dict:
    """The step-time columns of a record (in their order), from :func:`_step_time`'s result."""
    values, method, pooled, step = timing["values"], timing["method"], timing["pooled"], timing["step"]
    mean = float(np.mean(values)) if values else None
    std = float(np.std(values, ddof=1)) if len(values) > 1 else None
    return {
        "step_time_s": step,
        "step_time_median_s": float(np.median(values)) if values else None,
        "step_time_std_s": std,
        "step_time_cv": std / mean if std is not None and mean else None,
        "steps_timed": (round(sum(s for _, s in pooled[method]) / gbs) if method in pooled and gbs else None),
        "segments_used": len(values) or None,
        "samples_per_s": gbs / step if gbs and step else None,
    }


def _log_settings(events) -> tuple[dict, list[str]]:
    """The log's global batch, sequence length, sample counts, accumulation and seed (:data:`_LOG_SETTINGS`),
    and why a value was dropped: values no run can have leave the run kept, marked, and never fitted."""
    cfg = {k: number(first_value(events, k)) for k in _LOG_SETTINGS}
    early = []
    for key in ("global_batch_size", "gradient_accumulation_steps", "max_sequence_length", "train_samples",
                "samples_per_epoch"):
        value = cfg[key]
        if value is not None and not (value >= 1 and value.is_integer()):
            early.append(f"{key} {value:g} is not a positive integer")
            cfg[key] = None
    return cfg, early


def _step_time(events, bench: Benchmark | None, cfg: dict, starts: list, stops: list) -> dict:
    """The step time by the first method the log allows (the package docstring), the values it pools, the
    timestamp segments of each method, and the timestamp / logged throughput check."""
    gbs = cfg["global_batch_size"]
    thr, st = tracked_stats(events)
    if bench is not None and bench.throughput_unit == "tokens":  # e.g. GPT-3: tokens/s -> sequences/s
        seq = cfg["max_sequence_length"] or bench.seq_len
        thr = [t / seq for t in thr] if seq else []
    eval_segs = eval_segments(events, bench, cfg)
    point_segs = [] if eval_segs else eval_point_segments(events, bench, cfg)
    pooled = {  # timestamp segments (seconds, samples), pooled: total time / total samples
        "blocks_samples_count": block_segments(events, bench, cfg, samples_count_only=True),
        "eval_intervals": eval_segs, "eval_points": point_segs, "blocks": block_segments(events, bench, cfg),
    }
    if gbs and starts and stops and cfg["train_samples"] and bench is not None and bench.run_average:
        pooled["run_average"] = [((stops[-1]["time_ms"] - starts[0]) / 1000.0, cfg["train_samples"])]
    candidates = {name: [gbs * t / n for t, n in segs] if gbs else [] for name, segs in pooled.items()}
    candidates["tracked_stats_step_time"] = (st[1:] if len(st) > 1 else st) if st else []
    candidates["tracked_stats"] = [gbs / t for t in (thr[1:] if len(thr) > 1 else thr)] if gbs else []
    method, values, step = None, [], None
    for name in (bench.timing if bench else DEFAULT_TIMING):
        if candidates.get(name):
            method, values = name, candidates[name]
            segs = pooled.get(name)
            step = gbs * sum(t for t, _ in segs) / sum(n for _, n in segs) if segs else statistics.median(values)
            break
    # Cross-check: throughput from timestamps / throughput the run logged (independent sources).
    stamp = next((pooled[k] for k in STAMP_CHECK_ORDER if pooled.get(k)), None)
    stamp_thr = sum(n for _, n in stamp) / sum(t for t, _ in stamp) if stamp else None
    logged_thr = None
    if candidates["tracked_stats_step_time"] and gbs:
        logged_thr = gbs / statistics.median(candidates["tracked_stats_step_time"])
    elif thr:
        logged_thr = statistics.median(thr[1:] if len(thr) > 1 else thr)
    check = stamp_thr / logged_thr if stamp_thr and logged_thr else None
    return {"method": method, "values": values, "step": step, "pooled": pooled, "check": check}


def _run_precision(events, text: str, system: dict, accel: str | None, gpu_type: str | None,
                   implementation: Mapping[str, str] | None, system_name) -> tuple:
    """``(reported, source, evidence, precision)``: what the log, the system description or the launch config
    states (``summarize_run``'s ``implementation``), and what ran (fp8 only on a device with an fp8 peak)."""
    reported, prec_src, evidence, generic = log_precision(events, text, system, accel)
    if ((prec_src == "assumed" or generic) and gpu_type is not None and get_spec(gpu_type).peak_tflops("fp8")
            and implementation):
        # the log and the system description say nothing, or the log only says that mixed precision is on
        # (which does not rule out fp8 matmuls): the launch config of the run's system may say fp8
        found = implementation_precision(implementation, str(system_name or ""), system, device=gpu_type)
        if found is not None:
            log_line = f"log: {evidence}; " if generic else ""
            reported, prec_src, evidence = found[0], found[1], log_line + found[2]
    # fp8 where the log says so and the device has an fp8 peak; else the 16-bit type its matmuls fall back to
    precision = reported
    if reported == "fp8" and (gpu_type is None or not get_spec(gpu_type).peak_tflops("fp8")):
        precision = "bf16"
    return reported, prec_src, evidence, precision


def _exclusions(early: list[str], bench: Benchmark | None, bench_name: str, timing: dict, gpu_count, gpu_type,
                accel, gbs, division) -> list[str]:
    """Why a run cannot be fitted (its ``excluded_reason``, in this order), empty where it can."""
    reasons = list(early)
    if bench is None:
        reasons.append(f"benchmark {bench_name or '?'} not in the table")
    elif bench.params is None:
        reasons.append(f"params not sourced for {bench_name}")
    elif bench.flops_per_sample is None:  # perfmodel would fall back to 6*params, far off for a diffusion UNet
        reasons.append(f"flops_per_sample not sourced for {bench_name}")
    step, check = timing["step"], timing["check"]
    if step is None:
        reasons.append("no step time derivable")
    if gpu_count is None:
        reasons.append("accelerator count unknown (system JSON missing or incomplete)")
    if gpu_type is None:
        reasons.append(f"accelerator {accel!r} does not resolve in perfmodel.hardware")
    if check is not None and not (CHECK_LOW <= check <= CHECK_HIGH):
        reasons.append(f"logged throughput and timestamps disagree (ratio {check:.3g})")
    per_device = gbs / gpu_count if gbs and gpu_count else None
    peak = peak_flops(gpu_type)
    if step and gpu_count and gbs and peak and bench is not None and bench.flops_per_sample:
        achieved = bench.flops_per_sample * gbs / step / gpu_count
        if achieved > peak:
            reasons.append(f"implied {achieved / 1e12:.0f} TFLOP/s per device exceeds the device's fastest dense "
                           f"peak ({peak / 1e12:.0f}): the log's sample counts or the FLOPs figure do not fit this "
                           "run")
    if per_device is not None and per_device != int(per_device):
        reasons.append("global batch not divisible by the accelerator count (model parallel)")
    if str(division).strip().lower() == "open":
        # the open division may change the model, its size or the training method: the benchmark's FLOPs per
        # sample (the reference model's) do not describe the run
        reasons.append("open division: the model or training method may differ from the benchmark's reference")
    return reasons
