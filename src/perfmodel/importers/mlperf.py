"""Import MLPerf Training results as perfmodel run records: one row per result log.

MLPerf Training submissions (https://github.com/mlcommons/training_results_v*) hold, per submitter,
``results/<system>/<benchmark>/result_<n>.txt`` — a run's stdout with ``:::MLLOG {json}`` lines — and
``systems/<system>.json`` describing the hardware (``accelerator_model_name``, ``accelerators_per_node``,
``number_of_nodes``, ``framework``, ...). This module parses both with its own small parser (no dependency on
``mlperf-logging``: only a handful of keys are needed, and the logs of nine rounds differ in ways a strict
compliance checker rejects) and derives a steady-state time per optimizer step:

``tracked_stats``
    The median of the ``throughput`` (or ``imgs_sec``) values the run logged in ``tracked_stats`` events, the
    first one left out as warm-up when there are several; ``step_time_s = global_batch_size / throughput``.
    The MLPerf reference code logs these in samples per second over training time only. Where a run logs
    ``train_step_time`` (Llama 3.1 405B) that is used directly (``tracked_stats_step_time``).
``eval_intervals``
    From timestamps: the training stretches between one evaluation's ``eval_stop`` and the next ``eval_start``
    (so evaluation is excluded and the stretch before the first evaluation, with warm-up, is left out), with
    the samples trained in each stretch read from the evaluations' ``epoch_num`` / ``samples_count``
    (in samples, tokens or epochs depending on the benchmark, see :data:`BENCHMARKS`).
``blocks``
    From ``block_start`` / ``block_stop`` pairs (evaluations inside a block subtracted), the first block left
    out when there are several.

Where both a throughput and timestamps are present, ``throughput_check_ratio`` is the timestamp-derived
throughput divided by the logged one: a check on the units (it should be near 1; warm-up and host work in the
timestamped stretches make it a little below 1).

Sizes and FLOPs come from :data:`BENCHMARKS`, each figure cited; benchmarks without a sourced parameter count
or FLOPs figure get NaN there and an ``excluded_reason`` (perfmodel would otherwise fall back to 6·params
FLOPs per sample, far off for a diffusion UNet or a recommender).

Examples
--------
::

    from perfmodel.importers import from_mlperf
    runs = from_mlperf(["training_results_v4.0/NVIDIA"], round="v4.0")
"""

from __future__ import annotations

import hashlib
import json
import logging
import math
import os
import re
import statistics
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path
from typing import Iterable, Mapping

import numpy as np
import pandas as pd

from ..exceptions import MLPerfFormatError, UnknownHardwareError
from ..hardware import get_spec, resolve_gpu_type
from ._records import read_json_file

__all__ = [
    "BENCHMARKS",
    "Benchmark",
    "MLPerfFormatError",
    "epoch_times",
    "from_mlperf",
    "parse_mllog",
    "summarize_run",
    "find_result_files",
    "loadable",
]

logger = logging.getLogger(__name__)

_MARKER = ":::MLLOG"
_PREC_KEY_HINTS = ("fp8", "fp16", "bf16", "precision", "dtype", "amp")
#: The keys summarize_run reads.
_USED_KEYS = frozenset({
    "submission_benchmark", "submission_division", "global_batch_size", "max_sequence_length", "train_samples",
    "samples_per_epoch", "gradient_accumulation_steps", "seed", "run_start", "run_stop", "eval_start",
    "eval_stop", "block_start", "block_stop", "tracked_stats", "eval_accuracy",
})


# ----------------------------------------------------------------------------------------------- benchmark table
@dataclass(frozen=True)
class Benchmark:
    """What one MLPerf benchmark trains, and how big it is.

    ``position_unit`` says what ``epoch_num`` counts in the benchmark's logs: ``samples``, ``tokens`` (divided
    by ``max_sequence_length`` to get sequences) or ``epochs`` (multiplied by ``samples_per_epoch`` or
    ``train_samples``). ``params``/``flops_per_sample`` are ``None`` where no figure could be sourced.

    Attributes
    ----------
    model : str
        The ``model`` name the records get (e.g. ``resnet50-v1.5``).
    family : str
        The records' ``family`` (``cnn``, ``transformer``...).
    params : float or None
        Parameter count; None where none could be sourced (the run is then marked ``excluded_reason``).
    flops_per_sample : float or None
        Training FLOPs (forward + backward) per sample; None where none could be sourced (likewise excluded).
    position_unit : {"samples", "tokens", "epochs"}
        What ``epoch_num`` counts in the benchmark's logs.
    sample : str
        What one sample is, in words ("one 224x224 ImageNet image").
    source : str
        Where ``params`` and ``flops_per_sample`` come from (the citation).
    timing : tuple of str, default=()
        The step-time methods to try, in order (module docstring); empty means the default order.
    seq_len : int, optional
        Tokens per sample, where the logs count tokens and may not say ``max_sequence_length``.
    samples_per_epoch : int, optional
        The dataset size, where the logs' ``train_samples`` is not it.
    throughput_unit : str, default="samples"
        What a logged ``tracked_stats`` throughput counts per second (``tokens``: divided by the sequence
        length).
    run_average : bool, default=False
        Allow the whole-run average (``train_samples`` logged at the end) as a last resort.
    """

    model: str
    family: str
    params: float | None
    flops_per_sample: float | None
    position_unit: str
    sample: str
    source: str
    timing: tuple = ()
    seq_len: int | None = None  # tokens per sample, where the logs count tokens and may not say it
    samples_per_epoch: int | None = None  # the dataset size, where logs' train_samples is not it
    throughput_unit: str = "samples"  # what a logged tracked_stats throughput counts per second
    run_average: bool = False  # allow the whole-run average (train_samples logged at the end)

    def __post_init__(self):
        if not self.timing:
            object.__setattr__(self, "timing", _DEFAULT_TIMING)


