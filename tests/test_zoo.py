"""The broader zoo (issue 15): every architecture builds, trains one real step, has its family and countable
FLOPs; the named sweeps (zoo, calibrate) have the size they declare; the measure CLI's sweep flags."""

import math
import os
import subprocess
import sys

import pytest

torch = pytest.importorskip("torch")

from torch import nn  # noqa: E402
from torch.utils.flop_counter import FlopCounterMode  # noqa: E402

from perfmodel.io import load_runs  # noqa: E402
from perfmodel.measure import plans  # noqa: E402
from perfmodel.measure.sweep import DEFAULT_SWEEP, default_sweep_configs  # noqa: E402
from perfmodel.measure.zoo import (  # noqa: E402
    CLASSIC_MODELS,
    LARGE_ZOO,
    ZOO,
    analytic_flops_per_sample,
    build,
    count_flops_per_sample,
    count_params,
    default_seq_len,
    describe,
    families,
)

#: The family each architecture is declared with (written out by hand: the test of the labels).
FAMILIES = {
    "mlp": "mlp", "cnn": "cnn", "bert": "encoder", "gpt": "decoder", "lstm": "rnn", "vgg": "cnn",
    "densenet": "cnn", "mobilenet": "cnn-depthwise", "convnext": "cnn-depthwise", "resnext": "cnn-grouped",
    "tcn": "conv1d", "textcnn": "conv1d", "enc-explicit": "attention-explicit",
    "dec-explicit": "attention-explicit", "llama": "decoder", "seq2seq": "seq2seq", "gru": "rnn", "rnn": "rnn",
    "mixer": "mixer", "dlrm": "recsys", "widedeep": "recsys", "ae-mlp": "autoencoder", "ae-conv": "autoencoder",
    "unet": "unet", "vit": "vit", "gnn": "gnn",
}


def _arch(name: str) -> str:
    return name.rsplit("-", 1)[0]


def run_cli(*args, env=None, cwd=None):
    return subprocess.run([sys.executable, "-m", "perfmodel", *args], capture_output=True, text=True, timeout=600,
                          env=env, cwd=cwd)


class TestRegistry:
    def test_twenty_architectures_with_several_sizes(self):
        sizes = {}
        for name in ZOO:
            sizes.setdefault(_arch(name), []).append(name)
        assert set(sizes) == set(FAMILIES) and len(sizes) >= 20
        assert all(len(v) >= 2 for v in sizes.values()), {k: v for k, v in sizes.items() if len(v) < 2}

    def test_classic_names_and_large_zoo_unchanged(self):
        assert list(ZOO)[:11] == list(CLASSIC_MODELS)
        assert {n: ZOO[n][1] for n in ("mlp-xs", "cnn-m", "bert-m", "gpt-m", "lstm-m")} == {
            "mlp-xs": {"width": 64, "depth": 2}, "cnn-m": {"width": 16, "blocks": 2},
            "bert-m": {"d_model": 256, "layers": 3}, "gpt-m": {"d_model": 256, "layers": 4},
            "lstm-m": {"hidden": 256, "layers": 2}}
        assert set(LARGE_ZOO) == {"gpt-124m", "gpt-350m", "bert-110m", "resnet50", "mlp-l", "lstm-l"}
        assert {build(n).family for n in CLASSIC_MODELS} == {"mlp", "cnn", "encoder", "decoder", "rnn"}

    def test_families(self):
        fams = families()
        assert {m: f for f, ms in fams.items() for m in ms} == {n: FAMILIES[_arch(n)] for n in ZOO}
        assert len(fams) >= 14

    def test_sequence_models_take_seq_len(self):
        assert default_seq_len("tcn-s") == 256 and default_seq_len("llama-s", {"seq": 16}) == 16
        assert default_seq_len("vit-s") is None and default_seq_len("dlrm-s") is None
        b = build("seq2seq-s", seq=8)
        x, y = b.make_batch(3, torch.device("cpu"))
        assert x.shape == (3, 16) and y.shape == (3, 8) and b.module(x).shape == (3, 8, 1000)

    def test_describe_on_meta(self):
        d = describe("gpt-124m")  # GPU-sized: counted on the meta device, no real memory
        assert d["family"] == "decoder" and d["counted_on"] == "meta" and 1.2e8 < d["params"] < 1.3e8
        assert d["flops_per_sample"] > 6 * d["params"] * 1024 * 0.9


