"""benchmarks/gpu_campaign.py on CPU: its plan, its dry run, its refusal without CUDA, and its whole path in the
hidden ``--device cpu`` test mode (tiny models; timings meaningless)."""

import importlib.util
import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

torch = pytest.importorskip("torch")

REPO = Path(__file__).resolve().parents[1]
SCRIPT = REPO / "benchmarks" / "gpu_campaign.py"


def _env():
    env = dict(os.environ)
    env["PYTHONPATH"] = str(REPO / "src") + os.pathsep + env.get("PYTHONPATH", "")
    return env


def _run(*args, timeout=300, env=None):
    return subprocess.run([sys.executable, str(SCRIPT), *args], capture_output=True, text=True,
                          env={**_env(), **(env or {})}, timeout=timeout, cwd=str(REPO))


@pytest.fixture(scope="module")
def campaign():
    spec = importlib.util.spec_from_file_location("gpu_campaign", SCRIPT)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


class TestPlan:
    def test_first_tiers_cover_every_model_and_precision(self, campaign):
        plan = campaign.build_plan("gpu", 1)
        models = {c["model"] for c in plan}
        assert {"gpt-124m", "gpt-350m", "bert-110m", "resnet50", "mlp-l", "lstm-l"} <= models
        if campaign._hf_available():
            assert {"hf:gpt2", "hf:bert"} <= models
        head = plan[: 3 * len(models)]
        grid = {(m, p) for m in models for p in ("bf16", "fp32", "tf32")}
        assert {(c["model"], c["precision"]) for c in head} == grid
        assert all(c["batch_size"] == campaign.GPU_MODELS[c["model"]][1] for c in head)
        assert all(c["gpu_count"] == 1 for c in plan)  # one device: no data-parallel configurations

    def test_repeats_are_spread_and_measure_noise(self, campaign):
        plan = campaign.build_plan("gpu", 1)
        for model, bi, prec in campaign.GPU_REPEATED:
            same = [i for i, c in enumerate(plan) if c["model"] == model and c["precision"] == prec
                    and c["batch_size"] == campaign.GPU_MODELS[model][bi]]
            assert len(same) == 3 and min(b - a for a, b in zip(same, same[1:])) > 4

    def test_data_parallel_where_there_are_devices(self, campaign):
        counts = {c["gpu_count"] for c in campaign.build_plan("gpu", 8)}
        assert counts == {1, 2, 4, 8}

    def test_budget_leaves_out_the_tail(self, campaign):
        plan = campaign.build_plan("gpu", 1)
        per, k, _ = campaign._per_config_s("gpu", 7 * 60, len(plan), 0)
        assert per >= campaign.MIN_CONFIG_S["gpu"] and 0 < k < len(plan)


class TestCommandLine:
    def test_dry_run_lists_configurations_and_budget(self):
        res = _run("--dry-run", "--budget-min", "7")
        assert res.returncode == 0, res.stderr
        assert "per single-device configuration" in res.stdout and "gpt-350m" in res.stdout
        assert "planned" in res.stdout and "left out" in res.stdout

    @pytest.mark.skipif(torch.cuda.is_available(), reason="this machine has CUDA")
    def test_refuses_without_cuda(self, tmp_path):
        res = _run("--out-dir", str(tmp_path), "--budget-min", "1")
        assert res.returncode == 2 and res.stdout == ""
        lines = res.stderr.strip().splitlines()
        assert len(lines) == 1 and lines[0].startswith("gpu_campaign: error: no CUDA device")
        assert list(tmp_path.iterdir()) == []

    def test_bad_budget(self):
        res = _run("--budget-min", "0", "--dry-run")
        assert res.returncode == 2 and "--budget-min must be positive" in res.stderr

    @pytest.mark.slow
    def test_cpu_test_mode_runs_the_whole_path_within_budget(self, tmp_path):
        """The whole path, with the worker killed at its second configuration: that one is recorded, a fresh
        worker goes on, and the script still ends within its budget."""
        t0 = time.time()
        res = _run("--device", "cpu", "--budget-min", "1.5", "--out-dir", str(tmp_path), timeout=180,
                   env={"GPU_CAMPAIGN_TEST_KILL_AT": "1"})
        elapsed = time.time() - t0
        assert res.returncode == 0, res.stdout + res.stderr
        assert elapsed < 90 + 2.0  # the budget is a hard wall-clock limit (2 s for this test's own overhead)
        slug = "cpu-campaign-test"
        mb = json.loads((tmp_path / f"microbench_{slug}.json").read_text())
        proto = json.loads((tmp_path / f"runs_{slug}.protocol.json").read_text())
        assert mb["results"]["matmul_fp32_tflops"] > 0 and mb["results"]["copy_gb_per_s"] > 0
        from perfmodel.io import read_raw_history

        runs = read_raw_history(tmp_path / f"runs_{slug}.csv")
        assert set(runs["gpu_type"]) == {"cpu"}
        assert runs["status"].iloc[0] == "ok"
        killed = runs.iloc[1]
        assert killed["status"] == "oom" and "worker process died (exit -9)" in killed["error"]
        assert (runs["status"].iloc[2:] == "ok").sum() >= 1, runs[["model", "status", "error"]]  # a fresh worker
        assert proto["worker_starts"] == 2
        assert set(runs["launcher"].dropna()) <= {"local", "torchrun"}
        steps = [json.loads(x) for x in (tmp_path / f"runs_{slug}.csv.steps.jsonl").read_text().splitlines()]
        assert {s["run_id"] for s in steps} <= set(runs["run_id"])
        assert proto["budget_min"] == 1.5 and proto["planned"] and proto["microbenchmark"] == mb
        assert sum(proto["outcomes"].values()) == len(proto["planned"])
        assert not list(tmp_path.glob("*.lock")) and not list(tmp_path.glob(".*"))
        assert len(list(tmp_path.iterdir())) <= 8  # what a device machine's $OUT sends back