#: Order in which the step-time methods are tried (module docstring).
_DEFAULT_TIMING = ("tracked_stats_step_time", "blocks_samples_count", "tracked_stats", "eval_intervals", "blocks")
#: For benchmarks whose reference code logs ``throughput`` over wall time *including* evaluation (BERT: the
#: samples since the previous log over the seconds since it, evaluation included; DLRM and GNN: one average
#: over the whole run), the timestamps between evaluations are preferred.
_EVAL_FIRST = ("eval_intervals", "blocks_samples_count", "tracked_stats_step_time", "tracked_stats", "blocks")
#: BERT: a block is the whole run with epoch_count=1 (no sample count), older logs have no eval_start, and the
#: oldest give no sample position at all: then the whole-run average (train_samples is logged at the end).
_BERT_TIMING = ("eval_intervals", "eval_points", "tracked_stats", "run_average")
#: GPT-3: logged throughput is in tokens/s and some logs give train_step_timing; timestamps count tokens.
_GPT3_TIMING = ("tracked_stats_step_time", "eval_intervals", "blocks", "eval_points", "tracked_stats")
_STAMP_CHECK_ORDER = ("blocks_samples_count", "eval_intervals", "eval_points", "blocks")


def _decoder_flops(n_params: float, n_layer: int, d_model: int, n_ctx: int, *, frozen: bool = False) -> float:
    """Training FLOPs of one sequence of ``n_ctx`` tokens (Kaplan et al. 2020, Table 1: forward ≈ 2N +
    2·n_layer·n_ctx·d per token, training ≈ 3× forward). With ``frozen`` weights (LoRA) the weight-gradient
    matmuls are skipped: ≈ 2× forward for the weights, 3× for attention scores."""
    weights = (4.0 if frozen else 6.0) * n_params
    attention = 6.0 * n_layer * n_ctx * d_model
    return (weights + attention) * n_ctx


#: BERT: the mean sequence length the work is counted at (tokens, padding excluded; see its entry below).
_BERT_TOKENS = 256

_KAPLAN = "Kaplan et al. 2020, 'Scaling Laws for Neural Language Models', Table 1 (C_fwd = 2N + 2 n_layer n_ctx d)"

