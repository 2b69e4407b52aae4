"""Would ``auto`` choose better if it also scored its candidates one whole source held out? (issue #36 item 4; tried
and not adopted: CHANGELOG.md)

For each leave-one-set-out history of ``benchmarks/generalisation.py --loso`` (the four sets bundled, no Lambda) and
three of ``benchmarks/transfer_intervals.py`` section 4's, and each kind of held-out query: every ``auto`` candidate's
median APE on the kind's own split (``kind_split``, what ``auto`` chooses by), on refits that each held one whole
source of the history out (``source_split``: every source weighing the same, the mean of the sources' median APEs;
on the history or its 2,000-run subsample; a source with more runs than the others together is not held out, as in
:func:`perfmodel.models._conformal.source_splits`) and on the held-out set itself (``held_out``). Writes
``benchmarks/results/selection_by_source.txt``::

    python benchmarks/selection_by_source.py
"""
import sys
import time
import warnings
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "benchmarks"))
sys.path.insert(0, str(ROOT / "scripts"))
import build_transfer_error_book as B  # noqa: E402
import generalisation as G  # noqa: E402
import numpy as np  # noqa: E402
import pandas as pd  # noqa: E402
import transfer_intervals as T  # noqa: E402

from perfmodel.fitting import AUTO_CANDIDATES, choose_method  # noqa: E402
from perfmodel.metrics import median_ape  # noqa: E402
from perfmodel.models import TrainingTimeModel  # noqa: E402
from perfmodel.models._conformal import source_splits  # noqa: E402
from perfmodel.schema import validate_runs  # noqa: E402

LINES: list[str] = []


def say(text: str) -> None:
    print(text, flush=True)
    LINES.append(text)


def scenario(name, history, target, query_cols=None):
    history = validate_runs(history)
    if query_cols is not None:
        q = B.queries(target)
        y = q.pop("step_time_s").to_numpy()
    else:
        q = target.drop(columns=["step_time_s"])
        y = target["step_time_s"].to_numpy(float)
    t0 = time.time()
    probe = TrainingTimeModel(method="ratio", conformal=False).fit(history)
    kinds = probe.query_kinds(q)
    data = history.sample(min(2000, len(history)), random_state=0).reset_index(drop=True)
    ys = data["step_time_s"].to_numpy(float)
    splits, groups = source_splits(data["source"].to_numpy(object))
    held_out = np.zeros(len(data), dtype=bool)  # the runs of the sources rule 5 holds out (not a dominant one)
    for _, te in splits:
        held_out[te] = True
    for kind in np.unique(kinds):
        rows = kinds == kind
        ch = choose_method(history, kind)
        src = {}
        for m in AUTO_CANDIDATES:
            try:
                pm = TrainingTimeModel(method=m, conformal=False).fit(data, ys)
                oof = pm.out_of_fold_splits(data, ys, splits)
                ok = np.isfinite(oof) & (oof > 0)
                # every source weighs the same: mean over sources of each source's median APE
                per = [median_ape(ys[ok & (groups == g)], oof[ok & (groups == g)])
                       for g in np.unique(groups[held_out])]
                src[m] = float(np.mean(per)) if ok[held_out].mean() > 0.9 else float("inf")
            except (ValueError, TypeError, np.linalg.LinAlgError):  # cannot fit or answer: no score
                src[m] = float("nan")
        held = {}
        for m in AUTO_CANDIDATES:
            try:
                fm = TrainingTimeModel(method=m, conformal=False).fit(history)
                p = fm.predict(q.loc[rows])
                held[m] = median_ape(y[rows], p)
            except (ValueError, TypeError, np.linalg.LinAlgError):  # cannot fit or answer: no score
                held[m] = float("nan")
        say(f"\n== {name} / {kind} ({rows.sum()} rows) auto chose {ch['best']} [{ch['split']}]")
        say(pd.DataFrame({"kind_split": ch["scores"], "source_split": src, "held_out": held}).round(1).to_string())
    say(f"({time.time() - t0:.0f} s)")


def main() -> int:
    warnings.simplefilter("ignore")
    say("# python benchmarks/selection_by_source.py: median APE % per auto candidate")

    sets = G.load_sets(None, quick=False)
    for s in sets:
        hist = pd.concat([o["runs"] for o in sets if o["name"] != s["name"]], ignore_index=True, sort=False)
        scenario("LOSO " + s["name"], hist, s["runs"])
    files = ("mlperf_steps.csv", *B.BOOK_SETS)
    bs = {f: T._bundled(f) for f in files}
    for name in ("public_neusight.csv", "public_llmfoundry.csv", "public_megatron_bridge.csv"):
        hist = pd.concat([r for f, r in bs.items() if f != name], ignore_index=True, sort=False)
        scenario("S4 " + name, hist, bs[name], query_cols=True)
    out = ROOT / "benchmarks" / "results" / "selection_by_source.txt"
    out.write_text("\n".join(LINES) + "\n", encoding="utf-8")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
