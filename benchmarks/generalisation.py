"""Generalisation: every public set × method × split, with the one-line baselines side by side (issue #23).

Sets (``data/``; see data/README.md):

* ``mlperf_steps`` (development): MLPerf Training step times, repeats of one submission collapsed to their median
  (one row per round, submitter, system, benchmark, device type, precision, count and batch).
* ``public_llmfoundry`` (development): MosaicML MPT 125M–70B pre-training on 8–512 A100/H100, bf16/fp8.
* ``public_neusight`` (development): fp32 (no TF32) transformer forward+backward on 8 NVIDIA/AMD device types.
* ``public_megatron_bridge`` (confirmation): NVIDIA Megatron-Bridge LLM pre-training (dense Llama 3 and mixtures
  of experts, 8B–1T parameters) on H100, B200, B300, GB200 and GB300, fp8/bf16, NeMo releases 25.11–26.08. Added
  when the design was settled; nothing was chosen on it. Its first run exposed a numerical defect in the ``log``
  features (``loglinear`` intervals 10^200 wide), which was fixed and the set rerun: only ``loglinear``'s width
  moved.
* ``public_lambda`` (confirmation, reused): Lambda's cross-GPU CNN/BERT table, only with ``--lambda PATH`` (a CSV
  built by scripts/derive_public_lambda.py from one's own clone; not committed: no licence). Nothing was chosen on
  it, but it has been run at several stops since it was added, so it is no longer an unseen set.

Splits: ``new device type`` (every set: device types held out, at most ``--folds`` refits, several device types
per refit beyond that; kind ``new_device``), ``new model size`` (llmfoundry, megatron_bridge: each model held out;
kind ``new_model``), ``small→large`` (llmfoundry: fit on models ≤ 3B parameters, predict the 7B–70B models; kind
``new_model``). Every method is fitted as ``perfmodel.fit`` fits it for that kind of query
(:func:`perfmodel.fitting.fit_history`), intervals at 90%.

Methods: ``auto`` (the default), ``roofline``, ``physics``, ``loglinear``, ``gbm``, and the baseline methods
``ratio`` and ``mfu`` (:mod:`perfmodel.models._baselines`); ``mfu-pooled`` (``mfu`` fitted and queried without the
op FLOPs columns: one pooled utilisation, no attention split — the plain spreadsheet rule); ``6ND-util0.4`` (the
calculators' rule, point only).
Printed per cell: rows, median APE, 90% coverage, mean relative width, and the targets of issue #23 for the
default method: new device type median APE ≤ 0.8× ``ratio`` and ≤ 12%; new model size and small→large ≤ 0.8×
``mfu``; coverage 0.85–0.95.

Usage::

    python benchmarks/generalisation.py [--quick] [--lambda PATH] [--folds 10] [--jobs 1]
                                         [--out benchmarks/results/generalisation]

``--quick`` (a smoke test, not a result) runs one refit of a 2-way split per split, the methods auto, ratio, mfu
and 6ND-util0.4, and MLPerf subsampled to 150 rows. Writes ``<out>.json`` and ``<out>.md``.

Leave one set out (``--loso``, issue #36; instead of the splits above): each set in turn is the unseen one and
the union of the other sets (development and confirmation alike; ``public_lambda`` too with ``--lambda``) is the
history. Each held-out row's kind with respect to that history is :func:`perfmodel.kinds.classify`'s; each method
is fitted on the history for each kind that occurs (:func:`perfmodel.fitting.fit_history`) and predicts the rows
of that kind. Methods ``auto``, ``ratio``, ``mfu``, ``roofline`` and ``6ND-util0.4`` (``--methods a,b`` for a
subset; ``--holdout NAME``, repeatable, for some held-out sets only). Reported per held-out set and per kind, and
over the set's rows: rows answered (a refusal leaves its rows unanswered), median APE, 90% coverage, mean relative
width and ×upper (the median upper end over the answer). Writes ``benchmarks/results/generalisation_loso.{md,json}`` unless ``--out`` says otherwise::

    python benchmarks/generalisation.py --loso [--quick] [--lambda PATH] [--methods auto,ratio] [--holdout SET]
"""

