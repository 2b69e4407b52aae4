"""The ``perfmodel`` command line.

Exit status: 0 answered; 2 bad input (one line ``perfmodel: error: ...``, no traceback); 1 a well-formed question
that nothing could answer (a device, precision or model the history has no runs on, too few runs for the
interval asked, no price; ``recommend`` with no configuration left). Ctrl-C exits with 130. ``predict``, ``fit``, ``summary`` and ``import`` never import torch; ``measure`` does.
"""

from __future__ import annotations

import argparse
import json
import logging
import math
import os
import sys
import warnings
from pathlib import Path

from ._version import __version__

__all__ = ["main"]


def _count(text: str) -> int:
    """A whole number, also written as ``1e4`` or ``10_000`` (like ``--params 2e6``)."""
    try:
        value = float(str(text).replace("_", ""))
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a whole number, got {text!r}") from None
    if not value.is_integer():
        raise argparse.ArgumentTypeError(f"expected a whole number, got {text!r}")
    return int(value)


_count.__name__ = "int"


def _csv_list(kind):
    def parse(text: str):
        try:
            items = [kind(t.strip()) for t in text.split(",") if t.strip()]
        except ValueError:
            raise argparse.ArgumentTypeError(f"expected a comma-separated list of {kind.__name__}, got {text!r}")
        if not items:
            raise argparse.ArgumentTypeError("expected at least one value")
        return items

    return parse


class _OneLineParser(argparse.ArgumentParser):
    """argparse, but a usage error is one line (``perfmodel: error: ...``) and exit status 2."""

    def error(self, message):
        sub = self.prog[len("perfmodel"):].strip() if self.prog.startswith("perfmodel") else self.prog
        where = f"{sub}: " if sub else ""  # "perfmodel: error: predict: ...", never "perfmodel: perfmodel:"
        self.exit(2, f"perfmodel: error: {where}{message} (see {self.prog} --help)\n")


#: perfmodel.models.METHODS plus "auto" (kept literal so that --help does not import the models; a test checks it).
_METHOD_CHOICES = ["auto", "physics", "roofline", "loglinear", "gbm", "linear", "ops", "ratio", "mfu", "layout"]


def _add_llm_model_flags(p, *, params: bool = True) -> None:
    """The flags that describe an LLM's shape (plan-llm, recommend --seq-len; recommend has its own --params)."""
    if params:
        p.add_argument("--params", type=float, help="parameter count (or give --n-layers and --d-model, or "
                                                    "--hf-config; alone: the standard shape of that size is assumed)")
    p.add_argument("--hf-config", metavar="PATH",
                   help="a Hugging Face config.json (or the folder holding it), dense or mixture of experts: layers, "
                        "hidden size, heads, MLP width, experts, vocabulary and the parameter count are read from it "
                        "(nothing is downloaded)")
    p.add_argument("--n-layers", type=_count)
    p.add_argument("--d-model", type=_count)
    p.add_argument("--vocab", type=_count)
    p.add_argument("--n-heads", type=_count, help="attention heads (default d-model / 128)")
    p.add_argument("--n-kv-heads", type=_count, help="key/value heads (grouped-query attention; default --n-heads)")
    p.add_argument("--ffn-mult", type=float, default=None, help="MLP width / d-model (default 4)")
    p.add_argument("--ffn-hidden", type=_count, default=None, help="MLP width in units (instead of --ffn-mult)")


def _add_layout_flags(p, *, plan: bool) -> None:
    """The flags of an LLM job's parallel layout: plan-llm's (defaults: data parallel) and recommend's (none given:
    the fastest layout that fits, per configuration)."""
    p.add_argument("--zero-stage", type=int, default=1 if plan else None, choices=[0, 1, 2, 3],
                   help="sharding over the data-parallel ranks: 1 = Megatron's distributed optimizer (default), "
                        "3 = FSDP full shard")
    p.add_argument("--tensor-parallel", type=_count, default=1 if plan else None)
    p.add_argument("--pipeline-parallel", type=_count, default=1 if plan else None)
    p.add_argument("--context-parallel", type=_count, default=1 if plan else None)
    p.add_argument("--expert-parallel", type=_count, default=1 if plan else None, help="a mixture of experts' expert-parallel degree")
    p.add_argument("--virtual-stages", type=_count, default=1 if plan else None, help="interleaved pipeline stages per device")
    p.add_argument("--micro-batch", type=_count, help="sequences per pass on one replica (default 1)")
    p.add_argument("--sequence-parallel", action=argparse.BooleanOptionalAction, default=None,
                   help="tensor-parallel ranks split the sequence in norms and dropouts (default: on with "
                        "--tensor-parallel > 1)")
    p.add_argument("--recompute", choices=["none", "selective", "full"], default=None,
                   help="activation recomputation (default none; full with --activation-checkpointing)")
    p.add_argument("--activation-checkpointing", action="store_true", help="the same as --recompute full")
    p.add_argument("--no-flash-attention", dest="flash_attention", action="store_false",
                   help="attention kernels that store the score matrix (memory)")
    if plan:
        p.add_argument("--search-layouts", action="store_true",
                       help="search every valid layout that fits in memory and plan the fastest (the given degrees, "
                            "--zero-stage and --recompute are ignored); the ranking is printed")
        p.add_argument("--allow-no-fit", action="store_true",
                       help="print the time of a layout whose memory estimate does not fit, instead of refusing it")


