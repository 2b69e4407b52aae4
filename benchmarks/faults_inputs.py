"""Fault attacks on perfmodel's inputs (issue 26 #7-#12): importers, device files, numerics, the cache key and the
CLI. Every attack must end in a result or a ValueError/TypeError/OSError with a message (never another exception:
a "traceback"), never a NaN/inf result, never a duplicated row, never a partly registered device file, never a
stale cache key.

    python benchmarks/faults_inputs.py        # prints one count per line; every count must be 0
    python benchmarks/faults_inputs.py --output benchmarks/results/faults_inputs.txt

``benchmarks/faults.py`` runs the same attacks (its ``inputs`` part, through :func:`run_all`) and prints the
same counts. Results: ``benchmarks/results/faults_inputs.txt``.
"""

from __future__ import annotations

import json
import math
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import time
import warnings
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
MLPERF = ROOT / "tests" / "data" / "mlperf"
EXPECTED = (ValueError, TypeError, OSError)  # PerfModelError subclasses are ValueErrors
GPT2 = {"model_type": "gpt2", "n_layer": 2, "n_embd": 32, "n_head": 2, "vocab_size": 128, "n_positions": 32}


class Counts:
    def __init__(self):
        self.calls = self.tracebacks = self.nan = 0
        self.examples: list[str] = []

    def call(self, label, fn, *, check=None):
        """Run ``fn``; an unexpected exception counts as a traceback, a non-finite number in the result as NaN."""
        self.calls += 1
        try:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                out = fn()
        except EXPECTED as exc:
            if not str(exc).strip():
                self.tracebacks += 1
                self.examples.append(f"{label}: {type(exc).__name__} without a message")
            return None
        except Exception as exc:  # noqa: BLE001 - this is what the benchmark counts
            self.tracebacks += 1
            self.examples.append(f"{label}: {type(exc).__name__}: {str(exc)[:120]}")
            return None
        values = check(out) if check else []
        if any(not math.isfinite(v) for v in values):
            self.nan += 1
            self.examples.append(f"{label}: non-finite result {values}")
        return out


def _hf_dir(path: Path, **over) -> Path:
    path.mkdir(parents=True, exist_ok=True)
    speed = {"train_runtime": 20.0, "train_samples_per_second": 8.0, "train_steps_per_second": 2.0,
             "total_flos": 1e9}
    state = {"global_step": 40, "train_batch_size": 4, "log_history": [{"step": 40, **speed}]}
    state.update(over.pop("state", {}))
    (path / "trainer_state.json").write_text(over.pop("state_text", None) or json.dumps(state))
    (path / "all_results.json").write_text(over.pop("results_text", None) or json.dumps(speed))
    (path / "config.json").write_text(json.dumps(GPT2))
    card = over.pop("card", None)
    if card:
        lines = "\n".join(f"- {k}: {v}" for k, v in card.items())
        (path / "README.md").write_text(f"### Training hyperparameters\n\n{lines}\n\n### Training results\n")
    return path


