"""The public run-history sets beyond MLPerf (data/README.md, "Public sets"): each committed file loads, has the
rows and columns the README states, and its builder reproduces it byte for byte from a small fixture of the
source (tests/data/public/). The fetched snapshots are not needed; where one is on this machine the full build
is compared too."""

from __future__ import annotations

import importlib.util
import io
import json
import os
from pathlib import Path

import pandas as pd
import pytest

import perfmodel
from perfmodel.hardware import resolve_gpu_type

ROOT = Path(__file__).resolve().parents[1]
DATA = ROOT / "data"
FIXTURES = Path(__file__).resolve().parent / "data" / "public"
#: Git snapshots of the public sources (``<owner>+<name>/repo`` each), named by $PERFMODEL_MIRRORS; the rebuild
#: tests skip without it.
MIRRORS = os.environ.get("PERFMODEL_MIRRORS", "")


def _mirror(name: str) -> Path:
    """The git dir of one snapshot under $PERFMODEL_MIRRORS (a path that does not exist when none is named)."""
    return Path(MIRRORS, name, "repo") if MIRRORS else Path(os.devnull, name)

LLMFOUNDRY_COMMIT = "8c8dd48f72168c5d51e2f7b151595892a8fba43d"
NEUSIGHT_COMMIT = "6945927d9afcca2b9daf021f8395e53edc5b4eef"
LAMBDA_COMMIT = "aa5addb6a53675a649a80036dad548f1c27cbcc4"
MEGATRON_BRIDGE_COMMIT = "067f987df03b8355b03192d88d70f1709fedf51a"
TORCHTITAN_COMMIT = "b5bcd76c66d0acb1a08b176d9639425bc55e0b2a"
BIGSCIENCE_COMMIT = "9e64edec2ad1fb9263bf39ba616a84ff64b4d947"