def _parser() -> argparse.ArgumentParser:
    from .kinds import KIND_NAMES

    p = _OneLineParser(prog="perfmodel", description="Predict the wall-clock time of training jobs.")
    p.add_argument("--version", action="version", version=f"perfmodel {__version__}")
    p.add_argument("-v", "--verbose", action="store_true", help="log diagnostics to stderr")
    p.add_argument("--progress", action=argparse.BooleanOptionalAction, default=None,
                   help="progress bars on stderr for fits longer than ~2 s (default: when stderr is a "
                        "terminal; PERFMODEL_PROGRESS=0 turns them off)")
    sub = p.add_subparsers(dest="command", required=True)

    f = sub.add_parser("fit", help="fit a model on a run history and save it")
    f.add_argument("runs", help="run history: a store (runs.db, postgresql://..., default) or a .csv/.parquet file")
    f.add_argument("-o", "--output", required=True, help="model file to write (e.g. model.perfmodel; safe format)")
    f.add_argument("--force", action="store_true", help="overwrite -o even if it is not a model file")
    f.add_argument("--keep-noisy", action="store_true",
                   help="keep runs whose timing_flag says the machine was busy (left out by default)")
    f.add_argument("--method", default="auto", choices=_METHOD_CHOICES)
    f.add_argument("--kind", default="seen", choices=list(KIND_NAMES),
                   help="the kind of query the model is for: 'auto' chooses the method for it, and its intervals "
                        "come from the refits that hold out that kind's groups (default: seen)")

    pr = sub.add_parser("predict", help="predict the training time of a job")
    pr.add_argument("--model", help="model name in the history (or a label with --params)")
    pr.add_argument("--params", type=float, help="parameter count of a model not in the history")
    pr.add_argument("--flops-per-sample", type=float, help="forward+backward FLOPs per sample (with --params)")
    pr.add_argument("--attention-flops-per-sample", type=float,
                    help="the part of --flops-per-sample in attention's score and value products (the mfu rule "
                         "prices it at its own utilisation where the history's runs give theirs)")
    pr.add_argument("--family", help="model family of a model given by --params: cnn, encoder, decoder, ... (a "
                                     "decoder with --flops-per-sample and no --seq-len is priced by the layout "
                                     "model at the sequence its FLOPs imply, as predict_training_time does)")
    pr.add_argument("--seq-len", type=_count, help="tokens per sequence of a transformer job: the layout model "
                                                  "prices it (the other methods have no sequence term and do not "
                                                  "use it)")
    pr.add_argument("--batch-size", type=_count, required=True, help="per-device batch size")
    pr.add_argument("--gpu-count", type=_count, default=1)
    pr.add_argument("--gpu-type", required=True, help="device name, e.g. A100, H100, cpu")
    pr.add_argument("--steps", type=_count)
    pr.add_argument("--epochs", type=_count)
    pr.add_argument("--dataset-size", type=_count)
    pr.add_argument("--precision", default=None,
                    help="fp32, tf32, fp16, bf16 or fp8 (default: what most of the history's runs on the device used)")
    pr.add_argument("--confidence", type=float, default=0.9)
    pr.add_argument("--method", default="auto", choices=_METHOD_CHOICES)
    src = pr.add_mutually_exclusive_group()
    src.add_argument("--history", action="append",
                     help="run history to fit on: a store (runs.db, postgresql://..., default: $PERFMODEL_HISTORY), a "
                          ".csv/.parquet file or a bundled name (cpu, gpu, mlperf, h200); "
                          "repeat to combine, e.g. --history my_runs.csv --history gpu (default: the bundled runs "
                          "for the device: cpu, or the public GPU history)")
    src.add_argument("--fitted", help="a model file written by 'perfmodel fit'")
    pr.add_argument("--trusted", action="store_true",
                    help="allow a pickle-based (joblib) model file: it can run code, use only your own")
    pr.add_argument("--json", action="store_true", help="print the result as JSON")

    s = sub.add_parser("summary", help="print the summary of a fitted model (or of a fit on a history)")
    s.add_argument("source", nargs="?", help="model file, or a .csv/.parquet history (default: bundled runs)")
    s.add_argument("--method", default="auto", choices=_METHOD_CHOICES)
    s.add_argument("--trusted", action="store_true", help="allow a pickle-based (joblib) model file")

    m = sub.add_parser("measure", help="measure training runs and append them to a history (needs torch)")
    m.add_argument("--models", type=_csv_list(str),
                   help="comma-separated: zoo names, hf:<type>[?key=value&...] or hf:./config.json (needs the 'hf' "
                        "extra), or your own pkg.module:factory / file.py:factory (default: the default sweep)")
    m.add_argument("--name", help="the records' model name (one model only; default: the factory's dotted name)")
    m.add_argument("--seq-len", type=_count, help="sequence length of Hugging Face (default 128) and zoo sequence models")
    m.add_argument("--grad-accum", type=_count, default=1, help="micro-batches per optimizer step (default 1)")
    m.add_argument("--optimizer", choices=["adamw", "sgd"], default="adamw")
    m.add_argument("--compile", action="store_true", help="torch.compile the model (compile time goes to startup_s)")
    m.add_argument("--activation-checkpointing", action="store_true",
                   help="activation checkpointing where the model supports it (the record says if it ran)")
    m.add_argument("--batch-sizes", type=_csv_list(_count), default=None)
    m.add_argument("--gpu-counts", type=_csv_list(_count), default=None)
    m.add_argument("--precisions", type=_csv_list(str), default=["fp32"])
    m.add_argument("--device", choices=["cpu", "cuda"], default=None, help="default: cuda if available, else cpu")
    g = m.add_mutually_exclusive_group()
    g.add_argument("--steps", type=_count, help="fixed number of timed steps")
    g.add_argument("--max-seconds", type=float, help="adaptive timing budget per run (seconds)")
    m.add_argument("--ci-target", type=float, default=None, help="stop when the 95%% CI half-width is below this")
    m.add_argument("--repeats", type=_count, default=1)
    m.add_argument("--timeout", type=float, default=600.0, help="kill a run after this many seconds")
    m.add_argument("--retry-failed", action="store_true", help="re-run configurations recorded as failed")
    m.add_argument("--output", "-o", help="history to append to: a store (runs.db, postgresql://...) or .csv/.parquet "
                                          "(default: the default store, $PERFMODEL_HISTORY or runs.db in your data "
                                          "folder)")
    m.add_argument("--list-models", action="store_true",
                   help="list the zoo (family, parameters, FLOPs per sample) and exit")
    m.add_argument("--sweep", choices=["default", "zoo", "calibrate", "online", "layouts"], default=None,
                   help="a named sweep: default (the first 112 runs of the bundled CPU history), zoo (every zoo architecture, "
                        "about half an hour on 2 cores), calibrate (as --calibrate), online (ten 400-step runs for the "
                        "online remaining-time benchmark, about three minutes), layouts (tensor/pipeline/data-parallel "
                        "layouts of two decoders on 1-4 processes, as data/runs_cpu_layouts.csv)")
    m.add_argument("--calibrate", action="store_true",
                   help="measure this host in about four minutes (a fixed, op-diverse zoo sweep on CPU) to combine "
                        "with the bundled history: --history calibration_cpu.csv --history cpu "
                        "(default output calibration_cpu.csv)")
    m.add_argument("--plan", action="store_true", help="print the run count and expected time, then exit")
    m.add_argument("--launcher", choices=["local", "slurm"], default="local",
                   help="local: run here, one configuration after another (torchrun for several devices/nodes); "
                        "slurm: one job per configuration through submitit (needs the 'slurm' extra)")
    la = m.add_argument_group("layouts of a decoder (--models layout-gpt-s,layout-gpt-m,layout-gpt-l; --gpu-counts "
                              "are processes split tp x pp x dp)")
    la.add_argument("--tensor-parallel", type=_count, default=1, metavar="TP",
                    help="tensor-parallel degree (torch.distributed.tensor.parallel; default 1)")
    la.add_argument("--pipeline-parallel", type=_count, default=1, metavar="PP",
                    help="pipeline stages (torch.distributed.pipelining; default 1)")
    la.add_argument("--sequence-parallel", action="store_true", help="sequence-parallel norms (needs TP > 1)")
    la.add_argument("--pp-schedule", choices=["1f1b", "gpipe"], default="1f1b",
                    help="pipeline schedule (1f1b needs at least PP micro-batches per step; default 1f1b)")
    la.add_argument("--global-batch", type=_count, help="sequences per optimizer step over all processes (instead of "
                                                        "--batch-sizes/--grad-accum)")
    la.add_argument("--micro-batch", type=_count,
                    help="sequences per forward/backward pass of one replica, with --global-batch (default: the "
                         "replica's whole share, one micro-batch)")
    tr = m.add_argument_group("multi-node (torchrun, c10d rendezvous; start the same command on every node)")
    tr.add_argument("--nnodes", type=_count, help="nodes per run")
    tr.add_argument("--nproc-per-node", type=_count, help="processes (GPUs) per node; gpu_count = nnodes x this")
    tr.add_argument("--rdzv-endpoint", help="host:port of the rendezvous (a port free on the first node)")
    tr.add_argument("--rdzv-id", default=None, help="rendezvous id prefix, the same on every node (default perfmodel)")
    sl = m.add_argument_group("Slurm (--launcher slurm)")
    sl.add_argument("--partition", help="Slurm partition (required)")
    sl.add_argument("--time", type=_count, dest="time_min", help="time limit per job, minutes (required)")
    sl.add_argument("--gpus-per-node", type=_count, help="GPUs per job (default 1; must cover --gpu-counts)")
    sl.add_argument("--account", help="Slurm account")
    sl.add_argument("--cpus-per-task", type=_count, help="CPU cores per job (default 8)")
    sl.add_argument("--slurm-folder", help="logs, job ids and records (default: <output>.slurm)")
    sl.add_argument("--slurm-cluster", choices=["auto", "slurm", "local"], default="auto",
                    help="submitit executor: auto (Slurm if sbatch exists), slurm, or local processes (testing)")

    e = sub.add_parser("evaluate", help="grouped cross-validation of the methods and baselines on a history")
    e.add_argument("runs", nargs="?", help="run history (default: the bundled runs)")
    e.add_argument("--methods", type=_csv_list(str), default=None,
                   help="comma-separated methods (default: those perfmodel.evaluate.evaluate compares, "
                        "DEFAULT_EVAL_METHODS: linear,loglinear,gbm,physics,roofline,auto)")
    e.add_argument("--splits", type=_csv_list(str), default=None,
                   help="leave-one-model-out,leave-one-batch-size-out,leave-one-gpu-count-out,leave-one-gpu-type-out")
    e.add_argument("--no-baselines", action="store_true")
    e.add_argument("--confidence", type=float, default=0.9)
    e.add_argument("--n-jobs", type=_count, default=1)
    e.add_argument("--host-peak-gflops", type=float, default=None,
                   help="measured CPU FLOP/s of the host, for the 6ND-util0.4 baseline on CPU runs")
    e.add_argument("--json", action="store_true", help="print JSON instead of the table")

    r = sub.add_parser("recommend", help="rank device types and counts by cost for a job, with intervals")
    r.add_argument("--model", help="model name in the history (or a label with --params)")
    r.add_argument("--params", type=float)
    r.add_argument("--flops-per-sample", type=float)
    r.add_argument("--seq-len", type=_count,
                   help="plan an LLM job (tokens per sequence): --batch-size is the global batch in sequences, the "
                        "model is --params or the shape flags below, and each configuration gets the layout flags "
                        "given, or the fastest layout that fits in memory; the same answer as plan-llm")
    _add_llm_model_flags(r, params=False)
    r.add_argument("--gpus-per-node", type=_count, help="with --seq-len: devices per node / NVLink domain")
    r.add_argument("--inter-node-gbps", type=float, help="with --seq-len: the network per device, GB/s one way")
    _add_layout_flags(r, plan=False)
    r.add_argument("--batch-size", type=_count, required=True,
                   help="the global batch (per-device batch with --work per_device_batch)")
    r.add_argument("--work", default="global_batch", choices=["global_batch", "per_device_batch"],
                   help="what stays fixed across configurations besides the samples: the global batch (default; "
                        "per-device batch = global / n, with gradient accumulation above --max-device-batch) "
                        "or the per-device batch")
    r.add_argument("--max-device-batch", type=_count, help="largest per-device batch that fits (default: the "
                                                           "largest in the history)")
    r.add_argument("--gpu-types", type=_csv_list(str), required=True, help="e.g. A100,H100,cpu")
    r.add_argument("--gpu-counts", type=_csv_list(_count), default=[1, 2, 4, 8])
    r.add_argument("--steps", type=_count)
    r.add_argument("--epochs", type=_count)
    r.add_argument("--dataset-size", type=_count)
    r.add_argument("--deadline-hours", type=float)
    r.add_argument("--budget", type=float, help="dollars")
    r.add_argument("--confidence", type=float, default=0.9)
    r.add_argument("--prices", help="your price table (CSV: gpu_type,provider,on_demand_usd_per_hour,...)")
    r.add_argument("--precision", default=None,
                   help="fp32, tf32, fp16, bf16 or fp8 (default: what most of the history's runs on each device used)")
    r.add_argument("--provider", help="price from this provider (default: the cheapest in the table)")
    r.add_argument("--providers", type=_csv_list(str),
                   help="compare these providers, one row per provider and configuration, e.g. aws,lambda")
    r.add_argument("--spot", action="store_true")
    rsrc = r.add_mutually_exclusive_group()
    rsrc.add_argument("--history")
    rsrc.add_argument("--fitted")
    r.add_argument("--trusted", action="store_true", help="allow a pickle-based (joblib) model file")
    r.add_argument("--json", action="store_true")

    ll = sub.add_parser("plan-llm", help="plan an LLM training job from its shape: tokens, sequence length, "
                                          "global batch, devices or nodes, parallelism (time, FLOPs, memory fit)")
    _add_llm_model_flags(ll)
    ll.add_argument("--seq-len", type=_count, required=True, help="tokens per sequence")
    work = ll.add_mutually_exclusive_group(required=True)
    work.add_argument("--tokens", type=_count, help="training tokens, e.g. 100e9")
    work.add_argument("--samples", type=_count, help="training sequences")
    work.add_argument("--steps", type=_count, help="optimizer steps")
    ll.add_argument("--global-batch", type=_count, required=True, help="sequences per optimizer step, all devices")
    ll.add_argument("--gpu-type", required=True, help="device name, e.g. H100, MI300X")
    ll.add_argument("--gpu-count", type=_count, help="devices in all (or --nodes and --gpus-per-node)")
    ll.add_argument("--nodes", type=_count)
    ll.add_argument("--gpus-per-node", type=_count, help="devices per node / NVLink domain (default 8; 72 on GB200 "
                                                         "NVL72)")
    ll.add_argument("--inter-node-gbps", type=float,
                    help="your scale-out network per device, GB/s one way (e.g. 50 for a 400 Gb/s NIC per GPU; "
                         "default: the device table's reference system, where it has one)")
    _add_layout_flags(ll, plan=True)
    ll.add_argument("--deadline-hours", type=float, help="say whether the job ends in time (on the interval's upper "
                                                         "bound)")
    ll.add_argument("--budget", type=float, help="say whether the job's cost (upper bound) stays within this many "
                                                 "dollars")
    ll.add_argument("--optimizer", choices=["adamw", "sgd"], default="adamw")
    ll.add_argument("--precision", default=None,
                    help="fp32, tf32, fp16, bf16 or fp8 (default: what most of the history's runs on the device used)")
    ll.add_argument("--confidence", type=float, default=0.9)
    ll.add_argument("--method", default="auto", choices=_METHOD_CHOICES)
    ll.add_argument("--history", action="append", help="run history (default: the bundled public LLM history)")
    ll.add_argument("--provider", help="price from this provider (default: the cheapest in the table)")
    ll.add_argument("--prices", help="your price table (CSV)")
    ll.add_argument("--json", action="store_true", help="print the result as JSON")

    rp = sub.add_parser("report", help="write a one-page HTML report (needs matplotlib: perfmodel[plot])")
    rp.add_argument("runs", nargs="?", help="run history (default: the bundled runs)")
    rp.add_argument("-o", "--output", default="report.html")
    rp.add_argument("--methods", type=_csv_list(str), default=None,
                    help="methods to fit and cross-validate; the plots show the first (default: "
                         "perfmodel.report.REPORT_METHODS: auto,physics,loglinear)")
    rp.add_argument("--quick", action="store_true", help="cross-validate on leave-one-batch-size-out only")
    rp.add_argument("--max-minutes", type=float, default=4.5,
                    help="time budget: a cross-validation split still running when it is spent is stopped, and "
                         "the report says which were left out (default 4.5; 0: every split)")
    rp.add_argument("--n-jobs", type=_count, default=1)

    c = sub.add_parser("cache", help="the disk cache of fitted models (info, or clear it)")
    c.add_argument("action", choices=["info", "clear"])

    h = sub.add_parser("hardware", help="print the hardware spec table")
    h.add_argument("name", nargs="?", help="resolve one device name")

    ft = sub.add_parser("features", help="add feature columns to a run history")
    fsub = ft.add_subparsers(dest="action", required=True)
    fa = fsub.add_parser("add-ops", help="backfill op-level feature columns (op_*) by rebuilding zoo models by "
                                         "name on the meta device (needs torch)")
    fa.add_argument("history", help="run history (.csv or .parquet)")
    fa.add_argument("-o", "--output", default=None, help="where to write (default: rewrite HISTORY in place)")
    fa.add_argument("--overwrite", action="store_true", help="recount rows that already have op columns")
    imp = sub.add_parser("import", help="import run history from MLPerf logs, MLflow or Hugging Face output dirs")
    isub = imp.add_subparsers(dest="source", required=True, parser_class=_OneLineParser)
    ml = isub.add_parser("mlperf", help="MLPerf Training result logs (result_<n>.txt + systems/*.json)")
    ml.add_argument("paths", nargs="+", metavar="DIR", help="result logs, or folders searched for result_<n>.txt")
    ml.add_argument("-o", "--output", default="default", help="history to append to (default: the default store)")
    ml.add_argument("--system", help="system description JSON to use for every log (default: "
                    "<submitter>/systems/<system>.json next to results/)")
    ml.add_argument("--round", help="MLPerf round recorded with the runs, e.g. v4.0")
    ml.add_argument("--source-commit", help="commit of the results repository, recorded with the runs")
    im = isub.add_parser("mlflow", help="finished runs of an MLflow tracking store or server (needs mlflow)")
    im.add_argument("--tracking-uri", help="sqlite:///mlflow.db, file:./mlruns, http://host:5000 "
                                           "(default: $MLFLOW_TRACKING_URI)")
    im.add_argument("--experiment", help="experiment name (default: every experiment)")
    im.add_argument("--max-runs", type=_count, help="read at most this many runs, newest first")
    ih = isub.add_parser("hf-output", help="Hugging Face Trainer output dirs (trainer_state.json, all_results.json)")
    ih.add_argument("dirs", nargs="+", help="output dirs, or folders to search for them")
    for q in (im, ih):
        q.add_argument("-o", "--output", default="default", help="history to append to (default: the default store)")
        q.add_argument("--map", action="append", default=[], type=_key_value, metavar="KEY=COLUMN",
                       help="read column COLUMN from the source's KEY (a param, metric, tag or JSON key); repeatable")
        q.add_argument("--mapping-file", help='JSON object {"KEY": "COLUMN", ...}')
        q.add_argument("--set", action="append", default=[], type=_key_value, metavar="COLUMN=VALUE",
                       dest="set_values", help="a value that holds for every imported run, e.g. gpu_type=A100")

    hs = sub.add_parser("history", help="the run history store: export to CSV/Parquet, import, info, migrate")
    hsub = hs.add_subparsers(dest="action", required=True, parser_class=_OneLineParser)
    hx = hsub.add_parser("export", help="write a history to a plain .csv (no check column) or .parquet file")
    hx.add_argument("source", nargs="?", default="default", help="the history (default: the default store)")
    hx.add_argument("-o", "--output", required=True, help="the .csv or .parquet file to write")
    hx.add_argument("--force", action="store_true", help="replace -o if it exists")
    hi = hsub.add_parser("import", help="copy .csv/.parquet histories into a store (each run_id once)")
    hi.add_argument("files", nargs="+", help="histories to import (any perfmodel version's CSV or Parquet, or a store)")
    hi.add_argument("--into", default="default", help="the store (default: $PERFMODEL_HISTORY, else runs.db in your "
                                                      "data folder)")
    for name, text in (("info", "where the store is, its runs, columns and digest"),
                       ("migrate", "bring a store's layout up to this version's schema")):
        hq = hsub.add_parser(name, help=text)
        hq.add_argument("store", nargs="?", default="default", help="the store (default: the default store)")
    return p


