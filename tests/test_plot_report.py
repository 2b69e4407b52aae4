"""Plots, the notebook, the examples and the HTML report, on the bundled real runs."""

import base64
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

matplotlib = pytest.importorskip("matplotlib")
matplotlib.use("Agg", force=True)
from matplotlib.collections import PolyCollection  # noqa: E402

import perfmodel  # noqa: E402
from perfmodel import plot  # noqa: E402
from perfmodel.evaluate import evaluate  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture(scope="module")
def runs():
    return perfmodel.load_bundled_runs()


@pytest.fixture(scope="module")
def fitted(runs):
    return perfmodel.fit(runs, method="loglinear")


class TestPlots:
    def test_predicted_vs_measured(self, fitted, runs):
        ax = plot.plot_predicted_vs_measured(fitted, runs)
        assert ax.get_xscale() == "log" and ax.get_yscale() == "log"
        lines = [ln for ln in ax.lines if ln.get_label() == "identity"]
        assert len(lines) == 1
        assert len(ax.containers) == runs["family"].nunique()  # one errorbar container per family
        assert sum(len(c.lines[0].get_xdata()) for c in ax.containers) == len(runs)

    def test_residuals_one_panel_per_feature(self, fitted, runs):
        fig = plot.plot_residuals(fitted, runs)
        assert len(fig.axes) == 4
        assert sum(len(c.get_offsets()) for c in fig.axes[0].collections) == len(runs)

    def test_batch_curves_have_points_lines_and_bands(self, fitted, runs):
        ax = plot.plot_batch_curves(fitted, runs, models=["gpt-s", "cnn-m"])
        assert len([c for c in ax.collections if isinstance(c, PolyCollection)]) == 2  # the bands
        assert len(ax.lines) == 2

    def test_scaling_has_ideal_line(self, runs):
        ax = plot.plot_scaling(runs)
        from perfmodel.analysis import scaling

        # one line per model measured at more than one device count, and the ideal
        assert any(ln.get_label() == "ideal" for ln in ax.lines)
        assert len(ax.lines) == scaling(runs)["model"].nunique() + 1 > 2

    def test_cv_summary_has_noise_floor(self, runs):
        ev = evaluate(runs, methods=("loglinear",), splits=("leave-one-batch-size-out",), baselines=False)
        ax = plot.plot_cv_summary(ev)
        assert len(ax.patches) == 1 and any("noise floor" in ln.get_label() for ln in ax.lines)


@pytest.mark.parametrize("script", ["plan_training.py", "fit_own_history.py",
                                    pytest.param("record_training.py", marks=pytest.mark.slow),
                                    pytest.param("plan_llm_job.py", marks=pytest.mark.slow)])