from __future__ import annotations

import argparse
import json
import sys
import time
import warnings
from pathlib import Path

import numpy as np
import pandas as pd
from _paths import ROOT, rel  # benchmarks/_paths.py (the scripts run from benchmarks/)
from joblib import Parallel, delayed
from sklearn.model_selection import GroupKFold

from perfmodel.evaluate import AnalyticBaseline
from perfmodel.exceptions import UnsupportedQueryError
from perfmodel.fitting import fit_history
from perfmodel.io import load_runs
from perfmodel.kinds import KIND_NAMES, canonical_devices, classify
from perfmodel.metrics import coverage, mean_relative_width

DATA = ROOT / "data"
METHODS = ("auto", "roofline", "physics", "loglinear", "gbm", "ratio", "mfu", "mfu-pooled", "6ND-util0.4")
QUICK_METHODS = ("auto", "ratio", "mfu", "mfu-pooled", "6ND-util0.4")
LOSO_METHODS = ("auto", "ratio", "mfu", "roofline", "6ND-util0.4")
#: ``mfu-pooled``: the ``mfu`` rule on the runs and queries without their op FLOPs columns, so without the attention
#: split (one pooled utilisation per device type, precision and op class): the plain spreadsheet rule.
_OP_FLOPS = ("op_matmul_flops", "op_attention_flops")
CONFIDENCE = 0.9
#: small→large: fit on models with at most this many parameters, predict those with at least LARGE.
SMALL, LARGE = 3.5e9, 6e9
_MLPERF_KEYS = ["round", "submitter", "system", "model", "gpu_type", "precision", "gpu_count", "batch_size"]


def load_sets(lambda_path: Path | None, quick: bool) -> list[dict]:
    sets = []
    ml = load_runs(DATA / "mlperf_steps.csv")
    keys = [k for k in _MLPERF_KEYS if k in ml.columns]
    med = ml.groupby(keys, dropna=False)["step_time_s"].transform("median")
    ml = ml.assign(step_time_s=med).drop_duplicates(subset=keys).reset_index(drop=True)
    if quick:
        ml = ml.sample(150, random_state=0).reset_index(drop=True)
    sets.append({"name": "mlperf_steps", "role": "dev", "runs": ml, "splits": ("new device type",)})
    sets.append({"name": "public_llmfoundry", "role": "dev", "runs": load_runs(DATA / "public_llmfoundry.csv"),
                 "splits": ("new device type", "new model size", "small→large")})
    sets.append({"name": "public_neusight", "role": "dev", "runs": load_runs(DATA / "public_neusight.csv"),
                 "splits": ("new device type",)})
    sets.append({"name": "public_megatron_bridge", "role": "confirmation",
                 "runs": load_runs(DATA / "public_megatron_bridge.csv"),
                 "splits": ("new device type", "new model size")})
    if lambda_path is not None:
        sets.append({"name": "public_lambda", "role": "confirmation, reused", "runs": load_runs(lambda_path),
                     "splits": ("new device type",)})
    return sets


def split_folds(runs: pd.DataFrame, split: str, max_folds: int) -> tuple[str, list]:
    """The kind of query a split scores and its (train, test) index pairs."""
    if split == "small→large":
        params = runs["params"].to_numpy(dtype=float)
        train, test = np.flatnonzero(params <= SMALL), np.flatnonzero(params >= LARGE)
        return "new_model", [(train, test)] if len(train) and len(test) else []
    kind, groups = ("new_device", canonical_devices(runs["gpu_type"])) if split == "new device type" else \
        ("new_model", runs["model"].astype(str).to_numpy())
    k = min(len(np.unique(groups)), max_folds)
    if k < 2:
        return kind, []
    return kind, list(GroupKFold(k).split(np.zeros(len(runs)), groups=groups))


