import argparse
import json
import subprocess
import sys

import pytest
from conftest import assert_one_line_error, cli, make_history

from perfmodel.io import save_runs


def run(*args, check=True):
    proc = subprocess.run([sys.executable, "-m", "perfmodel", *args], capture_output=True, text=True, timeout=300)
    if check:
        assert proc.returncode == 0, proc.stderr
    return proc


@pytest.fixture(scope="module")
def history_csv(tmp_path_factory):
    path = tmp_path_factory.mktemp("cli") / "runs.csv"
    make_history().to_csv(path, index=False)
    return path


class TestEndToEnd:
    def test_fit_then_predict_from_model_file(self, history_csv, tmp_path):
        model = tmp_path / "model.perfmodel"
        out = run("fit", str(history_csv), "-o", str(model)).stdout
        assert "perfmodel fit summary" in out and model.exists()
        out = run("predict", "--model", "m1", "--batch-size", "16", "--gpu-count", "2", "--gpu-type", "A100",
                  "--steps", "1000", "--fitted", str(model), "--json").stdout
        result = json.loads(out)
        assert result["lower"] < result["seconds"] < result["upper"] and result["method"] in ("physics", "roofline", "loglinear", "gbm", "ops")

    def test_predict_from_history(self, history_csv):
        out = run("predict", "--params", "1e6", "--batch-size", "16", "--gpu-type", "A100", "--epochs", "2",
                  "--dataset-size", "10000", "--history", str(history_csv), "--method", "loglinear").stdout
        assert "90% PI" in out and "steps" in out

    def test_summary_of_model_file(self, history_csv, tmp_path):
        model = tmp_path / "m.perfmodel"
        run("fit", str(history_csv), "-o", str(model), "--method", "gbm")
        assert "importance" in run("summary", str(model)).stdout

    def test_hardware(self):
        assert "A100-SXM4-80GB" in run("hardware").stdout
        assert "bf16_tflops" in run("hardware", "NVIDIA H100 80GB HBM3").stdout


class TestErrors:
    @pytest.mark.parametrize("args, match", [
        (["predict", "--model", "m1", "--batch-size", "0", "--gpu-type", "A100", "--steps", "5"], "'batch_size'"),
        (["predict", "--model", "m1", "--batch-size", "8", "--gpu-type", "A1000", "--steps", "5"],
         "Unknown gpu_type 'A1000'"),
        (["predict", "--model", "m1", "--batch-size", "8", "--gpu-type", "A100"], "needs the amount of work"),
        (["fit", "missing.csv", "-o", "m.perfmodel"], "does not exist"),
        (["summary", "not-a-model.perfmodel"], "does not exist"),
    ])
    def test_one_line_no_traceback(self, history_csv, args, match):
        if args[0] == "predict":
            args = args + ["--history", str(history_csv)]
        proc = run(*args, check=False)
        assert proc.returncode == 2
        lines = proc.stderr.strip().splitlines()
        assert len(lines) == 1 and lines[0].startswith("perfmodel: error:") and match in lines[0]
        assert "Traceback" not in proc.stderr

    def test_bad_history_file(self, tmp_path):
        bad = tmp_path / "bad.csv"
        bad.write_text("model,params\nx,1\n")
        proc = run("fit", str(bad), "-o", str(tmp_path / "m.perfmodel"), check=False)
        assert proc.returncode == 2 and "missing required column" in proc.stderr
        assert "Traceback" not in proc.stderr


class TestRecommend:
    def test_recommend_json(self, history_csv):
        out = run("recommend", "--model", "m1", "--batch-size", "16", "--gpu-types", "A100", "--gpu-counts", "1,2",
                  "--steps", "1000", "--history", str(history_csv), "--json").stdout
        rows = json.loads(out)
        assert [r["gpu_count"] for r in rows] == [1, 2] and all(r["lower"] <= r["seconds"] <= r["upper"] for r in rows)

    def test_recommend_bad_budget(self, history_csv):
        proc = run("recommend", "--model", "m1", "--batch-size", "16", "--gpu-types", "A100", "--steps", "10",
                   "--budget", "-5", "--history", str(history_csv), check=False)
        assert proc.returncode == 2 and "'budget'" in proc.stderr and "Traceback" not in proc.stderr


