"""The disk cache of fitted models: keyed by content (history and device table), safe format, reused across
processes, clearable, and loud (once) when it cannot be written."""

from __future__ import annotations

import os
import subprocess
import sys
import warnings

import pytest
from conftest import make_history

from perfmodel import cache, fitting, hardware
from perfmodel.exceptions import CacheWarning
from perfmodel.history import read_history


@pytest.fixture()
def history_file(tmp_path):
    path = tmp_path / "runs.csv"
    make_history().to_csv(path, index=False)
    return path


@pytest.fixture()
def clean_registry():
    specs, aliases = dict(hardware._lookup.USER_SPECS), dict(hardware._lookup.USER_ALIASES)
    yield
    hardware._lookup.USER_SPECS.clear()
    hardware._lookup.USER_SPECS.update(specs)
    hardware._lookup.USER_ALIASES.clear()
    hardware._lookup.USER_ALIASES.update(aliases)
    hardware._lookup.CACHE.clear()


class TestCache:
    def test_fit_is_stored_and_reused(self, history_file, tmp_path, monkeypatch):
        monkeypatch.setenv("PERFMODEL_CACHE_DIR", str(tmp_path / "c"))
        loaded = read_history(str(history_file))
        first = fitting.fit_cached(loaded, "loglinear", "seen")
        assert cache.info()["models"] == 1
        again = fitting.fit_cached(read_history(str(history_file)), "loglinear", "seen")  # from disk
        runs = make_history().head(5)
        assert again is not first and again.predict(runs) == pytest.approx(first.predict(runs))
        assert again.provenance_ == first.provenance_
        assert cache.info()["models"] == 1

    def test_key_changes_with_content_method_and_kind(self, history_file):
        digest = read_history(str(history_file)).digest
        k = cache.cache_key(digest, "physics", "seen")
        assert k == cache.cache_key(digest, "physics", "seen")
        assert k != cache.cache_key(digest, "loglinear", "seen")
        assert k != cache.cache_key(digest, "physics", "new_model")
        assert cache.cache_key(digest, "physics", "seen", 6) != cache.cache_key(digest, "physics", "seen", 7) != k
        make_history(seed=1).to_csv(history_file, index=False)
        assert k != cache.cache_key(read_history(str(history_file)).digest, "physics", "seen")

    @pytest.mark.usefixtures("clean_registry")
    def test_key_changes_with_the_device_table(self, history_file):
        """Issue 26 #7: replacing a device's figures (here H100's, as PERFMODEL_DEVICES can) changes the key."""
        digest = read_history(str(history_file)).digest
        before = cache.cache_key(digest, "physics", "seen")
        h100 = hardware.get_spec("H100").to_dict()
        h100["bf16_tflops"] = h100["bf16_tflops"] / 2
        hardware.register_device(**{k: v for k, v in h100.items() if k != "name"}, name=h100["name"], replace=True)
        replaced = cache.cache_key(digest, "physics", "seen")
        assert replaced != before
        hardware.unregister_device(h100["name"])
        assert cache.cache_key(digest, "physics", "seen") == before

    def test_key_holds_devices_from_the_environment(self, history_file, tmp_path):
        """The same history and method in two processes whose PERFMODEL_DEVICES files differ: two keys."""
        digest = read_history(str(history_file)).digest
        f = tmp_path / "d.csv"
        code = f"from perfmodel import cache; print(cache.cache_key({digest!r}, 'physics', 'seen'))"
        keys = []
        for bf16 in ("100", "200"):
            f.write_text(f"name,vendor,source,bf16_tflops,replace\nH100-SXM5-80GB,nvidia,test,{bf16},true\n")
            out = subprocess.run([sys.executable, "-c", code], env={**os.environ, "PERFMODEL_DEVICES": str(f)},
                                 capture_output=True, text=True, timeout=120)
            assert out.returncode == 0, out.stderr
            keys.append(out.stdout.strip())
        assert keys[0] != keys[1] and keys[0] != cache.cache_key(digest, "physics", "seen")

    def test_damaged_entry_is_refitted(self, history_file, tmp_path, monkeypatch):
        monkeypatch.setenv("PERFMODEL_CACHE_DIR", str(tmp_path / "c"))
        loaded = read_history(str(history_file))
        key = cache.cache_key(loaded.digest, "loglinear", "seen")
        (tmp_path / "c").mkdir()
        (tmp_path / "c" / f"{key}.perfmodel").write_bytes(b"PK\x03\x04 torn")
        model = fitting.fit_cached(loaded, "loglinear", "seen")
        assert model.n_runs_ == len(make_history())

    def test_off_and_clear(self, history_file, tmp_path, monkeypatch):
        monkeypatch.setenv("PERFMODEL_CACHE_DIR", "off")
        assert cache.cache_dir() is None and cache.info()["enabled"] is False
        monkeypatch.setenv("PERFMODEL_CACHE_DIR", str(tmp_path / "c"))
        fitting.fit_cached(read_history(str(history_file)), "loglinear", "seen")
        out = subprocess.run([sys.executable, "-m", "perfmodel", "cache", "info"], capture_output=True, text=True)
        assert out.returncode == 0 and "1 cached model" in out.stdout
        out = subprocess.run([sys.executable, "-m", "perfmodel", "cache", "clear"], capture_output=True, text=True)
        assert out.returncode == 0 and "removed 1" in out.stdout and cache.info()["models"] == 0