@pytest.mark.slow
@pytest.mark.parametrize("name", list(ZOO))
def test_builds_trains_one_step_and_counts_flops(name):
    torch.manual_seed(0)
    bundle = build(name)
    assert bundle.family == FAMILIES[_arch(name)]
    module = bundle.module.train()
    opt = torch.optim.AdamW(module.parameters(), lr=1e-2)
    before = [p.detach().clone() for p in module.parameters()]
    x, y = bundle.make_batch(2, torch.device("cpu"))
    loss = bundle.loss_fn(module(x), y)
    loss.backward()
    assert math.isfinite(loss.item())
    unused = [k for k, p in module.named_parameters() if p.grad is None]
    assert not unused, f"parameters without a gradient (DDP would fail): {unused}"
    opt.step()
    assert all(not torch.equal(a, p) for a, p in zip(before, module.parameters()))
    flops, method = count_flops_per_sample(build(name))
    assert method in ("flop_counter", "analytic") and flops > 0
    assert count_params(module) > 0


class TestAnalyticFlops:
    """The recurrent formula against FlopCounterMode on hand-unrolled cells (plain nn.Linear, so the counter sees
    every matmul): embedding -> cell over ``seq`` steps -> classifier on the last step."""

    class Unrolled(nn.Module):
        def __init__(self, cell, embed, hidden, layers, classes=10):
            super().__init__()
            gates = {"lstm": 4, "gru": 3, "rnn": 1}[cell]
            self.cell, self.hidden = cell, hidden
            self.tok = nn.Embedding(50, embed)
            self.ih = nn.ModuleList(nn.Linear(embed if i == 0 else hidden, gates * hidden) for i in range(layers))
            self.hh = nn.ModuleList(nn.Linear(hidden, gates * hidden) for _ in range(layers))
            self.head = nn.Linear(hidden, classes)

        def forward(self, idx):
            xs = list(self.tok(idx).unbind(1))
            for ih, hh in zip(self.ih, self.hh):
                h = torch.zeros(idx.shape[0], self.hidden, requires_grad=True)  # so every hh matmul has 3 passes
                c = torch.zeros_like(h)
                out = []
                for x in xs:
                    a, b = ih(x), hh(h)
                    if self.cell == "rnn":
                        h = torch.tanh(a + b)
                    elif self.cell == "gru":
                        (ar, az, an), (br, bz, bn) = a.chunk(3, 1), b.chunk(3, 1)
                        r, z = torch.sigmoid(ar + br), torch.sigmoid(az + bz)
                        h = (1 - z) * torch.tanh(an + r * bn) + z * h
                    else:
                        i, f, g, o = (a + b).chunk(4, 1)
                        c = torch.sigmoid(f) * c + torch.sigmoid(i) * torch.tanh(g)
                        h = torch.sigmoid(o) * torch.tanh(c)
                    out.append(h)
                xs = out
            return self.head(xs[-1])

    @pytest.mark.parametrize("cell", ["lstm", "gru", "rnn"])
    def test_formula_matches_counter_on_unrolled_cells(self, cell):
        embed, hidden, layers, seq = 6, 5, 2, 4
        model = self.Unrolled(cell, embed, hidden, layers)
        with FlopCounterMode(display=False) as counter:
            torch.nn.functional.cross_entropy(model(torch.randint(0, 50, (1, seq))), torch.tensor([3])).backward()
        assert counter.get_total_flops() == analytic_flops_per_sample(embed, hidden, layers, seq, cell=cell)

    @pytest.mark.parametrize("name", ["gru-s", "rnn-s"])
    def test_cpu_gru_and_rnn_counted_close_to_formula(self, name):
        # on CPU aten's GRU/RNN decompose into matmuls the counter sees; the formula differs only by the input
        # gradient of the first step's zero hidden state
        bundle = build(name)
        flops, method = count_flops_per_sample(bundle)
        assert method == "flop_counter" and flops == pytest.approx(bundle.analytic_flops, rel=0.02)

    def test_bad_cell(self):
        with pytest.raises(ValueError, match="cell must be one of lstm, gru, rnn. Got 'tcn'"):
            analytic_flops_per_sample(8, 8, 1, 4, cell="tcn")