def attack_importers(c: Counts, tmp: Path) -> dict:
    """Broken HF output dirs and MLPerf logs; MLflow against closed / dropping ports."""
    from perfmodel.importers import from_hf_output_dirs, from_mlperf
    from perfmodel.importers.mlperf import parse_mllog, summarize_run

    deep = "[" * 100_000 + "]" * 100_000
    cases = {
        "accum0": {"card": {"train_batch_size": 4, "gradient_accumulation_steps": 0, "num_devices": 2}},
        "accum-1": {"card": {"train_batch_size": 4, "gradient_accumulation_steps": -1, "num_devices": 2}},
        "devices0": {"card": {"train_batch_size": 4, "num_devices": 0}},
        "deep_results": {"results_text": deep},
        "deep_state": {"state_text": deep},
        "huge": {"state": {"global_step": 10**400, "train_batch_size": 10**400}},
        "odd_types": {"state": {"log_history": 7, "train_batch_size": [1]}},
        "batch0": {"state": {"train_batch_size": 0}},
    }
    bad_accum = 0
    for name, over in cases.items():
        d = _hf_dir(tmp / "hf" / name, **over)
        res = c.call(f"hf_output {name}", lambda d=d: from_hf_output_dirs(d, values={"gpu_type": "A100"}))
        if res is not None and "grad_accum" in res.runs.columns:
            bad_accum += int((res.runs["grad_accum"].dropna() < 1).sum())
    lines = [
        ":::MLLOG " + deep,
        ':::MLLOG {"key": "run_start", "time_ms": 1, "metadata": "a string"}',
        ':::MLLOG {"key": "run_start", "time_ms": "soon"}',
        ':::MLLOG {"key": ["x"], "time_ms": 1}',
        ':::MLLOG {"key": "global_batch_size", "value": -8, "time_ms": 1, "metadata": 5}',
        ':::MLLOG {"key": "global_batch_size", "value": 1e400, "time_ms": 1e400}',
    ]
    for i, line in enumerate(lines):
        text = ':::MLLOG {"key": "submission_benchmark", "value": "bert", "time_ms": 0}\n' + line
        c.call(f"parse_mllog {i}", lambda t=text: parse_mllog(t))
        c.call(f"summarize_run {i}", lambda t=text: summarize_run(t, {"accelerator_model_name": 7,
                                                                    "accelerators_per_node": "-8"}))
    root = tmp / "mlperf" / "v4.0"
    shutil.copytree(MLPERF / "v4.0", root)
    bad = root / "Dell/results/XE9680x8H100-SXM-80GB/bert/result_9.txt"
    bad.write_text(":::MLLOG " + json.dumps({"key": "global_batch_size", "value": -256, "time_ms": 0}) + "\n"
                   + ":::MLLOG " + json.dumps({"key": "submission_benchmark", "value": "bert", "time_ms": 0}))
    runs = c.call("from_mlperf with a negative batch", lambda: from_mlperf([root]))
    aborted = int(runs is None)
    # MLflow: a closed port must fail within seconds with one line
    mlflow_slow = 0
    try:
        import mlflow  # noqa: F401

        from perfmodel.importers import from_mlflow

        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            port = s.getsockname()[1]
        t0 = time.monotonic()
        c.call("mlflow closed port", lambda: from_mlflow(f"http://127.0.0.1:{port}"))
        mlflow_slow += int(time.monotonic() - t0 > 10)
    except ImportError:
        pass
    return {"importer runs written with grad_accum < 1": bad_accum, "imports aborted by one bad log": aborted,
            "MLflow unreachable server taking > 10 s": mlflow_slow}


def attack_duplicates(c: Counts, tmp: Path) -> dict:
    """The same MLPerf logs and HF dirs imported twice, touched, and copied."""
    from perfmodel.cli import main
    from perfmodel.importers import from_hf_output_dirs
    from perfmodel.io import read_raw_history

    out = tmp / "dup" / "mlperf.csv"
    out.parent.mkdir(parents=True)
    copy = tmp / "dup" / "copy" / "v4.0"
    shutil.copytree(MLPERF / "v4.0", copy)
    import contextlib
    import io

    for src in (MLPERF / "v4.0", MLPERF / "v4.0", copy):
        with contextlib.redirect_stdout(io.StringIO()):
            c.call("import mlperf", lambda src=src: main(["import", "mlperf", str(src), "-o", str(out)]))
    hist = read_raw_history(out)
    dup_mlperf = len(hist) - hist["source_id"].nunique() + (len(hist) - 2)
    run = _hf_dir(tmp / "dup" / "hf" / "a")
    hf_out = tmp / "dup" / "hf.csv"
    from_hf_output_dirs(run, values={"gpu_type": "A100"}, output=hf_out)
    later = time.time() + 10
    for f in run.iterdir():
        os.utime(f, (later, later))
    from_hf_output_dirs(run, values={"gpu_type": "A100"}, output=hf_out)
    shutil.copytree(run, tmp / "dup" / "hf-copy" / "a")
    from_hf_output_dirs(tmp / "dup" / "hf-copy", values={"gpu_type": "A100"}, output=hf_out)
    dup_hf = len(read_raw_history(hf_out)) - 1
    return {"duplicated MLPerf rows (3 imports of 2 logs)": dup_mlperf,
            "duplicated HF rows (import, touch, copy)": dup_hf}


