"""``perfmodel fit``, ``predict``, ``summary`` and ``evaluate``: fit a model on a history, ask it, show it,
cross-validate the methods. None of them imports torch."""

from __future__ import annotations

import json
import sys

from ._flags import METHOD_CHOICES, count, csv_list, model_arg


def add_fit_parser(sub) -> None:
    from ..kinds import KIND_NAMES

    f = sub.add_parser("fit", help="fit a model on a run history and save it")
    f.add_argument("runs", help="run history: a store (runs.db, postgresql://..., default) or a .csv/.parquet file")
    f.add_argument("-o", "--output", required=True, help="model file to write (e.g. model.perfmodel; safe format)")
    f.add_argument("--force", action="store_true", help="overwrite -o even if it is not a model file")
    f.add_argument("--keep-noisy", action="store_true",
                   help="keep runs whose timing_flag says the machine was busy (left out by default)")
    f.add_argument("--method", default="auto", choices=METHOD_CHOICES)
    f.add_argument("--kind", default="seen", choices=list(KIND_NAMES),
                   help="the kind of query the model is for: 'auto' chooses the method for it, and its intervals "
                        "come from the refits that hold out that kind's groups (default: seen)")


def add_predict_parser(sub) -> None:
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
    pr.add_argument("--seq-len", type=count, help="tokens per sequence of a transformer job: the layout model "
                                                  "prices it (the other methods have no sequence term and do not "
                                                  "use it)")
    pr.add_argument("--batch-size", type=count, required=True, help="per-device batch size")
    pr.add_argument("--gpu-count", type=count, default=1)
    pr.add_argument("--gpu-type", required=True, help="device name, e.g. A100, H100, cpu")
    pr.add_argument("--steps", type=count)
    pr.add_argument("--epochs", type=count)
    pr.add_argument("--dataset-size", type=count)
    pr.add_argument("--precision", default=None,
                    help="fp32, tf32, fp16, bf16 or fp8 (default: what most of the history's runs on the device used)")
    pr.add_argument("--confidence", type=float, default=0.9)
    pr.add_argument("--method", default="auto", choices=METHOD_CHOICES)
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


def add_summary_parser(sub) -> None:
    s = sub.add_parser("summary", help="print the summary of a fitted model (or of a fit on a history)")
    s.add_argument("source", nargs="?", help="model file, or a .csv/.parquet history (default: bundled runs)")
    s.add_argument("--method", default="auto", choices=METHOD_CHOICES)
    s.add_argument("--trusted", action="store_true", help="allow a pickle-based (joblib) model file")


def add_evaluate_parser(sub) -> None:
    e = sub.add_parser("evaluate", help="grouped cross-validation of the methods and baselines on a history")
    e.add_argument("runs", nargs="?", help="run history (default: the bundled runs)")
    e.add_argument("--methods", type=csv_list(str), default=None,
                   help="comma-separated methods (default: those perfmodel.evaluate.evaluate compares, "
                        "DEFAULT_EVAL_METHODS: linear,loglinear,gbm,physics,roofline,auto)")
    e.add_argument("--splits", type=csv_list(str), default=None,
                   help="leave-one-model-out,leave-one-batch-size-out,leave-one-gpu-count-out,leave-one-gpu-type-out")
    e.add_argument("--no-baselines", action="store_true")
    e.add_argument("--confidence", type=float, default=0.9)
    e.add_argument("--n-jobs", type=count, default=1)
    e.add_argument("--host-peak-gflops", type=float, default=None,
                   help="measured CPU FLOP/s of the host, for the 6ND-util0.4 baseline on CPU runs")
    e.add_argument("--json", action="store_true", help="print JSON instead of the table")


def cmd_fit(args) -> int:
    from .._atomic import real_target
    from ..persistence import is_model_file, save_model
    from ..predict import fit

    out = real_target(args.output)
    if not args.force and out.is_file() and out.stat().st_size > 0 and not is_model_file(out):
        raise ValueError(f"-o {args.output}: the file exists and is not a model file (a run history?); pass "
                         "--force to overwrite it, or choose another -o.")
    runs = args.runs
    if not args.keep_noisy:
        from ..history import drop_noisy, read_history

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


def cmd_predict(args) -> int:
    from ..persistence import load_model
    from ..predict import predict_training_time

    model = model_arg(args)
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


def cmd_summary(args) -> int:
    from ..persistence import load_model
    from ..predict import fit

    src = args.source
    if src is None:
        from ..datasets import bundled_runs_path

        src = str(bundled_runs_path())
    from ..store import is_store

    if src.lower().endswith((".csv", ".parquet", ".pq")) or is_store(src):
        model = fit(src, method=args.method)
    else:
        model = load_model(src, trusted=args.trusted)
    print(model.summary().as_text())
    return 0


def cmd_evaluate(args) -> int:
    from ..evaluate import DEFAULT_EVAL_METHODS, SPLITS, evaluate

    runs = args.runs
    if runs is None:
        from ..datasets import bundled_runs_path

        runs = str(bundled_runs_path())
    ev = evaluate(runs, methods=tuple(args.methods or DEFAULT_EVAL_METHODS), splits=tuple(args.splits or SPLITS),
                  baselines=not args.no_baselines, confidence=args.confidence, n_jobs=args.n_jobs,
                  host_peak_flops=None if args.host_peak_gflops is None else args.host_peak_gflops * 1e9)
    print(json.dumps(ev.to_dict(), indent=2, allow_nan=False) if args.json else ev)
    return 0