#: Benchmark name in the logs -> model, family, size, FLOPs per sample (forward + backward), with the source.
BENCHMARKS: dict[str, Benchmark] = {
    "resnet": Benchmark(
        "resnet50-v1.5", "cnn", 25_557_032, 3 * 2 * 4.09e9, "epochs", "one 224x224 ImageNet image",
        "torchvision ResNet50_Weights docs (ResNet-50 v1.5 as in the MLPerf reference): 25,557,032 params, "
        "4.09 G multiply-accumulates per 224x224 forward (listed as 'GFLOPS'); x2 FLOP/MAC, x3 forward+backward",
    ),
    "bert": Benchmark(
        "bert-large", "transformer", 340e6, _decoder_flops(12 * 24 * 1024**2, 24, 1024, _BERT_TOKENS), "samples",
        "one sequence of at most 512 tokens (256 on average without padding)",
        "Devlin et al. 2019 (BERT-large: 24 layers, d=1024, 340M params); FLOPs by " + _KAPLAN
        + " with non-embedding N = 12 n_layer d^2 at the mean unpadded length, 256 tokens: at length 512, "
        "padding is more than 50% of the MLPerf Wikipedia data, and MLPerf submissions skip it (unpadded or "
        "packed kernels; Krell et al. 2021, 'Efficient Sequence Packing without Cross-contamination', "
        "arXiv:2107.02027). Counting the padded 512 would double the work and put tuned runs above the peak",
        timing=_BERT_TIMING, run_average=True,
    ),
    "gpt3": Benchmark(
        "gpt3-175b", "transformer", 175e9, _decoder_flops(175e9, 96, 12288, 2048), "tokens",
        "one 2048-token sequence",
        "Brown et al. 2020, Table 2.1 (GPT-3 175B: 96 layers, d=12288, n_ctx=2048); FLOPs by " + _KAPLAN,
        seq_len=2048, throughput_unit="tokens", timing=_GPT3_TIMING,
    ),
    "llama2_70b_lora": Benchmark(
        "llama2-70b-lora", "transformer", 70e9, _decoder_flops(70e9, 80, 8192, 8192, frozen=True), "samples",
        "one 8192-token sequence",
        "Touvron et al. 2023, Llama 2 (70B: 80 layers, d=8192); MLPerf llama2_70b_lora reference: LoRA on "
        "SCROLLS GovReport at 8192 tokens. FLOPs by " + _KAPLAN + " with frozen base weights (4N + attention); "
        "params is the base model size (LoRA adapters are the only trainable weights)",
    ),
    "llama31_405b": Benchmark(
        "llama3.1-405b", "transformer", 405e9, _decoder_flops(405e9, 126, 16384, 8192), "samples",
        "one 8192-token sequence",
        "Meta Llama 3.1 model card / Dubey et al. 2024, Table 3 (405B: 126 layers, d=16384); MLPerf "
        "llama31_405b pretraining reference at sequence length 8192; FLOPs by " + _KAPLAN,
    ),
    "maskrcnn": Benchmark(
        "maskrcnn-r50-fpn", "cnn", 44_401_393, 3 * 2 * 134.38e9, "epochs", "one COCO image (shorter side 800)",
        "torchvision MaskRCNN_ResNet50_FPN_Weights docs: 44,401,393 params, 134.38 'GFLOPS' per forward "
        "(multiply-accumulates, counted as for ResNet-50 above; shorter side 800 as in the MLPerf reference); x2 "
        "FLOP/MAC, x3 forward+backward; an epoch is the 117,266 COCO train2017 images with annotations (MLPerf "
        "maskrcnn reference); some logs' train_samples is another figure",
        samples_per_epoch=117_266,
    ),
    "stable_diffusion": Benchmark(
        "stable-diffusion-v2", "diffusion", 865e6, None, "samples", "one 512x512 image (64x64 latent)",
        "Stability AI stablediffusion README (SD 2: 865M-parameter UNet, the trained part); FLOPs per image "
        "not sourced",
    ),
    # Benchmarks kept in the table (their step times are derived) but without a sourced size: the rows carry
    # params=NaN and an excluded_reason, so they stay out of fitting rather than carry a guessed figure.
    "ssd": Benchmark("ssd", "cnn", None, None, "epochs", "one image",
                     "not sourced: SSD-ResNet34 (v1.x) and RetinaNet-ResNeXt50 (v2.0+) sizes not found in a citable "
                     "model card for the MLPerf variants"),
    "retinanet": Benchmark("retinanet-resnext50", "cnn", None, None, "epochs", "one 800x800 image",
                           "not sourced: the MLPerf RetinaNet uses a ResNeXt50-32x4d backbone, which torchvision "
                           "does not list"),
    "rnnt": Benchmark("rnn-t", "rnn", None, None, "epochs", "one LibriSpeech utterance",
                      "not sourced: utterance length varies; no citable per-sample FLOPs"),
    "unet3d": Benchmark("unet3d", "cnn", None, None, "epochs", "one 128^3 KiTS19 crop",
                        "not sourced: no citable parameter/FLOP figure for the MLPerf 3D U-Net"),
    "dlrm": Benchmark("dlrm", "recsys", None, None, "epochs", "one Criteo click record",
                      "not sourced: parameters are embedding rows whose count depends on the hashing setup",
                      timing=_EVAL_FIRST),
    "dlrm_dcnv2": Benchmark("dlrm-dcnv2", "recsys", None, None, "epochs", "one Criteo click record",
                            "not sourced: parameters are embedding rows whose count depends on the hashing setup",
                            timing=_EVAL_FIRST),
    "gnn": Benchmark("rgat", "gnn", None, None, "epochs", "one seed node with its sampled neighbourhood",
                     "not sourced: work per seed node depends on the sampled neighbourhood", timing=_EVAL_FIRST),
    "rgat": Benchmark("rgat", "gnn", None, None, "epochs", "one seed node with its sampled neighbourhood",
                      "not sourced: work per seed node depends on the sampled neighbourhood", timing=_EVAL_FIRST),
}

#: Benchmarks that are not imported, and why.
SKIPPED_BENCHMARKS = {
    "minigo": "reinforcement learning: a run interleaves self-play and training, so there is no per-sample "
              "training step to time",
}

#: Timestamp-derived / logged throughput outside this range means one of them is in other units (per device,
#: per token, ...): such rows are kept but marked in ``excluded_reason``. Inside it the difference is warm-up,
#: host work and (for BERT, DLRM, GNN) evaluation time inside the logged figure.
_CHECK_LOW, _CHECK_HIGH = 0.8, 1.25

_ASSUMED_FP16 = re.compile(r"v100|t4\b|p100", re.I)  # no bf16 on these devices: mixed precision there is fp16


# ----------------------------------------------------------------------------------------------------- parsing
def parse_mllog(text: str, keys: Iterable[str] | None = None) -> list[dict]:
    """The ``:::MLLOG`` events of a log, in file order, exact duplicates (one line per rank) dropped.

    Each event is the logged JSON object (``key``, ``value``, ``time_ms``, ``event_type``, ``metadata``).
    Lines that are not valid JSON after the marker are skipped (logs from many ranks sometimes interleave).
    With ``keys``, only events with those keys (or a key naming a dtype/precision) are decoded: faster on
    logs of many megabytes.

    Parameters
    ----------
    text : str
        The log's text (a ``result_<n>.txt``).
    keys : iterable of str, optional
        Decode only events with these keys (and precision-like ones); by default every event.

    Returns
    -------
    list of dict
        The events; each has a float ``time_ms`` and a dict ``metadata`` (empty where the log gave none).

    Raises
    ------
    TypeError
        If ``text`` is not a str.
    """
    if not isinstance(text, str):
        raise TypeError(f"parse_mllog expects the log text as a str. Got {type(text).__name__} instead.")
    events, seen = [], set()
    wanted = set(keys) if keys is not None else None
    for line in text.splitlines():
        i = line.find(_MARKER)
        if i < 0:
            continue
        raw = line[i + len(_MARKER):].strip()
        if raw in seen:  # the same line printed by another rank
            continue
        seen.add(raw)
        if wanted is not None:
            k = raw.find('"key": "')
            if k >= 0:
                key = raw[k + 8: raw.find('"', k + 8)]
                if key not in wanted and not any(h in key.lower() for h in _PREC_KEY_HINTS):
                    continue
        try:
            event = json.loads(raw)
        except RecursionError:  # nested too deeply to be an MLLOG event
            event = None
        except ValueError:
            j = raw.rfind("}")  # trailing text glued on by an interleaved rank
            try:
                event = json.loads(raw[: j + 1]) if j > 0 else None
            except (ValueError, RecursionError):
                event = None
        if not isinstance(event, dict) or not isinstance(event.get("key"), str):
            continue
        time_ms = _num(event.get("time_ms"))
        if time_ms is None:  # an event without a usable time is not one
            continue
        event["time_ms"] = time_ms
        if not isinstance(event.get("metadata"), dict):  # e.g. a string: the event keeps no metadata
            event["metadata"] = {}
        events.append(event)
    return events


