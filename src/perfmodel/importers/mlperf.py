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

The precision (``precision_source``) is what the log states (``mllog``: a logged key; ``log_text``: a line of
the run's output), else what the system description states (``system_json``), else what the launch config of
the run's system in the submission's ``benchmarks/<benchmark>/implementations/`` states
(``implementation_config`` where the config is identified as the system's, ``implementation_configs`` where
every candidate config for the system's size agrees but none is identified as the system's own; fp8 only, and
only on devices with an fp8 peak; see :func:`implementation_precision`), else ``assumed`` (bf16; fp16 on
V100/T4/P100). A log line that only switches 16-bit mixed precision on (``16-bits training: True``,
``amp=True``, ``precision=16``) does not rule out fp8: there the launch config is read too, and its fp8
wins (the evidence keeps the log line).

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
from ..transformer import TransformerShape, transformer_flops
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
    "implementation_precision",
    "implementation_text",
    "is_implementation_file",
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


def _transformer_flops(shape: TransformerShape, seq_len: int, *, frozen: bool = False) -> float:
    """Training FLOPs of one sequence (:func:`perfmodel.transformer.transformer_flops`: ``6·N·seq + 12·L·d·seq²``;
    with ``frozen`` weights (LoRA) the weight-gradient matmuls are skipped, ``4·N·seq`` of dense work)."""
    return transformer_flops(shape, seq_len, frozen_weights=frozen).model


#: The shapes of the language-model benchmarks, from their papers and model cards (cited in BENCHMARKS).
GPT3_175B = TransformerShape(n_layers=96, d_model=12288, n_heads=96, vocab=50257, positions=2048)
LLAMA2_70B = TransformerShape(n_layers=80, d_model=8192, n_heads=64, n_kv_heads=8, ffn_hidden=28672, vocab=32000,
                              gated_mlp=True, tied_embeddings=False)
LLAMA31_405B = TransformerShape(n_layers=126, d_model=16384, n_heads=128, n_kv_heads=8, ffn_hidden=53248,
                                vocab=128256, gated_mlp=True, tied_embeddings=False)
#: BERT-large's encoder layers (the embedding and the masked-LM head's small GEMM left out, as before).
BERT_LARGE = TransformerShape(n_layers=24, d_model=1024, n_heads=16)


#: BERT: the mean sequence length the work is counted at (tokens, padding excluded: about half of 512, at most;
#: see its entry below).
_BERT_TOKENS = 256

_KAPLAN = ("perfmodel.transformer.transformer_flops: 6 N_matmul seq + 12 n_layer d seq^2 (Megatron-LM / PaLM "
           "convention, no causal-mask saving)")

#: Benchmark name in the logs -> model, family, size, FLOPs per sample (forward + backward), with the source.
BENCHMARKS: dict[str, Benchmark] = {
    "resnet": Benchmark(
        "resnet50-v1.5", "cnn", 25_557_032, 3 * 2 * 4.09e9, "epochs", "one 224x224 ImageNet image",
        "torchvision ResNet50_Weights docs (ResNet-50 v1.5 as in the MLPerf reference): 25,557,032 params, "
        "4.09 G multiply-accumulates per 224x224 forward (listed as 'GFLOPS'); x2 FLOP/MAC, x3 forward+backward",
    ),
    "bert": Benchmark(
        "bert-large", "transformer", 340e6, _transformer_flops(BERT_LARGE, _BERT_TOKENS), "samples",
        "one sequence of at most 512 tokens (256 on average without padding)",
        "Devlin et al. 2019 (BERT-large: 24 layers, d=1024, 340M params); FLOPs by " + _KAPLAN
        + " with non-embedding N = 12 n_layer d^2 at the mean unpadded length, about 256 tokens (at most: at "
        "length 512, padding is in excess of 50% of the Wikipedia data BERT pre-trains on, Krell et al. 2021, "
        "'Efficient Sequence Packing without Cross-contamination', arXiv:2107.02027; NVIDIA's MLPerf BERT "
        "packs about 2 sequences per 512-token row, its run_pretraining.py --average_packing_rate default 2). "
        "MLPerf submissions skip padding (unpadded or packed kernels); counting the padded 512 would double the "
        "work and put tuned runs above the peak",
        timing=_BERT_TIMING, run_average=True,
    ),
    "gpt3": Benchmark(
        "gpt3-175b", "transformer", 175e9, _transformer_flops(GPT3_175B, 2048), "tokens",
        "one 2048-token sequence",
        "Brown et al. 2020, Table 2.1 (GPT-3 175B: 96 layers, d=12288, 96 heads, n_ctx=2048, learned positions, "
        "vocabulary 50257, tied head); FLOPs by " + _KAPLAN,
        seq_len=2048, throughput_unit="tokens", timing=_GPT3_TIMING,
    ),
    "llama2_70b_lora": Benchmark(
        "llama2-70b-lora", "transformer", 70e9, _transformer_flops(LLAMA2_70B, 8192, frozen=True), "samples",
        "one 8192-token sequence",
        "Touvron et al. 2023, Llama 2 (70B: 80 layers, d=8192, 64 heads, 8 KV heads, SwiGLU 28672, vocabulary "
        "32000, untied head); MLPerf llama2_70b_lora reference: LoRA on "
        "SCROLLS GovReport at 8192 tokens. FLOPs by " + _KAPLAN + " with frozen base weights (4N + attention); "
        "params is the base model size (LoRA adapters are the only trainable weights)",
    ),
    "llama31_405b": Benchmark(
        "llama3.1-405b", "transformer", 405e9, _transformer_flops(LLAMA31_405B, 8192), "samples",
        "one 8192-token sequence",
        "Meta Llama 3.1 model card / Dubey et al. 2024, Table 3 (405B: 126 layers, d=16384, 128 heads, 8 KV "
        "heads, SwiGLU 53248, vocabulary 128256, untied head); MLPerf "
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
#: Log lines that state a precision: ``(precision, pattern, generic)``, tried in order. ``generic`` marks the
#: 16-bit *switches* that do not name a dtype: ``16-bits training: True`` (the NVIDIA BERT code's AMP flag),
#: ``amp=True`` and ``precision=16``: mixed precision is on, but fp8 matmuls (Transformer Engine) may run on top
#: of it, so for these the launch configs are still read (:func:`summarize_run`). Lines naming a dtype
#: (``fp16=True``, ``bf16: 1``, ``precision='bf16'``, ``bfloat16``, the fp8 forms) are authoritative.
_PREC_TEXT = [
    ("fp8", re.compile(r"\bfp8\b[^\n]{0,40}?(?:=|:)\s*(?:true|1|on|hybrid|e4m3)\b|\bfp8_(?:e4m3|hybrid)\b"
                       r"|using fp8\b|\bfp8 (?:enabled|training|recipe)\b", re.I), False),
    ("bf16", re.compile(r"\bbf16\b\s*(?:=|:)\s*(?:true|1)\b|precision\s*(?:=|:)\s*['\"]?bf16|\bbfloat16\b", re.I),
     False),
    ("fp16", re.compile(r"\bfp16\b\s*(?:=|:)\s*(?:true|1)\b|precision\s*(?:=|:)\s*['\"]?fp16\b", re.I), False),
    ("fp16", re.compile(r"precision\s*(?:=|:)\s*['\"]?16\b|\bamp\b\s*(?:=|:)\s*(?:true|1)\b"
                        r"|16-bits training: True", re.I), True),
]


_PREC_HINTS = ("fp8", "fp16", "bf16", "bfloat16", "amp", "16-bits", "precision")


def _precision(events, text: str, system: Mapping | None, accelerator: str | None):
    """(reported precision, source, evidence, generic): ``generic`` is True where the only statement is a log
    line's generic 16-bit switch (see :data:`_PREC_TEXT`)."""
    for e in events:
        key = str(e["key"])
        if any(h in key.lower() for h in _PREC_KEY_HINTS) and _PREC_KEY.search(key):
            val = str(e.get("value")).lower()
            for p in ("fp8", "bf16", "fp16"):
                if p in key.lower() and val in ("true", "1") or p in val:
                    return p, "mllog", f"{key}={e.get('value')}", False
    if system:
        blob = " ".join(str(v) for v in system.values())
        for p, pat in (("fp8", r"\bfp8\b"), ("bf16", r"\bbf16\b|bfloat16"), ("fp16", r"\bfp16\b|float16")):
            m = re.search(pat, blob, re.I)
            if m:
                return p, "system_json", blob[max(0, m.start() - 30): m.end() + 30].strip(), False
    # Only lines that mention a dtype are searched (a log can be megabytes of training output).
    low = text.lower()
    hints = [h for h in _PREC_HINTS if h in low]
    lines = "\n".join(ln for ln in low.splitlines() if any(h in ln for h in hints) and _MARKER.lower() not in ln
                      ) if hints else ""
    found = [(p, m.group(0)[:80], generic) for p, pat, generic in _PREC_TEXT
             for m in [pat.search(lines)] if m]
    explicit = [f for f in found if not f[2]]
    if explicit:  # a dtype named anywhere in the log outranks a generic 16-bit switch
        return explicit[0][0], "log_text", explicit[0][1], False
    if found:
        return found[0][0], "log_text", found[0][1], True
    assumed = "fp16" if accelerator and _ASSUMED_FP16.search(accelerator) else "bf16"
    return assumed, "assumed", "", False


# ------------------------------------------------------------------------------------- implementation configs
# A submission's code and launch configs sit next to its results: ``<submitter>/benchmarks/<benchmark>/
# implementations/<impl>/config_*.sh`` (shell files exporting the run's settings, e.g. ``export FP8=True``, or
# passing flags in ``EXTRA_PARAMS``). Where a log does not state its precision, the config of the run's system
# may. See :func:`implementation_precision`.
_CONFIG_FILE = re.compile(r"^config.*\.sh$", re.I)
_README_FILE = re.compile(r"^readme.*\.md$", re.I)
#: ``source <...>/name.sh`` / ``. name.sh``: matched on a line's first :data:`_SOURCE_SPAN` characters only, so
#: that a very long line costs no more than a short one (the lazy ``.*?`` would be quadratic in its length).
_SOURCE_LINE = re.compile(r"^(?:source|\.)\s+[^\n]{0,300}?([\w.+-]{1,200}\.sh)\b")
_SOURCE_SPAN = 600
_FP8_ASSIGN = re.compile(r"^(?:export\s+)?FP8=(.*)$")
#: A ``--flag``, with the value it is given where one follows (``--fp8=False``, ``--fp8 0``).
_FLAG = re.compile(r"(?<![\w-])--([A-Za-z][\w-]*)(?:=(['\"]?)([^\s'\"]*)\2|\s+(['\"]?)([^\s'\"-][^\s'\"]*)\4)?")
_UNSET = re.compile(r"^unset\s+(?:-v\s+)?(.*)$")
_SHELL_DEFAULT = re.compile(r"^\$\{[A-Za-z_]\w*:?[-=]([^}]*)\}$")
_CONFIG_REF = re.compile(r"(?<![\w*.-])(config_[\w.+-]*?\.sh)\b(?!\*)")
_FOLDER_REF = re.compile(r"\]\(\.\./([^)/\s]+)/?\)")
_FP8_HELP = re.compile(r"^\s*(?:enables?|use)\s+fp8\b", re.I)
_TRUE, _FALSE = frozenset({"true", "1", "yes", "on"}), frozenset({"false", "0", "no", "off", ""})
_MAX_PY_CHARS = 1_000_000
#: Configs longer than this are not read (they state nothing): a launch config is a few kilobytes.
_MAX_SH_CHARS = 1_000_000
#: Configs sourcing each other deeper than this state nothing (a real chain is two or three files deep).
_MAX_SOURCE_DEPTH = 32


def is_implementation_file(path: str) -> bool:
    """Whether :func:`implementation_precision` reads a file of a benchmark's implementations, by its name.

    Parameters
    ----------
    path : str
        The file's path (only its name counts): ``config*.sh`` launch configs, ``README*.md`` files (which name
        a system's config) and ``*.py`` files (whose command-line flags' help texts say what a flag does).

    Returns
    -------
    bool
        True for a file worth reading.
    """
    name = str(path).replace("\\", "/").rsplit("/", 1)[-1]
    return bool(_CONFIG_FILE.match(name) or _README_FILE.match(name) or name.endswith(".py"))


def implementation_text(path: str, text: str) -> str | None:
    """The text of an implementation file as :func:`implementation_precision` needs it, or None to drop it.

    Parameters
    ----------
    path : str
        The file's path (only its name counts).
    text : str
        Its contents.

    Returns
    -------
    str or None
        ``text``; None for a Python file longer than 1,000,000 characters or that defines no command-line flag
        (no ``add_argument``): only flag definitions are read from Python files.
    """
    if str(path).endswith(".py") and (len(text) > _MAX_PY_CHARS or "add_argument" not in text):
        return None
    return text


def _impl_folder(path: str) -> str:
    """The implementation folder a file is in: the path component after ``implementations``, else the first."""
    parts = path.split("/")
    if "implementations" in parts[:-1]:
        i = parts.index("implementations")
        return parts[i + 1] if i + 1 < len(parts) - 1 else ""
    return parts[0] if len(parts) > 1 else ""


def _folder_path(path: str) -> str:
    return path.rsplit("/", 1)[0] if "/" in path else ""


def _shell_value(raw: str) -> str:
    """The value of a shell assignment's right-hand side: quotes, a trailing comment and a ``${X:-v}``
    default around it dropped."""
    v = re.split(r"\s+#", raw.strip(), maxsplit=1)[0].strip().rstrip(";").strip().strip("\"'")
    m = _SHELL_DEFAULT.match(v)
    return m.group(1).strip().strip("\"'") if m else v


class _Configs:
    """The launch configs among an implementation's files, how they source each other, what they set, and the
    flags whose argparse help says they enable FP8."""

    def __init__(self, files: Mapping[str, str]):
        self.files = {str(p).replace("\\", "/"): t for p, t in files.items() if isinstance(t, str)}
        self.configs = sorted(p for p in self.files if _CONFIG_FILE.match(p.rsplit("/", 1)[-1]))
        # a config too large to be one is kept as a config (so that it still counts as a candidate) but not read
        self.oversize = {p for p in self.configs if len(self.files[p]) > _MAX_SH_CHARS}
        for p in self.oversize:
            self.files[p] = ""
        self.by_name: dict[str, list[str]] = {}
        for p in self.configs:
            self.by_name.setdefault(p.rsplit("/", 1)[-1].lower(), []).append(p)
        self._help: dict[str, str | None] = {}
        self._settings: dict[str, dict] = {}

    def sourced(self, path: str) -> set[str]:
        """Names (lower case) of the files a config sources."""
        out = set()
        for line in self.files[path].splitlines():
            m = _SOURCE_LINE.match(line.strip()[:_SOURCE_SPAN])
            if m:
                out.add(m.group(1).lower())
        return out

    def resolve(self, name: str, near: Iterable[str] = ()) -> list[str]:
        """The configs of that file name, those in the folders ``near`` first (all of them when none is)."""
        cands = self.by_name.get(name.lower(), [])
        for folder in near:
            here = [c for c in cands if _folder_path(c) == folder]
            if here:
                return here
        return cands

    def _sourced_file(self, name: str, by: str) -> str | None:
        """The file a config's ``source .../name`` reads: the one next to it, else the only one of that name in
        its implementation folder, else the only one anywhere (None where that is ambiguous)."""
        cands = self.by_name.get(name.lower(), [])
        for pool in ([c for c in cands if _folder_path(c) == _folder_path(by)],
                     [c for c in cands if _impl_folder(c) == _impl_folder(by)], cands):
            if len(pool) == 1:
                return pool[0]
            if pool:
                return None
        return None

    def fp8_flag(self, flag: str) -> str | None:
        """The Python file whose ``add_argument('--flag', action='store_true', help='Enable FP8 ...')`` defines
        the flag (None when no file defines it so)."""
        if flag not in self._help:
            self._help[flag] = None
            pat = re.compile(r"add_argument\(\s*['\"]--" + re.escape(flag) + r"['\"]([^)]{0,600})\)")
            for p, t in sorted(self.files.items()):
                head = t[:_MAX_PY_CHARS]
                if not p.endswith(".py") or "--" + flag not in head:
                    continue
                for m in pat.finditer(head):
                    body = m.group(1)
                    h = re.search(r"help\s*=\s*['\"]([^'\"]*)", body)
                    if h and _FP8_HELP.search(h.group(1)) and "store_true" in body:
                        self._help[flag] = p
                        break
                if self._help[flag]:
                    break
        return self._help[flag]

    def settings(self, path: str, seen: tuple = ()) -> dict:
        """What a config sets, following the files it sources in order: ``{"FP8" | "DGXNNODES" | "DGXNGPU":
        (value, file, line)}``, the last setting of each; the value is None where it is set inside a shell
        conditional (``if``/``case``/loops: not readable without running it). ``FP8`` is a bool (``FP8=True``,
        a ``--fp8`` flag or a flag whose argparse help says it enables FP8; ``FP8=False``, or such a flag given
        an explicit false value, ``--fp8=False`` / ``--fp8 0``: False); ``unset FP8`` removes it. A config
        larger than :data:`_MAX_SH_CHARS`, or whose sourcing goes deeper than :data:`_MAX_SOURCE_DEPTH` files,
        gets ``FP8`` None (not readable)."""
        if path in self._settings:
            return self._settings[path]
        if path in seen:
            return {}
        if path in self.oversize:
            return {"FP8": (None, path, f"larger than {_MAX_SH_CHARS} characters: not read")}
        if len(seen) >= _MAX_SOURCE_DEPTH:
            return {"FP8": (None, path, f"sourced more than {_MAX_SOURCE_DEPTH} files deep: not read")}
        out: dict = {}
        depth = 0
        unreadable = None
        for line in self.files[path].splitlines():
            s = line.strip()
            if not s or s.startswith("#"):
                continue
            word = s.split(None, 1)[0].rstrip(";")
            if word in ("if", "case", "for", "while", "until"):
                depth += 1
            elif word in ("fi", "esac", "done"):
                depth = max(0, depth - 1)
            m = _SOURCE_LINE.match(s[:_SOURCE_SPAN])
            if m:
                target = self._sourced_file(m.group(1), path)
                if target:
                    for k, (v, f, ln) in self.settings(target, seen + (path,)).items():
                        if k == "FP8" and v is None and "not read" in ln:
                            unreadable = (None, f, ln)  # part of the config could not be read: no claim
                        out[k] = (v if depth == 0 else None, f, ln)
                continue
            m = _FP8_ASSIGN.match(s)
            if m:
                v = _shell_value(m.group(1)).lower()
                if v in _TRUE or v in _FALSE:
                    out["FP8"] = (v in _TRUE if depth == 0 else None, path, s)
                continue
            m = _UNSET.match(s)
            if m:
                if "FP8" in re.split(r"[\s;]+", m.group(1)):
                    if depth == 0:
                        out.pop("FP8", None)
                    else:
                        out["FP8"] = (None, path, s)
                continue
            m = re.match(r"^(?:export\s+)?(DGXNNODES|DGXNGPU)=(.*)$", s)
            if m:
                v = _shell_value(m.group(2))
                out[m.group(1)] = (int(v) if v.isdigit() and depth == 0 else None, path, s)
                continue
            for m in _FLAG.finditer(s):
                flag = m.group(1)
                where = None if flag.lower() == "fp8" else self.fp8_flag(flag)
                if flag.lower() == "fp8" or where:
                    # an explicit false value (--fp8=False, --fp8 0, --fp8=off) says fp8 is off; any other
                    # value, or none (a store_true flag), says it is on
                    value = m.group(3) if m.group(3) is not None else m.group(5)
                    on = value is None or value.lower() not in _FALSE
                    # the line around the flag (EXTRA_PARAMS lines run long), and where the flag is defined
                    excerpt = s if len(s) <= 160 else "..." + s[max(0, m.start() - 60): m.end() + 40] + "..."
                    note = "" if where is None else f" (--{flag}: 'Enable FP8' in {where})"
                    out["FP8"] = (on if depth == 0 else None, path, excerpt + note)
                    break
        if unreadable is not None:
            out["FP8"] = unreadable
        if not seen:
            self._settings[path] = out
        return out


def _system_int(system_info: Mapping | None, key: str) -> int | None:
    return _int(system_info.get(key)) if isinstance(system_info, Mapping) else None


#: Family words that are not a device model on their own: the model is the family and the next part
#: (``RTX-4090`` -> ``RTX4090``, ``TPU-v5p`` -> ``TPUV5P``, ``RX-7900-XTX`` -> ``RX7900``).
_FAMILY_WORDS = frozenset({"RTX", "TPU", "RX"})
#: Vendor system prefixes glued to the model in config names (``DGXH100``): NVIDIA's DGX / HGX boards carry the
#: SXM parts.
_SXM_SYSTEM = re.compile(r"^(?:DGX|HGX)([A-Z0-9]+)$")
#: ``<system>x<count><model>`` in config names (``XE9680x8H100``), or the model after a lower-case / digit
#: prefix (``2xA5000``, Lambda's ``1ccB200``): the model part starts at an upper-case letter, so ``GB200``
#: never yields ``B200``.
_COUNTED = re.compile(r"^(?:[A-Za-z0-9]*?[0-9a-z])?x\d+([A-Z][A-Za-z0-9]*)$|^[0-9a-z]+([A-Z][A-Za-z0-9]*)$")
#: Device types (``perfmodel.hardware`` names) of PCIe cards: ``H100-PCIE-80GB``; ``H200-NVL-141GB`` (the NVL
#: parts are PCIe cards too).
_PCIE_DEVICE = re.compile(r"PCIE|(?:^|-)NVL(?:-|$)", re.I)


def _device_model(gpu_type: str | None) -> str:
    """The model part of a device type as configs name it: its first ``-``-separated part, upper case
    (``H100`` for ``H100-SXM5-80GB``, ``B200``, ``GB200``, ``L40S``, ``MI325X``), or the first two joined where
    the first is a family word (``RTX4090``, ``TPUV5P``; :data:`_FAMILY_WORDS`)."""
    if not isinstance(gpu_type, str) or not gpu_type.strip():
        return ""
    parts = [p for p in re.split(r"[-_ ]+", gpu_type.strip().upper()) if p]
    if len(parts) > 1 and parts[0] in _FAMILY_WORDS:
        return parts[0] + parts[1]
    return parts[0]


def _config_names_device(name: str, model: str, pcie: bool) -> bool:
    """Whether a config's file name names the device ``model`` (from :func:`_device_model`): one of its
    alphanumeric parts is the model, exactly (``B200`` is not ``GB200``, ``L4`` not ``L40S``), also after a
    DGX/HGX prefix (``DGXH100``), a count (``XE9680x8H100``, ``2xA5000``) or a lower-case prefix
    (``1ccB200``). The PCIe and SXM parts of a model are told apart only where the name says which: a
    DGX/HGX prefix or an ``SXM`` part is an SXM system, not a PCIe card's (``pcie``), and a ``PCIE`` part is
    not an SXM part's."""
    if not model:
        return False
    stem = re.sub(r"(?i)\.sh$", "", name)
    tokens = [t for t in re.split(r"[^A-Za-z0-9]+", stem) if t]
    upper = {t.upper() for t in tokens}
    named_pcie = any("PCIE" in t for t in upper)
    sxm = any(t.startswith("SXM") for t in upper)
    hit = False
    for t in tokens:
        u = t.upper()
        m = _SXM_SYSTEM.match(u)
        c = _COUNTED.match(t)
        if u == model:
            hit = True
        elif m and m.group(1) == model:
            hit, sxm = True, True
        elif c and (c.group(1) or c.group(2)).upper() == model:
            hit = True
    if not hit:
        return False
    return not (pcie and sxm) and not (named_pcie and not pcie)


def implementation_precision(files: Mapping[str, str], system: str, system_info: Mapping | None = None, *,
                             device: str | None = None):
    """The precision the launch config of a system's run states, from a benchmark's implementation files.

    MLPerf submissions publish, next to the results, ``<submitter>/benchmarks/<benchmark>/implementations/``:
    the code and one launch config per system configuration (``config_<...>.sh``). This finds the config of
    ``system``, in order:

    1. the config named for the system, ``config_<system>.sh``;
    2. the config a README of the system names (``README-<system>.md`` / ``README_<system>.md`` anywhere, or a
       ``README*.md`` in the implementation folder named for the system; such a README may also point to
       another folder, ``[..](../<folder>)``, whose configs are then the candidates);
    3. the configs named ``config_<system>_*.sh``, else those in the implementation folder named for the
       system (or the one its README points to);
    4. failing these, the configs of the benchmark's implementations whose file name names the run's device
       model (``device``: ``H100`` in ``config_DGXH100_64x8x....sh``); none where ``device`` is not given
       (another system's config may be for another device). The name is split into alphanumeric parts and
       one of them must be the model exactly (after a ``DGX``/``HGX`` prefix, a count such as
       ``XE9680x8H100`` or a lower-case prefix such as ``1ccB200``): a B200 run does not take
       ``config_GB200_*``, an H200 run not ``config_GH200_*``, an L4 run not ``config_L40S_*``. The model is
       the device type's first ``-``-separated part (``H100``, ``B200``, ``GB200``, ``L40S``, ``MI300X``),
       the first two joined after a family word (``RTX4090``, ``TPUV5P``). PCIe and SXM parts share a model; they are told apart where the name says which: a
       ``DGX``/``HGX`` prefix or an ``SXM`` part names an SXM system and is not taken for a PCIe device
       (``PCIE`` or ``NVL`` in the device type, e.g. ``H100-PCIE-80GB``), a ``PCIE`` part is not taken for
       an SXM device.

    In 3 and 4, only run configs count (those setting ``DGXNNODES``, else those no other config sources), and
    of those, the ones for the system's ``number_of_nodes`` and ``accelerators_per_node`` where the configs
    state them (``DGXNNODES`` / ``DGXNGPU``, read through the files they source). The config is read with the
    files it sources, in order; it states fp8 by ``FP8=True`` (or 1), by a ``--fp8`` flag, or by a flag whose
    ``argparse`` definition in the implementation's Python code is ``store_true`` with a help text starting
    "Enable FP8" / "Use FP8". A flag given an explicit false value (``--fp8=False``, ``--fp8 0``; false, 0,
    no, off in any case) and ``unset FP8`` after ``FP8=True`` do not state fp8. fp8 is returned only when
    every candidate states it, outside any shell conditional.

    Parameters
    ----------
    files : mapping of str to str
        Path -> text of the implementation files (configs, READMEs, Python files; see
        :func:`is_implementation_file`), paths as in the results repository (``<submitter>/benchmarks/
        <benchmark>/implementations/<impl>/...``) or relative to ``implementations/``.
    system : str
        The system's name (the ``results/<system>/`` folder, ``systems/<system>.json``).
    system_info : mapping, optional
        The parsed system description (``number_of_nodes``, ``accelerators_per_node``).
    device : str, optional
        The run's device type (``perfmodel.hardware`` name, e.g. ``H100-SXM5-80GB``), for step 4: only configs
        whose file name holds its model part (``H100``) are candidates there. None: step 4 is skipped.

    Returns
    -------
    tuple of (str, str, str) or None
        ``("fp8", source, evidence)``: ``source`` is ``implementation_config`` where the config was identified
        as the system's (1-3), ``implementation_configs`` where it was not and every candidate for the system's
        size states fp8: the configs naming the device (4), or those of another folder a README of the system
        points to (3: v5.0 Supermicro ``AS-4126GS-NBR-LCC_N1``'s README points to ``../b200_nemo``, whose
        configs are named for other systems); ``evidence`` names how the configs were found, the config, the file
        and the line that says it. None where no config is found, the candidates disagree, or they do not
        state fp8.

    Raises
    ------
    TypeError
        If ``files`` is not a mapping, or ``device`` is neither a str nor None.

    Notes
    -----
    Only fp8 is read: a config's ``FP8=False`` does not say whether the rest ran in bf16 or fp16. A config
    larger than 1,000,000 characters is not read, and configs sourcing each other more than 32 files deep
    are not followed: such a candidate states nothing (no fp8 claim).
    """
    if not isinstance(files, Mapping):
        raise TypeError(f"implementation_precision expects a mapping of path -> text. Got {type(files).__name__}.")
    if device is not None and not isinstance(device, str):
        raise TypeError(f"implementation_precision expects device as a str (a device type such as "
                        f"'H100-SXM5-80GB') or None. Got {type(device).__name__}.")
    if not system or not isinstance(system, str):
        return None
    cf = _Configs(files)
    if not cf.configs:
        return None
    low = system.lower()
    how, source, chosen = "", "implementation_config", []
    exact = cf.by_name.get(f"config_{low}.sh", [])
    prefixed = [p for p in cf.configs if p.rsplit("/", 1)[-1].lower().startswith(f"config_{low}_")]
    folders = sorted({_impl_folder(p) for p in cf.files if _impl_folder(p).lower() == low})
    own_folders = set(folders)
    if exact:
        how, chosen = "config named for the system", exact
    else:
        own = [p for p in cf.files if _README_FILE.match(p.rsplit("/", 1)[-1])
               and p.rsplit("/", 1)[-1].lower() in (f"readme-{low}.md", f"readme_{low}.md")]
        in_folder = [p for p in cf.files if _README_FILE.match(p.rsplit("/", 1)[-1])
                     and _impl_folder(p) in folders and _folder_path(p).rsplit("/", 1)[-1] in folders]
        for readmes in (sorted(own), sorted(set(in_folder) - set(own))):
            names = sorted({n.lower() for r in readmes for n in _CONFIG_REF.findall(cf.files[r])
                            if n.lower() in cf.by_name})
            if names:
                near = [_folder_path(r) for r in readmes]
                chosen = sorted({p for n in names for p in cf.resolve(n, near)})
                how = "config named by " + ", ".join(readmes)
                break
            for r in readmes:  # a README pointing to another implementation folder
                folders += [d for d in _FOLDER_REF.findall(cf.files[r])
                            if d not in folders and any(_impl_folder(p) == d for p in cf.configs)]
        if not chosen and prefixed:
            how, chosen = "configs named for the system", prefixed
        elif not chosen and folders:
            how = "configs of the implementation folder " + ", ".join(folders)
            chosen = [p for p in cf.configs if _impl_folder(p) in folders]
            if any(_impl_folder(p) not in own_folders for p in chosen):
                # a README's pointer to another folder (v5.0 Supermicro AS-4126GS-NBR-LCC_N1 -> ../b200_nemo):
                # that folder's configs are other systems', none identified as this system's own
                source = "implementation_configs"
        elif not chosen:  # no config is the system's: those naming its device model, never another device's
            model = _device_model(device)
            pcie = bool(device and _PCIE_DEVICE.search(device))
            chosen = [p for p in cf.configs if _config_names_device(p.rsplit("/", 1)[-1], model, pcie)]
            if not chosen:
                return None
            how, source = f"every config of the benchmark's implementations naming {model}", "implementation_configs"
        if not how.startswith("config named by"):  # candidates: the run configs for the system's size
            sourced = set().union(*(cf.sourced(p) for p in chosen)) if chosen else set()
            runs = [p for p in chosen if p.rsplit("/", 1)[-1].lower() not in sourced]
            runs = [p for p in runs if "DGXNNODES" in cf.settings(p)] or runs
            for key, var, what in (("number_of_nodes", "DGXNNODES", "node"),
                                   ("accelerators_per_node", "DGXNGPU", "accelerators per node")):
                want = _system_int(system_info, key)
                stated = [p for p in runs if var in cf.settings(p)]
                if want is not None and stated:
                    runs = [p for p in stated if cf.settings(p)[var][0] == want]
                    how += f", {want} {what}{'s' if what == 'node' and want != 1 else ''}"
            chosen = runs
    if len(chosen) > 1:  # a file another chosen config sources is part of that config
        inner = set().union(*(cf.sourced(p) for p in chosen))
        chosen = [p for p in chosen if p.rsplit("/", 1)[-1].lower() not in inner] or chosen
    if not chosen:
        return None
    statements = [cf.settings(p).get("FP8") for p in chosen]
    if not all(st is not None and st[0] is True for st in statements):
        return None
    _, where, line = statements[0]
    count = f" (all {len(chosen)} agree)" if len(chosen) > 1 else ""
    evidence = f"{how}: {chosen[0]}{count}; {where}: {line}"
    return "fp8", source, evidence


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

    reported, prec_src, evidence, generic = _precision(events, text, system, accel)
    gpu_type = _resolve(accel)
    if ((prec_src == "assumed" or generic) and gpu_type is not None and get_spec(gpu_type).peak_tflops("fp8")
            and implementation):
        # the log and the system description say nothing, or the log only says that mixed precision is on
        # (which does not rule out fp8 matmuls): the launch config of the run's system may say fp8
        found = implementation_precision(implementation, str(provenance.get("system") or ""), system,
                                         device=gpu_type)
        if found is not None:
            log_line = f"log: {evidence}; " if generic else ""
            reported, prec_src, evidence = found[0], found[1], log_line + found[2]
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
    impl_cache: dict = {}
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
            impl = _implementation_files(sub_dir, bench, impl_cache)
            row = summarize_run(text, sysd, benchmark=bench, source_path=str(f), implementation=impl, round=rnd,
                                submitter=submitter, system=sys_name, source_commit=source_commit)
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


def _implementation_files(submitter_dir: Path | None, benchmark: str | None, cache: dict) -> dict[str, str]:
    """The files :func:`implementation_precision` reads from ``<submitter>/benchmarks/<benchmark>/
    implementations/`` (paths from the submitter folder, its name included, as in the results repository),
    read once per folder."""
    if submitter_dir is None or not benchmark:
        return {}
    key = (submitter_dir, benchmark)
    if key not in cache:
        root = submitter_dir / "benchmarks" / benchmark / "implementations"
        files: dict[str, str] = {}
        if root.is_dir():
            for f in sorted(root.rglob("*")):
                if not f.is_file() or not is_implementation_file(f.name):
                    continue
                try:
                    if f.suffix == ".py" and f.stat().st_size > _MAX_PY_CHARS:
                        continue
                    # no more than the caps (and one more character, to tell a file was over)
                    with f.open(encoding="utf-8", errors="replace") as fh:
                        text = fh.read((_MAX_SH_CHARS if f.suffix == ".sh" else _MAX_PY_CHARS) + 1)
                except OSError:
                    continue
                text = implementation_text(f.name, text)
                if text is not None:
                    files[f"{submitter_dir.name}/{f.relative_to(submitter_dir).as_posix()}"] = text
        cache[key] = files
    return cache[key]


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