def _key_value(text: str) -> tuple[str, str]:
    key, sep, value = text.partition("=")
    if not sep or not key.strip() or not value.strip():
        raise argparse.ArgumentTypeError(f"expected KEY=VALUE, got {text!r}")
    return key.strip(), value.strip()


def _cmd_fit(args) -> int:
    from .predict import fit

    from .persistence import save_model

    from ._atomic import real_target
    from .persistence import is_model_file

    out = real_target(args.output)
    if not args.force and out.is_file() and out.stat().st_size > 0 and not is_model_file(out):
        raise ValueError(f"-o {args.output}: the file exists and is not a model file (a run history?); pass "
                         "--force to overwrite it, or choose another -o.")
    runs = args.runs
    if not args.keep_noisy:
        from .history import drop_noisy, read_history

        loaded = read_history(runs)
        runs, dropped = drop_noisy(loaded)
        if dropped:
            print(f"perfmodel: left out {dropped} of {len(loaded.runs)} runs flagged as noisy (timing_flag); "
                  "--keep-noisy keeps them", file=sys.stderr)
    model = fit(runs, method=args.method, kind=args.kind)
    save_model(model, args.output, force=args.force)
    print(model.summary().as_text())
    print(f"\nsaved {model.method} model to {args.output}")
    return 0