def _first(events, key, default=None):
    for e in events:
        if e["key"] == key:
            return e.get("value")
    return default


def _num(value) -> float | None:
    if isinstance(value, bool):
        return None
    try:
        out = float(value)
    except (TypeError, ValueError, OverflowError):
        return None
    return out if math.isfinite(out) else None


def _position(meta: Mapping):
    for k in ("samples_count", "epoch_num"):
        v = _num(meta.get(k))
        if v is not None:
            return k, v
    return None, None


def _scale(unit_key: str, bench: Benchmark | None, cfg: dict) -> float | None:
    """Samples per unit of a logged position (``samples_count`` is always in samples)."""
    if unit_key == "samples_count":
        return 1.0
    unit = bench.position_unit if bench else None
    if unit == "samples":
        return 1.0
    if unit == "tokens":
        seq = cfg.get("max_sequence_length") or (bench.seq_len if bench else None)
        return 1.0 / seq if seq else None
    if unit == "epochs":
        return (bench.samples_per_epoch if bench and bench.samples_per_epoch else None) or cfg.get(
            "samples_per_epoch") or cfg.get("train_samples")
    return None


def _intervals(events, start_key, stop_key):
    out, open_ = [], None
    for e in events:
        if e["key"] == start_key:
            open_ = e
        elif e["key"] == stop_key and open_ is not None:
            out.append((open_, e))
            open_ = None
    return out


def _eval_segments(events, bench, cfg):
    """(seconds, samples) of the training stretches between consecutive evaluations."""
    evals = _intervals(events, "eval_start", "eval_stop")
    segs = []
    for (s0, e0), (s1, _) in zip(evals, evals[1:]):
        k0, p0 = _position(s0["metadata"])
        k1, p1 = _position(s1["metadata"])
        if k0 is None or k0 != k1:
            continue
        scale = _scale(k0, bench, cfg)
        seconds = (s1["time_ms"] - e0["time_ms"]) / 1000.0
        if scale is None or seconds <= 0 or p1 <= p0:
            continue
        segs.append((seconds, (p1 - p0) * scale))
    return segs


def _eval_point_segments(events, bench, cfg):
    """(seconds, samples) between consecutive ``eval_accuracy`` events, for logs without ``eval_start``:
    evaluation time is included."""
    points = []
    for e in events:
        if e["key"] == "eval_accuracy":
            k, pos = _position(e["metadata"])
            if k is not None:
                points.append((e["time_ms"], k, pos))
    segs = []
    for (t0, k0, p0), (t1, k1, p1) in zip(points, points[1:]):
        scale = _scale(k0, bench, cfg) if k0 == k1 else None
        if scale and t1 > t0 and p1 > p0:
            segs.append(((t1 - t0) / 1000.0, (p1 - p0) * scale))
    return segs


def _block_segments(events, bench, cfg, *, samples_count_only: bool = False):
    evals = [(a["time_ms"], b["time_ms"]) for a, b in _intervals(events, "eval_start", "eval_stop")]
    segs, prev_stop = [], None
    for start, stop in _intervals(events, "block_start", "block_stop"):
        m0, m1 = start["metadata"], stop["metadata"]
        if _num(m0.get("samples_count")) is not None and _num(m1.get("samples_count")) is not None:
            # Samples since the previous block's end: some logs put a step count in block_start's field.
            begin = prev_stop if prev_stop is not None else _num(m0["samples_count"])
            samples = _num(m1["samples_count"]) - begin
            prev_stop = _num(m1["samples_count"])
        elif samples_count_only:
            samples = None
        elif _num(m0.get("epoch_count")) is not None:
            scale = _scale("epoch_num", bench, cfg)
            samples = _num(m0["epoch_count"]) * scale if scale else None
        else:
            samples = None
        t0, t1 = start["time_ms"], stop["time_ms"]
        busy = sum(max(0, min(t1, b) - max(t0, a)) for a, b in evals)
        seconds = (t1 - t0 - busy) / 1000.0
        if samples and samples > 0 and seconds > 0:
            segs.append((seconds, samples))
    return segs[1:] if len(segs) > 1 else segs


def _tracked(events):
    """Throughputs (samples/s) and step times (s) logged in ``tracked_stats``, median per logged step."""
    by_pos: dict = {}
    step_times: dict = {}
    for e in events:
        if e["key"] != "tracked_stats" or not isinstance(e.get("value"), dict):
            continue
        v = e["value"]
        meta = e["metadata"]
        pos = (str(meta.get("step")), str(meta.get("step_num")), str(meta.get("epoch_num")),
               str(meta.get("samples_count")))
        thr = _num(v.get("throughput", v.get("imgs_sec")))
        if thr is not None and thr > 0:
            by_pos.setdefault(pos, []).append(thr)
        st = _num(v.get("train_step_time", v.get("train_step_timing")))
        if st is not None and st > 0:
            step_times.setdefault(pos, []).append(st)
    thr = [statistics.median(v) for v in by_pos.values()]
    st = [statistics.median(v) for v in step_times.values()]
    return thr, st