def fit_predict(method: str, runs: pd.DataFrame, train, test, kind: str) -> dict:
    tr, te = runs.iloc[train].reset_index(drop=True), runs.iloc[test].reset_index(drop=True)
    return fit_predict_frames(method, tr, te, kind)


def fit_predict_frames(method: str, tr: pd.DataFrame, te: pd.DataFrame, kind: str) -> dict:
    """Fit ``method`` on ``tr`` for queries of ``kind`` and predict ``te`` (a refusal: NaN rows and ``error``)."""
    out = {"pred": np.full(len(te), np.nan), "lower": np.full(len(te), np.nan), "upper": np.full(len(te), np.nan),
           "chosen": method, "error": ""}
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            if method == "6ND-util0.4":
                pi = AnalyticBaseline(0.4).fit(tr).predict_interval(te, CONFIDENCE)
            elif method == "mfu-pooled":
                drop = [c for c in _OP_FLOPS if c in tr.columns]
                model = fit_history(tr.drop(columns=drop), "mfu", kind=kind)
                pi = model.predict_interval(te.drop(columns=drop), CONFIDENCE)
            else:
                model = fit_history(tr, method, kind=kind)
                out["chosen"] = model.method
                pi = model.predict_interval(te, CONFIDENCE)
        out["pred"] = pi["step_time_s"].to_numpy(dtype=float)
        out["lower"] = pi["step_lower"].to_numpy(dtype=float)
        out["upper"] = pi["step_upper"].to_numpy(dtype=float)
    except (ValueError, UnsupportedQueryError, np.linalg.LinAlgError) as exc:
        out["error"] = f"{type(exc).__name__}: {str(exc)[:120]}"
    out["y"] = te["step_time_s"].to_numpy(dtype=float)
    return out


def summarise(res: list[dict]) -> dict:
    y = np.concatenate([r["y"] for r in res])
    p = np.concatenate([r["pred"] for r in res])
    lo = np.concatenate([r["lower"] for r in res])
    hi = np.concatenate([r["upper"] for r in res])
    ok = np.isfinite(p) & (p > 0)
    cell = {"rows": int(len(y)), "answered": int(ok.sum()), "median_ape": None, "coverage": None, "rel_width": None,
            "chosen": sorted({r["chosen"] for r in res}), "errors": sorted({r["error"] for r in res if r["error"]})}
    if ok.any():
        cell["median_ape"] = float(np.median(np.abs(p[ok] / y[ok] - 1)) * 100)
        pi = ok & np.isfinite(lo) & np.isfinite(hi)
        if pi.sum() == ok.sum():
            cell["coverage"] = float(coverage(y[pi], lo[pi], hi[pi]))
            cell["rel_width"] = float(mean_relative_width(p[pi], lo[pi], hi[pi]))
            # the band as a factor: the median upper end over the answer (issue #36's "band wider than ×2")
            cell["upper_factor"] = float(np.median(hi[pi] / p[pi]))
    return cell


def verdicts(split: str, cells: dict) -> list[str]:
    auto = cells.get("auto", {})
    out = []
    a = auto.get("median_ape")
    if a is None:
        return ["auto: no answer"]
    base = "ratio" if split == "new device type" else "mfu"
    b = cells.get(base, {}).get("median_ape")
    if b is not None:
        out.append(f"auto {a:.1f}% vs {base} {b:.1f}% = {a / b:.2f}x (target <= 0.8x): "
                   f"{'met' if a <= 0.8 * b else 'NOT met'}")
    plain = cells.get("mfu-pooled", {}).get("median_ape")
    if base == "mfu" and plain is not None and plain != b:
        out.append(f"auto {a:.1f}% vs mfu-pooled (no attention split) {plain:.1f}% = {a / plain:.2f}x")
    if split == "new device type":
        out.append(f"auto {a:.1f}% (target <= 12%): {'met' if a <= 12 else 'NOT met'}")
    c = auto.get("coverage")
    if c is not None:
        out.append(f"auto 90% coverage {c:.2f} (target 0.85-0.95): {'met' if 0.85 <= c <= 0.95 else 'NOT met'}")
    return out


