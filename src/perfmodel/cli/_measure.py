"""``perfmodel measure``: measure training runs and append them to a history (imports torch when it runs; its
--help does not). The flags are checked, and a named sweep's plan printed, before anything runs."""

from __future__ import annotations

import sys

from ._flags import count, csv_list


def add_measure_parser(sub) -> None:
    m = sub.add_parser("measure", help="measure training runs and append them to a history (needs torch)")
    m.add_argument("--models", type=csv_list(str),
                   help="comma-separated: zoo names, hf:<type>[?key=value&...] or hf:./config.json (needs the 'hf' "
                        "extra), or your own pkg.module:factory / file.py:factory (default: the default sweep)")
    m.add_argument("--name", help="the records' model name (one model only; default: the factory's dotted name)")
    m.add_argument("--seq-len", type=count, help="sequence length of Hugging Face (default 128) and zoo sequence models")
    m.add_argument("--grad-accum", type=count, default=1, help="micro-batches per optimizer step (default 1)")
    m.add_argument("--optimizer", choices=["adamw", "sgd"], default="adamw")
    m.add_argument("--compile", action="store_true", help="torch.compile the model (compile time goes to startup_s)")
    m.add_argument("--activation-checkpointing", action="store_true",
                   help="activation checkpointing where the model supports it (the record says if it ran)")
    m.add_argument("--batch-sizes", type=csv_list(count), default=None)
    m.add_argument("--gpu-counts", type=csv_list(count), default=None)
    m.add_argument("--precisions", type=csv_list(str), default=["fp32"])
    m.add_argument("--device", choices=["cpu", "cuda"], default=None, help="default: cuda if available, else cpu")
    g = m.add_mutually_exclusive_group()
    g.add_argument("--steps", type=count, help="fixed number of timed steps")
    g.add_argument("--max-seconds", type=float, help="adaptive timing budget per run (seconds)")
    m.add_argument("--ci-target", type=float, default=None, help="stop when the 95%% CI half-width is below this")
    m.add_argument("--repeats", type=count, default=1)
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
    _add_layout_group(m)
    _add_launch_groups(m)


def _add_layout_group(m) -> None:
    """measure's flags for the layout decoders' runs (tensor/pipeline/data-parallel processes)."""
    la = m.add_argument_group("layouts of a decoder (--models layout-gpt-s,layout-gpt-m,layout-gpt-l; --gpu-counts "
                              "are processes split tp x pp x dp)")
    la.add_argument("--tensor-parallel", type=count, default=1, metavar="TP",
                    help="tensor-parallel degree (torch.distributed.tensor.parallel; default 1)")
    la.add_argument("--pipeline-parallel", type=count, default=1, metavar="PP",
                    help="pipeline stages (torch.distributed.pipelining; default 1)")
    la.add_argument("--sequence-parallel", action="store_true", help="sequence-parallel norms (needs TP > 1)")
    la.add_argument("--pp-schedule", choices=["1f1b", "gpipe"], default="1f1b",
                    help="pipeline schedule (1f1b needs at least PP micro-batches per step; default 1f1b)")
    la.add_argument("--global-batch", type=count, help="sequences per optimizer step over all processes (instead of "
                                                       "--batch-sizes/--grad-accum)")
    la.add_argument("--micro-batch", type=count,
                    help="sequences per forward/backward pass of one replica, with --global-batch (default: the "
                         "replica's whole share, one micro-batch)")


def _add_launch_groups(m) -> None:
    """measure's flags for multi-node runs (torchrun) and for Slurm jobs."""
    tr = m.add_argument_group("multi-node (torchrun, c10d rendezvous; start the same command on every node)")
    tr.add_argument("--nnodes", type=count, help="nodes per run")
    tr.add_argument("--nproc-per-node", type=count, help="processes (GPUs) per node; gpu_count = nnodes x this")
    tr.add_argument("--rdzv-endpoint", help="host:port of the rendezvous (a port free on the first node)")
    tr.add_argument("--rdzv-id", default=None, help="rendezvous id prefix, the same on every node (default perfmodel)")
    sl = m.add_argument_group("Slurm (--launcher slurm)")
    sl.add_argument("--partition", help="Slurm partition (required)")
    sl.add_argument("--time", type=count, dest="time_min", help="time limit per job, minutes (required)")
    sl.add_argument("--gpus-per-node", type=count, help="GPUs per job (default 1; must cover --gpu-counts)")
    sl.add_argument("--account", help="Slurm account")
    sl.add_argument("--cpus-per-task", type=count, help="CPU cores per job (default 8)")
    sl.add_argument("--slurm-folder", help="logs, job ids and records (default: <output>.slurm)")
    sl.add_argument("--slurm-cluster", choices=["auto", "slurm", "local"], default="auto",
                    help="submitit executor: auto (Slurm if sbatch exists), slurm, or local processes (testing)")


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


