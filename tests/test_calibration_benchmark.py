"""benchmarks/calibration_cpu.py runs on the histories that exist (here: the bundled CPU history split in two)."""

import subprocess
import sys
from pathlib import Path

import pandas as pd
import pytest

ROOT = Path(__file__).resolve().parents[1]
SCRIPT = ROOT / "benchmarks" / "calibration_cpu.py"


def run(*args):
    return subprocess.run([sys.executable, str(SCRIPT), *args], capture_output=True, text=True, timeout=600)


@pytest.mark.slow
def test_demo_split_reports_host_shift_and_new_architecture():
    proc = run("--demo-split", str(ROOT / "data" / "runs_cpu.csv"), "--methods", "loglinear", "--cv", "2")
    assert proc.returncode == 0, proc.stderr
    runs = pd.read_csv(ROOT / "data" / "runs_cpu.csv")  # the smallest model of each family, one worker, repeat 0
    smallest = set(runs.sort_values("params").groupby("family")["model"].first())
    calib = runs[runs["model"].isin(smallest) & (runs["gpu_count"] == 1) & (runs["repeat"].fillna(0) == 0)]
    n_fam = runs["family"].nunique()
    assert f"calibration: {len(calib)} runs of {n_fam} models in {n_fam} families" in proc.stderr
    rows = [line.split("|")[1:-1] for line in proc.stdout.splitlines() if line.startswith("| ") and "---" not in line]
    table = {(r[0].strip(), r[1].strip()): r for r in rows[1:]}
    assert set(table) == {("host shift", "bundled only"), ("host shift", "bundled + calibration (LOMO)"),
                          ("host shift", "calibration only (LOMO)"),
                          ("new architecture (LOFO)", "bundled minus family"),
                          ("new architecture (LOFO)", "bundled + calibration minus family")}
    assert all(int(r[3]) == len(calib) for r in table.values())  # every calibration run predicted once per row
    assert all(0 <= float(r[6]) <= 1 for r in table.values())


def test_bad_arguments():
    proc = run("--bundled", str(ROOT / "data" / "runs_cpu.csv"))
    assert proc.returncode == 2 and "--bundled needs --calibration" in proc.stderr
    proc = run("--demo-split", str(ROOT / "data" / "runs_cpu.csv"), "--methods", "magic")
    assert proc.returncode == 2 and "unknown method(s) magic" in proc.stderr
