"""Op-level features: hand-checked FLOPs and bytes per op class on small modules (meta and CPU), the history
columns, the backfill (API and CLI), the fallback for rows without op columns, and the ``ops`` model."""

import math
import subprocess
import sys

import numpy as np
import pandas as pd
import pytest

torch = pytest.importorskip("torch")
import torch.nn.functional as F  # noqa: E402
from torch import nn  # noqa: E402

import perfmodel  # noqa: E402
from perfmodel.datasets import bundled_runs_path  # noqa: E402
from perfmodel.features import OPS_COLUMNS, RunFeaturizer  # noqa: E402
from perfmodel.io import load_runs, read_raw_history  # noqa: E402
from perfmodel.measure import add_op_features, count_ops  # noqa: E402
from perfmodel.measure.opcount import OP_CLASSES, OpFeatures, count_workload_ops, op_column_names  # noqa: E402
from perfmodel.measure.workload import count_workload_flops, resolve_workload  # noqa: E402
from perfmodel.models import OpsRegressor, TrainingTimeModel  # noqa: E402
from perfmodel.schema import OP_COLUMNS, OP_FEATURE_VERSION  # noqa: E402

DEVICES = ("meta", "cpu")


def _inputs(shape, grad=False):
    def make(b, dev):
        x = torch.randn(b, *shape, device=dev)
        return (x.requires_grad_(True) if grad else x,), None

    return make


def _sum_loss(out, _inputs, _target):
    return (out[0] if isinstance(out, tuple) else out).sum()