class TestSweepDefinitions:
    def test_zoo_sweep_size_and_order(self):
        d = plans.ZOO_SWEEP
        configs = plans.zoo_sweep_configs()
        expected = (len(d["models"]) * len(d["batch_sizes"])
                    + len(d["extra_batch_models"]) * len(d["extra_batch_sizes"])
                    + len(d["ddp_models"]) * len(d["ddp_batch_sizes"]) * len(d["ddp_gpu_counts"])
                    + len(d["repeat_models"]) * len(d["repeat_batch_sizes"]) * (d["repeats"] - 1))
        assert len(configs) == expected == 214
        assert len({c.key("cpu") for c in configs}) == len(configs)  # no configuration twice
        assert set(d["models"]) == set(ZOO)
        assert set(d["extra_batch_models"]) | set(d["ddp_models"]) | set(d["repeat_models"]) <= set(ZOO)
        assert {_arch(m) for m in d["extra_batch_models"]} == set(FAMILIES)  # one size of every architecture
        reps = [c.repeat for c in configs]
        assert reps == sorted(reps) and max(reps) == 2  # repeat index outermost
        assert all(c.max_seconds == 1.0 and c.warmup_steps == 2 for c in configs)
        p = plans.plan(configs)
        assert p.runs == 214 and p.by_workers == {1: 190, 2: 24} and p.expected_s <= 35 * 60

    def test_default_sweep_unchanged(self):
        configs = default_sweep_configs()
        assert len(configs) == 112 and {c.model for c in configs} == set(DEFAULT_SWEEP["models"])
        assert plans.named_sweep_configs("default") == configs

    def test_calibration_sweep(self):
        configs = plans.calibration_configs()
        models = plans.CALIBRATION_SWEEP["models"]
        assert len(configs) == 2 * len(models) + 2 and {c.model for c in configs} == set(models)
        fams = [build(m).family for m in models]
        assert len(set(fams)) >= 10  # op-diverse: few models share a family
        assert plans.plan(configs).expected_s <= 5 * 60

    def test_online_sweep_times_fixed_long_runs(self):
        configs = plans.named_sweep_configs("online")
        models = plans.ONLINE_SWEEP["models"]
        assert [c.model for c in configs] == list(models) and set(models) <= set(ZOO)
        assert len({build(m).family for m in models}) == len(models)  # one model per family
        assert all(c.steps == 400 and c.max_steps == 400 and c.batch_size == 32 for c in configs)

    def test_calibration_shrinks_for_tests(self, monkeypatch):
        assert [c.model for c in plans.calibration_configs(models=["gnn-s"], batch_sizes=[2])] == ["gnn-s"]
        monkeypatch.setenv(plans.CALIBRATION_MODELS_ENV, "mlp-xs, gnn-s")
        configs = plans.calibration_configs()
        assert [(c.model, c.batch_size, c.gpu_count) for c in configs] == [("mlp-xs", 8, 1), ("gnn-s", 8, 1)]

    def test_bad_names(self):
        with pytest.raises(ValueError, match="unknown: resnet50"):
            plans.calibration_configs(models=["resnet50"])
        with pytest.raises(ValueError, match="Unknown sweep 'big'. Known: default, zoo, calibrate, online"):
            plans.named_sweep_configs("big")