_PREC_KEY = re.compile(r"precision|fp8|fp16|bf16|dtype|\bamp\b", re.I)
_PREC_TEXT = [
    ("fp8", re.compile(r"\bfp8\b[^\n]{0,40}?(?:=|:)\s*(?:true|1|on|hybrid|e4m3)\b|\bfp8_(?:e4m3|hybrid)\b"
                       r"|using fp8\b|\bfp8 (?:enabled|training|recipe)\b", re.I)),
    ("bf16", re.compile(r"\bbf16\b\s*(?:=|:)\s*(?:true|1)\b|precision\s*(?:=|:)\s*['\"]?bf16|\bbfloat16\b", re.I)),
    ("fp16", re.compile(r"\bfp16\b\s*(?:=|:)\s*(?:true|1)\b|precision\s*(?:=|:)\s*['\"]?(?:fp16|16)\b"
                        r"|\bamp\b\s*(?:=|:)\s*(?:true|1)\b|16-bits training: True", re.I)),
]


_PREC_HINTS = ("fp8", "fp16", "bf16", "bfloat16", "amp", "16-bits", "precision")


def _precision(events, text: str, system: Mapping | None, accelerator: str | None):
    """(reported precision, source, evidence)."""
    for e in events:
        key = str(e["key"])
        if any(h in key.lower() for h in _PREC_KEY_HINTS) and _PREC_KEY.search(key):
            val = str(e.get("value")).lower()
            for p in ("fp8", "bf16", "fp16"):
                if p in key.lower() and val in ("true", "1") or p in val:
                    return p, "mllog", f"{key}={e.get('value')}"
    if system:
        blob = " ".join(str(v) for v in system.values())
        for p, pat in (("fp8", r"\bfp8\b"), ("bf16", r"\bbf16\b|bfloat16"), ("fp16", r"\bfp16\b|float16")):
            m = re.search(pat, blob, re.I)
            if m:
                return p, "system_json", blob[max(0, m.start() - 30): m.end() + 30].strip()
    # Only lines that mention a dtype are searched (a log can be megabytes of training output).
    low = text.lower()
    hints = [h for h in _PREC_HINTS if h in low]
    lines = "\n".join(ln for ln in low.splitlines() if any(h in ln for h in hints) and _MARKER.lower() not in ln
                      ) if hints else ""
    for p, pat in _PREC_TEXT:
        m = pat.search(lines)
        if m:
            return p, "log_text", m.group(0)[:80]
    assumed = "fp16" if accelerator and _ASSUMED_FP16.search(accelerator) else "bf16"
    return assumed, "assumed", ""


def _int(value) -> int | None:
    try:
        v = _num(str(value).strip()) if value is not None else None
    except ValueError:  # an int too long to print
        return None
    return int(v) if v is not None and v == int(v) else None


def _peak_flops(gpu_type: str | None) -> float | None:
    """An upper bound on a device's FLOP/s: its dense peak at the fastest precision it has (fp8 where the table
    lists it, else bf16 or fp16; a log's precision label can be wrong, the device's fastest peak cannot be
    beaten)."""
    if gpu_type is None:
        return None
    spec = get_spec(gpu_type)
    peaks = [spec.peak_tflops(p) for p in ("fp8", "bf16", "fp16")]
    best = max((p for p in peaks if p), default=None)
    return 1e12 * best if best else None


def _resolve(name: str | None) -> str | None:
    if not name:
        return None
    bare = re.sub(r"\s*\([^)]*\)", "", name)
    # "A100-SXM-40GB": MLPerf's spelling of the SXM4 part; spelled out so that the memory size is not dropped
    # (perfmodel.hardware resolves a bare "A100-SXM" to the 80 GB part).
    sxm4 = re.sub(r"(?i)\bA100-SXM-(\d+GB)", r"A100-SXM4-\1", bare)
    for candidate in dict.fromkeys((sxm4, name, bare)):
        try:
            return resolve_gpu_type(candidate)
        except UnknownHardwareError:
            continue
    return None


