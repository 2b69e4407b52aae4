import subprocess
import sys

import perfmodel

#: The public API as documented in the README ("Python API").
DOCUMENTED = {
    "predict_training_time", "predict_many", "fit", "TrainingTimePrediction", "TrainingTimeModel", "load_model",
    "save_model", "load_runs", "save_runs", "append_runs", "validate_runs", "get_spec", "resolve_gpu_type",
    "load_bundled_runs", "record", "Predictor", "PerfModelError", "SchemaError", "UnknownHardwareError", "NotFittedError",
    "PredictionError",
    "ExtrapolationWarning", "DataQualityWarning", "__version__",
}


def test_all_is_documented_api():
    assert set(perfmodel.__all__) == DOCUMENTED


def test_every_export_resolves():
    for name in perfmodel.__all__:
        assert getattr(perfmodel, name) is not None


def test_import_and_predict_do_not_import_torch():
    code = ("import sys, perfmodel; import perfmodel.predict, perfmodel.models, perfmodel.cli; "
            "import perfmodel.importers, perfmodel.importers.mlflow, perfmodel.importers.hf_output; "
            "import perfmodel.integrations; "
            "assert 'torch' not in sys.modules, 'torch imported'; print('ok')")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "ok"


def test_unknown_attribute():
    import pytest

    with pytest.raises(AttributeError, match="no attribute 'nope'"):
        _ = perfmodel.nope


def test_the_version_is_the_one_pyproject_declares():
    import pathlib
    import re

    import perfmodel
    from perfmodel._version import __version__

    text = (pathlib.Path(__file__).resolve().parents[1] / "pyproject.toml").read_text()
    assert perfmodel.__version__ == __version__ == re.search(r'^version = "([^"]+)"', text, re.M).group(1)
