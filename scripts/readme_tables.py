"""Generate the results tables of README.md and of the docs from ``benchmarks/results/*.json``.

    python scripts/readme_tables.py           # rewrite the generated blocks in README.md and docs/
    python scripts/readme_tables.py --check   # exit 1 if any block differs from what the results say

Every generated block sits between ``<!-- generated:NAME start -->`` and ``<!-- generated:NAME end -->``; the text
outside the markers is left alone. The figures come from the JSON files the benchmarks write (``accuracy.json``
from ``benchmarks/accuracy.py``, ``cross_hardware.json`` from ``benchmarks/cross_hardware.py``,
``new_architectures.json`` from ``benchmarks/new_architectures.py``, ``generalisation.json`` from
``benchmarks/generalisation.py``), never typed in: after a benchmark is rerun,
run this script and commit both. ``tests/test_docs.py`` checks that the committed blocks are up to date.

The docs build (``docs/hooks.py``) fills the same blocks, and the CLI reference (:func:`cli_reference`, from the
argparse parsers themselves), when it renders the pages.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import re
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
RESULTS = ROOT / "benchmarks" / "results"

#: The methods of the benchmarks that are baselines, not perfmodel methods.
BASELINES = ("seed-linear", "6ND-util0.4", "6ND-fitted-util", "peak-ratio", "ratio", "mfu")
#: What each split holds out, in the words of a user's query.
SPLIT_WORDS = {
    "leave-one-model-out": "a new model",
    "leave-one-family-out": "a new architecture family",
    "leave-one-batch-size-out": "a new batch size",
    "leave-one-gpu-count-out": "a new device count",
    "leave-one-gpu-type-out": "a new device type",
    "leave-one-pair-out": "a known model on a known device type, never together",
}


def _load(name: str) -> dict:
    return json.loads((RESULTS / name).read_text(encoding="utf-8"))


def _missing(v) -> bool:
    return v is None or (isinstance(v, float) and math.isnan(v))


def _pct(v) -> str:
    return "—" if _missing(v) else f"{v:.1f}%"


def _cov(v) -> str:
    return "—" if _missing(v) else f"{v:.3f}"


def _num(v, digits: int = 2) -> str:
    return "—" if _missing(v) else f"{v:.{digits}f}"


def _r2(v) -> str:
    return "—" if _missing(v) else ("< 0" if v < 0 else f"{v:.3f}")


def _table(header: list[str], rows: list[list[str]]) -> str:
    out = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    out += ["| " + " | ".join(r) + " |" for r in rows]
    return "\n".join(out)


def _best_baseline(rows: list[dict]) -> dict | None:
    base = [r for r in rows if r["method"] in BASELINES and not _missing(r.get("median_ape"))]
    return min(base, key=lambda r: r["median_ape"]) if base else None


def _auto(rows: list[dict], split: str) -> dict | None:
    return next((r for r in rows if r["split"] == split and r["method"] == "auto"), None)


# ---------------------------------------------------------------------------------------------------- README
def readme_results() -> str:
    """The README's one results table: ``auto`` on each split of the two benchmarks, beside the best baseline."""
    acc, xh = _load("accuracy.json"), _load("cross_hardware.json")
    rows = []
    acc_rows = acc["table"]
    n_cpu = max(r["n"] for r in acc_rows)
    n_models = next(r["folds"] for r in acc_rows if r["split"] == "leave-one-model-out")
    for split in dict.fromkeys(r["split"] for r in acc_rows):
        a = _auto(acc_rows, split)
        b = _best_baseline([r for r in acc_rows if r["split"] == split])
        if a is None or not a["n"]:
            continue
        rows.append([f"CPU runs ({n_cpu} runs, {n_models} models)", SPLIT_WORDS.get(split, split),
                     _pct(a["median_ape"]), _cov(a["coverage"]),
                     f"{_pct(b['median_ape'])} ({b['method']})" if b else "—"])
    xh_rows = xh["lodo"] + [r for r in xh["splits"] if r["split"] != "leave-one-gpu-type-out"]
    n_dev = next(r["folds"] for r in xh["lodo"] if r["method"] == "auto")
    for split in dict.fromkeys(r["split"] for r in xh_rows):
        a = _auto(xh_rows, split)
        b = _best_baseline([r for r in xh_rows if r["split"] == split])
        if a is None or not a["n"]:
            continue
        rows.append([f"public MLPerf steps ({xh['n_runs']:,} runs, {n_dev} device types)",
                     SPLIT_WORDS.get(split, split), _pct(a["median_ape"]), _cov(a["coverage"]),
                     f"{_pct(b['median_ape'])} ({b['method']})" if b else "—"])
    return _table(["history", "the query is", "median error (`auto`)", "90% interval coverage",
                   "best baseline, median error"], rows)