def attack_devices(c: Counts, tmp: Path) -> dict:
    """Device files: shared aliases, non-UTF-8, a 40,000-row file; the cache key follows the table."""
    from perfmodel import cache, hardware

    specs, aliases = dict(hardware._lookup.USER_SPECS), dict(hardware._lookup.USER_ALIASES)
    partial = slow = stale = 0
    try:
        f = tmp / "shared.csv"
        f.write_text("name,vendor,source,bf16_tflops,aliases\nFA,acme,s,1,same\nFB,acme,s,2,same\n")
        c.call("shared alias", lambda: hardware.load_devices(f))
        partial += int("FA" in hardware.known_gpu_types())
        g = tmp / "latin1.csv"
        g.write_bytes("name,vendor,source\nGerät,acme,s\n".encode("latin-1"))
        c.call("latin-1 file", lambda: hardware.load_devices(g))
        big = tmp / "big.csv"
        big.write_text("name,vendor,source,bf16_tflops,aliases\n"
                       + "".join(f"Big{i},acme,s,10,bigalias{i}\n" for i in range(40_000)))
        t0 = time.perf_counter()
        c.call("40k-row file", lambda: hardware.load_devices(big))
        slow += int(time.perf_counter() - t0 > 20)
        before = cache.cache_key("d" * 64, "physics", "seen")
        h100 = hardware.get_spec("H100").to_dict()
        hardware.register_device(**{**h100, "bf16_tflops": h100["bf16_tflops"] / 2}, replace=True)
        stale += int(cache.cache_key("d" * 64, "physics", "seen") == before)
    finally:
        hardware._lookup.USER_SPECS.clear()
        hardware._lookup.USER_SPECS.update(specs)
        hardware._lookup.USER_ALIASES.clear()
        hardware._lookup.USER_ALIASES.update(aliases)
        hardware._lookup.CACHE.clear()
    env_file = tmp / "env-latin1.csv"
    env_file.write_bytes("name,vendor,source\nGerät,acme,s\n".encode("latin-1"))
    code = ("from perfmodel.hardware import resolve_gpu_type\n"
            "errs = []\n"
            "for _ in range(3):\n"
            "    try:\n        resolve_gpu_type('A100'); errs.append('silent')\n"
            "    except Exception as e:\n        errs.append(type(e).__name__)\n"
            "print(','.join(errs))")
    out = subprocess.run([sys.executable, "-c", code], env={**os.environ, "PERFMODEL_DEVICES": str(env_file)},
                         capture_output=True, text=True, timeout=120)
    silent = int(out.stdout.strip() != "DeviceSpecError,DeviceSpecError,DeviceSpecError")
    return {"device files partly registered": partial, "device files taking > 20 s (40,000 rows)": slow,
            "cache keys unchanged by a replaced device": stale,
            "PERFMODEL_DEVICES errors ignored on a later lookup": silent}