class TestExitCodesAndArguments:
    def test_csv_as_fitted_model_is_not_a_model_file(self, history_csv):
        proc = run("predict", "--model", "m1", "--batch-size", "8", "--gpu-type", "A100", "--steps", "5",
                   "--fitted", str(history_csv), check=False)
        assert proc.returncode == 2 and "not a perfmodel model file" in proc.stderr and "pickle" not in proc.stderr

    def test_html_summary_is_not_a_model_file(self, tmp_path):
        page = tmp_path / "report.html"
        page.write_text("<html><body>report</body></html>")
        proc = run("summary", str(page), check=False)
        assert proc.returncode == 2 and "not a perfmodel model file" in proc.stderr

    def test_unanswerable_query_exits_1(self, history_csv):
        proc = run("predict", "--model", "m1", "--batch-size", "8", "--gpu-type", "cpu", "--steps", "5",
                   "--history", str(history_csv), check=False)
        assert proc.returncode == 1 and "has no runs on gpu_type 'cpu'" in proc.stderr

    def test_recommend_with_nothing_left_exits_1(self, history_csv):
        proc = run("recommend", "--model", "m1", "--batch-size", "16", "--gpu-types", "H100", "--gpu-counts", "1",
                   "--steps", "10", "--history", str(history_csv), check=False)
        assert proc.returncode == 1 and "no configuration" in proc.stderr

    def test_steps_in_float_notation(self, history_csv):
        out = run("predict", "--model", "m1", "--batch-size", "16", "--gpu-type", "A100", "--steps", "1e4",
                  "--history", str(history_csv), "--method", "loglinear", "--json").stdout
        assert json.loads(out)["steps"] == 10_000

    def test_model_and_params_conflict(self, history_csv):
        proc = run("predict", "--model", "m1", "--params", "1e6", "--batch-size", "16", "--gpu-type", "A100",
                   "--steps", "10", "--history", str(history_csv), check=False)
        assert proc.returncode == 2 and "--model m1 names a model in the history" in proc.stderr

    @pytest.mark.slow
    def test_list_models_needs_no_output(self):
        pytest.importorskip("torch")
        out = run("measure", "--list-models").stdout
        assert "gpt" in out

    def test_json_numbers_are_numbers(self, history_csv):
        out = json.loads(run("predict", "--model", "m1", "--batch-size", "16", "--gpu-type", "A100", "--steps",
                             "100", "--history", str(history_csv), "--method", "loglinear", "--json").stdout)
        assert out["query"]["batch_size"] == 16 and isinstance(out["query"]["gpu_count"], int)
        rows = json.loads(run("recommend", "--model", "m1", "--batch-size", "16", "--gpu-types", "A100",
                              "--gpu-counts", "1,2", "--steps", "100", "--history", str(history_csv),
                              "--json").stdout)
        assert all(isinstance(r["seconds"], float) and isinstance(r["device_batch"], int) for r in rows)


@pytest.mark.parametrize("args", [
    ["predict", "--model", "m1", "--batch-size", "abc", "--gpu-type", "cpu", "--steps", "5"],
    ["predict", "--batch-size", "8", "--gpu-type", "cpu", "--steps", "5"],
    ["predict", "--model", "m1", "--batch-size", "8", "--gpu-type", "cpu", "--steps", "5", "--confidence", "2"],
    ["predict", "--model", "m1", "--batch-size", "8", "--gpu-type", "cpu", "--steps", "5", "--precision", "int3"],
    ["frobnicate"],
    ["fit"],
])
def test_bad_cli_input_is_one_line(args):
    proc = run(*args, check=False)
    assert proc.returncode == 2
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("perfmodel: error:") and "Traceback" not in proc.stderr


@pytest.mark.parametrize("command, constant", [("evaluate", "perfmodel.evaluate.DEFAULT_EVAL_METHODS"),
                                               ("report", "perfmodel.report.REPORT_METHODS")])