def generalisation_results() -> str:
    """Every set x split of ``benchmarks/generalisation.py``: ``auto`` beside the one-line rules, each set marked
    development (methods and rules chosen on it), confirmation (run once, nothing chosen on it) or confirmation,
    reused (nothing chosen on it, but run at several stops)."""
    gen = _load("generalisation.json")
    rows = []
    for r in gen["results"]:
        m = r["methods"]

        def cell(name, cov=False):
            v = m.get(name) or {}
            if _missing(v.get("median_ape")):
                return "—"
            return f"{_pct(v['median_ape'])} / {_num(v.get('coverage'))}" if cov else _pct(v["median_ape"])

        role = {"dev": "development"}.get(r["role"], r["role"])
        rows.append([f"{r['set']} ({role})", r["split"],
                     str(r["runs"]), cell("auto", cov=True), cell("roofline", cov=True), cell("ratio", cov=True),
                     cell("mfu", cov=True), cell("6ND-util0.4")])
    if gen.get("lambda") == "skipped":
        rows.append(["public_lambda (confirmation, reused)", "not run: `--lambda PATH` not given", "", "", "", "",
                     "", ""])
    return _table(["set", "the query is", "runs", "`auto` median error / 90% coverage", "`roofline`", "`ratio`",
                   "`mfu`", "6ND at 40% of peak"], rows)


def transfer_interval_results() -> str:
    """``benchmarks/transfer_intervals.py``: coverage and width on each public set before the error books, with the
    book rebuilt without the set (leave-one-set-out), and on the confirmation set with the shipped books."""
    res = _load("transfer_intervals.json")
    rows = []

    def cells(c: dict) -> str:
        return f"{_num(c.get('coverage'))} / ×{_num(c.get('half_width'))}"

    for name, c in res["development"].items():
        loso = c.get("book without this set", {})
        rows.append([name.removesuffix(".csv"), "generic (gpu history)", str(c["no book"]["rows"]),
                     _pct(c["no book"]["median_ape"]), cells(c["no book"]), cells(loso),
                     _pct(c["baseline: const-MFU (point)"]["median_ape"])])
    for name, c in res["unstated_shape"].items():
        after = c["unstated-shape entry without this set"]
        before = c["bundled entry alone (before)"]
        rows.append([name.removesuffix(".csv"), "decoder by size alone (layout model)", str(after["rows"]),
                     _pct(after["median_ape"]), cells(before), cells(after),
                     _pct(c["baseline: 6ND at 0.4 MFU (point)"]["median_ape"]) + " (6ND)"])
    for name, c in res.get("confirmation", {}).items():
        rows.append([f"{name}, confirmation", "generic", str(c["no book"]["rows"]), _pct(c["no book"]["median_ape"]),
                     cells(c["no book"]), cells(c["shipped book"]) + " (shipped)",
                     _pct(c["baseline: const-MFU (point)"]["median_ape"])])
    return _table(["set", "answered as", "rows", "median error", "coverage / upper÷point, no book",
                   "with the book, leave-one-set-out", "baseline (const-MFU)"], rows)


# ---------------------------------------------------------------------------------------------------- docs
def _method_table(rows: list[dict], extra: bool = False) -> str:
    header = ["split", "method", "folds", "runs", "median APE", "MAPE", "R² log", "90% PI coverage", "rel. width"]
    if extra:
        header += ["held-out groups", "coverage 90% CI", "verdict"]
    out = []
    for r in rows:
        row = [r["split"], f"**{r['method']}**" if r["method"] == "auto" else r["method"], str(r["folds"]),
               str(r["n"]), _pct(r.get("median_ape")), _pct(r.get("mape")), _r2(r.get("r2_log")),
               _cov(r.get("coverage")), _num(r.get("rel_width"))]
        if extra:
            row += ["—" if _missing(r.get("groups")) else str(int(r["groups"])), r.get("coverage_ci90") or "—",
                    r.get("verdict") or "—"]
        if not r["n"]:
            row[4] = "refused (n = 0)"
        out.append(row)
    return _table(header, out)