def attack_numerics(c: Counts) -> dict:
    import numpy as np

    from perfmodel import plan
    from perfmodel._validation import check_positive_float, check_positive_int

    finite = lambda r: [float(v) for v in r.to_dict().values() if isinstance(v, (int, float)) and v is not None]  # noqa: E731
    for args in ((1000, 1, 2000), (999, 1, 1000), (9e8, 1, 10**9), (1e300, 1e300, 3), (1e-300, 1e-300, 3),
                 (2.0, 1.0, 10**12), (float("nan"), 1, 2), (10**400, 1, 2)):
        c.call(f"erlang_c{args}", lambda a=args: plan.erlang_c(*a), check=finite)
    for kw in ({"jobs": []}, {"warmup_fraction": 1.0}, {"warmup_fraction": float("nan")}, {"n_arrivals": 10**9},
               {"jobs": {"arrival": [0.0, 0.0], "duration": [1e308, 1e308]}},
               {"jobs": {"arrival": [0.0], "duration": [1.0], "size": [float("nan")]}}):
        args = {"arrival_rate": 2.0, "service_time": 1.0, "servers": 3, "n_arrivals": 200, **kw}
        c.call(f"simulate_queue{list(kw)}", lambda a=args: plan.simulate_queue(**a),
               check=lambda r: [r.mean_wait, r.mean_response, r.utilisation])
    for rate in (float("nan"), float("inf"), -1.0, 10**400):
        c.call(f"estimate_cost rate={rate}", lambda r=rate: plan.estimate_cost(
            seconds=3600, gpu_type="cpu", spot=True, interruptions_per_hour=r),
            check=lambda r: [r.dollars, r.lower, r.upper])
    c.call("estimate_cost huge", lambda: plan.estimate_cost(seconds=1e307, gpu_type="cpu", gpu_count=10**9),
           check=lambda r: [r.dollars, r.upper])
    for kw in ({"drift": 1e300}, {"step_noise": 1e300}, {"total_steps": 10**400}, {"drift": float("nan")},
               {"prior_confidence": 1e-9, "confidence": 0.9999999, "prior_lower": 1e-9, "prior_upper": 1e7}):
        args = {"prior_step_seconds": 1.0, "prior_lower": 0.5, "prior_upper": 2.0, "total_steps": 100, **kw}
        c.call(f"OnlineEstimator{list(kw)}", lambda a=args: plan.OnlineEstimator(**a).estimate(),
               check=lambda r: [r.total, r.total_lower, r.total_upper])
    for v in (10**400, 2**63, np.uint8(200), -(10**5000), float("inf")):
        c.call("check_positive_int", lambda v=v: check_positive_int(v, "n", "bench"))
        c.call("check_positive_float", lambda v=v: check_positive_float(v, "x", "bench"))
    for kw in ({"arrival_rate": 1e-308}, {"service_time": 1e308}):
        args = {"arrival_rate": 2.0, "service_time": 1.0, "servers": 3, "n_arrivals": 200, **kw}
        c.call(f"simulate_queue{kw}", lambda a=args: plan.simulate_queue(**a),
               check=lambda r: [r.mean_wait, r.mean_response, r.utilisation])
    c.call("simulate_queue numeric text", lambda: plan.simulate_queue(
        servers=1, jobs={"arrival": [5.0, "1"], "duration": [1.0, 10.0]}), check=lambda r: [r.mean_wait])
    for g in (float("inf"), 1.5):
        c.call(f"estimate_cost gpu_count={g}", lambda g=g: plan.estimate_cost(seconds=3600, gpu_type="cpu",
                                                                             gpu_count=g), check=lambda r: [r.dollars])
    c.call("OnlineEstimator prior_confidence=1e-308", lambda: plan.OnlineEstimator(
        1.0, 0.5, 2.0, 100, prior_confidence=1e-308).estimate(), check=lambda r: [r.total, r.total_upper])
    return {}


def attack_plan_and_analysis(c: Counts) -> dict:
    """scaling_from_model with NumPy integers and out-of-range batches; thresholds of scaling and diagnose."""
    import numpy as np
    import pandas as pd

    from perfmodel import analysis, plan

    table = lambda r: list(r.select_dtypes("number").to_numpy(dtype=float).ravel())  # noqa: E731
    for kw in ({"batch_size": np.uint8(200), "gpu_counts": (1, 2, 8)},
               {"batch_size": np.uint8(200), "gpu_counts": (300,), "mode": "strong"},
               {"batch_size": 10**400}, {"batch_size": "8"}, {"threshold": float("nan")}):
        args = {"batch_size": 8, "gpu_type": "cpu", "gpu_counts": (1, 2), **kw}
        c.call(f"scaling_from_model{list(kw)}", lambda a=args: plan.scaling_from_model("gpt-s", **a), check=table)
    runs = pd.DataFrame([{"model": "m", "params": 10**6, "batch_size": 8, "gpu_count": n, "gpu_type": "A100",
                          "step_time_s": 0.1 * n ** 0.1} for n in (1, 2, 4)])
    for v in (10**400, "3", None, float("nan")):
        c.call(f"scaling threshold={v!r}", lambda v=v: analysis.scaling(runs, threshold=v), check=table)
        for name in ("host_peak_flops", "util_threshold", "gap_threshold", "efficiency_threshold"):
            # utilisation columns are missing (NaN) in these runs: the computed ones must be finite
            c.call(f"diagnose {name}={v!r}", lambda n=name, v=v: analysis.diagnose(runs, **{n: v}),
                   check=lambda r: list(r.table[["achieved_tflops", "mfu"]].to_numpy(dtype=float).ravel()))
    return {}