# --------------------------------------------------------------------------------------------------- one run
def summarize_run(text: str, system_info: Mapping | None = None, *, benchmark: str | None = None,
                  source_path: str = "", **provenance) -> dict:
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
    events = parse_mllog(text, keys=_USED_KEYS)
    if not events:
        raise MLPerfFormatError(f"{source_path or 'the text'} holds no ':::MLLOG' lines: not an MLPerf result log.")
    bench_name = str(_first(events, "submission_benchmark") or benchmark or "").strip().lower()
    if bench_name == "ssd" and benchmark == "retinanet":
        bench_name = "retinanet"
    bench = BENCHMARKS.get(bench_name)
    cfg = {k: _num(_first(events, k)) for k in ("global_batch_size", "max_sequence_length", "train_samples",
                                                 "samples_per_epoch", "gradient_accumulation_steps", "seed")}
    early = []  # values the log gives that no run can have: the run is kept, marked, and never fitted
    for key in ("global_batch_size", "gradient_accumulation_steps", "max_sequence_length", "train_samples",
                "samples_per_epoch"):
        value = cfg[key]
        if value is not None and not (value >= 1 and value.is_integer()):
            early.append(f"{key} {value:g} is not a positive integer")
            cfg[key] = None
    gbs = cfg["global_batch_size"]
    system = dict(system_info) if isinstance(system_info, Mapping) else {}
    accel = system.get("accelerator_model_name")
    accel = accel.strip() or None if isinstance(accel, str) else None
    per_node = _int(system.get("accelerators_per_node"))
    nodes = _int(system.get("number_of_nodes"))
    gpu_count = per_node * nodes if per_node and nodes and per_node > 0 and nodes > 0 else None

    starts = [e["time_ms"] for e in events if e["key"] == "run_start"]
    stops = [e for e in events if e["key"] == "run_stop"]
    ttt = (stops[-1]["time_ms"] - starts[0]) / 1000.0 if starts and stops else None
    mlperf_status = str(stops[-1]["metadata"].get("status", "")).lower() if stops else "missing"

    thr, st = _tracked(events)
    if bench is not None and bench.throughput_unit == "tokens":  # e.g. GPT-3: tokens/s -> sequences/s
        seq = cfg["max_sequence_length"] or bench.seq_len
        thr = [t / seq for t in thr] if seq else []
    eval_segs = _eval_segments(events, bench, cfg)
    point_segs = [] if eval_segs else _eval_point_segments(events, bench, cfg)
    block_segs = _block_segments(events, bench, cfg)
    count_segs = _block_segments(events, bench, cfg, samples_count_only=True)
    pooled = {  # timestamp segments (seconds, samples), pooled: total time / total samples
        "blocks_samples_count": count_segs, "eval_intervals": eval_segs, "eval_points": point_segs,
        "blocks": block_segs,
    }
    if gbs and starts and stops and cfg["train_samples"] and bench is not None and bench.run_average:
        pooled["run_average"] = [((stops[-1]["time_ms"] - starts[0]) / 1000.0, cfg["train_samples"])]
    candidates = {name: [gbs * t / n for t, n in segs] if gbs else [] for name, segs in pooled.items()}
    candidates["tracked_stats_step_time"] = (st[1:] if len(st) > 1 else st) if st else []
    candidates["tracked_stats"] = [gbs / t for t in (thr[1:] if len(thr) > 1 else thr)] if gbs else []
    method, values, step = None, [], None
    for name in (bench.timing if bench else _DEFAULT_TIMING):
        if candidates.get(name):
            method, values = name, candidates[name]
            segs = pooled.get(name)
            step = gbs * sum(t for t, _ in segs) / sum(n for _, n in segs) if segs else statistics.median(values)
            break
    # Cross-check: throughput from timestamps / throughput the run logged (independent sources).
    stamp = next((pooled[k] for k in _STAMP_CHECK_ORDER if pooled.get(k)), None)
    stamp_thr = sum(n for _, n in stamp) / sum(t for t, _ in stamp) if stamp else None
    logged_thr = None
    if candidates["tracked_stats_step_time"] and gbs:
        logged_thr = gbs / statistics.median(candidates["tracked_stats_step_time"])
    elif thr:
        logged_thr = statistics.median(thr[1:] if len(thr) > 1 else thr)
    check = stamp_thr / logged_thr if stamp_thr and logged_thr else None

    reported, prec_src, evidence = _precision(events, text, system, accel)
    gpu_type = _resolve(accel)
    # fp8 where the log says so and the device has an fp8 peak; else the 16-bit type its matmuls fall back to
    precision = reported
    if reported == "fp8" and (gpu_type is None or not get_spec(gpu_type).peak_tflops("fp8")):
        precision = "bf16"

    reasons = list(early)
    if bench is None:
        reasons.append(f"benchmark {bench_name or '?'} not in the table")
    elif bench.params is None:
        reasons.append(f"params not sourced for {bench_name}")
    elif bench.flops_per_sample is None:  # perfmodel would fall back to 6*params, far off for a diffusion UNet
        reasons.append(f"flops_per_sample not sourced for {bench_name}")
    if step is None:
        reasons.append("no step time derivable")
    if gpu_count is None:
        reasons.append("accelerator count unknown (system JSON missing or incomplete)")
    if gpu_type is None:
        reasons.append(f"accelerator {accel!r} does not resolve in perfmodel.hardware")
    if check is not None and not (_CHECK_LOW <= check <= _CHECK_HIGH):
        reasons.append(f"logged throughput and timestamps disagree (ratio {check:.3g})")
    per_device = gbs / gpu_count if gbs and gpu_count else None
    peak = _peak_flops(gpu_type)
    if step and gpu_count and gbs and peak and bench is not None and bench.flops_per_sample:
        achieved = bench.flops_per_sample * gbs / step / gpu_count
        if achieved > peak:
            reasons.append(f"implied {achieved / 1e12:.0f} TFLOP/s per device exceeds the device's fastest dense "
                           f"peak ({peak / 1e12:.0f}): the log's sample counts or the FLOPs figure do not fit this "
                           "run")
    if per_device is not None and per_device != int(per_device):
        reasons.append("global batch not divisible by the accelerator count (model parallel)")
    division = _first(events, "submission_division") or system.get("division")
    if str(division).strip().lower() == "open":
        # the open division may change the model, its size or the training method: the benchmark's FLOPs per
        # sample (the reference model's) do not describe the run
        reasons.append("open division: the model or training method may differ from the benchmark's reference")

    mean = float(np.mean(values)) if values else None
    std = float(np.std(values, ddof=1)) if len(values) > 1 else None
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
        "step_time_s": step,
        "step_time_median_s": float(np.median(values)) if values else None,
        "step_time_std_s": std,
        "step_time_cv": std / mean if std is not None and mean else None,
        "steps_timed": (round(sum(s for _, s in pooled[method]) / gbs) if method in pooled and gbs else None),
        "segments_used": len(values) or None,
        "samples_per_s": gbs / step if gbs and step else None,
        "nodes": nodes,
        "source": "mlperf",
        "protocol": f"MLPerf Training result log; step time by {method}",
        "timestamp": timestamp,
        "benchmark": bench_name,
        "accelerator_name": accel,
        "accelerators_per_node": per_node,
        "global_batch_size": gbs,
        "batch_size_per_device": per_device,
        "gradient_accumulation_steps": cfg["gradient_accumulation_steps"],
        "step_time_method": method,
        "time_to_train_s": ttt,
        "mlperf_status": mlperf_status,
        "throughput_check_ratio": check,
        "precision_reported": reported,
        "precision_source": prec_src,
        "precision_evidence": evidence,
        "framework": system.get("framework"),
        "division": division,
        "excluded_reason": "; ".join(reasons) or None,
        "source_path": source_path,
        **provenance,
    }