def accuracy_tables() -> str:
    """docs/benchmarks/accuracy.md: the CPU-history benchmark."""
    acc = _load("accuracy.json")
    first = acc["header"].splitlines()[0]
    nf = acc["noise_floor"]
    lines = [f"From `benchmarks/results/accuracy.json` ({first.split(', ')[-1]}).", "",
             f"Noise floor (a run predicted by the mean of its repeats; {nf['n_configs']} configurations, "
             f"{nf['n_runs']} runs): **{_pct(nf['median_ape'])} median APE** ({_pct(nf['mean_ape'])} mean).", "",
             _method_table(acc["table"], extra=True), "", "Checks the benchmark makes:", ""]
    lines += [f"- {'pass' if c['pass'] else '**fail**'} ({c['split']}): {c['check']}" for c in acc["checks"]]
    return "\n".join(lines)


def cross_hardware_tables() -> str:
    """docs/benchmarks/cross-hardware.md: the public MLPerf per-step table."""
    xh = _load("cross_hardware.json")
    lines = [f"From `benchmarks/results/cross_hardware.json` ({xh['n_runs']:,} runs).", "",
             "### Leave-one-device-type-out", "", _method_table(xh["lodo"]), ""]
    paired = xh["lodo_extra"].get("paired_with_peak_ratio", {})
    if paired:
        lines += ["Against peak-ratio scaling on the rows where it has a reference:", "",
                  _table(["method", "rows", "median APE", "peak-ratio median APE"],
                         [[m, str(v["rows"]), _pct(v["median_ape"]), _pct(v["peak_ratio_median_ape"])]
                          for m, v in paired.items()]), ""]
    per_b = xh["lodo_extra"].get("per_benchmark", [])
    if per_b:
        lines += ["Per benchmark (the coverage a user asking about one workload gets; the 90% interval is over "
                  "resamples of the held-out device types):", "",
                  _table(["method", "benchmark", "runs", "device types", "median APE", "coverage", "rel. width",
                          "coverage 90% CI", "verdict"],
                         [[r["method"], r["benchmark"], str(r["n"]), str(r["device_types"]), _pct(r["median_ape"]),
                           _cov(r["coverage"]), _num(r["rel_width"]), r.get("coverage_ci90") or "—",
                           r.get("verdict") or "—"] for r in per_b]), ""]
    lines += ["### Every split", "", _method_table(xh["splits"]), ""]
    cal = xh.get("calibration", [])
    if cal:
        by_k: dict[int, list[dict]] = {}
        for r in cal:
            by_k.setdefault(r["k"], []).append(r)
        rows = []
        for k, rs in sorted(by_k.items()):
            apes = sorted(r["median_ape"] for r in rs)
            mid = len(apes) // 2
            med = apes[mid] if len(apes) % 2 else (apes[mid - 1] + apes[mid]) / 2
            rows.append([str(k), str(len(rs)), _pct(med), _cov(sum(r["coverage"] for r in rs) / len(rs))])
        lines += ["### Calibration: a new benchmark from k of its runs on one device", "",
                  "Each case holds one benchmark out, gives the fit k of its runs on one device, and predicts its "
                  "runs on the other devices (median over cases of the median APE; mean coverage).", "",
                  _table(["own runs k", "cases", "median APE", "90% PI coverage"], rows)]
    return "\n".join(lines).rstrip()


