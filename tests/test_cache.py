"""The disk cache of fitted models: keyed by content, safe format, reused across processes, clearable."""

from __future__ import annotations

import subprocess
import sys

import pytest

from perfmodel import cache, fitting

from conftest import make_history


@pytest.fixture()
def history_file(tmp_path):
    path = tmp_path / "runs.csv"
    make_history().to_csv(path, index=False)
    return path


class TestCache:
    def test_fit_is_stored_and_reused(self, history_file, tmp_path, monkeypatch):
        monkeypatch.setenv("PERFMODEL_CACHE_DIR", str(tmp_path / "c"))
        fitting._fit_cached.cache_clear()
        first = fitting.fit_files([str(history_file)], "loglinear", "seen")
        assert cache.info()["models"] == 1
        fitting._fit_cached.cache_clear()  # a new process: only the disk cache is left
        again = fitting.fit_files([str(history_file)], "loglinear", "seen")
        runs = make_history().head(5)
        assert again is not first and again.predict(runs) == pytest.approx(first.predict(runs))
        assert again.provenance_ == first.provenance_

    def test_key_changes_with_content_method_and_kind(self, history_file):
        k = cache.cache_key([history_file], "physics", "seen")
        assert k != cache.cache_key([history_file], "loglinear", "seen")
        assert k != cache.cache_key([history_file], "physics", "new_model")
        make_history(seed=1).to_csv(history_file, index=False)
        assert k != cache.cache_key([history_file], "physics", "seen")

    def test_damaged_entry_is_refitted(self, history_file, tmp_path, monkeypatch):
        monkeypatch.setenv("PERFMODEL_CACHE_DIR", str(tmp_path / "c"))
        key = cache.cache_key([str(history_file)], "loglinear", "seen")
        (tmp_path / "c").mkdir()
        (tmp_path / "c" / f"{key}.perfmodel").write_bytes(b"PK\x03\x04 torn")
        fitting._fit_cached.cache_clear()
        model = fitting.fit_files([str(history_file)], "loglinear", "seen")
        assert model.n_runs_ == len(make_history())

    def test_off_and_clear(self, history_file, tmp_path, monkeypatch):
        monkeypatch.setenv("PERFMODEL_CACHE_DIR", "off")
        assert cache.cache_dir() is None and cache.info()["enabled"] is False
        monkeypatch.setenv("PERFMODEL_CACHE_DIR", str(tmp_path / "c"))
        fitting._fit_cached.cache_clear()
        fitting.fit_files([str(history_file)], "loglinear", "seen")
        out = subprocess.run([sys.executable, "-m", "perfmodel", "cache", "info"], capture_output=True, text=True)
        assert out.returncode == 0 and "1 cached model" in out.stdout
        out = subprocess.run([sys.executable, "-m", "perfmodel", "cache", "clear"], capture_output=True, text=True)
        assert out.returncode == 0 and "removed 1" in out.stdout and cache.info()["models"] == 0


def test_a_cache_miss_validates_the_history_once(tmp_path, monkeypatch):
    import warnings

    import perfmodel
    import perfmodel.io as io_module
    from perfmodel import fitting
    from conftest import make_history

    path = tmp_path / "h.csv"
    make_history().to_csv(path, index=False)
    monkeypatch.setenv("PERFMODEL_CACHE_DIR", str(tmp_path / "cache"))
    fitting._fit_cached.cache_clear()
    calls = []
    original = io_module.validate_runs
    monkeypatch.setattr(io_module, "validate_runs", lambda *a, **k: calls.append(1) or original(*a, **k))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        perfmodel.predict_training_time("m1", batch_size=16, gpu_count=2, gpu_type="A100", steps=10,
                                        history=str(path), method="loglinear")
    assert len(calls) == 1
