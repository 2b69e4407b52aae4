"""The fitted defaults shipped in perfmodel/data/fitted (scripts/build_fitted_defaults.py): current, used without
fitting, never used when stale, and used with the disk cache off."""

from __future__ import annotations

import importlib
import json
import os
import subprocess
import sys
import time

import pytest

import perfmodel
from perfmodel import fitting
from perfmodel.history import read_history
from perfmodel.kinds import KIND_NAMES

REBUILD = "run scripts/build_fitted_defaults.py"
INDEX = fitting.shipped_dir() / "index.json"


@pytest.fixture(scope="module")
def index() -> dict:
    if not INDEX.is_file():
        pytest.fail(f"no shipped fitted defaults ({INDEX} is missing): {REBUILD}")
    return json.loads(INDEX.read_text())


@pytest.fixture(scope="module")
def digests() -> dict:
    return {name: read_history(name).digest for name in fitting.SHIPPED_HISTORIES}


def _entry(index, history, kind, method=None):
    method = method or fitting.SHIPPED_HISTORIES[history]
    for e in index["models"]:
        if (e["history"], e["kind"], e["method"]) == (history, kind, method):
            return e
    return None


class TestShippedFilesCurrent:
    def test_every_kind_shipped_or_skipped_with_a_reason(self, index):
        for name in fitting.SHIPPED_HISTORIES:
            for kind in KIND_NAMES:
                skipped = [s for s in index["skipped"] if (s["history"], s["kind"]) == (name, kind)]
                assert _entry(index, name, kind) is not None or (skipped and skipped[0]["reason"]), (
                    f"no shipped model for history {name!r}, kind {kind!r}, and no reason to skip it: {REBUILD}")

    def test_the_extra_fits_are_shipped(self, index):
        for name, method, kind in fitting.SHIPPED_EXTRA:
            assert _entry(index, name, kind, method) is not None, (
                f"no shipped {method} model for history {name!r}, kind {kind!r} (fitting.SHIPPED_EXTRA): {REBUILD}")

    def test_no_kind_left_out_for_want_of_a_format(self, index):
        # a kind whose auto winner the safe format cannot hold is fitted on first use (and cannot be cached either)
        gaps = [f"{s['history']}/{s['kind']}: {s['reason']}" for s in index["skipped"] if s.get("unsaveable")]
        assert not gaps, ("shipped fitted defaults missing because the safe model format cannot hold the chosen "
                          f"method: {'; '.join(gaps)}. Teach perfmodel.persistence that class, then {REBUILD}")

    def test_every_shipped_file_is_current(self, index, digests):
        stale = []
        for e in index["models"]:
            want = fitting.shipped_key(digests[e["history"]], e["method"], e["kind"])
            if e["key"] != want or e["file"] != f"{want}.perfmodel":
                stale.append(f"{e['history']}/{e['kind']}")
            elif not (fitting.shipped_dir() / e["file"]).is_file():
                stale.append(f"{e['history']}/{e['kind']} (file missing)")
        assert not stale, (f"shipped fitted defaults are stale for {', '.join(stale)} (the model code, bundled "
                           f"data, device table or version changed since they were built): {REBUILD}")

    def test_no_other_files(self, index):
        listed = {e["file"] for e in index["models"]}
        extra = sorted(p.name for p in fitting.shipped_dir().glob("*.perfmodel") if p.name not in listed)
        assert not extra, f"files in {fitting.shipped_dir()} not in index.json: {extra}; {REBUILD}"

    def test_each_loads_in_milliseconds(self, index, digests):
        # a generous bound (a fit takes tens of seconds): the benchmark measures it (benchmarks/latency.py)
        e = index["models"][0]
        t = time.perf_counter()
        model = fitting.load_shipped(digests[e["history"]], e["method"], e["kind"])
        assert model is not None, REBUILD
        assert time.perf_counter() - t < 2.0
        assert model.method == e["chosen"]