class TestCacheDirectory:
    def test_platform_directory_through_platformdirs(self, monkeypatch, tmp_path):
        import platformdirs

        monkeypatch.delenv("PERFMODEL_CACHE_DIR", raising=False)
        monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
        assert cache.cache_dir() == __import__("pathlib").Path(platformdirs.user_cache_dir("perfmodel",
                                                                                           appauthor=False))
        if sys.platform.startswith("linux"):
            assert cache.cache_dir() == tmp_path / "xdg" / "perfmodel"

    def test_env_var_wins(self, monkeypatch, tmp_path):
        monkeypatch.setenv("PERFMODEL_CACHE_DIR", str(tmp_path / "mine"))
        assert cache.cache_dir() == tmp_path / "mine"
        for off in ("off", "OFF", "", "none", "0"):
            monkeypatch.setenv("PERFMODEL_CACHE_DIR", off)
            assert cache.cache_dir() is None

    def test_unwritable_directory_warns_once(self, history_file, tmp_path, monkeypatch):
        """Issue 25 #6: an unwritable cache no longer refits silently on every call."""
        blocker = tmp_path / "file"
        blocker.write_text("not a directory")
        monkeypatch.setenv("PERFMODEL_CACHE_DIR", str(blocker / "cache"))  # mkdir fails: a file is in the way
        monkeypatch.setattr(cache, "_WARNED", set())
        loaded = read_history(str(history_file))
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            fitting.fit_cached(loaded, "loglinear", "seen")
            fitting.fit_cached(loaded, "loglinear", "seen")
        mine = [w for w in caught if issubclass(w.category, CacheWarning)]
        assert len(mine) == 1
        assert str(blocker / "cache") in str(mine[0].message) and "PERFMODEL_CACHE_DIR" in str(mine[0].message)

    def test_clear_skips_a_directory_named_like_an_entry(self, tmp_path, monkeypatch):
        """Issue 26 #12: `cache clear` stopped at a directory named *.perfmodel."""
        monkeypatch.setenv("PERFMODEL_CACHE_DIR", str(tmp_path))
        (tmp_path / "a.perfmodel").mkdir()
        (tmp_path / "b.perfmodel").write_bytes(b"x")
        (tmp_path / "c.perfmodel").write_bytes(b"yy")
        assert cache.info()["models"] == 2 and cache.info()["bytes"] == 3
        assert cache.clear() == 2
        assert (tmp_path / "a.perfmodel").is_dir() and not (tmp_path / "b.perfmodel").exists()
        out = subprocess.run([sys.executable, "-m", "perfmodel", "cache", "clear"], capture_output=True, text=True,
                             env={**os.environ, "PERFMODEL_CACHE_DIR": str(tmp_path)}, timeout=120)
        assert out.returncode == 0 and "removed 0" in out.stdout, out.stderr


def test_a_cache_miss_validates_the_history_once(tmp_path, monkeypatch):
    import perfmodel
    import perfmodel.io as io_module
    from perfmodel.predict import _memo

    path = tmp_path / "h.csv"
    make_history().to_csv(path, index=False)
    monkeypatch.setenv("PERFMODEL_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.setattr(_memo, "_PREDICTORS", type(_memo._PREDICTORS)())
    calls = []
    original = io_module.validate_runs
    monkeypatch.setattr(io_module, "validate_runs", lambda *a, **k: calls.append(1) or original(*a, **k))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        perfmodel.predict_training_time("m1", batch_size=16, gpu_count=2, gpu_type="A100", steps=10,
                                        history=str(path), method="loglinear")
    assert len(calls) == 1
