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

The language-model benchmarks' rows (``gpt3``, ``llama2_70b_lora``, ``llama31_405b``) also get the
transformer's shape from :data:`~perfmodel.importers.mlperf.catalogue.LLM_SHAPES` (``n_layers``, ``d_model``,
``n_heads``, ``n_kv_heads``, ``ffn_hidden``, ``vocab``, ``n_experts``, ``active_params``), the devices per NVLink
domain (``gpus_per_node``: the system's ``accelerators_per_node``, none for GB200 racks) and the layout their
launch config states (``tp``, ``pp``, ``vp``, ``cp``, ``dp``, ``micro_batch_size``, ``sequence_parallel``,
``recompute``, ``zero_stage``; :func:`implementation_layout`, with ``layout_source``, ``layout_config`` and
``layout_evidence``); what the config does not state is left empty. Every other row has these columns empty.

The precision (``precision_source``) is what the log states (``mllog``: a logged key; ``log_text``: a line of
the run's output), else what the system description states (``system_json``), else what the launch config of
the run's system in the submission's ``benchmarks/<benchmark>/implementations/`` states
(``implementation_config`` where the config is identified as the system's, ``implementation_configs`` where
every candidate config for the system's size agrees but none is identified as the system's own; fp8 only, and
only on devices with an fp8 peak; see :func:`implementation_precision`), else ``assumed`` (bf16; fp16 on
V100/T4/P100). A log line that only switches 16-bit mixed precision on (``16-bits training: True``,
``amp=True``, ``precision=16``) does not rule out fp8: there the launch config is read too, and its fp8
wins (the evidence keeps the log line).

The package's modules: :mod:`~perfmodel.importers.mlperf.log` (parsing a log, the step-time methods),
:mod:`~perfmodel.importers.mlperf.catalogue` (:data:`BENCHMARKS`, the language models' shapes),
:mod:`~perfmodel.importers.mlperf.configs` (the launch configs, the precision they state),
:mod:`~perfmodel.importers.mlperf.layout` (the layout they state: tensor/pipeline/context parallel degrees,
micro-batch, ...), :mod:`~perfmodel.importers.mlperf.devices` (device names),
:mod:`~perfmodel.importers.mlperf.run` (one run record) and
:mod:`~perfmodel.importers.mlperf.importer` (whole trees). Everything is imported from here.

Examples
--------
::

    from perfmodel.importers import from_mlperf
    runs = from_mlperf(["training_results_v4.0/NVIDIA"], round="v4.0")
"""

from __future__ import annotations

from ...exceptions import MLPerfFormatError
from .catalogue import (
                        BENCHMARKS,
                        BERT_LARGE,
                        GPT3_175B,
                        LLAMA2_70B,
                        LLAMA31_405B,
                        LLM_SHAPES,
                        SKIPPED_BENCHMARKS,
                        Benchmark,
)
from .configs import implementation_precision, implementation_text, is_implementation_file, select_configs
from .devices import gpus_per_node, resolve_device
from .importer import find_result_files, frame, from_mlperf, loadable, make_run_id
from .layout import LAYOUT_KEYS, LAYOUT_RECORD_COLUMNS, implementation_bindings, implementation_layout
from .log import epoch_times, parse_mllog
from .run import summarize_run

__all__ = [
    "BENCHMARKS",
    "Benchmark",
    "MLPerfFormatError",
    "epoch_times",
    "from_mlperf",
    "parse_mllog",
    "summarize_run",
    "find_result_files",
    "implementation_layout",
    "implementation_precision",
    "implementation_text",
    "is_implementation_file",
    "loadable",
]