class TestKnownModules:
    """Per-sample counts of forward + backward; inputs do not require grad unless said (no input gradient)."""

    @pytest.mark.parametrize("device", DEVICES)
    def test_linear(self, device):
        f = count_ops(nn.Linear(8, 4), _inputs((8,)), _sum_loss, device=device)
        # forward addmm 2·8·4 and the weight gradient mm 2·4·8 per sample; no input gradient
        assert f.flops["matmul"] == 128
        # addmm reads x (8) writes y (4); the weight-gradient mm reads grad_y (4) and x (8): 24 floats per sample
        assert f.bytes["matmul"] == 24 * 4
        assert f.optimizer_bytes == 28 * (8 * 4 + 4) and f.optimizer_flops == 12 * 36
        assert f.intensity("matmul") == pytest.approx(128 / 96)
        assert all(v == 0 for k, v in f.flops.items() if k not in ("matmul", "reduction", "elementwise"))

    @pytest.mark.parametrize("device", DEVICES)
    @pytest.mark.parametrize("groups,cls", [(1, "conv_dense"), (2, "conv_grouped"), (4, "conv_depthwise")])
    def test_conv_split_by_groups(self, device, groups, cls):
        conv = nn.Conv2d(4, 4, 3, padding=1, groups=groups, bias=False)
        f = count_ops(conv, _inputs((4, 8, 8)), _sum_loss, device=device)
        # forward 2·C_out·H·W·(C_in/groups)·k², weight gradient the same again
        fwd = 2 * 4 * 64 * (4 // groups) * 9
        assert f.flops[cls] == 2 * fwd
        assert sum(v for k, v in f.flops.items() if k.startswith("conv")) == 2 * fwd

    @pytest.mark.parametrize("device", DEVICES)
    def test_lstm_counted_analytically(self, device):
        lstm = nn.LSTM(8, 16, batch_first=True)
        f = count_ops(lstm, _inputs((5, 8)), _sum_loss, device=device)
        # per time step the four gates: 2·(4H·I + 4H·H); backward twice the forward
        assert f.flops["recurrent"] == 3 * 5 * 2 * (64 * 8 + 64 * 16)
        assert f.flops["matmul"] == 0  # the unrolled matmuls of the meta path are not counted twice

    @pytest.mark.parametrize("cell", [nn.GRU, nn.RNN])
    def test_unfused_cells_count_their_unrolled_kernels(self, cell):
        """torch fuses only the LSTM on CPU (oneDNN); a GRU or plain RNN dispatches its ops time step by time step.
        Kernels are what the CPU path dispatches, the same on meta; FLOPs and bytes stay analytic."""
        def kernels(module, steps, device):
            return count_ops(module, _inputs((steps, 8)), _sum_loss, device=device).kernels

        rnn = cell(8, 16, batch_first=True)
        k5, k10 = kernels(rnn, 5, "cpu"), kernels(rnn, 10, "cpu")
        assert kernels(cell(8, 16, batch_first=True), 5, "meta") == k5
        assert k10 - k5 >= 5 * 10  # at least ten kernels per extra time step (forward + backward)
        lstm = nn.LSTM(8, 16, batch_first=True)
        assert kernels(lstm, 5, "cpu") == kernels(nn.LSTM(8, 16, batch_first=True), 10, "meta")  # fused
        gates = 3 if cell is nn.GRU else 1
        f = count_ops(cell(8, 16, batch_first=True), _inputs((5, 8)), _sum_loss, device="meta")
        assert f.flops["recurrent"] == 3 * 5 * 2 * (gates * 16 * 8 + gates * 16 * 16)

    def test_unfused_cell_kernels_match_a_cpu_dispatch_count(self):
        from torch.utils._python_dispatch import TorchDispatchMode

        from perfmodel.measure.opcount import _classify, _rnn_config, _unfused_rnn_kernels

        class Count(TorchDispatchMode):
            n = 0

            def __torch_dispatch__(self, func, types, args=(), kwargs=None):
                out = func(*args, **(kwargs or {}))
                Count.n += _classify(func, func._overloadpacket.__name__, args, False) is not None
                return out

        gru = nn.GRU(8, 16, 2, batch_first=True)
        x = torch.randn(3, 7, 8)
        out, _ = gru(x)
        grad = torch.ones_like(out)
        with Count():
            out, _ = gru(x)
            torch.autograd.backward(out, grad)
        assert Count.n > 7 * 2 * 10 and _unfused_rnn_kernels(_rnn_config(gru), 7) == Count.n
        f = count_ops(nn.GRU(8, 16, 2, batch_first=True), _inputs((7, 8)), _sum_loss, device="meta", optimizer=None)
        assert Count.n <= f.kernels <= Count.n + 5  # + the loss's own few kernels

    @pytest.mark.parametrize("device", DEVICES)
    def test_layernorm(self, device):
        f = count_ops(nn.LayerNorm(16), _inputs((16,)), _sum_loss, device=device)
        # forward reads x (16), writes y (16), mean and rstd (1 + 1); backward reads grad_y, x, mean, rstd
        assert f.bytes["norm"] == (34 + 34) * 4
        assert f.flops["norm"] == 18  # one per output element (forward outputs; no input gradient)

    @pytest.mark.parametrize("device", DEVICES)
    def test_sdpa(self, device):
        class Attn(nn.Module):
            def __init__(self):
                super().__init__()
                self.w = nn.Parameter(torch.ones(1))

            def forward(self, q):
                q = q * self.w
                return F.scaled_dot_product_attention(q, q, q)

        f = count_ops(Attn(), _inputs((2, 6, 8)), _sum_loss, device=device)
        h, L, E = 2, 6, 8
        assert f.flops["attention"] == 4 * h * L * L * E + 10 * h * L * L * E  # torch's forward + backward
        assert f.flops["matmul"] == 0

    def test_meta_and_cpu_agree_on_a_zoo_transformer(self):
        wl = resolve_workload("gpt-s")
        meta, cpu = count_workload_ops(wl, device="meta"), count_workload_ops(wl, device="cpu")
        assert meta.flops == pytest.approx(cpu.flops) and meta.bytes == pytest.approx(cpu.bytes)
        assert meta.kernels == cpu.kernels and meta.flops["attention"] > 0
        # FlopCounterMode on CPU counts the matmuls only (not the CPU attention kernel): the same matmul FLOPs
        flops, _ = count_workload_flops(wl, "cpu")
        assert meta.flops["matmul"] == pytest.approx(flops, rel=1e-9)

    def test_meta_needs_no_real_memory(self):
        with torch.device("meta"):
            wl = resolve_workload("gpt-124m")
        f = count_workload_ops(wl, device="meta")
        assert f.params > 100e6 and f.total_flops > 6 * f.params * 1024

    def test_columns_match_the_schema(self):
        cols = OpFeatures().to_columns()
        assert tuple(cols) == op_column_names() == tuple(c.name for c in OP_COLUMNS)
        assert cols["op_feature_version"] == OP_FEATURE_VERSION == 2 and "optimizer" in OP_CLASSES

    def test_errors(self):
        with pytest.raises(TypeError, match="torch.nn.Module"):
            count_ops("not a module", _inputs((2,)), _sum_loss)
        with pytest.raises(ValueError, match="'device'"):
            count_ops(nn.Linear(2, 2), _inputs((2,)), _sum_loss, device="cuda:7")
        with pytest.raises(ValueError, match="'optimizer'"):
            count_ops(nn.Linear(2, 2), _inputs((2,)), _sum_loss, optimizer="lion")
        with pytest.raises(ValueError, match="'batches'"):
            count_ops(nn.Linear(2, 2), _inputs((2,)), _sum_loss, batches=(4, 2))
        with pytest.raises(TypeError, match="DataFrame"):
            add_op_features([1, 2])


@pytest.fixture(scope="module")
def small_history():
    """Bundled CPU runs of four models (one per family but the encoder), op columns backfilled."""
    runs = load_runs(bundled_runs_path("runs_cpu.csv"))
    runs = runs[runs["model"].isin(["mlp-xs", "mlp-m", "cnn-s", "gpt-s", "lstm-s", "bert-s"])]
    return add_op_features(runs.reset_index(drop=True))


class TestBackfill:
    def test_fills_zoo_rows_and_reports_unknown_ones(self, small_history):
        runs = small_history.copy()
        runs.loc[0, "model"] = "my-own-net"
        runs.loc[0, [c.name for c in OP_COLUMNS]] = pd.NA
        out = add_op_features(runs)
        names = [c.name for c in OP_COLUMNS]
        assert out.loc[0, names].isna().all()
        assert out.loc[1:, names].notna().all().all()
        assert out.attrs["op_features_skipped"] == {"my-own-net": "not a zoo model"}
        other = [c for c in runs.columns if c not in names]
        pd.testing.assert_frame_equal(out[other], runs[other])

    def test_cli_writes_atomically_and_lists_what_it_left(self, tmp_path):
        src = bundled_runs_path("runs_cpu.csv")
        lines = src.read_text().splitlines()
        header, rows = lines[0], [r for r in lines[1:] if ",mlp-xs," in r][:2]
        # start from rows without op columns (the bundled rows have them)
        import csv
        import io

        cols = next(csv.reader([header]))
        buf = io.StringIO()
        w = csv.writer(buf, lineterminator="\n")
        for r in csv.reader(rows):
            w.writerow(["" if c.startswith("op_") else v for c, v in zip(cols, r)])
        rows = buf.getvalue().splitlines()
        rows[1] = rows[1].replace(",mlp-xs,", ",mystery-net,")
        path = tmp_path / "h.csv"
        path.write_text("\n".join([header, *rows]) + "\n")
        out = tmp_path / "out.csv"
        proc = subprocess.run([sys.executable, "-m", "perfmodel", "features", "add-ops", str(path), "-o", str(out)],
                              capture_output=True, text=True, timeout=300)
        assert proc.returncode == 0, proc.stderr
        assert "op columns on 1 of 2 rows" in proc.stdout and "mystery-net (1 rows): not a zoo model" in proc.stdout
        got = read_raw_history(out)
        assert got["op_matmul_flops"].notna().tolist() == [True, False]
        before = read_raw_history(path)
        kept = [c for c in before.columns if not c.startswith("op_")]  # everything but the op columns unchanged
        pd.testing.assert_frame_equal(got[kept], before[kept])
        assert not list(tmp_path.glob("*.tmp*"))

    def test_cli_error_is_one_line(self, tmp_path):
        proc = subprocess.run([sys.executable, "-m", "perfmodel", "features", "add-ops", str(tmp_path / "no.csv")],
                              capture_output=True, text=True, timeout=120)
        assert proc.returncode == 2 and proc.stderr.startswith("perfmodel: error:")
        assert len(proc.stderr.strip().splitlines()) == 1


class TestFeaturesAndModel:
    def test_fallback_imputes_the_history_mix(self, small_history):
        f = RunFeaturizer(kind="ops").fit(small_history)
        bare = small_history.drop(columns=[c.name for c in OP_COLUMNS]).head(4)
        X = pd.DataFrame(f.transform(bare), columns=OPS_COLUMNS)
        full = pd.DataFrame(f.transform(small_history.head(4)), columns=OPS_COLUMNS)
        assert (X["op_imputed"] == 1).all() and (full["op_imputed"] == 0).all()
        assert (X[[c for c in OPS_COLUMNS if c.startswith("t_flops_")]].sum(axis=1) > 0).all()

    def test_fallback_without_any_op_columns_is_all_matmul(self):
        runs = load_runs(bundled_runs_path("runs_cpu.csv")).head(20)
        runs = runs.drop(columns=[c.name for c in OP_COLUMNS if c.name in runs.columns])  # a params/FLOPs-only history
        f = RunFeaturizer(kind="ops").fit(runs)
        X = pd.DataFrame(f.transform(runs), columns=OPS_COLUMNS)
        flops_cols = [c for c in OPS_COLUMNS if c.startswith("t_flops_")]
        assert (X["op_imputed"] == 1).all() and (X[flops_cols].drop(columns="t_flops_matmul_s") == 0).all().all()
        assert (X["t_step_bytes_s"] > 0).all()

    def test_ops_fits_and_predicts_with_intervals(self, small_history):
        model = perfmodel.fit(small_history, method="ops")
        assert model.method == "ops" and model.rsquared_log_ > 0.8
        pi = model.predict_interval(small_history.head(5))
        assert (pi["step_lower"] < pi["step_time_s"]).all() and (pi["step_time_s"] < pi["step_upper"]).all()
        table = model.coef_table()
        assert "compute_efficiency[recurrent]" in table.index and (table["value"] > 0).all()
        # a class no fitted model exercises keeps the pooled efficiency
        assert table.loc["compute_efficiency[conv_depthwise]", "value"] == pytest.approx(
            table.loc["pooled_compute_efficiency", "value"], rel=1e-3)

    def test_recurrent_class_is_pooled_toward_matmul(self, small_history):
        # without recurrent runs the recurrent class takes matmul's compute efficiency (its FLOPs are GEMMs), not
        # the pooled value; its memory efficiency keeps the pooled one
        train = small_history[small_history["family"] != "rnn"]
        table = perfmodel.fit(train, method="ops").coef_table()["value"]
        assert table["compute_efficiency[recurrent]"] == pytest.approx(table["compute_efficiency[matmul]"], rel=1e-3)
        assert table["compute_efficiency[recurrent]"] != pytest.approx(table["pooled_compute_efficiency"], rel=0.05)
        assert table["memory_efficiency[recurrent]"] == pytest.approx(table["pooled_memory_efficiency"], rel=1e-3)

    def test_a_new_model_gets_the_wider_leave_one_model_out_interval(self, small_history):
        train = small_history[small_history["family"] != "rnn"]
        model = perfmodel.TrainingTimeModel(method="ops", held_out="new_model").fit(train)
        held = small_history[small_history["family"] == "rnn"].head(3)
        pi = model.predict_interval(held)
        seen = model.predict_interval(train.head(3))
        # leave-one-model-out scores, every held-out model weighing the same (200 quantiles each)
        assert len(model.scores_["new_model"]["scores"]) == 200 * train["model"].nunique()
        assert set(pi["query_kind"]) == {"new_model"}
        assert (np.log(pi["step_upper"] / pi["step_time_s"]).min()
                > np.log(seen["step_upper"] / seen["step_time_s"]).max())

    def test_save_and_load(self, small_history, tmp_path):
        model = perfmodel.fit(small_history, method="ops")
        perfmodel.save_model(model, tmp_path / "m.pmodel")
        back = perfmodel.load_model(tmp_path / "m.pmodel")
        np.testing.assert_allclose(back.predict(small_history), model.predict(small_history))

    def test_errors(self, small_history):
        f = RunFeaturizer(kind="ops").fit(small_history)
        X, y = f.transform(small_history), small_history["step_time_s"].to_numpy()
        with pytest.raises(ValueError, match="shrinkage"):
            OpsRegressor(shrinkage=-1.0).fit(X, y)
        with pytest.raises(ValueError, match="expects the"):
            OpsRegressor().fit(X[:, :5], y)
        with pytest.raises(ValueError, match="at least 3"):
            OpsRegressor().fit(X[:2], y[:2])
        assert math.isfinite(TrainingTimeModel(method="ops", cv=None).fit(small_history).resid_std_)


class TestRecording:
    def test_a_measured_run_records_its_op_columns(self, tmp_path):
        from perfmodel.measure import run_sweep, sweep_configs

        out = tmp_path / "runs.csv"
        run_sweep(sweep_configs(["mlp-xs"], [2], [1], steps=3, warmup_steps=1), out, progress=False)
        runs = load_runs(out)
        assert runs["op_matmul_flops"].tolist() == [count_workload_ops(resolve_workload("mlp-xs")).flops["matmul"]]
        assert runs["op_feature_version"].tolist() == [OP_FEATURE_VERSION] and runs["op_kernels"].gt(0).all()