# ------------------------------------------------------------------------------------------------ whole trees
_RESULT = re.compile(r"result_\d+\.txt$")
_ROUND = re.compile(r"(?:^|/|_)(v\d+\.\d+)(?=/)")


def epoch_times(text: str) -> list[tuple[int, float]]:
    """Training seconds of each epoch of a run, ``[(epoch_num, seconds), ...]`` in epoch order.

    From the log's ``epoch_start`` / ``epoch_stop`` events of the same ``epoch_num`` (MLPerf logs evaluations
    outside them); only the leading stretch of consecutive epochs with positive times is returned (a gap or a
    missing event ends it). Empty for a log that does not time its epochs.

    Parameters
    ----------
    text : str
        The log's text.

    Returns
    -------
    list of (int, float)
        ``(epoch_num, seconds)`` pairs.
    """
    starts, stops = {}, {}
    for e in parse_mllog(text, keys=("epoch_start", "epoch_stop")):
        num = _num((e.get("metadata") or {}).get("epoch_num"))
        if e["key"] not in ("epoch_start", "epoch_stop") or num is None or _num(e.get("time_ms")) is None:
            continue  # (parse_mllog also hands over precision-like keys)
        (starts if e["key"] == "epoch_start" else stops).setdefault(int(num), float(e["time_ms"]))
    out: list[tuple[int, float]] = []
    for k in sorted(set(starts) & set(stops)):
        seconds = (stops[k] - starts[k]) / 1000.0
        if seconds <= 0 or (out and k != out[-1][0] + 1):
            break
        out.append((k, seconds))
    return out


def find_result_files(paths: Iterable[str | os.PathLike]) -> list[Path]:
    """Every ``result_<n>.txt`` under the given files/folders (sorted), or the files themselves.

    Parameters
    ----------
    paths : iterable of str or path-like
        Result files (taken as they are, whatever their name) and folders (searched recursively).

    Returns
    -------
    list of pathlib.Path
        The files, in the order of ``paths``; each folder's logs sorted.

    Raises
    ------
    FileNotFoundError
        For a path that does not exist.
    MLPerfFormatError
        For a folder with no result logs.
    """
    out = []
    for p in paths:
        p = Path(p)
        if not p.exists():
            raise FileNotFoundError(f"MLPerf results path {str(p)!r} does not exist.")
        if p.is_file():
            out.append(p)
            continue
        found = sorted(f for f in p.rglob("result_*.txt") if _RESULT.search(f.name))
        if not found:
            raise MLPerfFormatError(f"{str(p)!r} holds no MLPerf result logs (result_<n>.txt).")
        out.extend(found)
    return out


def _layout(path: Path):
    """(submitter dir, system, benchmark) for .../<submitter>/results/<system>/<benchmark>/result_n.txt."""
    parts = path.resolve().parts
    if len(parts) >= 5 and parts[-4] == "results":
        return Path(*parts[:-4]), parts[-3], parts[-2]
    return None, None, path.parent.name or None


def _system_json(submitter_dir: Path | None, system: str | None, explicit: Mapping | None):
    if explicit is not None:
        return dict(explicit)
    if submitter_dir is None or system is None:
        return None
    f = submitter_dir / "systems" / f"{system}.json"
    if not f.is_file():
        return None
    try:
        data = json.loads(f.read_text(encoding="utf-8", errors="replace"))
    except (ValueError, RecursionError):
        logger.warning("System description %s is not valid JSON; ignoring it.", f)
        return None
    if not isinstance(data, dict):
        logger.warning("System description %s is not a JSON object; ignoring it.", f)
        return None
    return data