def test_cli_method_lists_are_the_python_defaults(command, constant):
    import importlib
    import re

    from perfmodel.cli import _parser

    module, name = constant.rsplit(".", 1)
    sub = next(a for a in _parser()._actions if isinstance(a, argparse._SubParsersAction))
    action = next(a for a in sub.choices[command]._actions if "--methods" in a.option_strings)
    assert action.default is None  # resolved to the Python default when the command runs
    listed = re.search(rf"{name}: ([a-z,]+)", action.help).group(1).split(",")
    assert tuple(listed) == getattr(importlib.import_module(module), name)


class TestSmallBreaks:
    """Issue 26 #12: one line at the CLI, nothing created silently, a closed pipe is not an error."""

    def test_closed_pipe_exits_quietly(self):
        proc = subprocess.Popen([sys.executable, "-m", "perfmodel", "hardware"], stdout=subprocess.PIPE,
                                stderr=subprocess.PIPE)
        proc.stdout.close()  # the reader went away, as `| head` does
        err = proc.stderr.read().decode()
        proc.wait(timeout=120)
        assert err == "" and proc.returncode == 141

    def test_summary_into_a_closed_pipe_exits_quietly(self, history_csv, tmp_path):
        """`perfmodel summary model.perfmodel | head` printed `perfmodel: error: [Errno 32] Broken pipe`."""
        model = tmp_path / "m.perfmodel"
        run("fit", str(history_csv), "--method", "loglinear", "-o", str(model))
        proc = subprocess.Popen([sys.executable, "-m", "perfmodel", "summary", str(model)], stdout=subprocess.PIPE,
                                stderr=subprocess.PIPE)
        proc.stdout.close()
        err = proc.stderr.read().decode()
        proc.wait(timeout=120)
        assert err == "" and proc.returncode == 141

    def test_closed_pipe_in_process(self, monkeypatch, capsys):
        from perfmodel import cli

        monkeypatch.setattr(cli, "_COMMANDS", {**cli._COMMANDS, "hardware": lambda args: (_ for _ in ()).throw(
            BrokenPipeError(32, "Broken pipe"))})
        monkeypatch.setattr(cli, "_quiet_broken_pipe", lambda: 141)
        assert cli.main(["hardware"]) == 141
        assert capsys.readouterr().err == ""

    def test_output_into_a_missing_folder_is_refused(self, tmp_path, history_csv):
        target = tmp_path / "nonexistent" / "dir" / "model.perfmodel"
        proc = run("fit", str(history_csv), "-o", str(target), "--method", "loglinear", check=False)
        assert proc.returncode == 2 and proc.stderr.count("\n") == 1
        assert proc.stderr.startswith("perfmodel: error: the folder of -o/--output") and "does not exist" in \
            proc.stderr
        assert not (tmp_path / "nonexistent").exists()

    def test_import_output_into_a_missing_folder_is_refused(self, tmp_path):
        from perfmodel.cli import main

        out = tmp_path / "no" / "runs.csv"
        assert main(["import", "hf-output", str(tmp_path), "-o", str(out)]) == 2
        assert not (tmp_path / "no").exists()

    def test_missing_prices_file_is_a_sentence(self, tmp_path):
        proc = run("recommend", "--model", "gpt-m", "--batch-size", "32", "--gpu-types", "cpu", "--gpu-counts", "1",
                   "--steps", "100", "--prices", str(tmp_path / "missing.csv"), check=False)
        assert proc.returncode == 2 and proc.stderr.count("\n") == 1
        assert "Errno" not in proc.stderr and "Price table" in proc.stderr and "does not exist" in proc.stderr

    def test_os_errors_are_sentences(self, capsys):
        from perfmodel import cli

        assert cli._os_message(FileNotFoundError(2, "No such file or directory", "x.csv")) == \
            "'x.csv': No such file or directory"
        assert cli._os_message(FileNotFoundError("Price table 'p' does not exist.")) == \
            "Price table 'p' does not exist."

    @pytest.mark.parametrize("argv, where", [(["--bogus"], ""), (["predict", "--bogus"], "predict: ")])
    def test_usage_errors_have_one_prefix(self, argv, where, capsys):
        from perfmodel.cli import main

        with pytest.raises(SystemExit) as exc:
            main(argv)
        err = capsys.readouterr().err
        assert exc.value.code == 2 and err.count("\n") == 1
        assert err.startswith(f"perfmodel: error: {where}") and "perfmodel: perfmodel" not in err
        assert not err.startswith("perfmodel: error: perfmodel")


