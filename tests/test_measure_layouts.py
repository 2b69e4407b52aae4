"""Layout runs (perfmodel.measure.layouts): the checks, the configurations and their records, the CLI's refusals,
the tensor- and pipeline-parallel decoder against the unsplit one (gloo, slow), real runs through the sweep (slow)
and the bundled data/runs_cpu_layouts.csv."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

torch = pytest.importorskip("torch")

import perfmodel  # noqa: E402
from perfmodel.exceptions import LayoutError  # noqa: E402
from perfmodel.measure import RunConfig, run_sweep  # noqa: E402
from perfmodel.measure.layouts import LAYOUT_MODELS, LAYOUTS_SWEEP, layout_run_problems, layout_shape  # noqa: E402
from perfmodel.measure.plans import layouts_sweep_configs  # noqa: E402
from perfmodel.measure.sweep import base_record  # noqa: E402
from perfmodel.schema import LAYOUT_COLUMNS, SHAPE_COLUMNS  # noqa: E402

REPO = Path(__file__).resolve().parents[1]
BUNDLED = REPO / "src" / "perfmodel" / "data" / "runs_cpu_layouts.csv"
#: Layout and shape columns a single-host dense decoder run leaves empty: no network between nodes, no experts.
# flash_attention: recorded since the column exists; the bundled sweep predates it (empty reads as fused, which
# its scaled_dot_product_attention is)
UNUSED = {"inter_node_gbps", "experts_per_token", "moe_ffn_hidden", "flash_attention"}


def _env():
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join([str(REPO / "src"), env.get("PYTHONPATH", "")])
    return env


class TestChecks:
    def test_a_good_layout_has_no_problems(self):
        assert layout_run_problems("layout-gpt-s", gpu_count=4, tp=2, pp=2, micro_batches=4,
                               sequence_parallel=True) == []

    @pytest.mark.parametrize("kwargs, words", [
        (dict(gpu_count=4, tp=3), ["3 processes per replica do not divide"]),
        (dict(gpu_count=3, tp=3), ["does not divide the 4 n_heads", "does not divide the 1024 vocab"]),
        (dict(gpu_count=3, pp=3, micro_batches=3), ["does not divide the 4 layers"]),
        (dict(gpu_count=4, pp=4, micro_batches=2), ["1f1b needs at least pp (4) micro-batches", "gpipe"]),
        (dict(gpu_count=2, sequence_parallel=True), ["sequence_parallel needs tensor parallelism"]),
        (dict(gpu_count=1, pp_schedule="zb"), ["pp_schedule must be one of 1f1b, gpipe"]),
    ])
    def test_bad_layouts_say_why(self, kwargs, words):
        text = " ".join(layout_run_problems("layout-gpt-s", **kwargs))
        for w in words:
            assert w in text

    def test_gpipe_takes_fewer_micro_batches_than_stages(self):
        assert layout_run_problems("layout-gpt-s", gpu_count=4, pp=4, micro_batches=1, pp_schedule="gpipe") == []

    def test_shape_knobs(self):
        assert layout_shape("layout-gpt-m") == LAYOUT_MODELS["layout-gpt-m"]
        assert layout_shape("layout-gpt-s", {"n_layers": 8}, seq_len=128)["seq"] == 128
        with pytest.raises(LayoutError, match="Unknown shape knobs"):
            layout_shape("layout-gpt-s", {"width": 3})
        with pytest.raises(LayoutError, match="multiple of n_heads"):
            layout_shape("layout-gpt-s", {"n_heads": 3})
        with pytest.raises(LayoutError, match="not a layout decoder"):
            layout_shape("gpt-s")


class TestRunConfig:
    def test_degrees_and_batches(self):
        cfg = RunConfig("layout-gpt-s", batch_size=2, grad_accum=4, gpu_count=4, tp=2)
        assert (cfg.tp, cfg.pp, cfg.dp) == (2, 1, 2)
        assert cfg.global_batch == 16 and cfg.record_batch_size == 4
        odd = RunConfig("layout-gpt-s", batch_size=1, grad_accum=4, gpu_count=4, pp=4)
        assert odd.global_batch == 4 and odd.record_batch_size == 1
        assert RunConfig("layout-gpt-s", batch_size=1, grad_accum=2, gpu_count=4, tp=4).record_batch_size == 0.5

    def test_layout_fields_refused_on_other_models(self):
        with pytest.raises(LayoutError, match="layout decoders"):
            RunConfig("gpt-s", batch_size=8, gpu_count=2, tp=2)
        with pytest.raises(ValueError, match="does not divide the 4 layers"):
            RunConfig("layout-gpt-s", batch_size=8, gpu_count=3, pp=3, grad_accum=3)
        with pytest.raises(LayoutError, match="does not support compile"):
            RunConfig("layout-gpt-s", batch_size=8, compile=True)

    def test_layouts_are_distinct_configurations(self):
        a = RunConfig("layout-gpt-s", batch_size=4, grad_accum=4, gpu_count=2, tp=2)
        b = RunConfig("layout-gpt-s", batch_size=4, grad_accum=4, gpu_count=2, pp=2)
        c = RunConfig("layout-gpt-s", batch_size=4, grad_accum=4, gpu_count=2, tp=2, sequence_parallel=True)
        assert len({a.key("cpu"), b.key("cpu"), c.key("cpu")}) == 3
        assert len(RunConfig("gpt-s", batch_size=8).key("cpu")) == 12  # other runs keep their key

    def test_the_sweep_multiplies_to_the_processes(self):
        configs = layouts_sweep_configs()
        assert len({c.key("cpu") for c in configs}) == len(configs)
        for c in configs:
            assert c.tp * c.pp * c.dp == c.gpu_count
            assert c.global_batch == LAYOUTS_SWEEP["global_batch"]
            assert c.gpu_count in (1, 2, 4) and c.threads == 1
        assert {(c.gpu_count, c.tp, c.pp, c.sequence_parallel) for c in configs} == set(LAYOUTS_SWEEP["layouts"])

    def test_the_record_of_a_layout_run_fills_its_columns_before_it_runs(self):
        cfg = RunConfig("layout-gpt-m", batch_size=1, grad_accum=4, gpu_count=4, tp=2, pp=2, sequence_parallel=True)
        rec = base_record(cfg, "cpu", None)
        assert (rec["tp"], rec["pp"], rec["dp"], rec["sequence_parallel"]) == (2, 2, 1, 1)
        assert (rec["global_batch_size"], rec["micro_batch_size"], rec["batch_size"]) == (4, 1, 1)
        assert (rec["n_layers"], rec["d_model"], rec["n_heads"], rec["ffn_hidden"], rec["vocab"]) == (4, 256, 8,
                                                                                                      1024, 1024)
        # a failed run keeps them and validates
        rec.update(status="error", error="RuntimeError: x", timestamp="2026-12-03T00:00:00+00:00")
        runs = perfmodel.load_runs(pd.DataFrame([rec]), include_failed=True)
        assert runs.loc[0, "dp"] == 1 and runs.loc[0, "recompute"] == "none"


class TestStages:
    def test_stages_partition_the_decoder(self):
        from perfmodel.measure._layout_worker import build_decoder, keep_stage

        torch.manual_seed(0)
        full, _ = build_decoder("layout-gpt-s")
        names = {n for n, _ in full.named_parameters()}
        seen: list[str] = []
        for stage in range(4):
            torch.manual_seed(0)
            part = keep_stage(build_decoder("layout-gpt-s")[0], stage, 4)
            seen += [n for n, _ in part.named_parameters()]
        assert sorted(seen) == sorted(names)  # every parameter on exactly one stage

    def test_stages_chained_give_the_full_output(self):
        from perfmodel.measure._layout_worker import build_decoder, keep_stage

        torch.manual_seed(0)
        full, shape = build_decoder("layout-gpt-s")
        x = torch.randint(0, shape["vocab"], (2, shape["seq"]))
        h = x
        for stage in range(2):
            part = keep_stage(build_decoder("layout-gpt-s")[0], stage, 2)
            part.load_state_dict({k: v for k, v in full.state_dict().items() if k in part.state_dict()})
            h = part(h)
        assert torch.allclose(h, full(x), atol=1e-5)


class TestCli:
    @pytest.mark.parametrize("argv, flags", [
        (["--models", "layout-gpt-s", "--gpu-counts", "2", "--tensor-parallel", "2", "--pipeline-parallel", "2"],
         ["--tensor-parallel 2", "--pipeline-parallel 2", "--gpu-counts 2"]),
        (["--models", "layout-gpt-s", "--gpu-counts", "3", "--tensor-parallel", "3"], ["--tensor-parallel 3"]),
        (["--models", "gpt-s", "--tensor-parallel", "2"], ["--tensor-parallel", "layout-gpt-s"]),
        (["--models", "layout-gpt-s", "--gpu-counts", "4", "--pipeline-parallel", "4", "--global-batch", "16"],
         ["--pp-schedule 1f1b", "--pipeline-parallel (4)", "--micro-batch"]),
        (["--models", "layout-gpt-s", "--sequence-parallel"], ["--sequence-parallel", "--tensor-parallel"]),
        (["--models", "layout-gpt-s", "--micro-batch", "2"], ["--micro-batch", "--global-batch"]),
        (["--models", "layout-gpt-s", "--gpu-counts", "4", "--pipeline-parallel", "2", "--global-batch", "16",
          "--micro-batch", "3"], ["--micro-batch 3", "--global-batch 16"]),
        (["--models", "layout-gpt-s", "--gpu-counts", "4", "--global-batch", "6"], ["--global-batch 6"]),
        (["--sweep", "layouts", "--tensor-parallel", "2"], ["--sweep layouts", "--tensor-parallel"]),
        (["--models", "layout-gpt-s,gpt-s"], ["--models", "gpt-s"]),
    ])
    def test_bad_layouts_are_refused_in_one_line(self, argv, flags, capsys, tmp_path):
        from perfmodel.cli import main

        assert main(["measure", *argv, "-o", str(tmp_path / "x.csv"), "--plan"]) == 2
        err = capsys.readouterr().err
        assert err.count("\n") == 1 and err.startswith("perfmodel: error: ")
        for f in flags:
            assert f in err
        assert not (tmp_path / "x.csv").exists()

    def test_a_good_layout_plans(self, capsys, tmp_path):
        from perfmodel.cli import main

        assert main(["measure", "--models", "layout-gpt-s,layout-gpt-m", "--gpu-counts", "2,4", "--tensor-parallel",
                     "2", "--global-batch", "16", "--micro-batch", "2", "-o", str(tmp_path / "x.csv"), "--plan"]) == 0
        assert "4 runs of 2 models" in capsys.readouterr().err

    def test_the_layouts_sweep_plans(self, capsys, tmp_path):
        from perfmodel.cli import main

        assert main(["measure", "--sweep", "layouts", "-o", str(tmp_path / "x.csv"), "--plan"]) == 0
        assert f"{len(layouts_sweep_configs())} runs of 2 models" in capsys.readouterr().err


_CHECK = textwrap.dedent("""
    import json, sys, torch, torch.distributed as dist
    from torch.distributed.tensor.parallel import loss_parallel
    from perfmodel.measure._layout_worker import _mesh, build_decoder, lm_loss, tensor_parallelize
    torch.set_num_threads(1)
    dist.init_process_group("gloo")
    knobs = {"n_layers": 2, "d_model": 32, "n_heads": 4, "ffn_hidden": 64, "vocab": 64, "seq": 8}
    out = {}
    for sp in (False, True):
        torch.manual_seed(0)
        ref, shape = build_decoder("layout-gpt-s", knobs)
        torch.manual_seed(0)
        model, _ = build_decoder("layout-gpt-s", knobs)
        tensor_parallelize(model, _mesh(torch.device("cpu"), 1, 1, dist.get_world_size())["tp"],
                           sequence_parallel=sp)
        x = torch.randint(0, 64, (3, 8), generator=torch.Generator().manual_seed(1))
        y = torch.roll(x, -1, dims=1)
        with loss_parallel():
            loss = lm_loss(model(x), y)
            loss.backward()
        ref_loss = lm_loss(ref(x), y)
        ref_loss.backward()
        grads = dict(ref.named_parameters())
        full = lambda g: g.full_tensor() if hasattr(g, "full_tensor") else g  # replicated plain tensors as they are
        diff = max(float((full(p.grad) - grads[n].grad).abs().max()) for n, p in model.named_parameters())
        sharded = sum(1 for p in model.parameters() if any(pl.is_shard() for pl in getattr(p, "placements", ())))
        out[str(sp)] = [float(loss.full_tensor()), float(ref_loss), diff, sharded]
    if dist.get_rank() == 0:
        json.dump(out, open(sys.argv[1], "w"))
    dist.destroy_process_group()