def test_examples_run(script, tmp_path):
    if script == "record_training.py":
        pytest.importorskip("torch")
    proc = subprocess.run([sys.executable, str(ROOT / "examples" / script)], capture_output=True, text=True,
                          timeout=600, cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    assert "PI" in proc.stdout or "hours" in proc.stdout


@pytest.mark.slow
def test_notebook_executes_headless(tmp_path):
    nbformat = pytest.importorskip("nbformat")
    nbclient = pytest.importorskip("nbclient")
    path = ROOT / "notebooks" / "explore_fits.ipynb"
    nb = nbformat.read(path, as_version=4)
    assert all(not c.get("outputs") for c in nb.cells if c.cell_type == "code"), "outputs must be stripped in git"
    nbclient.NotebookClient(nb, timeout=120, kernel_name="python3",
                            resources={"metadata": {"path": str(tmp_path)}}).execute()
    images = [o for c in nb.cells if c.cell_type == "code" for o in c.outputs if "image/png" in o.get("data", {})]
    assert len(images) >= 5


@pytest.mark.slow
def test_llm_notebook_executes_headless(tmp_path):
    nbformat = pytest.importorskip("nbformat")
    nbclient = pytest.importorskip("nbclient")
    pytest.importorskip("matplotlib")
    nb = nbformat.read(ROOT / "notebooks" / "plan_llm_job.ipynb", as_version=4)
    assert all(not c.get("outputs") for c in nb.cells if c.cell_type == "code"), "outputs must be stripped in git"
    nbclient.NotebookClient(nb, timeout=300, kernel_name="python3",
                            resources={"metadata": {"path": str(tmp_path)}}).execute()
    outputs = [o for c in nb.cells if c.cell_type == "code" for o in c.outputs]
    text = "".join(o.get("text", "") for o in outputs if o.get("output_type") == "stream")
    assert sum("image/png" in o.get("data", {}) for o in outputs) >= 3
    assert "6·N_a·seq + 12·L·h·hd·seq²" in text and "per device: fits" in text and "cheapest within" in text
    assert "step: pipeline" in text and "FSDP" in text  # the step's parts, the searched layout


@pytest.fixture(scope="module")
def report(tmp_path_factory):
    out = tmp_path_factory.mktemp("report") / "report.html"
    proc = subprocess.run([sys.executable, "-m", "perfmodel", "report", "--quick", "-o", str(out)],
                          capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr
    return out


@pytest.mark.slow
def test_report_is_one_self_contained_file(report):
    page = report.read_text()
    assert page.startswith("<!DOCTYPE html>") and page.rstrip().endswith("</html>")
    images = re.findall(r'src="data:image/png;base64,([A-Za-z0-9+/=]+)"', page)
    assert len(images) == 5 and all(base64.b64decode(i)[:8] == b"\x89PNG\r\n\x1a\n" for i in images)
    assert "http://" not in page and "https://" not in page  # nothing fetched from the network
    assert "noise floor" in page and "perfmodel fit summary" in page


CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")


@pytest.mark.slow
@pytest.mark.skipif(CHROMIUM is None, reason="chromium is not installed (.ci/run installs it)")
def test_report_renders_its_images_in_chromium(report, tmp_path):
    proc = subprocess.run([CHROMIUM, "--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
                           "--disable-component-update", "--disable-sync", "--no-first-run",
                           f"--user-data-dir={tmp_path / 'profile'}", "--virtual-time-budget=5000", "--dump-dom",
                           report.as_uri()], capture_output=True, text=True, timeout=120)
    loaded = re.search(r'data-images-loaded="(\d+)"', proc.stdout)
    assert loaded is not None, proc.stderr[-500:]
    assert int(loaded.group(1)) == 5


@pytest.mark.slow
def test_report_keeps_to_its_time_budget_and_says_what_it_left_out(tmp_path, history):
    from perfmodel.report import make_report

    lines: list = []
    out = make_report(history, tmp_path / "r.html", methods=("loglinear",), max_seconds=1e-3, progress=lines.append)
    page = out.read_text(encoding="utf-8")
    assert "Not cross-validated within the report's time budget" in page and "leave-one-batch-size-out" in page
    assert lines[0].startswith("fitting loglinear") and any(t.startswith("left out leave-one-batch-size-out")
                                                              for t in lines)
    full = make_report(history, tmp_path / "f.html", methods=("loglinear",), max_seconds=None, progress=lines.append)
    text = full.read_text(encoding="utf-8")
    assert "Not cross-validated" not in text and "leave-one-model-out" in text


@pytest.mark.slow
def test_a_split_past_the_budget_is_stopped(history):
    import time

    from perfmodel.report import _evaluate_within

    t = time.monotonic()
    status, value = _evaluate_within(history, ("auto",), "leave-one-model-out", 1, 0.5)
    assert status == "late" and value is None and time.monotonic() - t < 10
    status, value = _evaluate_within(history, ("loglinear",), "leave-one-model-out", 1, 300)
    assert status == "ok" and set(value.table["split"]) == {"leave-one-model-out"}
    assert _evaluate_within(history, ("loglinear",), "leave-one-gpu-type-out", 1, 300)[0] == "skip"
