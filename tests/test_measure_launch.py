"""Launchers: two "nodes" on 127.0.0.1 through torchrun's c10d rendezvous (gloo), Slurm through submitit's local
executor (real processes) with resume, torch.compile, and the CLI's launch-flag rules."""

import json
import os
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

torch = pytest.importorskip("torch")

from perfmodel.io import read_raw_history, save_runs  # noqa: E402
from perfmodel.measure import RunConfig, run_sweep  # noqa: E402

REPO = Path(__file__).resolve().parents[1]
BYO_DIR = Path(__file__).parent / "_byo"
TINY = dict(steps=3, warmup_steps=1)


def _env(**extra):
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join([str(REPO / "src"), str(BYO_DIR), env.get("PYTHONPATH", "")])
    env.update(extra)
    return env


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _cli(*args, timeout=60):
    return subprocess.run([sys.executable, "-m", "perfmodel", "measure", *args], capture_output=True, text=True,
                          env=_env(), timeout=timeout, cwd=str(REPO))


class TestLaunchFlags:
    @pytest.mark.parametrize("args, message", [
        (["--launcher", "slurm", "--nnodes", "2", "--partition", "p", "--time", "5"],
         "cannot be used with --launcher slurm"),
        (["--launcher", "slurm", "--partition", "gpu"], "--launcher slurm needs --time"),
        (["--launcher", "slurm"], "needs --partition and --time"),
        (["--nnodes", "2"], "needs --rdzv-endpoint"),
        (["--rdzv-endpoint", "127.0.0.1:29500"], "is for multi-node runs"),
        (["--partition", "gpu"], "--partition: only with --launcher slurm"),
        (["--nproc-per-node", "2", "--gpu-counts", "1"], "either --gpu-counts or --nproc-per-node"),
        (["--nnodes", "0"], "--nnodes must be a positive int"),
        (["--models", "mlp-xs", "--grad-accum", "0"], "'grad_accum' parameter of RunConfig must be a positive int"),
        (["--models", "mlp-xs,gpt-s", "--name", "x"], "--name names the records of one model"),
        (["--models", "hf:meta-llama/Llama-3-8B"], "would need a download"),
    ])
    def test_bad_combinations_are_one_line(self, tmp_path, args, message):
        res = _cli("-o", str(tmp_path / "h.csv"), *args)
        assert res.returncode == 2 and res.stdout == ""
        assert res.stderr.count("\n") == 1 and res.stderr.startswith("perfmodel: error: ") and message in res.stderr
        assert not (tmp_path / "h.csv").exists()

    def test_config_rules(self):
        with pytest.raises(ValueError, match="needs rdzv_endpoint"):
            RunConfig("mlp-xs", 2, gpu_count=2, nnodes=2)
        with pytest.raises(ValueError, match="nnodes .* x processes per node"):
            RunConfig("mlp-xs", 2, gpu_count=3, nnodes=2, rdzv_endpoint="h:1")
        cfg = RunConfig("mlp-xs", 2, gpu_count=4, nnodes=2, rdzv_endpoint="h:1")
        assert cfg.launcher == "torchrun" and cfg.digest() == RunConfig("mlp-xs", 2, gpu_count=4, nnodes=2,
                                                                          rdzv_endpoint="other:2").digest()


@pytest.mark.slow
class TestMultiNode:
    def test_two_nodes_on_localhost_over_gloo(self, tmp_path):
        """Two `perfmodel measure` processes, one per "node", share one history: each configuration is recorded
        once, by the node that hosts rank 0, with the world size and node count."""
        out = tmp_path / "shared.csv"
        port = _free_port()
        cmd = [sys.executable, "-m", "perfmodel", "measure", "--models", "mlp-xs,gpt-s", "--batch-sizes", "4",
               "--steps", "3", "--nnodes", "2", "--nproc-per-node", "1", "--rdzv-endpoint", f"127.0.0.1:{port}",
               "--timeout", "240", "-o", str(out)]
        nodes = [subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=_env(),
                                  cwd=str(tmp_path)) for _ in range(2)]
        outputs = [p.communicate(timeout=400) for p in nodes]
        assert [p.returncode for p in nodes] == [0, 0], outputs
        runs = read_raw_history(out)
        assert sorted(runs["model"]) == ["gpt-s", "mlp-xs"] and (runs["status"] == "ok").all(), runs
        assert (runs["gpu_count"] == 2).all() and (runs["nodes"] == 2).all()
        assert set(runs["launcher"]) == {"torchrun"}
        followers = sum(err.count("ran as a follower node") for _, err in outputs)
        assert followers == 2


@pytest.mark.slow
class TestSlurmLocalExecutor:
    def test_jobs_gather_resume(self, tmp_path, monkeypatch):
        from perfmodel.measure.slurm import SlurmOptions

        pytest.importorskip("submitit")
        monkeypatch.setenv("PYTHONPATH", _env()["PYTHONPATH"])
        out = tmp_path / "runs.csv"
        opts = SlurmOptions(partition="debug", time_min=5, cluster="local", poll_s=0.5)
        models = ["mlp-xs", "byo_factories:mlp"]
        first = run_sweep(models=models, output=out, batch_sizes=[4], launcher="slurm", slurm=opts, progress=False,
                          **TINY)
        assert sorted(first["status"]) == ["ok", "ok"]
        runs = read_raw_history(out)
        assert set(runs["launcher"]) == {"slurm"} and runs["job_id"].notna().all()
        jobs_file = tmp_path / "runs.csv.slurm" / "jobs.jsonl"
        jobs = [json.loads(x) for x in jobs_file.read_text().splitlines()]
        assert sorted(j["job_id"] for j in jobs) == sorted(runs["job_id"].astype(str))

        # a crash between a job's end and the gathering: the history lost a record, the job's file is there
        save_runs(runs[runs["model"] == "mlp-xs"], out)
        again = run_sweep(models=models + ["gpt-s"], output=out, batch_sizes=[4], launcher="slurm", slurm=opts,
                          progress=False, **TINY)
        assert sorted(again["model"]) == ["byo_factories:mlp", "gpt-s"]
        jobs_after = [json.loads(x) for x in jobs_file.read_text().splitlines()]
        assert len(jobs_after) == 3 and jobs_after[-1]["model"] == "gpt-s"  # only the new configuration submitted
        final = read_raw_history(out)
        assert sorted(final["model"]) == ["byo_factories:mlp", "gpt-s", "mlp-xs"]
        assert not final["run_id"].duplicated().any()


@pytest.mark.slow
def test_compile_time_goes_to_startup():
    from dataclasses import asdict

    from perfmodel.measure._worker import measure_config

    cfg = RunConfig("mlp-xs", 4, compile=True, **TINY)
    rec = measure_config({**asdict(cfg), "launched_at": time.time()}, device=torch.device("cpu"))
    assert rec["compiled"] == 1 and "torch.compile" in rec["protocol"]
    # the first step (compilation) is in startup_s, not in the timed steps
    assert rec["startup_s"] > 10 * rec["step_time_s"]