def _cmd_predict(args) -> int:
    from .persistence import load_model
    from .predict import predict_training_time

    model = _model_arg(args)
    if args.fitted:
        history = load_model(args.fitted, trusted=args.trusted)
    else:
        history = args.history if not args.history or len(args.history) > 1 else args.history[0]
    result = predict_training_time(
        model, batch_size=args.batch_size, gpu_count=args.gpu_count, gpu_type=args.gpu_type, steps=args.steps,
        epochs=args.epochs, dataset_size=args.dataset_size, precision=args.precision, history=history,
        confidence=args.confidence, method=args.method, seq_len=args.seq_len,
    )
    if args.json:
        print(json.dumps(result.to_dict(), indent=2, allow_nan=False))
    else:
        assumed = " (assumed: --precision not given)" if args.precision is None else ""
        print(f"{result} in {result.query.get('precision')}{assumed}")
        if result.peak_basis and result.peak_basis != result.query.get("precision"):
            print(f"peak: {result.peak_basis}")
        if result.provenance:
            print(f"learned from: {', '.join(result.provenance)} ({result.query_kind.replace('_', ' ')} query)")
        if result.interval_rule:
            print(f"interval: {result.interval_rule}")
        step = (f"step {result.step_seconds:.4g} s ({result.confidence:.0%} PI {result.step_lower:.4g} – "
                f"{result.step_upper:.4g} s) x {result.steps} steps")
        if result.startup_seconds:
            step += f" + start-up {result.startup_seconds:.3g} s"
        print(step)
    return 0


def _cmd_summary(args) -> int:
    from .persistence import load_model
    from .predict import fit

    src = args.source
    if src is None:
        from .datasets import bundled_runs_path

        src = str(bundled_runs_path())
    from .store import is_store

    if src.lower().endswith((".csv", ".parquet", ".pq")) or is_store(src):
        model = fit(src, method=args.method)
    else:
        model = load_model(src, trusted=args.trusted)
    print(model.summary().as_text())
    return 0


_SLURM_FLAGS = {"partition": "--partition", "time_min": "--time", "gpus_per_node": "--gpus-per-node",
                "account": "--account", "cpus_per_task": "--cpus-per-task", "slurm_folder": "--slurm-folder"}
_TORCHRUN_FLAGS = {"nnodes": "--nnodes", "nproc_per_node": "--nproc-per-node", "rdzv_endpoint": "--rdzv-endpoint",
                   "rdzv_id": "--rdzv-id"}


def _check_launch_flags(args) -> None:
    """Flag combinations that cannot work, refused before anything runs."""
    given = lambda table: [flag for dest, flag in table.items() if getattr(args, dest) is not None]  # noqa: E731
    slurm_given, torchrun_given = given(_SLURM_FLAGS), given(_TORCHRUN_FLAGS)
    if args.launcher == "slurm":
        if torchrun_given:
            raise ValueError(f"{', '.join(torchrun_given)} cannot be used with --launcher slurm: each Slurm job is "
                             "one node; multi-node runs use --launcher local with --nnodes on every node.")
        missing = [f for d, f in (("partition", "--partition"), ("time_min", "--time")) if getattr(args, d) is None]
        if missing:
            raise ValueError(f"--launcher slurm needs {' and '.join(missing)} (partition and time limit in "
                             "minutes of each job).")
    elif slurm_given or args.slurm_cluster != "auto":
        raise ValueError(f"{', '.join(slurm_given) or '--slurm-cluster'}: only with --launcher slurm.")
    if args.nnodes is not None and args.nnodes > 1 and not args.rdzv_endpoint:
        raise ValueError("--nnodes > 1 needs --rdzv-endpoint host:port (the c10d rendezvous every node joins).")
    if args.rdzv_endpoint and (args.nnodes is None or args.nnodes < 2):
        raise ValueError("--rdzv-endpoint is for multi-node runs: give --nnodes N (N >= 2) with it.")
    if args.nproc_per_node is not None and args.gpu_counts is not None:
        raise ValueError("give either --gpu-counts or --nproc-per-node (gpu_count = nnodes x nproc-per-node).")
    for dest, flag in (("nnodes", "--nnodes"), ("nproc_per_node", "--nproc-per-node"), ("time_min", "--time"),
                       ("gpus_per_node", "--gpus-per-node"), ("cpus_per_task", "--cpus-per-task")):
        value = getattr(args, dest)
        if value is not None and value < 1:
            raise ValueError(f"{flag} must be a positive int. Got {value}.")


