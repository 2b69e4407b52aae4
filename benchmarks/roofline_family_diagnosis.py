"""Why ``roofline`` misses Megatron-Bridge's new devices when the other public sets are the history (issue #36).

``benchmarks/transfer_intervals.py`` section 4 predicts each public set from a history of all the others (given as a
DataFrame, as one's own runs). For Megatron-Bridge's rows on device types the others lack (Blackwell: B300, GB300),
``auto`` picks ``roofline`` and misses by a median ~1,100%. This script fits ``roofline`` for ``new_device`` queries
on that history, prints its family effects, and asks the same rows again with the family changed to ``decoder``
(then also on a device type the history has, then at bf16), the median predicted/measured step per model: where the
miss comes from. Writes ``benchmarks/results/roofline_family_diagnosis.txt``::

    python benchmarks/roofline_family_diagnosis.py
"""

from __future__ import annotations

import sys
import time
import warnings
from pathlib import Path

import numpy as np
import pandas as pd

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "benchmarks"))
sys.path.insert(0, str(ROOT / "scripts"))

import build_transfer_error_book as B  # noqa: E402
import transfer_intervals as T  # noqa: E402

from perfmodel.fitting import fit_history  # noqa: E402

HELD_OUT = "public_megatron_bridge.csv"


def main() -> int:
    start = time.time()
    warnings.simplefilter("ignore")
    files = ("mlperf_steps.csv", *B.BOOK_SETS)
    sets = {f: T._bundled(f) for f in files}
    history = pd.concat([r for f, r in sets.items() if f != HELD_OUT], ignore_index=True, sort=False)
    m = fit_history(history, "roofline", kind="new_device")
    q = B.queries(sets[HELD_OUT])
    y = q.pop("step_time_s").to_numpy()
    nd = m.query_kinds(q) == "new_device"
    fams = history.groupby("family")["model"].nunique()

    def ratios(frame: pd.DataFrame) -> pd.Series:
        return pd.Series(m.predict(frame)[nd] / y[nd]).groupby(frame["model"].to_numpy()[nd]).median().round(2)

    as_decoder = q.assign(family="decoder")
    table = pd.DataFrame({
        "family": q.loc[nd].groupby("model")["family"].first(),
        "as asked": ratios(q),
        "family decoder": ratios(as_decoder),
        "+ device B200": ratios(as_decoder.assign(gpu_type="B200")),
        "+ bf16": ratios(as_decoder.assign(gpu_type="B200", precision="bf16")),
    })
    coef = m.coef_table()
    fam = coef.loc[[i for i in coef.index if str(i).startswith("efficiency_log[family=")], "value"]
    lines = [f"# python benchmarks/roofline_family_diagnosis.py ({HELD_OUT} held out of the public sets)", "",
             f"history: {len(history)} runs of {', '.join(f for f in files if f != HELD_OUT)}; "
             f"{int(nd.sum())} new-device rows of {HELD_OUT}", "",
             "roofline's fitted family effects (log slow-down; models per family in the history):"]
    lines += [f"  {name}: {v:+.3f} (×{np.exp(v):.2f}; {int(fams.get(name[len('efficiency_log[family='):-1], 0))} "
              "models)" for name, v in fam.items()]
    lines += ["", "median predicted / measured step per model (new-device rows):", table.to_string(), "",
              f"Wall time {time.time() - start:.0f} s."]
    text = "\n".join(lines) + "\n"
    print(text)
    out = ROOT / "benchmarks" / "results" / "roofline_family_diagnosis.txt"
    out.write_text(text, encoding="utf-8")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
