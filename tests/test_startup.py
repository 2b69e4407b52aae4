"""What a warm prediction does not do (issue 24): read the run history when a stored model answers, or import
modules only a fit, a report or a plot needs. Behaviour, not timing (benchmarks/latency.py times it)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import warnings

import numpy as np
import pytest
from conftest import make_history

import perfmodel
from perfmodel import fitting, persistence, predict
from perfmodel.predict import _memo

#: Modules that ``import perfmodel`` must not import (it is lazy: the CLI and every API load what they use).
HEAVY = ("numpy", "pandas", "scipy", "sklearn", "statsmodels", "pyarrow", "matplotlib", "torch", "joblib")
#: Modules a warm CLI ``predict`` must not import: the history's reader (a stored model answers), the fitting
#: machinery, reports and plots, and the writers of files it does not write.
NOT_FOR_A_WARM_PREDICT = ("perfmodel.io", "perfmodel._atomic", "perfmodel.plan", "perfmodel.report",
                          "perfmodel.plot", "perfmodel.evaluate", "perfmodel.analysis", "perfmodel.measure",
                          "sklearn.ensemble", "sklearn.model_selection", "sklearn.tree", "sklearn.linear_model",
                          "statsmodels.regression", "pyarrow.parquet", "matplotlib", "torch", "tqdm",
                          "platformdirs", "filelock")


def _subprocess_modules(code: str, env=None) -> list[str]:
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300,
                         env={**os.environ, **(env or {})})
    assert out.returncode == 0, out.stderr
    return json.loads(out.stdout.strip().splitlines()[-1])


def test_import_perfmodel_imports_nothing_heavy():
    found = _subprocess_modules("import json, sys, perfmodel\n"
                                f"print(json.dumps(sorted(m for m in sys.modules if m.split('.')[0] in {HEAVY!r})))")
    assert found == []


@pytest.fixture
def own_history(tmp_path, monkeypatch):
    """A history file of one's own, with a private model cache and no Predictors kept from other tests."""
    path = tmp_path / "runs.csv"
    make_history().to_csv(path, index=False)
    monkeypatch.setenv("PERFMODEL_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.setattr(_memo, "_PREDICTORS", type(_memo._PREDICTORS)())
    return path


def _no_reading(monkeypatch):
    """Make any read of a history fail the test."""
    import perfmodel.io as io_module

    def refuse(*args, **kwargs):
        raise AssertionError("the history was read although a stored model answers")

    monkeypatch.setattr(predict, "read_history", refuse)
    monkeypatch.setattr(io_module, "load_runs", refuse)


QUERIES = [dict(model="m1", batch_size=16, gpu_count=2, gpu_type="A100", steps=100),  # seen
           dict(model="m1", batch_size=24, gpu_count=2, gpu_type="A100", steps=100),  # new batch
           dict(model={"params": 3e5, "flops_per_sample": 5e7}, batch_size=16, gpu_type="A100", steps=100)]


def test_a_warm_predict_answers_from_the_stored_models_without_reading_the_history(own_history, monkeypatch):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        cold = [perfmodel.predict_training_time(history=str(own_history), method="physics", **q).to_dict()
                for q in QUERIES]
        cold_many = perfmodel.predict_many(_frame(), history=str(own_history), method="physics")
    assert {c["query_kind"] for c in cold} == {"seen", "new_batch", "new_model"}
    monkeypatch.setattr(_memo, "_PREDICTORS", type(_memo._PREDICTORS)())  # a fresh process, as the CLI is
    _no_reading(monkeypatch)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        warm = [perfmodel.predict_training_time(history=str(own_history), method="physics", **q).to_dict()
                for q in QUERIES]
        warm_many = perfmodel.predict_many(_frame(), history=str(own_history), method="physics")
    assert warm == cold
    assert warm_many.equals(cold_many)


def _frame():
    import pandas as pd

    return pd.DataFrame({"model": ["m1", "m1", "m2"], "batch_size": [16, 24, 8], "gpu_count": [2, 2, 1],
                         "gpu_type": ["A100", "A100", "A100"], "steps": [10, 10, 10]})


def test_a_warm_predict_still_reads_a_history_that_mixes_own_and_bundled_runs(own_history, monkeypatch):
    # which runs answer (the caller's own alone, or all) is known only from the runs: no shortcut there
    p = predict.BasePredictor([str(own_history), "cpu"], method="physics")
    assert p._backend.stored("seen", None) is None
    _no_reading(monkeypatch)
    with pytest.raises(AssertionError, match="history was read"):
        p.predict("m1", batch_size=16, gpu_count=2, gpu_type="A100", steps=100)


def test_the_cli_predict_path_imports_only_what_a_prediction_needs(own_history):
    args = ["predict", "--model", "m1", "--batch-size", "16", "--gpu-count", "2", "--gpu-type", "A100",
            "--steps", "100", "--method", "physics", "--history", str(own_history)]
    cold = subprocess.run([sys.executable, "-m", "perfmodel", *args], capture_output=True, text=True, timeout=300)
    assert cold.returncode == 0, cold.stderr  # fits and caches the model
    code = ("import contextlib, io, json, sys\nfrom perfmodel import cli\n"
            "with contextlib.redirect_stdout(io.StringIO()) as out:\n"
            f"    status = cli.main({args!r})\n"
            "assert status == 0 and out.getvalue() == " + repr(cold.stdout) + ", out.getvalue()\n"
            f"print(json.dumps(sorted(m for m in sys.modules if m in {NOT_FOR_A_WARM_PREDICT!r} or "
            f"m.split('.')[0] in {NOT_FOR_A_WARM_PREDICT!r})))")
    assert _subprocess_modules(code) == []


@pytest.mark.parametrize("entry", json.loads((fitting.shipped_dir() / "index.json").read_text())["models"],
                         ids=lambda e: f"{e['history']}-{e['kind']}-{e['method']}")
def test_every_shipped_model_passes_the_load_time_prediction_it_is_loaded_without(entry):
    # fitting.load_shipped skips load_model's probe prediction for perfmodel's own files: this test makes it
    path = fitting.shipped_dir() / entry["file"]
    probed = persistence.load_model(path)
    unprobed = persistence.load_model(path, probe=False)
    if probed.method == "layout":  # a transformer job of the fitted shape (what the probe asks)
        q = persistence.probe_query(probed)
    else:
        row = probed.configs_.iloc[[0]]
        q = probed.models_.loc[[str(row["model"].iloc[0])], ["params", "flops_per_sample"]].reset_index()
        q = q.assign(batch_size=row["batch_size"].to_numpy(), gpu_count=row["gpu_count"].to_numpy(),
                     gpu_type=row["gpu_type"].to_numpy(), precision=probed.precisions_[0], steps=1)
    a, b = probed.predict_interval(q), unprobed.predict_interval(q)
    assert np.isfinite(a[["step_time_s", "step_lower", "step_upper"]].to_numpy(dtype=float)).all()
    assert a.equals(b)