def _cmd_measure(args) -> int:
    _check_launch_flags(args)
    from .measure.launch import run_sweep
    from .measure.sweep import default_sweep_configs, sweep_configs
    from .measure.zoo import CLASSIC_MODELS

    if args.list_models:
        return _list_models()
    named = _named_sweep(args)
    if not args.output and named == "calibrate":
        args.output = "calibration_cpu.csv"
    if not args.output:
        from .store import default_store

        args.output = default_store(make_folder=True)
    device = args.device
    if device is None and named == "calibrate":
        device = "cpu"  # a calibration pairs with the bundled CPU history
    if device is None:
        import torch

        device = "cuda" if torch.cuda.is_available() else "cpu"
    opts = {}
    if args.steps is not None:
        opts["steps"] = args.steps
    if args.max_seconds is not None:
        opts["max_seconds"] = args.max_seconds
    if args.ci_target is not None:
        opts["ci_target"] = args.ci_target
    job = {"grad_accum": args.grad_accum, "optimizer": args.optimizer, "compile": args.compile,
           "activation_checkpointing": args.activation_checkpointing}
    if args.seq_len is not None:
        job["seq_len"] = args.seq_len
    if args.name is not None:
        job["name"] = args.name
    nnodes = args.nnodes or 1
    if nnodes > 1 or args.nproc_per_node is not None:
        job["nnodes"] = nnodes
        if args.rdzv_endpoint:
            job["rdzv_endpoint"] = args.rdzv_endpoint
        if args.rdzv_id:
            job["rdzv_id"] = args.rdzv_id
        args.gpu_counts = [nnodes * (args.nproc_per_node or 1)]
    if args.name is not None and (args.models is None or len(args.models) != 1):
        raise ValueError("--name names the records of one model: give exactly one --models entry with it.")
    if named is not None:
        from .measure.plans import named_sweep_configs

        configs = named_sweep_configs(named, device=device, **opts, **job)
    elif _is_layout_request(args):
        configs = _layout_configs(args, device, {"max_seconds": 10.0, **opts, **job})
    elif args.models is None and args.batch_sizes is None and args.gpu_counts is None:
        configs = default_sweep_configs(device=device, **opts, **job)
    else:
        defaults = {"max_seconds": 10.0}
        configs = sweep_configs(args.models or list(CLASSIC_MODELS), args.batch_sizes or [8, 32],
                                args.gpu_counts or [1], precisions=args.precisions, repeats=args.repeats,
                                device=device, **{**defaults, **opts, **job})
    if named is not None or args.plan:  # what a named sweep will do, before it starts (errors stay one line)
        _print_plan(configs, named, args)
        if args.plan:
            return 0
    slurm = None
    if args.launcher == "slurm":
        from .measure.slurm import SlurmOptions

        slurm = SlurmOptions(partition=args.partition, time_min=args.time_min, gpus_per_node=args.gpus_per_node or 1,
                             account=args.account, cpus_per_task=args.cpus_per_task or 8, folder=args.slurm_folder,
                             cluster=args.slurm_cluster)
    done = run_sweep(configs, args.output, timeout_s=args.timeout, retry_failed=args.retry_failed,
                     launcher=args.launcher, slurm=slurm)
    failed = int((done["status"] != "ok").sum()) if len(done) else 0
    print(f"wrote {len(done)} runs to {args.output} ({failed} failed)")
    if named == "calibrate":
        print(f"use it beside the bundled history: perfmodel predict ... --history {args.output} --history cpu "
              f"(Python: history=[{args.output!r}, 'cpu'])")
    return 0


def _print_plan(configs, named, args) -> None:
    from pathlib import Path

    from ._atomic import check_writable
    from ._validation import check_positive_float
    from .measure.plans import plan

    if not args.plan:  # the checks run_sweep makes first, made before the plan is printed
        from .io import check_history_target

        check_positive_float(args.timeout, "timeout_s", "run_sweep")
        if check_history_target(args.output, "-o/--output") != "store" or "://" not in args.output:
            check_writable(Path(args.output))
    todo = plan(configs, args.output)
    left = ""
    if todo.runs < len(configs):
        left = f" ({len(configs) - todo.runs} of {len(configs)} already in {args.output})"
    print(f"{named or 'sweep'}: {todo}{left}", file=sys.stderr, flush=True)


def _layout_flags_given(args) -> list[tuple[str, bool]]:
    """The layout flags and whether each was given (not at its default)."""
    return [("--tensor-parallel", args.tensor_parallel != 1), ("--pipeline-parallel", args.pipeline_parallel != 1),
            ("--sequence-parallel", bool(args.sequence_parallel)), ("--pp-schedule", args.pp_schedule != "1f1b"),
            ("--global-batch", args.global_batch is not None), ("--micro-batch", args.micro_batch is not None)]


def _is_layout_request(args) -> bool:
    """Whether the flags ask for layout runs (a layout decoder among --models, or a layout flag); refuses a mix
    of layout decoders and other models, and layout flags without a layout decoder, in one line naming the flags."""
    from .measure.layouts import LAYOUT_MODELS, is_layout_model

    flags = [f for f, given in _layout_flags_given(args) if given]
    models = args.models or []
    layout = [m for m in models if is_layout_model(m)]
    if layout and len(layout) != len(models):
        other = [m for m in models if not is_layout_model(m)]
        raise ValueError(f"--models mixes layout decoders ({', '.join(layout)}) with other models "
                         f"({', '.join(other)}); measure them in separate commands.")
    if flags and not layout:
        raise ValueError(f"{', '.join(flags)}: only for the layout decoders (--models "
                         f"{','.join(LAYOUT_MODELS)}).")
    return bool(layout)