def attack_predict(c: Counts) -> dict:
    """The fuzz's predict_training_time overflows (steps, params and confidence beyond the float range), a bool
    count, and a linear fit crossing zero at a measured model (counted in ``zero_answers``)."""
    import numpy as np
    import pandas as pd

    import perfmodel

    c.call("predict steps=10**400", lambda: perfmodel.predict_training_time(
        "gpt-m", batch_size=32, gpu_type="cpu", steps=10**400), check=lambda r: [r.seconds, r.lower, r.upper])
    c.call("predict params=10**400", lambda: perfmodel.predict_training_time(
        {"params": 10**400}, batch_size=8, gpu_type="cpu", steps=10), check=lambda r: [r.seconds, r.upper])
    c.call("predict confidence=10**400", lambda: perfmodel.predict_training_time(
        "gpt-m", batch_size=32, gpu_type="cpu", steps=10, confidence=10**400), check=lambda r: [r.seconds])
    c.call("predict gpu_count=True", lambda: perfmodel.predict_training_time(
        "gpt-m", batch_size=32, gpu_type="cpu", gpu_count=True, steps=10), check=lambda r: [r.seconds])
    # method='linear' crossing zero at a small model measured 4 times at 0.039 s: 0 s per step is no answer
    rows = [{"model": "small", "params": 1000, "batch_size": 8, "gpu_count": 1, "gpu_type": "cpu",
             "step_time_s": 0.039 + 0.0005 * i} for i in range(4)]
    rng = np.random.default_rng(0)
    for m in range(6):
        params = int(10 ** rng.uniform(6, 8))
        rows += [{"model": f"big{m}", "params": params, "batch_size": b, "gpu_count": n, "gpu_type": "cpu",
                  "step_time_s": 1e-9 * params * b * n} for b in (8, 16, 32, 64) for n in (1, 2)]
    r = c.call("predict method=linear at a measured small model", lambda: perfmodel.predict_training_time(
        "small", batch_size=8, gpu_type="cpu", steps=100, history=pd.DataFrame(rows), method="linear"),
        check=lambda r: [r.seconds])
    return {"zero_answers": int(r is not None and not r.step_seconds > 0)}


def attack_cli(c: Counts, tmp: Path) -> dict:
    """One line per error, nothing created, a closed pipe quiet."""
    bad = 0
    cmds = [["--bogus"], ["predict", "--bogus"], ["import", "mlperf", str(MLPERF), "-o", str(tmp / "no" / "x.csv")],
            ["recommend", "--model", "gpt-m", "--batch-size", "32", "--gpu-types", "cpu", "--gpu-counts", "1",
             "--steps", "10", "--prices", str(tmp / "missing.csv")],
            ["cache", "clear"]]
    (tmp / "cachedir" / "x.perfmodel").mkdir(parents=True)
    env = {**os.environ, "PERFMODEL_CACHE_DIR": str(tmp / "cachedir")}
    for cmd in cmds:
        out = subprocess.run([sys.executable, "-m", "perfmodel", *cmd], capture_output=True, text=True, env=env,
                             timeout=300)
        c.calls += 1
        err = out.stderr
        if "Traceback" in err or err.count("\n") > 1 or "Errno" in err or "perfmodel: perfmodel" in err \
                or "error: perfmodel" in err:
            c.tracebacks += 1
            c.examples.append(f"cli {cmd[:2]}: {err[:160]!r}")
    bad += int((tmp / "no").exists())
    hist = tmp / "cli-runs.csv"
    hist.write_text("model,params,batch_size,gpu_count,gpu_type,step_time_s\n"
                    + "".join(f"m{m},{10**5 * (m + 1)},{b},1,A100,{0.01 * (m + 1) * b}\n"
                              for m in range(3) for b in (8, 16, 32)))
    subprocess.run([sys.executable, "-m", "perfmodel", "fit", str(hist), "--method", "loglinear", "-o",
                    str(tmp / "cli.perfmodel")], capture_output=True, env=env, timeout=300)
    for cmd in (["hardware"], ["summary", str(tmp / "cli.perfmodel")]):  # `perfmodel ... | head`
        proc = subprocess.Popen([sys.executable, "-m", "perfmodel", *cmd], stdout=subprocess.PIPE,
                                stderr=subprocess.PIPE, env=env)
        proc.stdout.close()
        err = proc.stderr.read().decode()
        proc.wait(timeout=120)
        c.calls += 1
        if err or proc.returncode != 141:
            c.tracebacks += 1
            c.examples.append(f"cli {cmd[0]} into a closed pipe: rc {proc.returncode}, {err[:160]!r}")
    return {"folders created by -o into a missing folder": bad}