def _fmt(v, spec):
    return "—" if v is None else format(v, spec)


def loso_jobs(sets: list[dict], holdout, methods) -> tuple[list[dict], list[tuple]]:
    """Leave one set out: per held-out set its history (the other sets), each row's kind, and the fit jobs
    ``(set index, kind, method)``."""
    plans, jobs = [], []
    for i, s in enumerate(sets):
        if holdout and s["name"] not in holdout:
            continue
        others = [o for j, o in enumerate(sets) if j != i]
        history = pd.concat([o["runs"] for o in others], ignore_index=True, sort=False)
        kinds = np.asarray(classify(history, s["runs"]), dtype=object)
        order = [k for k in KIND_NAMES[::-1] if (kinds == k).any()]  # most demanding first
        plans.append({"index": i, "history": history, "history_sets": [o["name"] for o in others],
                      "kinds": kinds, "order": order})
        jobs += [(len(plans) - 1, k, m) for k in order for m in methods]
    return plans, jobs


def run_loso(args, sets: list[dict], methods, start: float) -> int:
    holdout = set(args.holdout or ())
    unknown = holdout - {s["name"] for s in sets}
    if unknown:
        raise SystemExit(f"--holdout: no set named {', '.join(sorted(unknown))} "
                         f"(sets: {', '.join(s['name'] for s in sets)})")
    plans, jobs = loso_jobs(sets, holdout, methods)

    def one(p, k, m):
        s, plan = sets[plans[p]["index"]], plans[p]
        test = s["runs"].loc[plan["kinds"] == k].reset_index(drop=True)
        return fit_predict_frames(m, plan["history"], test, k)

    outs = Parallel(n_jobs=args.jobs)(delayed(one)(p, k, m) for p, k, m in jobs)
    by_job = dict(zip(jobs, outs))
    cmd = "benchmarks/generalisation.py --loso" + (" --quick" if args.quick else "") + \
        ("" if args.methods is None else f" --methods {','.join(methods)}") + \
        "".join(f" --holdout {h}" for h in sorted(holdout)) + ("" if args.lambda_path is None else " --lambda PATH")
    lines = [f"# Generalisation, leave one set out ({cmd})", "",
             "Each set in turn is the unseen one; the union of the other sets is the history. The kind of each "
             "held-out row is perfmodel.kinds.classify's with respect to that history; every method is fitted on "
             "the history for each kind that occurs (perfmodel.fitting.fit_history) and predicts the rows of that "
             "kind (6ND-util0.4: the point rule, no interval). 90% intervals; median APE over answered rows; "
             "width = mean (upper − lower) / predicted, as in generalisation.md; ×upper = the median of upper end / "
             "predicted (the band as a factor either way); a refusal leaves its rows unanswered. dev = development set (methods and rules chosen on it); confirmation = added when the "
             "design was settled, nothing chosen on it; confirmation, reused = nothing chosen on it, but run at "
             "several stops.", ""]
    if args.lambda_path is None:
        lines += ["public_lambda (confirmation, reused): not in the sets — no --lambda PATH given.", ""]
    if holdout:
        lines += [f"Held out: {', '.join(sorted(holdout))} only (--holdout); the other sets are history only.", ""]
    if args.methods is not None:
        lines += [f"Methods: {', '.join(methods)} only (--methods).", ""]
    results, summary = [], []
    for p, plan in enumerate(plans):
        s = sets[plan["index"]]
        counts = {k: int((plan["kinds"] == k).sum()) for k in plan["order"]}
        per_kind = {k: {m: summarise([by_job[(p, k, m)]]) for m in methods} for k in plan["order"]}
        overall = {m: summarise([by_job[(p, k, m)] for k in plan["order"]]) for m in methods}
        results.append({"set": s["name"], "role": s["role"], "rows": int(len(s["runs"])),
                        "history_sets": plan["history_sets"], "history_rows": int(len(plan["history"])),
                        "kinds": counts, "per_kind": per_kind, "all": overall})
        head = (f"## {s['name']} ({s['role']}) held out — {len(s['runs'])} rows "
                f"({', '.join(f'{k} {n}' for k, n in counts.items())}); history: "
                f"{', '.join(plan['history_sets'])} ({len(plan['history'])} runs)")
        block = [head, "", "| kind | method | rows answered | median APE % | 90% coverage | width | ×upper |",
                 "|---|---|---|---|---|---|---|"]
        for k, cells in [*per_kind.items(), ("all", overall)]:
            for m in methods:
                c = cells[m]
                name = m if m != "auto" else f"auto ({', '.join(c['chosen'])})"
                block.append(f"| {k} | {name} | {c['answered']}/{c['rows']} | {_fmt(c['median_ape'], '.1f')} | "
                             f"{_fmt(c['coverage'], '.2f')} | {_fmt(c['rel_width'], '.2f')} | "
                             f"{_fmt(c.get('upper_factor'), '.2f')} |")
        refusals = sorted({f"{m} ({k}): {e}" for k, cells in per_kind.items() for m in methods
                           for e in cells[m]["errors"]})
        block += [""] + [f"- refused: {r}" for r in refusals] + ([""] if refusals else [])
        lines += block
        print("\n".join(block), flush=True)
        summary.append((s, overall))
    at = len(lines)
    lines += ["## Summary: median APE % / 90% coverage / ×upper over each held-out set's rows", "",
              "| held-out set | role | " + " | ".join(methods) + " |", "|---|---|" + "---|" * len(methods)]
    for s, overall in summary:
        lines.append(f"| {s['name']} | {s['role']} | " + " | ".join(
            f"{_fmt(overall[m]['median_ape'], '.1f')} / {_fmt(overall[m]['coverage'], '.2f')} / "
            f"{_fmt(overall[m].get('upper_factor'), '.2f')}" for m in methods)
            + " |")
    lines += ["", f"Wall time {time.time() - start:.0f} s."]
    print("\n".join(lines[at:]), flush=True)
    out = args.out or ROOT / "benchmarks" / "results" / "generalisation_loso"
    out.parent.mkdir(parents=True, exist_ok=True)
    out.with_suffix(".md").write_text("\n".join(lines) + "\n", encoding="utf-8")
    out.with_suffix(".json").write_text(json.dumps({
        "protocol": "leave one set out", "quick": args.quick, "confidence": CONFIDENCE, "methods": list(methods),
        "holdout": sorted(holdout) or "all", "lambda": "skipped" if args.lambda_path is None else
        rel(args.lambda_path), "wall_s": round(time.time() - start, 1), "results": results,
    }, indent=1, allow_nan=False), encoding="utf-8")
    return 0


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--lambda", dest="lambda_path", type=Path, default=None,
                    help="a public_lambda.csv built by scripts/derive_public_lambda.py (reused confirmation set)")
    ap.add_argument("--folds", type=int, default=10, help="most refits per split (default 10)")
    ap.add_argument("--jobs", type=int, default=1)
    ap.add_argument("--out", type=Path, default=None,
                    help="results path without suffix (default benchmarks/results/generalisation, with --loso "
                         "benchmarks/results/generalisation_loso)")
    ap.add_argument("--loso", action="store_true", help="leave one set out instead of the splits")
    ap.add_argument("--methods", default=None, help="with --loso: comma-separated subset of its methods")
    ap.add_argument("--holdout", action="append", default=None, help="with --loso: hold out this set only "
                    "(repeatable)")
    args = ap.parse_args(argv)
    if not args.loso and (args.methods is not None or args.holdout is not None):
        ap.error("--methods and --holdout go with --loso")
    start = time.time()
    if args.loso:
        methods = LOSO_METHODS if args.methods is None else tuple(m.strip() for m in args.methods.split(","))
        bad = [m for m in methods if m not in LOSO_METHODS]
        if bad or not methods:
            ap.error(f"--methods: choose from {', '.join(LOSO_METHODS)}")
        return run_loso(args, load_sets(args.lambda_path, args.quick), methods, start)
    if args.out is None:
        args.out = ROOT / "benchmarks" / "results" / "generalisation"
    methods = QUICK_METHODS if args.quick else METHODS
    max_folds = 2 if args.quick else args.folds  # quick: 2-way splits, the first refit of each only
    sets = load_sets(args.lambda_path, args.quick)
    if args.lambda_path is None:
        print("public_lambda (confirmation, reused): skipped (no --lambda PATH)", flush=True)
    lines = [f"# Generalisation (benchmarks/generalisation.py{' --quick' if args.quick else ''})", "",
             f"90% intervals; median APE over held-out rows; width = mean (upper − lower) / predicted; at most "
             f"{max_folds} refits per split. dev = development set (methods and rules chosen on it); "
             "confirmation = added when the design was settled, nothing chosen on it (public_megatron_bridge: "
             "rerun once after the loglinear fix its first run prompted); confirmation, reused = nothing chosen "
             "on it, but run at several stops (no longer unseen).", ""]
    if args.lambda_path is None:
        lines.append("public_lambda (confirmation, reused): skipped — no --lambda PATH given (build it with "
                     "scripts/derive_public_lambda.py from a clone; it is not committed).")
        lines.append("")
    results = []
    for s in sets:
        runs = s["runs"]
        for split in s["splits"]:
            kind, fold_list = split_folds(runs, split, max_folds)
            if args.quick:
                fold_list = fold_list[:1]
            if not fold_list:
                continue
            jobs = [(m, tr, te) for tr, te in fold_list for m in methods]
            outs = Parallel(n_jobs=args.jobs)(delayed(fit_predict)(m, runs, tr, te, kind) for m, tr, te in jobs)
            cells = {m: summarise([o for (mm, _, _), o in zip(jobs, outs) if mm == m]) for m in methods}
            entry = {"set": s["name"], "role": s["role"], "split": split, "kind": kind, "folds": len(fold_list),
                     "runs": int(len(runs)), "methods": cells, "verdicts": verdicts(split, cells)}
            results.append(entry)
            lines += [f"## {s['name']} ({s['role']}) — {split} (kind {kind}; {len(fold_list)} refits, "
                      f"{len(runs)} runs)", "",
                      "| method | rows answered | median APE % | 90% coverage | width |", "|---|---|---|---|---|"]
            for m in methods:
                c = cells[m]
                name = m if m != "auto" else f"auto ({', '.join(c['chosen'])})"
                lines.append(f"| {name} | {c['answered']}/{c['rows']} | {_fmt(c['median_ape'], '.1f')} | "
                             f"{_fmt(c['coverage'], '.2f')} | {_fmt(c['rel_width'], '.2f')} |")
            lines += [""] + [f"- {v}" for v in entry["verdicts"]] + [""]
            print("\n".join(lines[-(len(methods) + 6 + len(entry["verdicts"])):]), flush=True)
    lines.append(f"Wall time {time.time() - start:.0f} s.")
    text = "\n".join(lines) + "\n"
    print(lines[-1])
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.with_suffix(".md").write_text(text, encoding="utf-8")
    args.out.with_suffix(".json").write_text(json.dumps({
        "quick": args.quick, "confidence": CONFIDENCE, "max_folds": max_folds,
        "lambda": "skipped" if args.lambda_path is None else rel(args.lambda_path), "results": results,
    }, indent=1, allow_nan=False), encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main())