def new_architectures_tables() -> str:
    """docs/benchmarks/new-architectures.md: ops against the other methods on unseen models and families."""
    na = _load("new_architectures.json")
    rows = [[r["split"], f"**{r['method']}**" if r["method"] == "ops" else r["method"], str(r["n"]),
             _pct(r["median_ape"]), _pct(r["mape"]), _cov(r["coverage"]), _num(r["rel_width"])]
            for r in na["table"]]
    return "\n".join([f"From `benchmarks/results/new_architectures.json` (`{na['history']}`, {na['runs']} runs, "
                      f"{na['confidence']:.0%} intervals).", "",
                      _table(["split", "method", "runs", "median APE", "MAPE", "coverage", "rel. width"], rows)])


def cli_reference() -> str:
    """Every ``perfmodel`` command's ``--help``, from the argparse parsers themselves."""
    import argparse as ap

    old = os.environ.get("COLUMNS")
    os.environ["COLUMNS"] = "100"
    try:
        from perfmodel import cli

        parser = cli._parser()
        out = ["## `perfmodel`", "", "```text", parser.format_help().rstrip(), "```", ""]

        def walk(p, prefix):
            for action in p._actions:
                if isinstance(action, ap._SubParsersAction):
                    for name, sp in action.choices.items():
                        out.extend([f"## `{prefix} {name}`", "", "```text", sp.format_help().rstrip(), "```", ""])
                        walk(sp, f"{prefix} {name}")

        walk(parser, "perfmodel")
        return "\n".join(out).rstrip()
    finally:
        if old is None:
            os.environ.pop("COLUMNS", None)
        else:
            os.environ["COLUMNS"] = old


def api_reference() -> str:
    """A table of ``perfmodel.__all__``: each name links to its entry on the page of the module that defines it."""
    import perfmodel

    rows = [[f"[`{name}`][{perfmodel._EXPORTS[name]}.{name}]", f"`{perfmodel._EXPORTS[name]}`"]
            for name in sorted(perfmodel._EXPORTS, key=str.lower)]
    return _table(["name", "defined in"], rows)


#: Generated blocks: name -> (function, files that hold the block). The CLI and API blocks are filled at docs
#: build time only (they follow the code, which others edit).
BLOCKS = {
    "results": (readme_results, ["README.md", "docs/benchmarks/index.md", "docs/index.md"]),
    "generalisation": (generalisation_results, ["README.md", "docs/benchmarks/index.md"]),
    "transfer-intervals": (transfer_interval_results, ["docs/benchmarks/index.md"]),
    "accuracy": (accuracy_tables, ["docs/benchmarks/accuracy.md"]),
    "cross-hardware": (cross_hardware_tables, ["docs/benchmarks/cross-hardware.md"]),
    "new-architectures": (new_architectures_tables, ["docs/benchmarks/new-architectures.md"]),
    "cli": (cli_reference, []),
    "api": (api_reference, []),
}


def _pattern(name: str) -> re.Pattern:
    return re.compile(rf"(<!-- generated:{re.escape(name)} start -->\n).*?(<!-- generated:{re.escape(name)} end -->)",
                      re.S)


def fill(text: str, names=None) -> str:
    """``text`` with every generated block it holds (of ``names``, default all) rewritten."""
    for name, (fn, _) in BLOCKS.items():
        if names is not None and name not in names:
            continue
        pat = _pattern(name)
        if pat.search(text):
            body = fn()
            text = pat.sub(lambda m: m.group(1) + "\n" + body + "\n\n" + m.group(2), text)
    return text


def block(text: str, name: str) -> str | None:
    """The content of block ``name`` in ``text`` (None when the markers are absent)."""
    m = _pattern(name).search(text)
    return None if m is None else m.group(0)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--check", action="store_true", help="only check; exit 1 if a block is out of date")
    args = ap.parse_args(argv)
    stale = []
    for name, (_, files) in BLOCKS.items():
        for f in files:
            path = ROOT / f
            text = path.read_text(encoding="utf-8")
            if block(text, name) is None:
                print(f"{f}: no generated:{name} block", file=sys.stderr)
                return 1
            new = fill(text, [name])
            if new != text:
                stale.append(f"{f} ({name})")
                if not args.check:
                    path.write_text(new, encoding="utf-8")
    if stale:
        print(("out of date: " if args.check else "rewrote: ") + ", ".join(stale))
        return 1 if args.check else 0
    print("all generated blocks are up to date")
    return 0


if __name__ == "__main__":
    sys.exit(main())