class TestCli:
    def test_plan_prints_and_runs_nothing(self, tmp_path):
        proc = run_cli("measure", "--sweep", "zoo", "--plan")
        assert proc.returncode == 0, proc.stderr
        assert "zoo: 214 runs of 53 models (190 on 1 worker, 24 on 2 workers" in proc.stderr
        proc = run_cli("measure", "--calibrate", "--plan", "-o", str(tmp_path / "c.csv"))
        assert proc.returncode == 0 and "calibrate: 28 runs of 13 models" in proc.stderr
        assert not (tmp_path / "c.csv").exists()

    @pytest.mark.parametrize("args,message", [
        (["--calibrate", "--models", "mlp-xs"], "--calibrate is a fixed sweep; --models would change it"),
        (["--sweep", "zoo", "--batch-sizes", "8", "--repeats", "2", "-o", "x.csv"],
         "--sweep zoo is a fixed sweep; --batch-sizes, --repeats would change it (drop them"),
        (["--calibrate", "--sweep", "zoo"], "--calibrate runs the calibration sweep; it cannot be combined"),
        (["--calibrate", "--device", "cuda"], "--calibrate measures the CPU host"),
        (["--sweep", "zoo", "-o", "x.xlsx"], "must end in .csv or .parquet, or be a history store"),
    ])
    def test_errors_are_one_line(self, args, message):
        proc = run_cli("measure", *args)
        assert proc.returncode == 2 and proc.stderr.startswith("perfmodel: error: ")
        assert message in proc.stderr and len(proc.stderr.strip().splitlines()) == 1

    def test_unknown_sweep_name(self):
        proc = run_cli("measure", "--sweep", "huge")
        assert proc.returncode == 2 and "invalid choice: 'huge'" in proc.stderr

    @pytest.mark.slow
    def test_list_models_shows_family_params_flops(self):
        proc = run_cli("measure", "--list-models")
        assert proc.returncode == 0, proc.stderr
        rows = {line.split()[0]: line.split() for line in proc.stdout.splitlines()[1:]}
        from perfmodel.measure.layouts import LAYOUT_MODELS

        assert set(rows) == set(ZOO) | set(LARGE_ZOO) | set(LAYOUT_MODELS)  # the layout decoders listed last
        assert rows["mobilenet-s"][1] == "cnn-depthwise" and float(rows["mlp-xs"][3]) == pytest.approx(93952, rel=1e-3)
        assert "GPU-sized" in " ".join(rows["gpt-124m"])

    @pytest.mark.slow
    def test_calibrate_runs_resumes_and_combines_with_bundled(self, tmp_path):
        import perfmodel

        env = {**os.environ, plans.CALIBRATION_MODELS_ENV: "mlp-xs,gnn-s"}
        proc = run_cli("measure", "--calibrate", "--steps", "2", env=env, cwd=tmp_path)
        assert proc.returncode == 0, proc.stderr
        assert "calibrate: 2 runs of 2 models" in proc.stderr and "--history calibration_cpu.csv" in proc.stdout
        out = tmp_path / "calibration_cpu.csv"
        runs = load_runs(out)
        assert sorted(runs["model"]) == ["gnn-s", "mlp-xs"] and set(runs["family"]) == {"mlp", "gnn"}
        assert (runs["gpu_type"] == "cpu").all() and runs["flops_per_sample"].gt(0).all()
        again = run_cli("measure", "--calibrate", "--steps", "2", env=env, cwd=tmp_path)
        assert again.returncode == 0 and "already in calibration_cpu.csv" in again.stderr
        assert "wrote 0 runs" in again.stdout
        res = perfmodel.predict_training_time("gnn-s", batch_size=8, gpu_count=1, gpu_type="cpu", steps=10,
                                              history=[str(out), "cpu"], method="loglinear")
        assert res.seconds > 0


def test_readme_zoo_table_lists_every_family_and_architecture():
    import pathlib
    import re

    page = pathlib.Path(__file__).resolve().parents[1] / "docs" / "guide" / "measuring.md"
    readme = page.read_text(encoding="utf-8")
    section = readme[readme.index("## The zoo"):readme.index("## Calibrate to your CPU host")]
    rows = [line.split("|")[1:3] for line in section.splitlines() if line.startswith("| `")]
    listed = {re.fullmatch(r"\s*`([\w-]+)`\s*", fam).group(1): cell for fam, cell in rows}
    assert set(listed) == set(families())
    for name in ZOO:
        assert f"`{_arch(name)}-" in listed[FAMILIES[_arch(name)]], name