class TestShippedUsed:
    def test_bundled_query_without_fitting(self, monkeypatch):
        def no_fit(*args, **kwargs):
            raise AssertionError(f"fit_history was called: the shipped model was not used ({REBUILD})")

        monkeypatch.setattr(fitting, "fit_history", no_fit)
        monkeypatch.setattr(importlib.import_module("perfmodel.predict._backend"), "fit_history", no_fit)
        p = perfmodel.Predictor()
        r = p.predict("gpt-m", batch_size=32, gpu_count=2, gpu_type="cpu", steps=20_000)
        assert r.lower < r.seconds < r.upper
        assert r.provenance == ["bundled:runs_cpu.csv"]

    def test_cache_off_still_uses_shipped(self, monkeypatch):
        monkeypatch.setenv("PERFMODEL_CACHE_DIR", "off")

        def no_fit(*args, **kwargs):
            raise AssertionError(f"fit_history was called with the cache off ({REBUILD})")

        monkeypatch.setattr(fitting, "fit_history", no_fit)
        loaded = read_history("cpu")
        model = fitting.fit_cached(loaded, "auto", "new_batch")
        assert model.auto_kind_ == "new_batch"

    def test_stale_key_is_not_used(self, monkeypatch, tmp_path):
        # another fit format: another key, so no shipped file matches and the fit happens as before
        monkeypatch.setattr(fitting, "FIT_FORMAT", fitting.FIT_FORMAT + 1000)
        monkeypatch.setenv("PERFMODEL_CACHE_DIR", str(tmp_path))
        loaded = read_history("cpu")
        assert fitting.load_shipped(loaded.digest, "auto", "seen") is None
        calls = []

        def fake_fit(history, method, *, kind):
            calls.append((method, kind))
            raise RuntimeError("fitted")

        monkeypatch.setattr(fitting, "fit_history", fake_fit)
        with pytest.raises(RuntimeError, match="fitted"):
            fitting.fit_cached(loaded, "auto", "seen")
        assert calls == [("auto", "seen")]

    def test_key_changes_with_what_shapes_a_fit(self, monkeypatch):
        base = fitting.shipped_key("d" * 64, "auto", "seen")
        assert fitting.shipped_key("e" * 64, "auto", "seen") != base
        assert fitting.shipped_key("d" * 64, "gbm", "seen") != base
        assert fitting.shipped_key("d" * 64, "auto", "new_model") != base
        monkeypatch.setattr(fitting, "FIT_FORMAT", fitting.FIT_FORMAT + 1)
        assert fitting.shipped_key("d" * 64, "auto", "seen") != base
        monkeypatch.undo()
        monkeypatch.setattr(importlib.import_module("perfmodel.cache"), "__version__", "999.0")
        assert fitting.shipped_key("d" * 64, "auto", "seen") != base

    def test_own_history_still_fits_and_caches(self, monkeypatch, tmp_path, history):
        monkeypatch.setenv("PERFMODEL_CACHE_DIR", str(tmp_path))
        path = tmp_path / "runs.csv"
        history.to_csv(path, index=False)
        loaded = read_history(str(path))
        assert fitting.load_shipped(loaded.digest, "loglinear", "seen") is None
        model = fitting.fit_cached(loaded, "loglinear", "seen")
        assert model.n_runs_ == len(history)
        assert list(tmp_path.glob("*.perfmodel"))


@pytest.mark.slow
@pytest.mark.parametrize("history", sorted(fitting.SHIPPED_HISTORIES))
def test_shipped_predictions_are_what_the_code_fits_now(index, digests, history):
    """A change that alters fits must bump FIT_FORMAT (and rebuild): the shipped model of each history's first
    kind predicts its own runs as a refit with today's code does."""
    e = next(e for e in index["models"] if e["history"] == history)
    shipped = fitting.load_shipped(digests[history], e["method"], e["kind"])
    assert shipped is not None, REBUILD
    loaded = read_history(history)
    refit = fitting.fit_history(loaded, e["method"], kind=e["kind"])
    runs = loaded.runs.sample(min(200, len(loaded.runs)), random_state=0)
    assert refit.method == shipped.method, f"auto chooses {refit.method} now, {shipped.method} when built: {REBUILD}"
    import numpy as np

    assert np.allclose(refit.predict(runs), shipped.predict(runs), rtol=1e-6), (
        f"the {history} fit ({e['method']}, {e['kind']}) predicts otherwise than the shipped one: the fitting code "
        f"changed what fits give. Bump perfmodel.fitting.FIT_FORMAT and {REBUILD}")


class TestProgress:
    def test_off_in_tests(self):
        assert not fitting._progress_on()

    def test_env_switch(self, monkeypatch):
        monkeypatch.setenv("PERFMODEL_PROGRESS", "1")
        assert fitting._progress_on()
        monkeypatch.setenv("PERFMODEL_PROGRESS", "0")
        assert not fitting._progress_on()

    def test_cli_prints_no_progress_when_not_a_tty(self, tmp_path, history):
        path = tmp_path / "runs.csv"
        history.to_csv(path, index=False)
        env = {k: v for k, v in os.environ.items() if k not in ("PYTEST_CURRENT_TEST", "PERFMODEL_PROGRESS")}
        res = subprocess.run([sys.executable, "-m", "perfmodel", "predict", "--model", "m0", "--batch-size", "8",
                              "--gpu-type", "A100", "--steps", "10", "--history", str(path)],
                             capture_output=True, text=True, env=env, timeout=300)
        assert res.returncode == 0, res.stderr
        assert "it/s" not in res.stderr and "fit/s" not in res.stderr and "s/fit" not in res.stderr

    def test_tqdm_not_imported_by_import(self):
        res = subprocess.run([sys.executable, "-c", "import sys, perfmodel, perfmodel.fitting, perfmodel.predict; "
                              "print('tqdm' in sys.modules)"], capture_output=True, text=True, timeout=120)
        assert res.stdout.strip() == "False", res.stderr