def run_all(*, include_predict: bool = True) -> dict:
    """Every attack; the counts by name, plus ``calls`` and ``examples``. Fitted models go to a temporary cache
    unless ``PERFMODEL_CACHE_DIR`` is set (the variable is restored afterwards)."""
    c = Counts()
    extra: dict = {}
    p = Counts()
    zero = 0
    old_cache = os.environ.get("PERFMODEL_CACHE_DIR")
    with tempfile.TemporaryDirectory() as d:
        tmp = Path(d)
        os.environ.setdefault("PERFMODEL_CACHE_DIR", str(tmp / "cache"))
        try:
            extra.update(attack_importers(c, tmp))
            extra.update(attack_duplicates(c, tmp))
            extra.update(attack_devices(c, tmp))
            extra.update(attack_numerics(c))
            extra.update(attack_plan_and_analysis(c))
            extra.update(attack_cli(c, tmp))
            zero = attack_predict(p)["zero_answers"] if include_predict else 0
        finally:
            if old_cache is None:
                os.environ.pop("PERFMODEL_CACHE_DIR", None)
            else:
                os.environ["PERFMODEL_CACHE_DIR"] = old_cache
    return {"calls": c.calls + p.calls,
            "tracebacks (exceptions other than ValueError/TypeError/OSError)": c.tracebacks,
            "NaN/inf results": c.nan + p.nan, **extra,
            "tracebacks in predict_training_time (steps, params, confidence = 10**400; gpu_count=True)": p.tracebacks,
            "answers of 0 s per step (method='linear' crossing zero at a measured model)": zero,
            "examples": c.examples + p.examples}


def report_lines(counts: dict, seconds: float) -> list[str]:
    """The printed report of :func:`run_all`'s counts: a header line, one count per line, then examples."""
    counts = dict(counts)
    examples = counts.pop("examples")
    calls = counts.pop("calls")
    lines = [f"faults_inputs: {calls} attacks on importers, device files, numerics, plan/analysis, cache key and "
             f"CLI ({seconds:.0f} s)"]
    lines += [f"  {n:6d}  {name}" for name, n in counts.items()]
    lines += [f"  example: {e}" for e in examples]
    return lines


def main(argv=None) -> int:
    import argparse

    p = argparse.ArgumentParser(description="Fault attacks on perfmodel's inputs (issue 26 #7-#12): one count "
                                "per line, each must be 0.")
    p.add_argument("--output", help="also write the report to this file")
    args = p.parse_args(argv)
    t0 = time.perf_counter()
    counts = run_all()
    lines = report_lines(counts, time.perf_counter() - t0)
    print("\n".join(lines))
    if args.output:
        Path(args.output).parent.mkdir(parents=True, exist_ok=True)
        Path(args.output).write_text("\n".join(lines) + "\n", encoding="utf-8")
    failures = {k: v for k, v in counts.items() if k not in ("calls", "examples")}
    return 0 if all(n == 0 for n in failures.values()) else 1


if __name__ == "__main__":
    sys.exit(main())