def from_mlperf(paths_or_dirs, *, system: Mapping | str | os.PathLike | None = None, round: str | None = None,
                source_commit: str | None = None) -> pd.DataFrame:
    """Read MLPerf Training result logs into a run table, one row per ``result_<n>.txt``.

    Parameters
    ----------
    paths_or_dirs : path or list of paths
        Result logs, or folders searched recursively for ``result_<n>.txt`` (a submitter folder, a round's
        checkout, ...). The system description is read from ``<submitter>/systems/<system>.json`` next to the
        ``results/`` folder.
    system : mapping or path, optional
        A system description to use for every log instead (for logs outside the usual layout).
    round : str, optional
        MLPerf round (``"v4.0"``), recorded in the ``round`` column; by default read from the path (a folder
        named ``v4.0`` or ``training_results_v4.0``).
    source_commit : str, optional
        Commit of the results repository, recorded in ``source_commit``.

    Returns
    -------
    DataFrame
        Run records (perfmodel's schema columns plus MLPerf provenance columns). Rows whose
        ``excluded_reason`` is set cannot be fitted yet (unsourced size, unresolved accelerator, ...); use
        :func:`loadable` to keep the rest.

    Raises
    ------
    FileNotFoundError, MLPerfFormatError
        For a path that does not exist, a folder without result logs, or a file that is not an MLPerf log.
    """
    if isinstance(paths_or_dirs, (str, os.PathLike)):
        paths_or_dirs = [paths_or_dirs]
    if not isinstance(paths_or_dirs, Iterable):
        raise TypeError(f"from_mlperf expects a path or a list of paths. Got {type(paths_or_dirs).__name__}.")
    explicit = None
    if isinstance(system, (str, os.PathLike)):
        explicit = read_json_file(system, "System description", MLPerfFormatError)
    elif system is not None:
        explicit = system
    rows = []
    for f in find_result_files(list(paths_or_dirs)):
        sub_dir, sys_name, bench = _layout(f)
        if bench in SKIPPED_BENCHMARKS:
            logger.info("Skipping %s: %s", f, SKIPPED_BENCHMARKS[bench])
            continue
        try:
            text = f.read_text(encoding="utf-8", errors="replace")
        except OSError as exc:
            raise MLPerfFormatError(f"Cannot read {str(f)!r}: {exc}") from None
        sysd = _system_json(sub_dir, sys_name, explicit)
        rnd = round
        if rnd is None:  # a checkout named training_results_v4.0, or a folder named v4.0, on the path
            m = _ROUND.search(f.resolve().as_posix())
            rnd = m.group(1) if m else None
        submitter = sysd.get("submitter") if sysd else (sub_dir.name if sub_dir else None)
        submitter = None if submitter is None else str(submitter)
        try:
            row = summarize_run(text, sysd, benchmark=bench, source_path=str(f), round=rnd, submitter=submitter,
                                system=sys_name, source_commit=source_commit)
        except MLPerfFormatError:
            raise
        except (ValueError, TypeError, ArithmeticError, KeyError, AttributeError, RecursionError) as exc:
            # one unreadable log never aborts the import: it is listed with the reason and left out
            row = {"status": "error", "error": f"unreadable MLPerf log ({type(exc).__name__}: {exc})",
                   "source": "mlperf", "benchmark": bench, "submitter": submitter, "system": sys_name,
                   "round": rnd, "source_path": str(f), "source_commit": source_commit,
                   "excluded_reason": f"the log could not be read ({type(exc).__name__}: "
                                      f"{' '.join(str(exc).split())[:200]})"}
        row["run_id"] = make_run_id(rnd, row["submitter"], sys_name, row["benchmark"], f.name)
        # What identifies the run is its log's content: the same log imported twice, or from a copy, is one run.
        row["source_id"] = "mlperf:" + hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()[:24]
        rows.append(row)
    return _mark_invalid(_frame(rows))


def _mark_invalid(runs: pd.DataFrame) -> pd.DataFrame:
    """Give every row that is not excluded yet but that the schema refuses an ``excluded_reason`` (the schema's
    message), so that one bad log is left out with its reason instead of failing the whole import."""
    from ..exceptions import SchemaError
    from ..schema import validate_runs

    if runs.empty or "excluded_reason" not in runs.columns:
        return runs
    ok = runs["excluded_reason"].isna()
    if not ok.any():
        return runs
    try:
        validate_runs(runs.loc[ok], include_failed=True)
        return runs
    except (SchemaError, ValueError, TypeError):
        pass
    runs = runs.copy()
    for i in runs.index[ok]:
        try:
            validate_runs(runs.loc[[i]], include_failed=True)
        except (SchemaError, ValueError, TypeError) as exc:
            runs.loc[i, "excluded_reason"] = "the schema refuses it: " + " ".join(str(exc).split())[:300]
    return runs


def make_run_id(round, submitter, system, benchmark, filename) -> str:
    stem = re.sub(r"\.txt$", "", str(filename))
    return "mlperf-" + "/".join(str(x) for x in (round or "?", submitter or "?", system or "?", benchmark, stem))


def _frame(rows: list[dict]) -> pd.DataFrame:
    df = pd.DataFrame(rows)
    if len(df):
        df = df[["run_id"] + [c for c in df.columns if c != "run_id"]]
    return df


def loadable(runs: pd.DataFrame) -> pd.DataFrame:
    """The rows of :func:`from_mlperf`'s table that :func:`perfmodel.load_runs` accepts.

    Parameters
    ----------
    runs : pandas.DataFrame
        A table from :func:`from_mlperf`.

    Returns
    -------
    pandas.DataFrame
        The rows without an ``excluded_reason`` (every row when the column is absent), re-indexed from 0.
    """
    keep = runs["excluded_reason"].isna() if "excluded_reason" in runs.columns else pd.Series(True, runs.index)
    return runs.loc[keep].reset_index(drop=True)