def cmd_measure(args) -> int:
    _check_launch_flags(args)
    from ..measure.launch import run_sweep

    if args.list_models:
        return _list_models()
    named = _named_sweep(args)
    if not args.output and named == "calibrate":
        args.output = "calibration_cpu.csv"
    if not args.output:
        from ..store import default_store

        args.output = default_store(make_folder=True)
    device = args.device
    if device is None and named == "calibrate":
        device = "cpu"  # a calibration pairs with the bundled CPU history
    if device is None:
        import torch

        device = "cuda" if torch.cuda.is_available() else "cpu"
    opts = _timing_options(args)
    job = _job_options(args)
    if args.name is not None and (args.models is None or len(args.models) != 1):
        raise ValueError("--name names the records of one model: give exactly one --models entry with it.")
    configs = _sweep_configs(args, named, device, opts, job)
    if named is not None or args.plan:  # what a named sweep will do, before it starts (errors stay one line)
        _print_plan(configs, named, args)
        if args.plan:
            return 0
    slurm = None
    if args.launcher == "slurm":
        from ..measure.slurm import SlurmOptions

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


def _timing_options(args) -> dict:
    """How long each run is timed: the --steps, --max-seconds and --ci-target given."""
    opts = {}
    if args.steps is not None:
        opts["steps"] = args.steps
    if args.max_seconds is not None:
        opts["max_seconds"] = args.max_seconds
    if args.ci_target is not None:
        opts["ci_target"] = args.ci_target
    return opts


def _job_options(args) -> dict:
    """What every run of the sweep shares: the training step's flags, the records' name, and a multi-node
    rendezvous (which sets --gpu-counts to nnodes x nproc-per-node)."""
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
    return job


def _sweep_configs(args, named: str | None, device: str, opts: dict, job: dict) -> list:
    """The runs the flags ask for: a named sweep, layout runs, the default sweep, or --models x --batch-sizes x
    --gpu-counts x --precisions."""
    from ..measure.sweep import default_sweep_configs, sweep_configs
    from ..measure.zoo import CLASSIC_MODELS

    if named is not None:
        from ..measure.plans import named_sweep_configs

        return named_sweep_configs(named, device=device, **opts, **job)
    if _is_layout_request(args):
        return _layout_configs(args, device, {"max_seconds": 10.0, **opts, **job})
    if args.models is None and args.batch_sizes is None and args.gpu_counts is None:
        return default_sweep_configs(device=device, **opts, **job)
    defaults = {"max_seconds": 10.0}
    return sweep_configs(args.models or list(CLASSIC_MODELS), args.batch_sizes or [8, 32],
                         args.gpu_counts or [1], precisions=args.precisions, repeats=args.repeats,
                         device=device, **{**defaults, **opts, **job})


def _print_plan(configs, named, args) -> None:
    from pathlib import Path

    from .._atomic import check_writable
    from .._validation import check_positive_float
    from ..measure.plans import plan

    if not args.plan:  # the checks run_sweep makes first, made before the plan is printed
        from ..io import check_history_target

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
    from ..measure.layouts import LAYOUT_MODELS, is_layout_model

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
    from ..measure.layouts import layout_run_problems
    from ..measure.sweep import RunConfig

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
                    problems = layout_run_problems(model, gpu_count=n, tp=tp, pp=pp, micro_batches=accum,
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
    from ..measure.zoo import LARGE_ZOO, ZOO, describe

    print(f"{'model':<16} {'family':<19} {'params':>12} {'FLOPs/sample':>13}  size")
    for name in {**ZOO, **LARGE_ZOO}:
        d = describe(name)
        size = "GPU-sized (FLOPs counted on meta)" if name in LARGE_ZOO else "CPU"
        print(f"{name:<16} {d['family']:<19} {d['params']:>12,d} {d['flops_per_sample']:>13.3g}  {size}", flush=True)
    from ..measure import describe_layout_model
    from ..measure.layouts import LAYOUT_MODELS

    for name in LAYOUT_MODELS:  # the decoders that run split over tensor/pipeline/data-parallel processes
        d = describe_layout_model(name)
        print(f"{name:<16} {'decoder':<19} {d['params']:>12,d} {d['flops_per_sample']:>13.3g}  "
              f"CPU (layouts: --tensor-parallel/--pipeline-parallel)", flush=True)
    return 0