def _layout_configs(args, device: str, options: dict) -> list:
    """The layout runs the flags ask for, each checked (one line naming the flags on a bad layout)."""
    from .measure.layouts import layout_problems
    from .measure.sweep import RunConfig

    tp, pp = args.tensor_parallel, args.pipeline_parallel
    if tp < 1 or pp < 1:
        raise ValueError(f"--tensor-parallel and --pipeline-parallel must be positive ints. Got {tp}, {pp}.")
    if args.micro_batch is not None and args.global_batch is None:
        raise ValueError("--micro-batch needs --global-batch (or give the micro-batch as --batch-sizes with "
                         "--grad-accum micro-batches per step).")
    if args.global_batch is not None and (args.batch_sizes is not None or args.grad_accum != 1):
        raise ValueError("give either --global-batch [--micro-batch] or --batch-sizes/--grad-accum, not both.")
    names = {"tp": "--tensor-parallel", "pp": "--pipeline-parallel", "gpu_count": "--gpu-counts",
             "sequence_parallel": "--sequence-parallel", "pp_schedule": "--pp-schedule",
             "micro_batches": ("--global-batch / (dp x --micro-batch) =" if args.global_batch is not None
                               else "--grad-accum")}
    counts = args.gpu_counts or [tp * pp]
    configs = []
    for r in range(args.repeats):
        for model in args.models:
            for n in counts:
                if n % (tp * pp):
                    raise ValueError(f"--tensor-parallel {tp} x --pipeline-parallel {pp} = {tp * pp} processes per "
                                     f"replica do not divide --gpu-counts {n}.")
                dp = n // (tp * pp)
                if args.global_batch is not None:
                    if args.global_batch % dp:
                        raise ValueError(f"--global-batch {args.global_batch} does not split over the {dp} "
                                         f"data-parallel replicas of --gpu-counts {n} (--tensor-parallel {tp} x "
                                         f"--pipeline-parallel {pp}).")
                    share = args.global_batch // dp
                    mb = args.micro_batch or share
                    if share % mb:
                        raise ValueError(f"--micro-batch {mb} does not divide a replica's {share} sequences "
                                         f"(--global-batch {args.global_batch} over dp {dp}).")
                    batches = [(mb, share // mb)]
                else:
                    batches = [(b, args.grad_accum) for b in (args.batch_sizes or [8])]
                for mb, accum in batches:
                    problems = layout_problems(model, gpu_count=n, tp=tp, pp=pp, micro_batches=accum,
                                               sequence_parallel=args.sequence_parallel, pp_schedule=args.pp_schedule,
                                               seq_len=args.seq_len, names=names)
                    if problems:
                        raise ValueError(" ".join(problems))
                    opts = {**options, "grad_accum": accum}
                    configs += [RunConfig(model=model, batch_size=mb, gpu_count=n, precision=p, device=device,
                                          repeat=r, tp=tp, pp=pp, sequence_parallel=args.sequence_parallel,
                                          pp_schedule=args.pp_schedule, **opts) for p in args.precisions]
    return configs


def _named_sweep(args) -> str | None:
    """The named sweep the flags ask for (``--sweep``, ``--calibrate``), refusing flags that would change it."""
    named = "calibrate" if args.calibrate else args.sweep
    if args.calibrate and args.sweep not in (None, "calibrate"):
        raise ValueError(f"--calibrate runs the calibration sweep; it cannot be combined with --sweep {args.sweep}.")
    if named is None:
        return None
    flag = "--calibrate" if args.calibrate else f"--sweep {named}"
    fixed = [f for f, given in (("--models", args.models is not None), ("--batch-sizes", args.batch_sizes is not None),
                                ("--gpu-counts", args.gpu_counts is not None), ("--repeats", args.repeats != 1),
                                ("--precisions", args.precisions != ["fp32"]), ("--name", args.name is not None),
                                ("--launcher", args.launcher != "local"), ("--nnodes", args.nnodes is not None),
                                *_layout_flags_given(args))
             if given]
    if fixed:
        raise ValueError(f"{flag} is a fixed sweep; {', '.join(fixed)} would change it (drop "
                         f"{'it' if len(fixed) == 1 else 'them'}, or give --models/--batch-sizes without {flag}).")
    if args.calibrate and args.device == "cuda":
        raise ValueError("--calibrate measures the CPU host, to pair with the bundled CPU history; drop --device cuda.")
    return named


def _list_models() -> int:
    from .measure.zoo import LARGE_ZOO, ZOO, describe

    print(f"{'model':<16} {'family':<19} {'params':>12} {'FLOPs/sample':>13}  size")
    for name in {**ZOO, **LARGE_ZOO}:
        d = describe(name)
        size = "GPU-sized (FLOPs counted on meta)" if name in LARGE_ZOO else "CPU"
        print(f"{name:<16} {d['family']:<19} {d['params']:>12,d} {d['flops_per_sample']:>13.3g}  {size}", flush=True)
    from .measure import describe_layout_model
    from .measure.layouts import LAYOUT_MODELS

    for name in LAYOUT_MODELS:  # the decoders that run split over tensor/pipeline/data-parallel processes
        d = describe_layout_model(name)
        print(f"{name:<16} {'decoder':<19} {d['params']:>12,d} {d['flops_per_sample']:>13.3g}  "
              f"CPU (layouts: --tensor-parallel/--pipeline-parallel)", flush=True)
    return 0


def _cmd_evaluate(args) -> int:
    from .evaluate import DEFAULT_EVAL_METHODS, SPLITS, evaluate

    runs = args.runs
    if runs is None:
        from .datasets import bundled_runs_path

        runs = str(bundled_runs_path())
    ev = evaluate(runs, methods=tuple(args.methods or DEFAULT_EVAL_METHODS), splits=tuple(args.splits or SPLITS),
                  baselines=not args.no_baselines, confidence=args.confidence, n_jobs=args.n_jobs,
                  host_peak_flops=None if args.host_peak_gflops is None else args.host_peak_gflops * 1e9)
    print(json.dumps(ev.to_dict(), indent=2, allow_nan=False) if args.json else ev)
    return 0


def _model_arg(args):
    if args.params is not None and args.model and _is_history_model(args):
        raise ValueError(f"--model {args.model} names a model in the history and --params gives another size; "
                         "pass --model NAME alone to predict that model, or --params N (with --model LABEL only "
                         "as a label for a model that is not in the history).")
    for flag in ("flops_per_sample", "attention_flops_per_sample", "family"):
        if args.params is None and getattr(args, flag, None) is not None:
            raise ValueError(f"--{flag.replace('_', '-')} describes a model given by --params; with --model NAME "
                             "alone the history's own FLOPs of that model are used. Pass --params N too.")
    if args.params is not None:
        model = {"params": args.params, "name": args.model or "custom"}
        if args.flops_per_sample is not None:
            model["flops_per_sample"] = args.flops_per_sample
        if getattr(args, "attention_flops_per_sample", None) is not None:
            model["attention_flops_per_sample"] = args.attention_flops_per_sample
        if getattr(args, "family", None) is not None:
            model["family"] = args.family
        return model
    if args.model:
        return args.model
    raise ValueError(f"{args.command} needs --model NAME (a model in the history) or --params N.")


def _is_history_model(args) -> bool:
    """Whether --model names a model of the history the command will use (for the --model/--params conflict)."""
    if getattr(args, "fitted", None):
        from .persistence import load_model

        return args.model in load_model(args.fitted, trusted=args.trusted).models_.index
    from .history import model_table, read_history

    history = args.history or None
    if history is None:
        gpu = [g for g in ([getattr(args, "gpu_type", None)] + list(getattr(args, "gpu_types", None) or []))
               if g is not None]
        from .hardware import resolve_gpu_type

        history = "cpu" if all(resolve_gpu_type(g) == "cpu" for g in gpu) else "gpu"
    elif isinstance(history, list) and len(history) == 1:
        history = history[0]
    return args.model in model_table(read_history(history).runs).index


def _cmd_recommend(args) -> int:
    from .persistence import load_model
    from .plan import recommend

    if args.fitted:
        history = load_model(args.fitted, trusted=args.trusted)
    else:
        history = args.history if not args.history or len(args.history) > 1 else args.history[0]
    llm = {}
    if args.seq_len is not None:
        if args.fitted:
            raise ValueError("recommend --seq-len plans LLM jobs from a history (--history), not --fitted.")
        model = {k: v for k, v in (("params", args.params), ("hf_config", args.hf_config),
                                   ("n_layers", args.n_layers), ("d_model", args.d_model), ("vocab", args.vocab),
                                   ("n_heads", args.n_heads), ("n_kv_heads", args.n_kv_heads),
                                   ("ffn_mult", args.ffn_mult), ("ffn_hidden", args.ffn_hidden),
                                   ("name", args.model)) if v is not None}
        layout = {k: v for k, v in (("tensor_parallel", args.tensor_parallel),
                                    ("pipeline_parallel", args.pipeline_parallel),
                                    ("context_parallel", args.context_parallel),
                                    ("expert_parallel", args.expert_parallel),
                                    ("virtual_stages", args.virtual_stages), ("micro_batch", args.micro_batch),
                                    ("zero_stage", args.zero_stage), ("sequence_parallel", args.sequence_parallel),
                                    ("recompute", args.recompute)) if v is not None}
        if args.activation_checkpointing:
            layout["activation_checkpointing"] = True
        if not args.flash_attention:
            layout["flash_attention"] = False
        llm = {"seq_len": args.seq_len, "layout": layout or None, "gpus_per_node": args.gpus_per_node,
               "inter_node_gbps": args.inter_node_gbps}
    else:
        shape_flags = [f for f in ("hf_config", "n_layers", "d_model", "vocab", "n_heads", "n_kv_heads", "ffn_mult",
                                   "ffn_hidden", "gpus_per_node", "inter_node_gbps", "tensor_parallel",
                                   "pipeline_parallel", "context_parallel", "expert_parallel", "virtual_stages",
                                   "micro_batch", "zero_stage", "sequence_parallel", "recompute")
                       if getattr(args, f) is not None]
        if shape_flags or args.activation_checkpointing or not args.flash_attention:
            raise ValueError(f"--{(shape_flags or ['activation_checkpointing'])[0].replace('_', '-')} describes an "
                             "LLM job: give --seq-len too.")
        model = _model_arg(args)
    out = recommend(model, batch_size=args.batch_size, steps=args.steps, epochs=args.epochs,
                    dataset_size=args.dataset_size, gpu_types=args.gpu_types, gpu_counts=args.gpu_counts,
                    work=args.work, max_device_batch=args.max_device_batch,
                    history=history, deadline=None if args.deadline_hours is None else args.deadline_hours * 3600,
                    budget=args.budget, confidence=args.confidence, prices=args.prices,
                    provider=args.providers or args.provider, spot=args.spot, precision=args.precision, **llm)
    if out.empty:
        print("perfmodel: error: no configuration could be predicted (see the warning above)", file=sys.stderr)
        return 1
    if args.json:
        from ._format import to_plain

        print(json.dumps(to_plain(out), indent=2, allow_nan=False))  # unpriced rows: cost null, price_note why
    else:
        import pandas as pd

        show = out.drop(columns="price_note")
        for col in ("seconds", "lower", "upper"):
            show[col] = (show[col] / 3600).round(3)
        show["cost"] = [f"{v:.4g}" if pd.isna(note) else "no price"
                        for v, note in zip(out["cost"], out["price_note"])]
        show = show.rename(columns={"seconds": "hours", "lower": "hours_lo", "upper": "hours_hi",
                                    "usd_per_device_hour": "usd_per_h"})
        with pd.option_context("display.width", 250, "display.max_columns", 40):
            print(show.to_string(index=False, float_format=lambda v: f"{v:.4g}", na_rep="-"))
        unpriced = out[out["price_note"].notna()].drop_duplicates(["gpu_type", "price_note"])
        for g, note in zip(unpriced["gpu_type"], unpriced["price_note"]):
            print(f"{g}: {note}")
    return 0


#: How plan-llm names the layout in its messages: by its flags.
_PLAN_LLM_NAMES = {"tp": "--tensor-parallel", "pp": "--pipeline-parallel", "cp": "--context-parallel",
                   "dp": "the data-parallel degree", "ep": "--expert-parallel", "vp": "--virtual-stages",
                   "micro_batch": "--micro-batch", "global_batch": "--global-batch", "devices": "--gpu-count",
                   "search": "--search-layouts", "allow_no_fit": "--allow-no-fit"}


def _cmd_plan_llm(args) -> int:
    from .plan import plan_llm_job
    from .exceptions import UnknownPriceError

    history = args.history if not args.history or len(args.history) > 1 else args.history[0]
    for flag, value in (("--deadline-hours", args.deadline_hours), ("--budget", args.budget)):
        if value is not None and not (math.isfinite(value) and value > 0):
            raise ValueError(f"{flag} must be a positive number. Got {value!r}.")
    job = plan_llm_job(params=args.params, n_layers=args.n_layers, d_model=args.d_model, vocab=args.vocab,
                       n_heads=args.n_heads, n_kv_heads=args.n_kv_heads, ffn_mult=args.ffn_mult,
                       ffn_hidden=args.ffn_hidden, hf_config=args.hf_config, seq_len=args.seq_len,
                       tokens=args.tokens, samples=args.samples, steps=args.steps, global_batch=args.global_batch,
                       gpu_type=args.gpu_type, gpu_count=args.gpu_count, nodes=args.nodes,
                       gpus_per_node=args.gpus_per_node, inter_node_gbps=args.inter_node_gbps,
                       zero_stage=args.zero_stage, tensor_parallel=args.tensor_parallel,
                       pipeline_parallel=args.pipeline_parallel, context_parallel=args.context_parallel,
                       expert_parallel=args.expert_parallel, virtual_stages=args.virtual_stages,
                       micro_batch=args.micro_batch, sequence_parallel=args.sequence_parallel,
                       recompute=args.recompute, activation_checkpointing=args.activation_checkpointing,
                       flash_attention=args.flash_attention, optimizer=args.optimizer, precision=args.precision,
                       history=history, confidence=args.confidence, method=args.method,
                       search=args.search_layouts, allow_no_fit=args.allow_no_fit, names=_PLAN_LLM_NAMES)
    try:
        cost, no_price = job.cost(provider=args.provider, prices=args.prices), None
    except UnknownPriceError as exc:
        cost, no_price = None, " ".join(str(exc).split())
    verdicts = {}
    if args.deadline_hours is not None:
        verdicts["meets_deadline"] = bool(job.upper <= args.deadline_hours * 3600)
    if args.budget is not None:
        verdicts["within_budget"] = None if cost is None else bool(cost.upper <= args.budget)
    if args.json:
        out = job.to_dict()
        out["cost"] = None if cost is None else cost.to_dict()
        out.update(verdicts)
        print(json.dumps(out, indent=2, allow_nan=False))
    else:
        print(job)
        print(f"cost: {cost}" if cost is not None else f"cost: not priced ({no_price})")
        if "meets_deadline" in verdicts:
            print(f"deadline {args.deadline_hours:g} h: {'met' if verdicts['meets_deadline'] else 'NOT met'} on the "
                  f"interval's upper bound ({job.upper / 3600:.3g} h)")
        if "within_budget" in verdicts:
            within = verdicts["within_budget"]
            print(f"budget ${args.budget:,.0f}: " + ("not priced" if within is None else
                                                     ("within" if within else "NOT within") +
                                                     f" on the cost's upper bound (${cost.upper:,.0f})"))
    return 0


def _cmd_report(args) -> int:
    from .report import REPORT_METHODS, make_report

    runs = args.runs
    if runs is None:
        from .datasets import bundled_runs_path

        runs = str(bundled_runs_path())
    if args.max_minutes < 0:
        raise ValueError(f"--max-minutes must be 0 (no limit) or positive. Got {args.max_minutes:g}.")
    path = make_report(runs, args.output, methods=tuple(args.methods or REPORT_METHODS), quick=args.quick,
                       n_jobs=args.n_jobs, max_seconds=args.max_minutes * 60 or None,
                       progress=lambda text: print(f"report: {text}", file=sys.stderr, flush=True))
    print(f"wrote {path}")
    return 0


def _import_mlperf(args) -> int:
    from .importers.mlperf import from_mlperf, loadable
    from .io import append_new_runs

    runs = from_mlperf(args.paths, system=args.system, round=args.round, source_commit=args.source_commit)
    good = loadable(runs)
    left = runs.loc[runs["excluded_reason"].notna()] if "excluded_reason" in runs.columns else runs.iloc[:0]
    if good.empty:
        reasons = "; ".join(sorted(set(left["excluded_reason"].astype(str))))[:300]
        raise ValueError(f"none of the {len(runs)} runs found can be imported: {reasons}")
    added, already = append_new_runs(good, args.output, key="source_id")  # a log's content is imported once
    print(f"appended {added} runs to {args.output}" + (f" ({already} already there)" if already else ""))
    if len(left):
        counts = left["excluded_reason"].value_counts()
        print(f"left out {len(left)} runs:")
        for reason, n in counts.items():
            print(f"  {n:5d}  {reason}")
    return 0


def _cmd_features(args) -> int:
    from .io import read_raw_history, write_history

    runs = read_raw_history(args.history)
    try:
        from .measure import add_op_features
    except ImportError as exc:  # pragma: no cover - torch is missing
        raise ImportError(f"perfmodel features add-ops needs torch (pip install 'perfmodel[measure]'): {exc}") from None
    out = add_op_features(runs, overwrite=args.overwrite)
    target = args.output or args.history
    write_history(out, target)
    filled = int(out["op_feature_version"].notna().sum())
    print(f"{target}: op columns on {filled} of {len(out)} rows")
    for model, why in out.attrs.get("op_features_skipped", {}).items():
        n = int((out["model"].astype(str) == model).sum())
        print(f"  left empty: {model} ({n} rows): {why}")
    return 0


def _cmd_import(args) -> int:
    if args.source == "mlperf":
        return _import_mlperf(args)
    from .importers._records import read_mapping_file

    mapping = read_mapping_file(args.mapping_file) if args.mapping_file else {}
    mapping.update(dict(args.map))
    values = dict(args.set_values)
    if args.source == "mlflow":
        from .importers.mlflow import from_mlflow

        result = from_mlflow(args.tracking_uri, experiment=args.experiment, output=args.output, mapping=mapping,
                             values=values, max_runs=args.max_runs)
    else:
        from .importers.hf_output import from_hf_output_dirs

        result = from_hf_output_dirs(args.dirs, output=args.output, mapping=mapping, values=values)
    print(result.summary())
    print(f"wrote {args.output}" if result.added else f"{args.output}: nothing new to write")
    return 0


def _cmd_history(args) -> int:
    from . import io
    from .store import open_store, store_label

    if args.action == "export":
        n = io.export_history(args.source, args.output, force=args.force)
        print(f"wrote {n} runs from {store_label(args.source) if args.source == 'default' else args.source} "
              f"to {args.output}")
    elif args.action == "import":
        added, skipped = io.import_history(args.files, args.into)
        print(f"imported {added} runs into {store_label(args.into)}"
              + (f" ({skipped} already there, by run_id)" if skipped else ""))
    elif args.action == "info":
        with open_store(args.store, create=False) as store:
            info = store.info()
        for key in ("store", "kind", "runs", "schema_version", "revision", "digest"):
            print(f"{key:>14}: {info[key]}")
        print(f"{'columns':>14}: {', '.join(info['columns'])}")
    else:
        with open_store(args.store, create=False) as store:
            notes = store.migrate()
        print(f"{store_label(args.store)}: " + ("; ".join(notes) if notes else "up to date"))
    return 0


def _cmd_cache(args) -> int:
    from . import cache

    if args.action == "clear":
        print(f"removed {cache.clear()} cached model(s) from {cache.info()['directory']}")
        return 0
    i = cache.info()
    if not i["enabled"]:
        print("the model cache is off (PERFMODEL_CACHE_DIR=off)")
    else:
        print(f"{i['directory']}: {i['models']} cached model(s), {i['bytes'] / 1e6:.2f} MB")
    return 0


def _cmd_hardware(args) -> int:
    from .hardware import get_spec, spec_table

    if args.name:
        spec = get_spec(args.name)
        for k, v in spec.to_dict().items():
            print(f"{k:>22}: {v}")
        return 0
    import pandas as pd

    with pd.option_context("display.width", 200, "display.max_columns", 20):
        print(spec_table().drop(columns=["source"]).to_string())
    return 0


_COMMANDS = {"fit": _cmd_fit, "predict": _cmd_predict, "summary": _cmd_summary, "measure": _cmd_measure,
             "hardware": _cmd_hardware, "evaluate": _cmd_evaluate,
             "recommend": _cmd_recommend, "plan-llm": _cmd_plan_llm, "report": _cmd_report, "import": _cmd_import, "features": _cmd_features, "cache": _cmd_cache,
             "history": _cmd_history}


def _one_line_warnings(message, category, filename, lineno, file=None, line=None):
    print(f"perfmodel: warning: {message}", file=sys.stderr)


def _check_output_folder(args) -> None:
    """``-o`` into a folder that does not exist is refused (perfmodel never creates folders it was not asked to)."""
    output = getattr(args, "output", None)
    if not output or "://" in output or output == "default":  # a store URL, or the default store
        return
    parent = Path(output).expanduser().parent
    if not parent.is_dir():
        what = "is not a folder" if parent.exists() else "does not exist"
        raise FileNotFoundError(f"the folder of -o/--output {output!r} {what}: {str(parent)!r}; create it first.")


def _os_message(exc: OSError) -> str:
    """An OSError as a sentence: ``'x.csv': No such file or directory``, not ``[Errno 2] ...``."""
    text = " ".join(str(exc).split())
    if exc.strerror and (text.startswith("[Errno") or not text):
        target = f"{str(exc.filename)!r}: " if exc.filename is not None else ""
        return f"{target}{exc.strerror}"
    return text or type(exc).__name__


def _quiet_broken_pipe() -> int:
    """The reader of stdout went away (``perfmodel summary ... | head``): stop quietly, as a piped tool does."""
    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())  # so that the interpreter's last flush does not fail again
    except (OSError, ValueError):
        pass
    return 141  # 128 + SIGPIPE


def main(argv=None) -> int:
    """The ``perfmodel`` command: parse the arguments, run the subcommand, turn errors into an exit status.

    An error is printed as one ``perfmodel: error: ...`` line on stderr, not a traceback. ``argparse`` itself
    exits (``SystemExit``, status 2) on bad arguments and after ``--help``.

    Parameters
    ----------
    argv : list of str, optional
        The arguments after the program name; default ``sys.argv[1:]``.

    Returns
    -------
    int
        The exit status: the subcommand's own (0 on success); 1 for a well-formed question the history or price
        table cannot answer; 2 for bad input (a perfmodel error, ValueError, TypeError, OSError or ImportError);
        130 on Ctrl-C; 141 when the reader of stdout went away.
    """
    args = _parser().parse_args(argv)
    logging.basicConfig(level=logging.INFO if args.verbose else logging.WARNING, format="perfmodel: %(message)s")
    warnings.showwarning = _one_line_warnings
    if args.progress is not None:  # read by perfmodel.fitting when a long fit starts
        os.environ["PERFMODEL_PROGRESS"] = "1" if args.progress else "0"
    elif sys.stderr.isatty():
        os.environ.setdefault("PERFMODEL_PROGRESS", "1")
    from .exceptions import (DoesNotFitError, PerfModelError, PredictionError, UnknownPriceError,
                             UnsupportedQueryError)

    try:
        _check_output_folder(args)
        status = _COMMANDS[args.command](args)
        sys.stdout.flush()  # a closed pipe shows here, inside the handler below
        return status
    except BrokenPipeError:
        return _quiet_broken_pipe()
    except KeyboardInterrupt:
        print("perfmodel: interrupted (runs finished so far are saved)", file=sys.stderr)
        return 130
    except (UnsupportedQueryError, UnknownPriceError, PredictionError, DoesNotFitError) as exc:
        # a well-formed question the history (or price table) cannot answer, e.g. too few runs for the interval,
        # or a planned job that does not fit in memory
        print(f"perfmodel: error: {' '.join(str(exc).split())}", file=sys.stderr)
        return 1
    except (PerfModelError, ValueError, TypeError, OSError, ImportError) as exc:
        msg = _os_message(exc) if isinstance(exc, OSError) else " ".join(str(exc).split()) or type(exc).__name__
        print(f"perfmodel: error: {msg}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