""")


@pytest.mark.slow
def test_tensor_parallel_decoder_matches_the_unsplit_one(tmp_path):
    """Two gloo ranks: the same loss and the same (gathered) gradients as the unsplit decoder, with and without
    sequence parallelism."""
    script, result = tmp_path / "check.py", tmp_path / "out.json"
    script.write_text(_CHECK)
    for _ in range(2):  # a rank killed by a signal (gloo's transport aborting on a busy host) is run once more
        proc = subprocess.run([sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc_per_node=2",
                               str(script), str(result)], capture_output=True, text=True, env=_env(), timeout=240)
        if proc.returncode == 0 or "Signal 6 (SIGABRT)" not in proc.stderr:
            break
    assert proc.returncode == 0, proc.stderr[-2000:]
    out = json.loads(result.read_text())
    for sp in ("False", "True"):
        loss, ref_loss, grad_diff, sharded = out[sp]
        # per layer the q, k, v, fc1 weights and biases and the o, fc2 weights (their biases are replicated); the
        # token embedding and the head
        assert sharded == 2 * 10 + 2
        assert loss == pytest.approx(ref_loss, rel=1e-5)
        assert grad_diff < 1e-5


@pytest.mark.slow
def test_layout_runs_write_valid_records(tmp_path):
    """Real runs through the sweep: tensor parallel with sequence parallelism on 2 processes, 1F1B pipeline and
    data parallel on 4; every layout and shape column filled, tp x pp x dp = gpu_count."""
    out = tmp_path / "runs.csv"
    opts = dict(steps=2, warmup_steps=1, threads=1)
    configs = [RunConfig("layout-gpt-s", batch_size=4, grad_accum=2, gpu_count=2, tp=2, sequence_parallel=True,
                         **opts),
               RunConfig("layout-gpt-s", batch_size=2, grad_accum=2, gpu_count=4, pp=2, **opts)]
    done = run_sweep(configs, out, progress=False, timeout_s=300)
    assert list(done["status"]) == ["ok", "ok"], list(done["error"])
    runs = perfmodel.load_runs(out)
    assert (runs["tp"] * runs["pp"] * runs["cp"] * runs["dp"] == runs["gpu_count"]).all()
    assert list(runs["dp"]) == [1, 2] and list(runs["global_batch_size"]) == [8, 8]
    assert np.allclose(runs["batch_size"] * runs["gpu_count"], runs["global_batch_size"])
    for c in LAYOUT_COLUMNS + SHAPE_COLUMNS:
        if c.name not in UNUSED:
            assert runs[c.name].notna().all(), c.name
    assert (runs["step_time_s"] > 0).all() and (runs["flops_per_sample"] > 0).all()
    assert "tensor parallel 2" in runs.loc[0, "protocol"] and "SequenceParallel" in runs.loc[0, "protocol"]
    assert "Schedule1F1B" in runs.loc[1, "protocol"] and "data parallel 2" in runs.loc[1, "protocol"]
    assert len(run_sweep(configs, out, progress=False)) == 0  # resumes: both configurations are recorded


@pytest.mark.skipif(not BUNDLED.exists(), reason="the bundled layout sweep is not in this checkout")
def test_the_bundled_layout_runs_validate():
    runs = perfmodel.load_runs(BUNDLED)
    assert len(runs) >= 48 and (runs["gpu_type"] == "cpu").all()
    assert (runs["tp"] * runs["pp"] * runs["cp"] * runs["dp"] == runs["gpu_count"]).all()
    assert set(runs["gpu_count"]) <= {1, 2, 4} and (runs["threads_per_worker"] == 1).all()
    for c in LAYOUT_COLUMNS + SHAPE_COLUMNS:
        if c.name not in UNUSED:
            assert runs[c.name].notna().all(), c.name
    assert ((runs["tp"] > 1) & (runs["pp"] > 1)).any() and ((runs["tp"] > 1) & (runs["dp"] > 1)).any()