def _script(name: str):
    spec = importlib.util.spec_from_file_location(name, ROOT / "scripts" / f"{name}.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def _csv(df: pd.DataFrame, mod) -> str:
    buf = io.StringIO()
    df.to_csv(buf, index=False, lineterminator="\n", float_format="%.10g")
    return buf.getvalue()


def _committed_rows(path: Path, run_ids) -> str:
    """The header and the lines of ``path`` whose run_id is in ``run_ids``, in file order, exactly as stored."""
    lines = path.read_text(encoding="utf-8").splitlines(keepends=True)
    keep = [ln for ln in lines[1:] if ln.split(",", 1)[0] in set(run_ids)]
    return lines[0] + "".join(keep)


# (file, rows, gpu types, precisions) as data/README.md states them
COMMITTED = {
    "public_llmfoundry.csv": (216, {"A100-SXM4-40GB", "A100-SXM4-80GB", "H100-SXM5-80GB"}, {"bf16", "fp8"}),
    "public_neusight.csv": (44, {"A100-PCIE-80GB", "A100-SXM4-40GB", "H100-SXM5-80GB", "L4", "MI100", "MI210",
                                 "MI250-GCD", "V100-PCIE-32GB"}, {"fp32"}),
    "public_bigscience.csv": (127, {"A100-SXM4-80GB"}, {"bf16", "fp16"}),
    "public_torchtitan.csv": (43, {"A100-SXM4-80GB", "H100-SXM5-80GB", "H200-SXM-141GB"}, {"bf16", "fp8"}),
    "public_megatron_bridge.csv": (182, {"B200", "B300", "GB200", "GB300", "H100-SXM5-80GB"}, {"bf16", "fp8"}),
}


@pytest.mark.parametrize("name", sorted(COMMITTED))
def test_committed_file_loads_and_matches_readme(name):
    rows, gpus, precisions = COMMITTED[name]
    runs = perfmodel.load_runs(str(DATA / name))
    assert len(runs) == rows
    assert set(runs["gpu_type"]) == gpus
    assert set(runs["precision"]) == precisions
    assert runs["run_id"].is_unique
    raw = pd.read_csv(DATA / name)
    for col in ("source", "source_repo", "source_path", "source_commit", "flops_per_sample", "step_time_s"):
        assert col in raw.columns
    assert f"## `{name}` — {rows} " in (DATA / "README.md").read_text(encoding="utf-8")  # the README's heading


def test_llmfoundry_builder_reproduces_committed_rows():
    mod = _script("derive_public_llmfoundry")
    text = (FIXTURES / "llmfoundry_README_excerpt.md").read_text(encoding="utf-8")
    df = mod.build(text, LLMFOUNDRY_COMMIT)
    assert len(df) == 10  # two rows under each of the five result headings
    assert _csv(df, mod) == _committed_rows(DATA / "public_llmfoundry.csv", df["run_id"])
    # the derivation as documented: global tokens / tokens per second; MosaicML's FLOPs agree with Model TFLOP
    row = df.iloc[0]
    assert row["step_time_s"] == pytest.approx(8388608 / 515636)
    assert row["batch_size"] * row["grad_accum"] * row["gpu_count"] == row["global_batch_size"]
    assert (df["flops_check_ratio"].between(1.0, 1.01)).all()
    # the schema's layout columns: FSDP data parallelism only; zero stage from the sharding strategy
    assert (df["tp"] == 1).all() and (df["pp"] == 1).all() and (df["cp"] == 1).all()
    assert (df["dp"] == df["gpu_count"]).all() and (df["micro_batch_size"] == df["batch_size"]).all()
    assert set(zip(df["sharding_strategy"], df["zero_stage"])) <= {("FULL_SHARD", 3), ("SHARD_GRAD_OP", 2)}
    assert (df["recompute"] == df["activation_checkpointing"].map({1: "full", 0: "none"})).all()
    assert (df["ffn_hidden"] == 4 * df["d_model"]).all() and (df["n_kv_heads"] == df["n_heads"]).all()


def test_llmfoundry_new_columns_leave_the_old_ones_byte_identical():
    """The layout and shape columns were appended: every line starts with the columns and values it had."""
    mod = _script("derive_public_llmfoundry")
    old = mod.COLUMNS[:mod.COLUMNS.index("micro_batch_size")]
    lines = (DATA / "public_llmfoundry.csv").read_text(encoding="utf-8").splitlines()
    assert lines[0].startswith(",".join(old) + ",micro_batch_size,")
    runs = perfmodel.load_runs(str(DATA / "public_llmfoundry.csv"))
    assert runs["n_heads"].notna().all() and (runs["vocab"] == 50368).all()


def test_llmfoundry_full_build_when_the_snapshot_is_here(tmp_path):
    git_dir = _mirror("mosaicml+llm-foundry")
    if not git_dir.exists():
        pytest.skip("no llm-foundry snapshot on this machine")
    mod = _script("derive_public_llmfoundry")
    out = tmp_path / "x.csv"
    mod.main(["--git-dir", str(git_dir), "--commit", LLMFOUNDRY_COMMIT, "--out", str(out)])
    assert out.read_bytes() == (DATA / "public_llmfoundry.csv").read_bytes()


def test_neusight_builder_reproduces_committed_rows():
    mod = _script("derive_public_neusight")
    df = mod.build(mod._Tree(FIXTURES / "neusight", NEUSIGHT_COMMIT))
    # five training labels; the inference and tensor-parallel files of the fixture give no row
    assert sorted(df["parallelism"]) == ["dp4", "single", "single", "single", "single"]
    assert _csv(df, mod) == _committed_rows(DATA / "public_neusight.csv", df["run_id"])
    dp = df.loc[df["parallelism"] == "dp4"].iloc[0]
    assert (dp["gpu_count"], dp["batch_size"]) == (4, 1)
    assert df.loc[df["model"] == "neusight-switchxl4", "flops_per_sample"].isna().all()
    mi250 = df.loc[df["device_dir"] == "AMD_Instinct_MI250"].iloc[0]
    label = json.loads((FIXTURES / "neusight" / "scripts" / "asplos" / "label" / "AMD_Instinct_MI250" /
                        "gpt2_large-train-1024-1.json").read_text())
    assert mi250["gpu_type"] == "MI250-GCD" and mi250["step_time_s"] == pytest.approx(label["e2e_latency"] / 1000)


def test_neusight_full_build_when_the_snapshot_is_here(tmp_path):
    git_dir = _mirror("sitar-lab+NeuSight")
    if not git_dir.exists():
        pytest.skip("no NeuSight snapshot on this machine")
    mod = _script("derive_public_neusight")
    out = tmp_path / "x.csv"
    mod.main(["--git-dir", str(git_dir), "--commit", NEUSIGHT_COMMIT, "--out", str(out)])
    assert out.read_bytes() == (DATA / "public_neusight.csv").read_bytes()


def test_neusight_param_counts_match_transformers():
    transformers = pytest.importorskip("transformers")
    torch = pytest.importorskip("torch")
    mod = _script("derive_public_neusight")
    for model in ("bert_large", "gpt2_large"):  # the fixture's dense configs (the others are larger to build)
        cfg = transformers.AutoConfig.from_pretrained(str(FIXTURES / "neusight" / mod.CONFIG_DIR / f"{model}.json"))
        cls = transformers.AutoModelForPreTraining if model.startswith("bert") else transformers.AutoModelForCausalLM
        with torch.device("meta"):
            net = cls.from_config(cfg)
        assert type(net).__name__ == mod.BUILT_AS[model]
        assert sum(p.numel() for p in net.parameters()) == mod.PARAMS[model]


def _megatron_bridge_fixture(mod) -> dict:
    return {path: (FIXTURES / "megatron_bridge" / Path(path).name).read_text(encoding="utf-8")
            for path in mod.SOURCE_PATHS}


def test_megatron_bridge_builder_reproduces_committed_rows():
    mod = _script("derive_public_megatron_bridge")
    df, dropped = mod.build(_megatron_bridge_fixture(mod), MEGATRON_BRIDGE_COMMIT)
    # 26.08: 2 rows; 26.06: FP8 and MXFP8 on two systems and the H100 row of 1.5 sequences per GPU (NVFP4 left out;
    # the SFT table is not pre-training); 25.11: a row with "a (b)" cells gives two rows, plus three; 25.09: no
    # precision
    assert len(df) == 12
    assert sorted(df["release"].value_counts().items()) == [("25.11", 5), ("26.06", 5), ("26.08", 2)]
    assert _csv(df, mod) == _committed_rows(DATA / "public_megatron_bridge.csv", df["run_id"])
    assert sorted(dropped["reason"].str.split(":").str[0].str.split(" ").str[0]) == ["NVFP4", "NVFP4", "the", "the"]
    # the derivation as documented: global tokens / global tokens per second; NVIDIA's FLOPs from its own columns
    first, second = df[(df["model"] == "llama3-8b")].sort_values("precision_reported").itertuples()
    assert (first.precision_reported, second.precision_reported) == ("FP8-CS", "FP8-MX")
    assert first.step_time_s == pytest.approx(128 * 8192 / (37556 * 8))
    assert second.step_time_s == pytest.approx(128 * 8192 / (36108 * 8))
    assert first.flops_per_sample == pytest.approx(1933e12 / 37556 * 8192)
    assert (first.batch_size, first.gpu_count, first.gpu_type, first.precision) == (16, 8, "GB300", "fp8")
    assert second.tp == first.tp == 1 and first.vp_reported == second.vp_reported == "n/a"  # shared cells
    ds = df[df["model"] == "deepseek-v3"]
    assert set(ds["family"]) == {"moe"} and (ds["params"] == 671e9).all() and (ds["active_params"] == 37e9).all()
    assert "w/o MTP" in set(ds["note"])  # a model label's parenthesis is an annotation, not a second row
    # the schema's layout columns: a fractional share of the global batch where devices split a replica
    h100 = df[(df["gpu_count"] == 1024)].iloc[0]
    assert (h100.batch_size, h100.tp, h100.pp, h100.cp, h100.dp, h100.vp, h100.ep) == (1.5, 8, 8, 2, 8, 8, 1)
    assert (h100.vp_reported, h100.ep_reported, h100.sequence_parallel, h100.gpus_per_node) == ("8", "n/a", 1, 8)
    assert (df["tp"] * df["pp"] * df["cp"] * df["dp"] == df["gpu_count"]).all()
    assert (df["sequence_parallel"] == (df["tp"] > 1).astype(int)).all()
    assert set(df.loc[df["fsdp"] > 0, "zero_stage"]) == {3} and set(df.loc[df["fsdp"] == 0, "zero_stage"]) == {1}
    assert set(df.loc[df["gpu_type"].isin(["GB200", "GB300"]), "gpus_per_node"]) == {72}
    assert (first.vp, second.vp, first.vp_reported) == (1, 1, "n/a")  # n/a: no interleaving
    assert (ds["n_layers"] == 61).all() and (ds["n_experts"] == 256).all() and (ds["dense_layers"] == 3).all()
    runs = perfmodel.load_runs(str(DATA / "public_megatron_bridge.csv"))
    assert runs["n_layers"].notna().all() and runs["dp"].notna().all()
    assert runs["zero_stage"].isna().sum() == (runs["model"] == "kimi-k2").sum()  # Muon: not a ZeRO stage


def test_megatron_bridge_shapes_match_their_sources_when_the_snapshot_is_here():
    git_dir = _mirror("NVIDIA-NeMo+Megatron-Bridge")
    if not git_dir.exists():
        pytest.skip("no Megatron-Bridge snapshot on this machine")
    mod = _script("derive_public_megatron_bridge")
    mod.check_shapes(git_dir)
    assert set(mod.SHAPES) == {m[0] for m in mod.MODELS.values()} == set(mod.SHAPE_CHECKS)


def test_megatron_bridge_builder_refuses_what_it_cannot_read():
    mod = _script("derive_public_megatron_bridge")
    header = ("## 26.99 NeMo Container\n\n### Pre-Training Performance\n\n#### Model: {model}\n\n"
              "| System | #-GPUs | Precision | GBS | MBS | Sequence Length | TP | PP | CP | VP | EP | "
              "Tokens / sec / GPU | Model TFLOP / sec / GPU |\n" + "|---" * 13 + "|\n")
    row = "| {system} | 8 | {prec} | 128 | 1 | 8192 | 1 | 1 | 1 | n/a | n/a | 1000 | 500 |\n"

    def build(model="LLAMA3_8B", system="DGX-H100", prec="FP8"):
        text = header.format(model=model) + row.format(system=system, prec=prec)
        return mod.build({mod.SOURCE_PATHS[0]: text, mod.SOURCE_PATHS[1]: ""}, MEGATRON_BRIDGE_COMMIT)

    df, dropped = build()
    assert len(df) == 1 and dropped.empty
    df, dropped = build(model="Nemotron_3_Nano")  # no cited parameter count: left out, with the reason
    assert df.empty and list(dropped["reason"]) == ["no cited parameter count for this model"]
    with pytest.raises(ValueError, match="unknown system"):
        build(system="DGX-X999")
    with pytest.raises(ValueError, match="unknown precision"):
        build(prec="FP6")
    malformed = header.format(model="LLAMA3_8B") + "| DGX-H100 | 8 | FP8 | 128 |\n"
    df, dropped = mod.build({mod.SOURCE_PATHS[0]: malformed, mod.SOURCE_PATHS[1]: ""}, MEGATRON_BRIDGE_COMMIT)
    assert df.empty and dropped["reason"].str.startswith("malformed").all()


def test_megatron_bridge_builder_says_what_is_wrong_in_one_line_and_keeps_the_old_file(tmp_path, capsys):
    mod = _script("derive_public_megatron_bridge")
    out = tmp_path / "x.csv"
    out.write_text("kept\n")
    with pytest.raises(SystemExit) as e:  # a directory without the two copies
        mod.main(["--docs", str(tmp_path), "--commit", MEGATRON_BRIDGE_COMMIT, "--out", str(out)])
    err = capsys.readouterr().err.strip()
    assert e.value.code == 2 and len(err.splitlines()) == 1 and "performance-summary.md" in err
    with pytest.raises(SystemExit) as e:  # not a clone
        mod.main(["--git-dir", str(tmp_path), "--out", str(out)])
    err = capsys.readouterr().err.strip()
    assert e.value.code == 2 and len(err.splitlines()) == 1 and err.startswith(f"{Path(mod.__file__).name}: git")
    assert out.read_text() == "kept\n"


def test_megatron_bridge_full_build_when_the_snapshot_is_here(tmp_path):
    git_dir = _mirror("NVIDIA-NeMo+Megatron-Bridge")
    if not git_dir.exists():
        pytest.skip("no Megatron-Bridge snapshot on this machine")
    mod = _script("derive_public_megatron_bridge")
    out = tmp_path / "x.csv"
    mod.main(["--git-dir", str(git_dir), "--commit", MEGATRON_BRIDGE_COMMIT, "--out", str(out)])
    assert out.read_bytes() == (DATA / "public_megatron_bridge.csv").read_bytes()


def test_lambda_is_not_committed_and_its_devices_resolve():
    """No licence: the builder exists, the file is not shipped; every device name it maps is a known device."""
    mod = _script("derive_public_lambda")
    assert not (ROOT / "src" / "perfmodel" / "data" / "public_lambda.csv").exists() or os.environ.get(
        "PERFMODEL_ALLOW_LOCAL_LAMBDA")
    for canonical in mod.GPU_TYPES.values():
        assert resolve_gpu_type(canonical) == canonical
    assert mod._device("LambdaCloud 8x H100 80GB SXM5") == "H100 80GB SXM5"
    assert mod._device("2x RTX 6000 Ada") == "RTX 6000 Ada"


def test_lambda_full_build_when_the_snapshot_is_here(tmp_path):
    git_dir = _mirror("lambdal+deeplearning-benchmark")
    if not git_dir.exists():
        pytest.skip("no deeplearning-benchmark snapshot on this machine")
    mod = _script("derive_public_lambda")
    out = tmp_path / "public_lambda.csv"
    mod.main(["--git-dir", str(git_dir), "--commit", LAMBDA_COMMIT, "--out", str(out)])
    runs = perfmodel.load_runs(str(out))
    assert len(runs) == 198  # as data/README.md states
    assert runs["gpu_type"].nunique() == 14
    assert sorted(runs["gpu_count"].unique()) == [1, 2, 4, 8]


def _torchtitan_fixture(mod) -> tuple[dict, dict]:
    commits = {(p, c): c or TORCHTITAN_COMMIT for p, c in mod.SOURCES}
    texts = {k: (FIXTURES / "torchtitan" / mod.fixture_name(k[0], commits[k])).read_text(encoding="utf-8")
             for k in commits}
    return texts, commits


def test_torchtitan_builder_reproduces_committed_rows():
    mod = _script("derive_public_torchtitan")
    df, dropped = mod.build(*_torchtitan_fixture(mod))
    # April 2024: the two out-of-memory rows (dropped from later versions); August 2024: the 405B table and the
    # Llama 2 table (whose rows win over the April ones); Dec 2024: tables 4 and 5; async TP: the 70B table (3 x 2);
    # Trainy: 2
    assert len(df) == 22 and dropped.empty
    assert _csv(df, mod) == _committed_rows(DATA / "public_torchtitan.csv", df["run_id"])
    assert list(df.loc[df["status"] == "oom", "model"]) == ["llama2-70b", "llama2-70b"]
    assert df.loc[df["status"] == "oom", "step_time_s"].isna().all()
    # the derivation: global tokens / (TPS per GPU x GPUs); global batch = local batch x FSDP degree
    pp = df[df["pp_schedule"] == "1F1B"].iloc[0]
    assert (pp.global_batch_size, pp.dp, pp.tp, pp.pp, pp.vp, pp.zero_stage) == (256, 8, 8, 8, 1, 2)
    assert pp.step_time_s == pytest.approx(256 * 8192 / (100 * 512)) and pd.isna(pp.micro_batch_size)
    assert pp.peak_mem_bytes == pytest.approx(82.5 * 2**30) and pp.mem_source == "reported"
    inter = df[df["pp_schedule"] == "Interleaved 1F1B"].iloc[0]
    assert pd.isna(inter.vp)  # the stages per rank are not stated
    a100 = df[(df["model"] == "llama2-13b") & (df["ac_reported"] == "no")].iloc[0]
    assert (a100.gpu_count, a100.batch_size, a100.micro_batch_size, a100.zero_stage, a100.recompute) == (
        64, 2, 2, 3, "none")
    assert a100.step_time_s == pytest.approx(128 * 4096 / (2162 * 64))
    # torchtitan's FLOPs reproduce its published MFU (A100: with the embedding, as train.py counted in April 2024)
    assert df["flops_check_ratio"].dropna().between(0.997, 1.002).all() and df["flops_check_ratio"].notna().sum() == 8
    assert df.loc[df["ac_reported"].str.startswith("selective"), "recompute"].isna().all()
    assert (df.loc[df["tp"] > 1, "sequence_parallel"] == 1).all()
    assert set(df.loc[df["float8"] == 1, "precision"]) == {"fp8"}


def test_torchtitan_shapes_give_the_published_parameter_counts():
    mod = _script("derive_public_torchtitan")
    counts = {k: mod.param_count(v)[0] for k, v in mod.SHAPES.items()}
    # Meta's model cards (as cited in derive_public_megatron_bridge.MODELS) for Llama 3 / 3.1
    assert counts["llama3-8b"] == 8_030_261_248 and counts["llama3-70b"] == 70_553_706_496
    assert counts["llama3-405b"] == 405_853_388_800
    assert {k: mod.ffn_hidden(v) for k, v in mod.SHAPES.items()} == {
        "llama2-13b": 13824, "llama2-70b": 28672, "llama3-8b": 14336, "llama3-70b": 28672, "llama3-405b": 53248}


def test_torchtitan_builder_refuses_a_changed_caption(tmp_path):
    mod = _script("derive_public_torchtitan")
    texts, commits = _torchtitan_fixture(mod)
    key = (mod.H100_2412, None)
    texts[key] = texts[key].replace("Each H100 GPU is equipped with 96GB HBM2e", "Each H100 GPU has 80GB HBM3")
    with pytest.raises(ValueError, match="no longer says"):
        mod.build(texts, commits)


def test_torchtitan_full_build_when_the_snapshot_is_here(tmp_path):
    git_dir = _mirror("pytorch+torchtitan")
    if not git_dir.exists():
        pytest.skip("no torchtitan snapshot on this machine")
    mod = _script("derive_public_torchtitan")
    mod.check_shapes(git_dir)
    out = tmp_path / "x.csv"
    mod.main(["--git-dir", str(git_dir), "--commit", TORCHTITAN_COMMIT, "--out", str(out)])
    assert out.read_bytes() == (DATA / "public_torchtitan.csv").read_bytes()


def test_bigscience_builder_reproduces_committed_rows():
    mod = _script("derive_public_bigscience")
    df, dropped = mod.build((FIXTURES / "bigscience" / "chronicles-prequel.md").read_text(encoding="utf-8"),
                            BIGSCIENCE_COMMIT)
    # Best TFLOPs fp16: 3 (times from the log lines); the first topology table: 9; 48 node contenders: 4 + 2 (ZeRO
    # stage 1 and 0); Rebalancing layers: 4 + 4 (two out of memory)
    assert len(df) == 26 and dropped.empty
    assert _csv(df, mod) == _committed_rows(DATA / "public_bigscience.csv", df["run_id"])
    assert (df["tp"] * df["pp"] * df["dp"] == df["gpu_count"]).all()
    best = df[df["section"] == "Best TFLOPs / fp16"]
    assert list(best["step_time_s"]) == [769.99, 844.81, 430.21] and set(best["precision"]) == {"fp16"}
    assert list(best["n_layers"]) == [8, 80, 80]  # from the "20B model: ..." / "200B model: ..." lines
    row = df[(df["gpu_count"] == 384) & (df["dp"] == 12)].iloc[0]
    assert (row.step_time_s, row.global_batch_size, row.batch_size, row.micro_batch_size) == (189.06, 2040, 2040 / 384, 1)
    assert row.peak_mem_bytes == 47 * 2**30 and pd.isna(row.n_layers)  # the topology tables state no shape
    zs = df[df["run_id"].str.contains("-zs0/")]
    assert list(zs["zero_stage"]) == [0] and zs.iloc[0].step_time_s == 137.34
    oom = df[df["status"] == "oom"]
    assert len(oom) == 2 and oom["step_time_s"].isna().all() and set(oom["precision"]) == {"bf16"}
    assert set(df.loc[df["section"] == "Rebalancing layers", "n_layers"]) == {106, 100}
    assert df["tflops_check_ratio"].dropna().between(0.97, 1.03).all()


def test_bigscience_builder_drops_a_repeated_listing_and_a_row_that_does_not_add_up():
    mod = _script("derive_public_bigscience")
    text = (FIXTURES / "bigscience" / "chronicles-prequel.md").read_text(encoding="utf-8")
    table = text[text.index("| Nodes | Size | DP | TP | PP | MBS |  GBS"):text.index("## 48 node contenders")]
    bad = "|    40 | 187B |  8 |  8 | 10 |   4 | 2048 | GB   | 147.04 | 135.92 | 02-21 |\n"
    extra = "## Choosing again\n\n" + table.replace("| 02-20 |\n|       |", "| 02-20 |\n" + bad + "|       |", 1)
    df, dropped = mod.build(text + "\n" + extra, BIGSCIENCE_COMMIT)
    assert len(df) == 26
    reasons = list(dropped["reason"])
    assert reasons.count("the same measurement as a row of an earlier table (kept there)") == 9
    assert any(r.startswith("DP 8 x TP 8 x PP 10 = 640") for r in reasons)


def test_bigscience_full_build_when_the_snapshot_is_here(tmp_path):
    git_dir = _mirror("bigscience-workshop+bigscience")
    if not git_dir.exists():
        pytest.skip("no bigscience snapshot on this machine")
    mod = _script("derive_public_bigscience")
    out = tmp_path / "x.csv"
    mod.main(["--git-dir", str(git_dir), "--commit", BIGSCIENCE_COMMIT, "--out", str(out)])
    assert out.read_bytes() == (DATA / "public_bigscience.csv").read_bytes()
