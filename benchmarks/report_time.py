"""How long ``perfmodel report`` takes with its default settings on the bundled history (issue 38: at most
5 minutes on 2 cores, with progress shown).

Runs the command as a user would (``python -m perfmodel report -o <tmp>/report.html``, the bundled CPU history,
the default time budget), ``--repeats`` times, and prints each run's wall time, its progress lines and which
cross-validation splits the budget left out. Usage::

    python benchmarks/report_time.py --output benchmarks/results/report_time.txt
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

SRC = str(Path(__file__).resolve().parents[1] / "src")


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--repeats", type=int, default=1)
    ap.add_argument("--output", help="also write the report to this file")
    args = ap.parse_args(argv)
    lines = [f"perfmodel report, default settings, bundled CPU history; {os.cpu_count()} CPUs, load average "
             f"{os.getloadavg()[0]:.1f} at the start"]
    print(lines[0], flush=True)
    for k in range(args.repeats):
        with tempfile.TemporaryDirectory() as tmp:
            out = Path(tmp) / "report.html"
            env = {**os.environ, "PYTHONPATH": SRC, "PERFMODEL_CACHE_DIR": str(Path(tmp) / "cache")}  # no cached fits
            t = time.perf_counter()
            proc = subprocess.run([sys.executable, "-m", "perfmodel", "report", "-o", str(out)], capture_output=True,
                                  text=True, env=env, timeout=3600)
            wall = time.perf_counter() - t
            left = [ln for ln in proc.stderr.splitlines() if "left out" in ln]
            text = (f"run {k + 1}: exit {proc.returncode}, {wall:.0f} s wall ({wall / 60:.1f} min), report "
                    f"{out.stat().st_size / 1e6:.1f} MB" if out.exists() else f"run {k + 1}: no report written")
            text += f"; {left[0].removeprefix('report: ') if left else 'every split cross-validated'}"
            for block in [text] + [f"  {ln}" for ln in proc.stderr.splitlines() if ln.startswith("report:")]:
                print(block, flush=True)
                lines.append(block)
    lines.append(f"load average {os.getloadavg()[0]:.1f} at the end")
    print(lines[-1])
    if args.output:
        Path(args.output).write_text("\n".join(lines) + "\n", encoding="utf-8")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