def test_io_is_an_attribute_after_import_perfmodel():
    code = ("import sys, perfmodel; assert 'perfmodel.io' not in sys.modules; f = perfmodel.io.load_runs; "
            "assert 'torch' not in sys.modules; assert 'io' in dir(perfmodel); print('ok')")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0 and out.stdout.strip() == "ok", out.stderr


class TestPredictTransformerJobs:
    """`perfmodel predict --family/--seq-len`: the Python API's transformer path at the CLI, the same answer."""

    ARGS = ["predict", "--params", "7e9", "--flops-per-sample", "1.72e14", "--batch-size", "1", "--gpu-count", "64",
            "--gpu-type", "H100", "--precision", "bf16", "--steps", "1000", "--json"]

    def _cli(self, capsys, *extra):
        from perfmodel.cli import main

        assert main([*self.ARGS, *extra]) == 0
        return json.loads(capsys.readouterr().out)

    def test_a_decoder_by_size_is_the_layout_model_as_in_python(self, capsys):
        import warnings

        from perfmodel import predict_training_time

        out = self._cli(capsys, "--family", "decoder")
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            py = predict_training_time({"params": 7e9, "flops_per_sample": 1.72e14, "family": "decoder"},
                                       batch_size=1, gpu_count=64, gpu_type="H100", precision="bf16", steps=1000)
        assert out["method"] == py.method == "layout"
        assert out["seconds"] == pytest.approx(py.seconds, rel=1e-9) and out["upper"] == pytest.approx(py.upper)

    def test_seq_len_is_passed_on(self, capsys):
        a = self._cli(capsys, "--family", "decoder", "--seq-len", "4096")
        b = self._cli(capsys, "--family", "decoder", "--seq-len", "2048")
        assert a["method"] == b["method"] == "layout" and a["seconds"] != b["seconds"]

    def test_family_without_params_names_the_flags(self):
        proc = run("predict", "--model", "gpt-m", "--family", "decoder", "--batch-size", "8", "--gpu-type", "cpu",
                   "--steps", "10", check=False)
        assert proc.returncode == 2 and proc.stderr.count("\n") == 1 and "--family" in proc.stderr
        assert "--params" in proc.stderr


# ----------------------------------------------------------------------------------------------------------
# Issue 14 (no silent corruption) #6: late failures are one-line errors, reported before anything runs.
class TestEarlyOneLineErrors:
    def test_cli_measure_bad_numbers(self, tmp_path):
        pytest.importorskip("torch")
        out = tmp_path / "runs.csv"
        assert_one_line_error(cli("measure", "--models", "mlp-xs", "--batch-sizes", "2", "--max-seconds", "-1",
                                  "--output", out), "max_seconds")
        assert_one_line_error(cli("measure", "--models", "mlp-xs", "--batch-sizes", "2", "--timeout", "-5",
                                  "--output", out), "timeout_s")
        assert not out.exists()

    def test_cuda_on_cpu_torch(self, tmp_path):
        torch = pytest.importorskip("torch")
        if torch.cuda.is_available():
            pytest.skip("this machine has CUDA")
        assert_one_line_error(cli("measure", "--device", "cuda", "--models", "mlp-xs", "--batch-sizes", "2",
                                  "--steps", "2", "--output", tmp_path / "runs.csv"), "sees no CUDA device")

    def test_evaluate_one_row(self, tmp_path):
        path = tmp_path / "one.csv"
        save_runs(make_history().head(1), path)
        assert_one_line_error(cli("evaluate", path), "nothing to cross-validate")

    def test_cli_negative_startup(self, tmp_path):
        h = make_history()
        h["startup_s"] = -1e6
        h.to_csv(tmp_path / "h.csv", index=False)
        assert_one_line_error(cli("predict", "--model", "m1", "--batch-size", "8", "--gpu-type", "A100",
                                  "--steps", "10", "--history", tmp_path / "h.csv"), "startup_s")
