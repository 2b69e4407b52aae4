"""``perfmodel import``: import run history from MLPerf Training logs, an MLflow tracking store or Hugging Face
Trainer output dirs."""

from __future__ import annotations

from ._flags import OneLineParser, count, key_value


def add_import_parser(sub) -> None:
    imp = sub.add_parser("import", help="import run history from MLPerf logs, MLflow or Hugging Face output dirs")
    isub = imp.add_subparsers(dest="source", required=True, parser_class=OneLineParser)
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
    im.add_argument("--max-runs", type=count, help="read at most this many runs, newest first")
    ih = isub.add_parser("hf-output", help="Hugging Face Trainer output dirs (trainer_state.json, all_results.json)")
    ih.add_argument("dirs", nargs="+", help="output dirs, or folders to search for them")
    for q in (im, ih):
        q.add_argument("-o", "--output", default="default", help="history to append to (default: the default store)")
        q.add_argument("--map", action="append", default=[], type=key_value, metavar="KEY=COLUMN",
                       help="read column COLUMN from the source's KEY (a param, metric, tag or JSON key); repeatable")
        q.add_argument("--mapping-file", help='JSON object {"KEY": "COLUMN", ...}')
        q.add_argument("--set", action="append", default=[], type=key_value, metavar="COLUMN=VALUE",
                       dest="set_values", help="a value that holds for every imported run, e.g. gpu_type=A100")


def cmd_import(args) -> int:
    if args.source == "mlperf":
        return _import_mlperf(args)
    from ..importers._records import read_mapping_file

    mapping = read_mapping_file(args.mapping_file) if args.mapping_file else {}
    mapping.update(dict(args.map))
    values = dict(args.set_values)
    if args.source == "mlflow":
        from ..importers.mlflow import from_mlflow

        result = from_mlflow(args.tracking_uri, experiment=args.experiment, output=args.output, mapping=mapping,
                             values=values, max_runs=args.max_runs)
    else:
        from ..importers.hf_output import from_hf_output_dirs

        result = from_hf_output_dirs(args.dirs, output=args.output, mapping=mapping, values=values)
    print(result.summary())
    print(f"wrote {args.output}" if result.added else f"{args.output}: nothing new to write")
    return 0


def _import_mlperf(args) -> int:
    from ..importers.mlperf import from_mlperf, loadable
    from ..io import append_new_runs

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
