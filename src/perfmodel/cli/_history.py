"""The housekeeping commands: ``perfmodel history`` (export, import, info, migrate the run history store),
``cache`` (the disk cache of fitted models), ``hardware`` (the device spec table) and ``features`` (add feature
columns to a history)."""

from __future__ import annotations

from ._flags import OneLineParser


def add_cache_parser(sub) -> None:
    c = sub.add_parser("cache", help="the disk cache of fitted models (info, or clear it)")
    c.add_argument("action", choices=["info", "clear"])


def add_hardware_parser(sub) -> None:
    h = sub.add_parser("hardware", help="print the hardware spec table")
    h.add_argument("name", nargs="?", help="resolve one device name")


def add_features_parser(sub) -> None:
    ft = sub.add_parser("features", help="add feature columns to a run history")
    fsub = ft.add_subparsers(dest="action", required=True)
    fa = fsub.add_parser("add-ops", help="backfill op-level feature columns (op_*) by rebuilding zoo models by "
                                         "name on the meta device (needs torch)")
    fa.add_argument("history", help="run history (.csv or .parquet)")
    fa.add_argument("-o", "--output", default=None, help="where to write (default: rewrite HISTORY in place)")
    fa.add_argument("--overwrite", action="store_true", help="recount rows that already have op columns")


def add_history_parser(sub) -> None:
    hs = sub.add_parser("history", help="the run history store: export to CSV/Parquet, import, info, migrate")
    hsub = hs.add_subparsers(dest="action", required=True, parser_class=OneLineParser)
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


def cmd_history(args) -> int:
    from .. import io
    from ..store import open_store, store_label

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


def cmd_cache(args) -> int:
    from .. import cache

    if args.action == "clear":
        print(f"removed {cache.clear()} cached model(s) from {cache.info()['directory']}")
        return 0
    i = cache.info()
    if not i["enabled"]:
        print("the model cache is off (PERFMODEL_CACHE_DIR=off)")
    else:
        print(f"{i['directory']}: {i['models']} cached model(s), {i['bytes'] / 1e6:.2f} MB")
    return 0


def cmd_hardware(args) -> int:
    from ..hardware import get_spec, spec_table

    if args.name:
        spec = get_spec(args.name)
        for k, v in spec.to_dict().items():
            print(f"{k:>22}: {v}")
        return 0
    import pandas as pd

    with pd.option_context("display.width", 200, "display.max_columns", 20):
        print(spec_table().drop(columns=["source"]).to_string())
    return 0


def cmd_features(args) -> int:
    from ..io import read_raw_history, write_history

    runs = read_raw_history(args.history)
    try:
        from ..measure import add_op_features
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
