"""perfmodel.importers.mlperf on real MLPerf Training log excerpts (tests/data/mlperf/README.md)."""

from __future__ import annotations

import json
import shutil
import statistics
from pathlib import Path

import pandas as pd
import pytest

from perfmodel.cli import main
from perfmodel.importers import from_mlperf
from perfmodel.importers.mlperf import (
    BENCHMARKS,
    MLPerfFormatError,
    find_result_files,
    implementation_precision,
    is_implementation_file,
    loadable,
    parse_mllog,
    summarize_run,
)
from perfmodel.io import load_runs, read_raw_history

DATA = Path(__file__).parent / "data" / "mlperf"
BERT = DATA / "v4.0/Dell/results/XE9680x8H100-SXM-80GB/bert/result_0.txt"
LLAMA = DATA / "v4.0/Dell/results/XE9680x8H100-SXM-80GB/llama2_70b_lora/result_0.txt"
RESNET = DATA / "v1.0/NVIDIA/results/dgxa100_ngc21.05_mxnet/resnet/result_0.txt"
DELL_SYSTEM = DATA / "v4.0/Dell/systems/XE9680x8H100-SXM-80GB.json"
RESNET_SYSTEM = DATA / "v1.0/NVIDIA/systems/dgxa100_ngc21.05_mxnet.json"


@pytest.fixture(scope="module")
def runs() -> pd.DataFrame:
    return from_mlperf([DATA]).set_index("benchmark")


class TestParse:
    def test_events_are_parsed_and_rank_duplicates_dropped(self):
        text = BERT.read_text()
        events = parse_mllog(text)
        assert [e["key"] for e in events][:2] == ["submission_benchmark", "submission_org"]
        # The same line printed by another rank is one event.
        line = next(ln for ln in text.splitlines() if '"key": "global_batch_size"' in ln)
        assert len(parse_mllog(text + "\n" + line + "\n0: " + line)) == len(events)

    def test_non_mllog_and_broken_lines_are_skipped(self):
        events = parse_mllog('hello\n:::MLLOG {"key": "x", "time_ms": 1, "value": 2}garbage\n:::MLLOG {not json\n')
        assert [(e["key"], e["value"]) for e in events] == [("x", 2)]

    def test_text_must_be_str(self):
        with pytest.raises(TypeError, match="log text as a str"):
            parse_mllog(b":::MLLOG {}")

    def test_no_mllog_lines_is_a_format_error(self):
        with pytest.raises(MLPerfFormatError, match="no ':::MLLOG' lines"):
            summarize_run("just some text\n", None, source_path="x.txt")


class TestStepTime:
    """Step times hand-checked against the numbers in the excerpts."""

    def test_resnet_from_tracked_stats(self, runs):
        r = runs.loc["resnet"]
        # imgs_sec logged per epoch; the first (warm-up) epoch is left out, the median of the other six taken.
        later = [26706.53814739906, 26713.780938285385, 26792.472762354355, 26730.467585302147,
                 26735.187057380692, 26741.70611836667]
        assert r["step_time_method"] == "tracked_stats"
        assert r["step_time_s"] == pytest.approx(3264 / statistics.median(later))
        assert r["step_time_s"] == pytest.approx(0.12210, abs=1e-5)
        assert r["global_batch_size"] == 3264 and r["gpu_count"] == 8 and r["batch_size"] == 408
        # The epoch timestamps agree with the logged throughput (evaluation lies outside the epochs).
        assert r["throughput_check_ratio"] == pytest.approx(1.0, abs=0.01)

    def test_bert_from_the_stretches_between_evaluations(self, runs):
        r = runs.loc["bert"]
        # eval_stop -> next eval_start, in ms, and the samples between the evaluations' epoch_num.
        seconds = (57174 - 38679 + 76642 - 58543 + 96565 - 78015) / 1000
        samples = 600328 - 150801
        assert r["step_time_method"] == "eval_intervals"
        assert r["step_time_s"] == pytest.approx(768 * seconds / samples)
        assert r["steps_timed"] == round(samples / 768)
        # BERT's logged throughput counts evaluation time too, so it is ~7% lower than the training-only rate.
        tracked = statistics.median([7090.65516340727, 7674.279469653575, 7553.342773658346, 7702.437474480688])
        assert r["throughput_check_ratio"] == pytest.approx((samples / seconds) / tracked)

    def test_llama_from_sample_counted_blocks(self, runs):
        r = runs.loc["llama2_70b_lora"]
        # block_start -> block_stop, the first (warm-up) block of 1536 samples left out; 384 samples each.
        seconds = (1713995425707 - 1713995231428 + 1713995658731 - 1713995463420 + 1713995890838
                   - 1713995696426) / 1000
        assert r["step_time_method"] == "blocks_samples_count"
        assert r["step_time_s"] == pytest.approx(8 * seconds / (3 * 384))
        assert r["batch_size"] == 1 and r["gradient_accumulation_steps"] == 4

    def test_time_to_train_and_status(self, runs):
        assert runs.loc["bert", "time_to_train_s"] == pytest.approx((1695170355358 - 1695170016945) / 1000)
        assert set(runs["status"]) == {"ok"} and set(runs["mlperf_status"]) == {"success"}

    def test_aborted_run_is_an_error_row(self):
        text = BERT.read_text().replace('"status": "success"', '"status": "aborted"')
        row = summarize_run(text, json.loads(DELL_SYSTEM.read_text()), source_path="b.txt")
        assert row["status"] == "error" and "aborted" in row["error"]

    def test_single_throughput_is_used_as_is(self):
        text = "\n".join([
            ':::MLLOG {"key": "submission_benchmark", "value": "resnet", "time_ms": 0, "metadata": {}}',
            ':::MLLOG {"key": "global_batch_size", "value": 100, "time_ms": 0, "metadata": {}}',
            ':::MLLOG {"key": "run_start", "value": null, "time_ms": 0, "metadata": {}}',
            ':::MLLOG {"key": "tracked_stats", "value": {"throughput": 400.0}, "time_ms": 5, "metadata": {"step": 1}}',
            ':::MLLOG {"key": "run_stop", "value": null, "time_ms": 9000, "metadata": {"status": "success"}}',
        ])
        row = summarize_run(text, {"accelerator_model_name": "NVIDIA A100-SXM4-80GB", "accelerators_per_node": "4",
                                   "number_of_nodes": "1"})
        assert row["step_time_s"] == pytest.approx(0.25) and row["batch_size"] == 25
        assert row["time_to_train_s"] == pytest.approx(9.0)


def _log(*events) -> str:
    """MLLOG lines from (key, value, time_ms, metadata) tuples."""
    return "\n".join(":::MLLOG " + json.dumps({"key": k, "value": v, "time_ms": t, "metadata": m})
                     for k, v, t, m in events)


_H100x8 = {"accelerator_model_name": "NVIDIA H100-SXM5-80GB", "accelerators_per_node": "8", "number_of_nodes": "1"}


class TestEdgeCases:
    def test_block_start_holding_a_step_count(self):
        # Seen in a v4.0 log: block_start's samples_count is a step count, block_stop's a sample count.
        text = _log(("submission_benchmark", "llama2_70b_lora", 0, {}), ("global_batch_size", 8, 0, {}),
                    ("run_start", None, 0, {}), ("block_start", None, 0, {"samples_count": 0}),
                    ("block_stop", None, 100_000, {"samples_count": 800}),
                    ("block_start", None, 110_000, {"samples_count": 100}),
                    ("block_stop", None, 150_000, {"samples_count": 1200}),
                    ("block_start", None, 160_000, {"samples_count": 150}),
                    ("block_stop", None, 200_000, {"samples_count": 1600}),
                    ("run_stop", None, 200_000, {"status": "success"}))
        row = summarize_run(text, _H100x8)
        # Blocks 2 and 3 (the first is warm-up): 80 s for 800 samples -> 0.8 s per 8-sample step.
        assert row["step_time_method"] == "blocks_samples_count"
        assert row["step_time_s"] == pytest.approx(0.8)

    def test_gpt3_throughput_in_tokens_is_converted(self):
        text = _log(("submission_benchmark", "gpt3", 0, {}), ("global_batch_size", 1024, 0, {}),
                    ("max_sequence_length", 2048, 0, {}), ("run_start", None, 0, {}),
                    ("tracked_stats", {"throughput": 1.0e6}, 10, {"step": 1}),
                    ("tracked_stats", {"throughput": 2048 * 512.0}, 20, {"step": 2}),
                    ("run_stop", None, 30, {"status": "success"}))
        row = summarize_run(text, {**_H100x8, "number_of_nodes": "128"})
        assert row["step_time_method"] == "tracked_stats" and row["step_time_s"] == pytest.approx(2.0)

    def test_impossible_speed_is_flagged(self):
        # BERT-large at 10^6 sequences/s on 8 H100s would be ~1.2e17 FLOP/s per device: above any peak.
        text = _log(("submission_benchmark", "bert", 0, {}), ("global_batch_size", 1000, 0, {}),
                    ("run_start", None, 0, {}), ("tracked_stats", {"throughput": 1e6}, 10, {"step": 1}),
                    ("run_stop", None, 20, {"status": "success"}))
        row = summarize_run(text, _H100x8)
        assert "exceeds the device's fastest dense peak" in row["excluded_reason"]
        assert loadable(pd.DataFrame([row])).empty


class TestRecord:
    def test_system_json_gives_devices_and_framework(self, runs):
        r = runs.loc["bert"]
        assert (r["gpu_type"], r["accelerator_name"]) == ("H100-SXM5-80GB", "NVIDIA H100-SXM5-80GB")
        assert (r["nodes"], r["accelerators_per_node"], r["submitter"], r["system"]) == (
            1, 8, "Dell", "XE9680x8H100-SXM-80GB")
        assert "PyTorch" in r["framework"]
        # "NVIDIA A100-SXM4-80GB (400W)": the power note in brackets is dropped before resolving.
        assert runs.loc["resnet", "gpu_type"] == "A100-SXM4-80GB"

    def test_mlperf_spelling_of_the_a100_sxm4_keeps_its_memory_size(self):
        from perfmodel.importers.mlperf import resolve_device

        assert resolve_device("NVIDIA A100-SXM-40GB") == "A100-SXM4-40GB"
        assert resolve_device("NVIDIA A100-SXM-80GB (400W)") == "A100-SXM4-80GB"
        assert resolve_device("Acme Matrix Engine 9") is None

    def test_precision_is_evidence_or_marked_assumed(self, runs):
        assert runs.loc["bert", ["precision_reported", "precision_source", "precision"]].tolist() == [
            "fp8", "log_text", "fp8"]  # H100 has an fp8 peak
        assert runs.loc["bert", "precision_evidence"] == "using fp8"
        assert runs.loc["resnet", ["precision", "precision_source"]].tolist() == ["bf16", "assumed"]
        assert not (runs["precision"] == "fp32").any()

    def test_model_sizes_come_from_the_cited_table(self, runs):
        for bench in runs.index:
            spec = BENCHMARKS[bench]
            assert runs.loc[bench, "params"] == spec.params and spec.source
            assert runs.loc[bench, "family"] == spec.family
        # perfmodel.transformer: 6N per token + 12 n_layer n_ctx d of attention, at BERT-large's mean unpadded
        # length (256 tokens of 512: more than half of MLPerf's Wikipedia positions are padding, which submissions
        # skip).
        bert = (6 * 12 * 24 * 1024**2 + 12 * 24 * 256 * 1024) * 256
        assert runs.loc["bert", "flops_per_sample"] == pytest.approx(bert)

    def test_open_division_is_excluded(self):
        # the open division may change the model: the benchmark's FLOPs would not describe the run
        text = _log(("submission_benchmark", "bert", 0, {}), ("submission_division", "open", 0, {}),
                    ("global_batch_size", 768, 0, {}), ("run_start", None, 0, {}),
                    ("tracked_stats", {"throughput": 8000.0}, 10, {"step": 1}),
                    ("run_stop", None, 20, {"status": "success"}))
        row = summarize_run(text, _H100x8)
        assert "open division" in row["excluded_reason"] and row["division"] == "open"
        assert loadable(pd.DataFrame([row])).empty

    def test_open_division_from_the_system_description_is_excluded(self):
        # the log does not say its division; the system JSON's "division" does
        text = _log(("submission_benchmark", "bert", 0, {}), ("global_batch_size", 768, 0, {}),
                    ("run_start", None, 0, {}), ("tracked_stats", {"throughput": 8000.0}, 10, {"step": 1}),
                    ("run_stop", None, 20, {"status": "success"}))
        row = summarize_run(text, dict(_H100x8, division="Open"))
        assert "open division" in row["excluded_reason"] and row["division"] == "Open"
        assert loadable(pd.DataFrame([row])).empty
        closed = summarize_run(text, dict(_H100x8, division="closed"))
        assert closed["division"] == "closed" and "open division" not in (closed["excluded_reason"] or "")

    def test_round_and_run_id_from_the_path(self, runs):
        assert runs.loc["resnet", "round"] == "v1.0"
        assert runs.loc["bert", "run_id"] == "mlperf-v4.0/Dell/XE9680x8H100-SXM-80GB/bert/result_0"

    def test_table_loads_with_load_runs(self, runs):
        got = load_runs(loadable(runs.reset_index()))
        assert len(got) == 3 and set(got["gpu_type"]) == {"A100-SXM4-80GB", "H100-SXM5-80GB"}

    def test_unresolved_accelerator_is_kept_but_marked(self, tmp_path):
        tree = tmp_path / "v9.9" / "Acme" / "results" / "box" / "bert"
        tree.mkdir(parents=True)
        shutil.copy(BERT, tree / "result_0.txt")
        (tmp_path / "v9.9" / "Acme" / "systems").mkdir()
        system = json.loads(DELL_SYSTEM.read_text()) | {"accelerator_model_name": "Acme Matrix Engine 9"}
        (tmp_path / "v9.9" / "Acme" / "systems" / "box.json").write_text(json.dumps(system))
        df = from_mlperf(tmp_path)
        assert df.loc[0, "gpu_type"] is None and df.loc[0, "accelerator_name"] == "Acme Matrix Engine 9"
        assert "does not resolve" in df.loc[0, "excluded_reason"]
        assert loadable(df).empty

    def test_missing_system_json_leaves_the_count_unknown(self, tmp_path):
        shutil.copy(BERT, tmp_path / "result_0.txt")
        row = from_mlperf(tmp_path / "result_0.txt").iloc[0]
        assert pd.isna(row["gpu_count"]) and "accelerator count unknown" in row["excluded_reason"]


class TestBadInput:
    def test_missing_path(self, tmp_path):
        with pytest.raises(FileNotFoundError, match="does not exist"):
            from_mlperf(tmp_path / "nope")

    def test_folder_without_logs(self, tmp_path):
        with pytest.raises(MLPerfFormatError, match="holds no MLPerf result logs"):
            find_result_files([tmp_path])

    def test_not_a_log(self, tmp_path):
        (tmp_path / "result_0.txt").write_text("hello\n")
        with pytest.raises(MLPerfFormatError, match="not an MLPerf result log"):
            from_mlperf(tmp_path)

    def test_bad_system_json(self, tmp_path):
        (tmp_path / "s.json").write_text("{")
        with pytest.raises(MLPerfFormatError, match="not valid JSON"):
            from_mlperf(BERT, system=tmp_path / "s.json")

    def test_wrong_type(self):
        with pytest.raises(TypeError, match="a path or a list of paths"):
            from_mlperf(42)


class TestRobustness:
    """Issue 26 #8/#9: a broken log is left out with a reason, never a traceback; a log is imported once."""

    def test_deeply_nested_mllog_line_is_skipped(self):
        text = _log(("submission_benchmark", "bert", 0, {})) + "\n:::MLLOG " + "[" * 100_000 + "]" * 100_000
        text += "\n:::MLLOG {\"key\": \"x\", \"time_ms\": 1, \"value\": " + "[" * 100_000 + "]" * 100_000 + "}"
        assert [e["key"] for e in parse_mllog(text)] == ["submission_benchmark"]

    @pytest.mark.parametrize("metadata", ["a string", 7, ["list"], None])
    def test_event_with_non_mapping_metadata(self, metadata):
        text = _log(("submission_benchmark", "resnet", 0, {}), ("global_batch_size", 256, 0, metadata),
                    ("run_start", None, 1000, metadata), ("run_stop", None, 9000, metadata),
                    ("tracked_stats", {"throughput": 1000.0}, 5000, metadata))
        row = summarize_run(text, _H100x8, source_path="x")
        assert row["time_to_train_s"] == pytest.approx(8.0)

    def test_events_with_odd_keys_and_times_are_skipped(self):
        text = "\n".join(":::MLLOG " + json.dumps(e) for e in (
            {"key": ["list"], "time_ms": 1}, {"key": "run_start", "time_ms": "soon"},
            {"key": "run_start", "time_ms": 10**400}, {"key": "run_start", "time_ms": 5, "metadata": {}}))
        assert [(e["key"], e["time_ms"]) for e in parse_mllog(text)] == [("run_start", 5.0)]

    @pytest.mark.parametrize("gbs", [-256, 0, 2.5])
    def test_bad_batch_is_marked_not_fatal(self, tmp_path, capsys, gbs):
        """One log with a negative batch aborted the whole import."""
        root = tmp_path / "v4.0"
        shutil.copytree(DATA / "v4.0", root)
        bad = root / "Dell/results/XE9680x8H100-SXM-80GB/bert/result_1.txt"
        text = _log(("submission_benchmark", "bert", 0, {}), ("global_batch_size", gbs, 0, {}),
                    ("run_start", None, 0, {}), ("run_stop", None, 9000, {"status": "success"}),
                    ("tracked_stats", {"throughput": 100.0}, 5000, {"step": 1}))
        bad.write_text(text)
        runs = from_mlperf([root]).set_index("source_path")
        assert "is not a positive integer" in runs.loc[str(bad), "excluded_reason"]
        out = tmp_path / "r.csv"
        assert main(["import", "mlperf", str(root), "-o", str(out)]) == 0
        captured = capsys.readouterr()
        assert "appended 2 runs" in captured.out and "global_batch_size" in captured.out
        assert len(load_runs(out)) == 2

    def test_schema_refusal_is_marked_not_fatal(self, tmp_path, monkeypatch):
        from perfmodel.importers.mlperf import importer as mlperf

        real = mlperf.summarize_run

        def negative_count(*a, **k):
            row = real(*a, **k)
            if row["benchmark"] == "bert":
                row["step_time_s"] = -0.5  # a value the schema refuses on a row that is otherwise fine
            return row

        monkeypatch.setattr(mlperf, "summarize_run", negative_count)
        runs = from_mlperf([DATA / "v4.0"]).set_index("benchmark")
        assert runs.loc["bert", "excluded_reason"].startswith("the schema refuses it")
        assert "step_time_s" in runs.loc["bert", "excluded_reason"]
        assert pd.isna(runs.loc["llama2_70b_lora", "excluded_reason"])
        assert list(loadable(runs.reset_index())["benchmark"]) == ["llama2_70b_lora"]

    def test_unexpected_failure_in_one_log_is_marked(self, tmp_path, monkeypatch):
        from perfmodel.importers.mlperf import importer as mlperf

        real = mlperf.summarize_run

        def boom(text, *a, **k):
            if "llama2_70b_lora" in k.get("source_path", ""):
                raise ZeroDivisionError("division by zero")
            return real(text, *a, **k)

        monkeypatch.setattr(mlperf, "summarize_run", boom)
        runs = from_mlperf([DATA / "v4.0"]).set_index("benchmark")
        assert "could not be read (ZeroDivisionError" in runs.loc["llama2_70b_lora", "excluded_reason"]
        assert pd.isna(runs.loc["bert", "excluded_reason"])

    def test_string_system_fields_and_negative_counts(self, tmp_path):
        text = BERT.read_text()
        row = summarize_run(text, {"accelerator_model_name": 7, "accelerators_per_node": "8",
                                   "number_of_nodes": "1"}, source_path="x")
        assert row["gpu_type"] is None and "does not resolve" in row["excluded_reason"]
        row = summarize_run(text, {**_H100x8, "accelerators_per_node": "-8", "number_of_nodes": "-1"},
                            source_path="x")
        assert row["gpu_count"] is None and "accelerator count unknown" in row["excluded_reason"]
        row = summarize_run(text, ["not", "a", "mapping"], source_path="x")
        assert row["gpu_count"] is None and row["excluded_reason"]

    def test_import_twice_adds_nothing(self, tmp_path, capsys):
        """`perfmodel import mlperf DIR -o out.csv` run twice doubled the rows."""
        out = tmp_path / "runs.csv"
        assert main(["import", "mlperf", str(DATA / "v4.0"), "-o", str(out)]) == 0
        assert main(["import", "mlperf", str(DATA / "v4.0"), "-o", str(out)]) == 0
        assert "appended 0 runs" in capsys.readouterr().out
        copy = tmp_path / "copy" / "v4.0"
        shutil.copytree(DATA / "v4.0", copy)  # the same logs elsewhere: the same runs
        assert main(["import", "mlperf", str(copy), "-o", str(out)]) == 0
        hist = read_raw_history(out)
        assert len(hist) == 2 and hist["source_id"].is_unique and hist["run_id"].is_unique
        assert hist["source_id"].str.startswith("mlperf:").all()


class TestCLI:
    def test_import_appends_to_a_history(self, tmp_path, capsys):
        out = tmp_path / "runs.csv"
        assert main(["import", "mlperf", str(DATA / "v4.0"), "-o", str(out)]) == 0
        assert "appended 2 runs" in capsys.readouterr().out
        assert main(["import", "mlperf", str(RESNET), "-o", str(out), "--round", "v1.0"]) == 0
        hist = read_raw_history(out)
        assert len(hist) == 3 and set(hist["benchmark"]) == {"bert", "llama2_70b_lora", "resnet"}
        assert len(load_runs(out)) == 3

    def test_bad_path_is_one_line(self, tmp_path, capsys):
        assert main(["import", "mlperf", str(tmp_path / "missing"), "-o", str(tmp_path / "r.csv")]) == 2
        err = capsys.readouterr().err
        assert err.startswith("perfmodel: error:") and "does not exist" in err and err.count("\n") == 1

    def test_nothing_importable_is_one_line(self, tmp_path, capsys):
        shutil.copy(BERT, tmp_path / "result_0.txt")
        assert main(["import", "mlperf", str(tmp_path), "-o", str(tmp_path / "r.csv")]) == 2
        err = capsys.readouterr().err
        assert "none of the 1 runs found can be imported" in err and err.count("\n") == 1
        assert not (tmp_path / "r.csv").exists()

    def test_unknown_source_is_a_usage_error(self, tmp_path, capsys):
        with pytest.raises(SystemExit) as exc:
            main(["import", "wandb", str(tmp_path), "-o", "x.csv"])
        assert exc.value.code == 2 and capsys.readouterr().err.startswith("perfmodel: error:")


def test_epoch_times_from_a_real_resnet_log():
    from perfmodel.importers.mlperf import epoch_times

    epochs = epoch_times(RESNET.read_text())
    assert [k for k, _ in epochs] == list(range(1, len(epochs) + 1)) and len(epochs) >= 2
    # epoch 1: epoch_start 1621118646731 -> epoch_stop 1621118726892 ms in the log
    assert epochs[0] == (1, pytest.approx(80.161))
    assert epochs[1] == (2, pytest.approx(47.971))


def test_epoch_times_stops_at_a_gap_and_ignores_logs_without_epochs():
    from perfmodel.importers.mlperf import epoch_times

    line = ':::MLLOG {{"key": "{k}", "value": null, "time_ms": {t}, "metadata": {{"epoch_num": {n}}}}}'
    text = "\n".join(line.format(k=k, t=t, n=n) for k, t, n in [
        ("epoch_start", 0, 1), ("epoch_stop", 2000, 1), ("epoch_start", 2000, 2), ("epoch_stop", 3500, 2),
        ("epoch_start", 9000, 4), ("epoch_stop", 9900, 4)])
    assert epoch_times(text) == [(1, 2.0), (2, 1.5)]
    assert epoch_times(':::MLLOG {"key": "run_start", "value": null, "time_ms": 0, "metadata": {}}') == []


# ------------------------------------------------------------------------------------- implementation configs
def _implementation(rnd: str, submitter: str, benchmark: str) -> dict[str, str]:
    """The fixture's ``<submitter>/benchmarks/<benchmark>/implementations/`` files, keyed as in the repository."""
    root = DATA / rnd / submitter
    return {f"{submitter}/{f.relative_to(root).as_posix()}": f.read_text()
            for f in sorted((root / "benchmarks" / benchmark).rglob("*"))
            if f.is_file() and is_implementation_file(f.name)}


_LORA_CONFIG = "NVIDIA/benchmarks/llama2_70b_lora/implementations/nemo/config_DGXH100_1x8x4xtp4pp1cp1.sh"


class TestImplementationPrecision:
    """The precision a submission's launch config states (excerpts of the v3.0, v3.1 and v4.0 repositories)."""

    def test_config_named_by_the_systems_readme(self):
        # README-eos_ngc24.04_nemo.md names nemo/config_DGXH100_1x8x4xtp4pp1cp1.sh, which exports FP8=True.
        got = implementation_precision(_implementation("v4.0", "NVIDIA", "llama2_70b_lora"), "eos_ngc24.04_nemo")
        assert got[:2] == ("fp8", "implementation_config")
        assert "README-eos_ngc24.04_nemo.md" in got[2] and got[2].endswith(f"{_LORA_CONFIG}: export FP8=True")

    def test_without_the_readme_every_config_for_the_size_must_agree(self):
        files = _implementation("v4.0", "NVIDIA", "llama2_70b_lora")
        files = {p: t for p, t in files.items() if "README" not in p}
        # no config is the system's: of the 1-node, 8-GPU configs, only those naming the run's device
        got = implementation_precision(files, "eos_ngc24.04_nemo", _H100x8, device="H100-SXM5-80GB")
        assert got[:2] == ("fp8", "implementation_configs") and "naming H100" in got[2]
        assert "config_DGXH100_1x8x4xtp4pp1cp1.sh" in got[2] and "DGXH200" not in got[2]
        # the device not given, or one no config names: another device's config is never read
        assert implementation_precision(files, "eos_ngc24.04_nemo", _H100x8) is None
        assert implementation_precision(files, "eos_ngc24.04_nemo", _H100x8, device="MI325X") is None
        # the H100 config not stating fp8 any more: nothing is claimed (the H200 one's FP8=True does not count)
        h100 = "NVIDIA/benchmarks/llama2_70b_lora/implementations/nemo/config_DGXH100_1x8x4xtp4pp1cp1.sh"
        files[h100] = files[h100].replace("export FP8=True", "export FP8=False")
        assert implementation_precision(files, "eos_ngc24.04_nemo", _H100x8, device="H100-SXM5-80GB") is None

    def test_flag_whose_argparse_help_enables_fp8(self):
        # config_ESC-N8-E11.sh passes --use_transformer_engine2; run_pretraining.py: help='Enable FP8 layers'
        files = _implementation("v3.1", "ASUSTeK", "bert")
        got = implementation_precision(files, "ESC-N8-E11")
        assert got[:2] == ("fp8", "implementation_config")
        assert "--use_transformer_engine2" in got[2] and "run_pretraining.py" in got[2]
        # the flag alone says nothing: without the code that defines it, no claim
        assert implementation_precision({p: t for p, t in files.items() if not p.endswith(".py")},
                                        "ESC-N8-E11") is None

    def test_config_for_the_systems_node_count(self):
        # dgxh100_n64_nemo: 64 nodes; of the two configs only config_DGXH100_64x8x128x4x8_mbs1.sh is for 64 nodes,
        # and it states fp8 through the config_fp8.sh it sources
        system = json.loads((DATA / "v3.0/NVIDIA/systems/dgxh100_n64_nemo.json").read_text())
        got = implementation_precision(_implementation("v3.0", "NVIDIA", "gpt3"), "dgxh100_n64_nemo", system,
                                       device="H100-SXM5-80GB")
        assert got[:2] == ("fp8", "implementation_configs")
        assert "64 nodes" in got[2] and "config_DGXH100_64x8x128x4x8_mbs1.sh;" in got[2]
        assert got[2].endswith("config_fp8.sh: export FP8=True")
        # a system size no published config has: no claim
        assert implementation_precision(_implementation("v3.0", "NVIDIA", "gpt3"), "dgxh100_n64_nemo",
                                        dict(system, number_of_nodes="32"), device="H100-SXM5-80GB") is None

    def test_config_that_does_not_state_fp8(self):
        # the 434-node BERT config passes no FP8 flag (the flag is defined, the config does not use it)
        assert implementation_precision(_implementation("v4.0", "NVIDIA", "bert"), "eos_n434_ngc23.09_pytorch") is None

    def test_last_setting_wins_and_conditionals_are_not_read(self):
        common = {"x/implementations/impl/config_common.sh": "export FP8=True\n"}
        later_off = {"x/implementations/impl/config_box.sh": "source $(dirname ${BASH_SOURCE[0]})/config_common.sh\n"
                                                             "export FP8=False\n", **common}
        assert implementation_precision(later_off, "box") is None
        later_on = {"x/implementations/impl/config_box.sh": "export FP8=False\n"
                                                            "source $(dirname ${BASH_SOURCE[0]})/config_common.sh\n",
                    **common}
        assert implementation_precision(later_on, "box")[0] == "fp8"
        conditional = {"x/implementations/impl/config_box.sh": 'if [[ "$X" == 1 ]]; then\n  export FP8=True\nfi\n'}
        assert implementation_precision(conditional, "box") is None
        assert implementation_precision({"x/implementations/impl/config_box.sh": "# export FP8=True\n"}, "box") is None

    def test_nothing_to_read(self):
        assert implementation_precision({}, "box") is None
        assert implementation_precision({"x/implementations/impl/README.md": "text"}, "box") is None
        with pytest.raises(TypeError, match="mapping of path -> text"):
            implementation_precision(["config_box.sh"], "box")

    def test_file_names_read(self):
        assert is_implementation_file("a/b/config_DGXH100_1x8x4xtp4pp1cp1.sh")
        assert is_implementation_file("README-eos.md") and is_implementation_file("run_pretraining.py")
        assert is_implementation_file("nemo/conf/megatron_gpt_peft_tuning_config.yaml")  # read for the layout
        assert is_implementation_file("pytorch/run_and_time.sh")
        assert not is_implementation_file("a/run.sub") and not is_implementation_file("a/Dockerfile")


class TestPrecisionFromTheImplementation:
    """summarize_run / from_mlperf read the config only where the log and the system description are silent."""

    def test_silent_log_on_an_fp8_device(self):
        # The v1.0 ResNet log states no precision; on an H100 system the implementation's FP8=True is taken.
        row = summarize_run(RESNET.read_text(), _H100x8, system="eos_ngc24.04_nemo",
                            implementation=_implementation("v4.0", "NVIDIA", "llama2_70b_lora"))
        assert row["precision"] == "fp8"
        assert (row["precision_reported"], row["precision_source"]) == ("fp8", "implementation_config")
        assert _LORA_CONFIG in row["precision_evidence"]

    def test_no_fp8_peak_no_fp8(self):
        # A100: no fp8 peak in perfmodel.hardware, so the config's fp8 is not used at all
        row = summarize_run(RESNET.read_text(), json.loads(RESNET_SYSTEM.read_text()), system="eos_ngc24.04_nemo",
                            implementation=_implementation("v4.0", "NVIDIA", "llama2_70b_lora"))
        assert (row["precision"], row["precision_source"]) == ("bf16", "assumed")

    def test_the_logs_statement_comes_first(self):
        row = summarize_run(BERT.read_text(), json.loads(DELL_SYSTEM.read_text()), system="ESC-N8-E11",
                            implementation=_implementation("v3.1", "ASUSTeK", "bert"))
        assert (row["precision_source"], row["precision_evidence"]) == ("log_text", "using fp8")

    def test_from_mlperf_finds_the_implementation_next_to_the_results(self, tmp_path):
        # A results tree laid out as in the repositories: results/<system>/, systems/<system>.json and
        # benchmarks/<benchmark>/implementations/. (The log is the ResNet excerpt and the configs the Llama-2 ones:
        # this checks where the files are looked for, not what a ResNet run used.)
        sub = tmp_path / "v4.0" / "NVIDIA"
        (sub / "results" / "eos_ngc24.04_nemo" / "resnet").mkdir(parents=True)
        shutil.copy(RESNET, sub / "results" / "eos_ngc24.04_nemo" / "resnet" / "result_0.txt")
        (sub / "systems").mkdir()
        shutil.copy(DELL_SYSTEM, sub / "systems" / "eos_ngc24.04_nemo.json")
        shutil.copytree(DATA / "v4.0/NVIDIA/benchmarks/llama2_70b_lora", sub / "benchmarks" / "resnet")
        row = from_mlperf([tmp_path]).iloc[0]
        assert (row["precision"], row["precision_source"]) == ("fp8", "implementation_config")
        assert "NVIDIA/benchmarks/resnet/implementations/nemo/config_DGXH100_1x8x4xtp4pp1cp1.sh" in row[
            "precision_evidence"]


# ------------------------------------------------------------------------ device names, flags, sourcing limits
def _one_node(gpus=8):
    return {"number_of_nodes": "1", "accelerators_per_node": str(gpus)}


def _fp8_configs(*names):
    """Configs under one implementation folder, each for one node of 8 accelerators and exporting FP8=True."""
    return {f"x/benchmarks/b/implementations/impl/{n}": "export DGXNNODES=1\nexport DGXNGPU=8\nexport FP8=True\n"
            for n in names}


class TestDeviceNamedByTheConfig:
    """Step 4: a config counts for a device only where a part of its file name is the device's model."""

    @pytest.mark.parametrize("device, other", [
        ("B200", "config_GB200_1x8x1xtp1pp1cp1.sh"),
        ("H200-SXM-141GB", "config_GH200_1x8x1.sh"),
        ("L4", "config_L40S_1x8x1.sh"),
        ("L40", "config_L40S_1x8x1.sh"),
        ("H100-PCIE-80GB", "config_DGXH100_1x8x1.sh"),
        ("H100-PCIE-80GB", "config_XE9680x8H100-SXM-80GB_1x8x1.sh"),
        ("H100-SXM5-80GB", "config_R760xa_H100-PCIe-80GB_1x8x1.sh"),
        ("B200", "config_1ccGB200_1x8x1.sh"),
    ])
    def test_another_devices_config_is_not_taken(self, device, other):
        assert implementation_precision(_fp8_configs(other), "box", _one_node(), device=device) is None

    @pytest.mark.parametrize("device, own", [
        ("B200", "config_DGXB200_1x8x1xtp1pp1cp1.sh"),
        ("GB200", "config_GB200_1x8x1xtp1pp1cp1.sh"),
        ("H200-SXM-141GB", "config_DGXH200_1x8x1.sh"),
        ("L4", "config_L4_1x8x1.sh"),
        ("L40S", "config_L40S_1x8x1.sh"),
        ("H100-SXM5-80GB", "config_DGXH100_1x8x1.sh"),
        ("H100-SXM5-80GB", "config_XE9680x8H100-SXM-80GB_1x8x1.sh"),
        ("H100-PCIE-80GB", "config_R760xa_H100-PCIe-80GB_1x8x1.sh"),
        ("H100-PCIE-80GB", "config_H100_1x8x1.sh"),  # the name does not say which part: taken
        ("B200", "config_1ccB200_1x8x1xtp1pp1cp1.sh"),  # as v5.0 Lambda's
    ])
    def test_the_devices_config_is_taken(self, device, own):
        got = implementation_precision(_fp8_configs(own), "box", _one_node(), device=device)
        assert got is not None and got[:2] == ("fp8", "implementation_configs") and own in got[2]

    def test_only_the_matching_one_among_several(self):
        files = _fp8_configs("config_DGXB200_1x8x1.sh", "config_GB200_1x8x1.sh")
        gb = "x/benchmarks/b/implementations/impl/config_GB200_1x8x1.sh"
        files[gb] = files[gb].replace("FP8=True", "FP8=False")
        got = implementation_precision(files, "box", _one_node(), device="B200")
        assert got[0] == "fp8" and "config_DGXB200_1x8x1.sh" in got[2] and "GB200" not in got[2]
        assert implementation_precision(files, "box", _one_node(), device="GB200") is None

    def test_family_word_devices(self):
        files = _fp8_configs("config_RTX_1x8x1.sh", "config_TPU_1x8x1.sh")
        assert implementation_precision(files, "box", _one_node(), device="RTX-4090") is None
        assert implementation_precision(files, "box", _one_node(), device="TPU-v5p") is None
        assert implementation_precision(_fp8_configs("config_RTX4090_1x8x1.sh"), "box", _one_node(),
                                        device="RTX-4090")[0] == "fp8"

    def test_device_must_be_a_str(self):
        with pytest.raises(TypeError, match="device"):
            implementation_precision(_fp8_configs("config_DGXH100_1x8x1.sh"), "box", _one_node(), device=5)


class TestWhatAConfigStates:
    @pytest.mark.parametrize("line", ["--fp8=False", "--fp8 0", "--fp8=0", "--fp8=OFF", "--fp8 no", '--fp8="false"'])
    def test_a_flag_with_a_false_value_is_not_fp8(self, line):
        files = {"x/implementations/impl/config_box.sh": f'EXTRA_PARAMS="--lr 1e-4 {line} --seed 1"\n'}
        assert implementation_precision(files, "box") is None

    @pytest.mark.parametrize("line", ["--fp8", "--fp8=True", "--fp8 1", "--fp8 --seed 1", "--fp8=hybrid"])
    def test_a_flag_alone_or_true_is_fp8(self, line):
        files = {"x/implementations/impl/config_box.sh": f'EXTRA_PARAMS="--lr 1e-4 {line}"\n'}
        assert implementation_precision(files, "box")[0] == "fp8"

    def test_unset_after_export(self):
        unset = {"x/implementations/impl/config_box.sh": "export FP8=True\nunset FP8\n"}
        assert implementation_precision(unset, "box") is None
        again = {"x/implementations/impl/config_box.sh": "export FP8=True\nunset FP8\nexport FP8=1\n"}
        assert implementation_precision(again, "box")[0] == "fp8"
        other = {"x/implementations/impl/config_box.sh": "export FP8=True\nunset FP8_RECIPE\n"}
        assert implementation_precision(other, "box")[0] == "fp8"

    def test_a_deep_chain_of_sourced_configs_states_nothing(self):
        folder = "x/implementations/impl"
        files = {f"{folder}/config_c{i}.sh": f"source $(dirname ${{BASH_SOURCE[0]}})/config_c{i + 1}.sh\n"
                 for i in range(2000)}
        files[f"{folder}/config_c2000.sh"] = "export FP8=True\n"
        files[f"{folder}/config_box.sh"] = "source $(dirname ${BASH_SOURCE[0]})/config_c0.sh\n"
        assert implementation_precision(files, "box") is None  # no RecursionError, no claim
        # a short chain is followed
        short = {f"{folder}/config_box.sh": "source $(dirname ${BASH_SOURCE[0]})/config_c0.sh\n",
                 f"{folder}/config_c0.sh": "source $(dirname ${BASH_SOURCE[0]})/config_c1.sh\n",
                 f"{folder}/config_c1.sh": "export FP8=True\n"}
        assert implementation_precision(short, "box")[0] == "fp8"

    def test_an_oversized_config_is_not_read(self):
        files = {"x/implementations/impl/config_box.sh": "export FP8=True\n" + "#" * 1_000_001 + "\n"}
        assert implementation_precision(files, "box") is None

    def test_a_long_line_is_read_quickly(self):
        import time

        line = "source " + "a" * 200_000 + " b"
        files = {"x/implementations/impl/config_box.sh": line + "\nexport FP8=True\n"}
        t = time.perf_counter()
        assert implementation_precision(files, "box")[0] == "fp8"
        assert time.perf_counter() - t < 2.0


class TestReadmePointer:
    def test_a_pointer_to_another_folder_gives_implementation_configs(self):
        # as v5.0 Supermicro llama2_70b_lora: AS-4126GS-NBR-LCC_N1/README.md points to ../b200_nemo, whose configs
        # are named for other systems (the README line is the real one; the configs are reduced to what counts)
        root = "Supermicro/benchmarks/llama2_70b_lora/implementations"
        files = {f"{root}/AS-4126GS-NBR-LCC_N1/README.md":
                 "Please refer to the implementation directory [b200_nemo](../b200_nemo) for the details.\n"}
        for name in ("config_AS-A126GS-TNBR_1x8x1xtp1pp1cp1.sh", "config_DGXB200_1x8x1xtp1pp1cp1.sh"):
            files[f"{root}/b200_nemo/{name}"] = "export DGXNNODES=1\nexport DGXNGPU=8\nexport FP8=True\n"
        got = implementation_precision(files, "AS-4126GS-NBR-LCC_N1", _one_node(), device="B200")
        assert got[:2] == ("fp8", "implementation_configs") and "b200_nemo" in got[2]
        # the folder named for the system itself: its configs are the system's own
        own = {f"{root}/AS-4126GS-NBR-LCC_N1/config_x_1x8.sh": "export DGXNNODES=1\nexport DGXNGPU=8\nexport FP8=1\n"}
        got = implementation_precision(own, "AS-4126GS-NBR-LCC_N1", _one_node())
        assert got[:2] == ("fp8", "implementation_config")


class TestGeneric16BitLogLine:
    """A log's "16-bits training: True" is the AMP switch: it does not rule out fp8, the launch config is read."""

    _TEXT = _log(("submission_benchmark", "bert", 0, {}), ("global_batch_size", 768, 0, {}),
                 ("run_start", None, 0, {}), ("tracked_stats", {"throughput": 8000.0}, 10, {"step": 1}),
                 ("run_stop", None, 20, {"status": "success"}))

    def _impl(self, fp8: str):
        return {"NVIDIA/benchmarks/bert/implementations/pytorch/config_box.sh": f"export FP8={fp8}\n"}

    def test_the_configs_fp8_wins_and_the_log_line_is_kept(self):
        row = summarize_run(self._TEXT + "\n16-bits training: True\n", _H100x8, system="box",
                            implementation=self._impl("True"))
        assert (row["precision"], row["precision_source"]) == ("fp8", "implementation_config")
        assert row["precision_evidence"].startswith("log: 16-bits training: true; config named for the system")

    def test_without_an_fp8_config_the_log_line_stands(self):
        row = summarize_run(self._TEXT + "\n16-bits training: True\n", _H100x8, system="box",
                            implementation=self._impl("False"))
        assert (row["precision"], row["precision_source"], row["precision_evidence"]) == (
            "fp16", "log_text", "16-bits training: true")

    def test_a_named_dtype_is_authoritative(self):
        for line, prec in (("fp16=True", "fp16"), ("precision: 'bf16'", "bf16"), ("bf16: 1", "bf16")):
            row = summarize_run(self._TEXT + f"\n16-bits training: True\n{line}\n", _H100x8, system="box",
                                implementation=self._impl("True"))
            assert (row["precision"], row["precision_source"]) == (prec, "log_text"), line

    def test_no_fp8_peak_no_config(self):
        a100 = dict(_H100x8, accelerator_model_name="NVIDIA A100-SXM4-80GB")
        row = summarize_run(self._TEXT + "\n16-bits training: True\n", a100, system="box",
                            implementation=self._impl("True"))
        assert (row["precision"], row["precision_source"]) == ("fp16", "log_text")


# ------------------------------------------------------------------------------------ the split's public names
def test_public_names_are_importable_from_the_package():
    import perfmodel.importers.mlperf as mlperf
    from perfmodel.importers.mlperf import catalogue, configs, devices, importer, layout, log, run

    for name in mlperf.__all__:
        assert getattr(mlperf, name) is not None, name
    # each name is defined once, in its module, and the package hands out that object
    assert mlperf.summarize_run is run.summarize_run and mlperf.from_mlperf is importer.from_mlperf
    assert mlperf.BENCHMARKS is catalogue.BENCHMARKS and mlperf.parse_mllog is log.parse_mllog
    assert mlperf.implementation_precision is configs.implementation_precision
    assert mlperf.implementation_layout is layout.implementation_layout
    assert mlperf.resolve_device is devices.resolve_device
    assert mlperf.frame is importer.frame and mlperf.make_run_id is importer.make_run_id


class TestCatalogue:
    def test_llm_flops_come_from_perfmodel_transformer(self):
        from perfmodel.importers.mlperf import GPT3_175B, LLAMA2_70B, LLAMA31_405B, LLM_SHAPES
        from perfmodel.transformer import transformer_flops

        assert BENCHMARKS["gpt3"].flops_per_sample == transformer_flops(GPT3_175B, 2048).model
        assert BENCHMARKS["llama31_405b"].flops_per_sample == transformer_flops(LLAMA31_405B, 8192).model
        assert BENCHMARKS["llama2_70b_lora"].flops_per_sample == transformer_flops(
            LLAMA2_70B, 8192, frozen_weights=True).model
        # attention is 12 L d seq^2 (forward + backward), on top of 6 N seq: GPT-3 at 2048 tokens
        n = GPT3_175B.matmul_params()
        assert BENCHMARKS["gpt3"].flops_per_sample == pytest.approx(6 * n * 2048 + 12 * 96 * 12288 * 2048**2)
        assert set(LLM_SHAPES) == {"gpt3", "llama2_70b_lora", "llama31_405b"}
        assert (LLAMA31_405B.n_layers, LLAMA31_405B.d_model, LLAMA31_405B.n_kv_heads) == (126, 16384, 8)


# -------------------------------------------------------------------------------------------------- layouts
_GPT3_SYSTEM = DATA / "v3.0/NVIDIA/systems/dgxh100_n64_nemo.json"


class TestShellVariables:
    """What a launch config sets, read without running it (configs.assignments / Configs.variables)."""

    def test_assignments(self):
        from perfmodel.importers.mlperf.configs import assignments

        assert assignments('export A=1 && export B="${A:-3}"', {}) == [("A", "1"), ("B", "1")]
        assert assignments('export TENSOR_MODEL_PARALLEL="${TP:=4}"   #  comment', {}) == [
            ("TENSOR_MODEL_PARALLEL", "4")]
        assert assignments('export TENSOR_MODEL_PARALLEL="${TP:=4}"', {"TP": "8"}) == [("TENSOR_MODEL_PARALLEL", "8")]
        assert assignments(': "${SEQ_PARALLEL:=True}"', {}) == [("SEQ_PARALLEL", "True")]
        assert assignments(': "${SEQ_PARALLEL:=True}"', {"SEQ_PARALLEL": "False"}) == []
        assert assignments("export WALLTIME=$(( (${NEXP:-1} * 5) ))", {}) == [("WALLTIME", None)]
        assert assignments("export X=$Y", {}) == [("X", None)]

    def test_sourcing_order_and_conditionals(self):
        from perfmodel.importers.mlperf.configs import Configs

        folder = "x/implementations/impl"
        files = {f"{folder}/config_box.sh": "export TP=2\nsource $(dirname ${BASH_SOURCE[0]})/config_common.sh\n"
                                            "if [[ $X ]]; then\n  export PP=4\nfi\nexport MBS=1\nunset CP\n",
                 f"{folder}/config_common.sh": "export TP=8\nexport MBS=2\nexport CP=2\n"}
        got = {k: v[0] for k, v in Configs(files).variables(f"{folder}/config_box.sh").items()}
        assert got == {"TP": "8", "PP": None, "MBS": "1"}  # the sourced file's TP wins; PP is conditional


class TestLayout:
    """implementation_layout on the v3.0 (GPT-3, NeMo 1 with run_and_time.sh overrides) and v4.0 (Llama 2 LoRA,
    NeMo 1 with a YAML bound to the environment) excerpts."""

    def test_gpt3_from_run_and_time_overrides(self):
        from perfmodel.importers.mlperf import implementation_layout

        files = _implementation("v3.0", "NVIDIA", "gpt3")
        system = json.loads(_GPT3_SYSTEM.read_text())
        got = implementation_layout(files, "dgxh100_n64_nemo", system, device="H100-SXM5-80GB",
                                    global_batch_size=2048, accumulation=128)
        # config_DGXH100_64x8x128x4x8_mbs1.sh: TP 4, PP 8, MICRO_BATCH_SIZE 1 (after config_common.sh's 2);
        # config_common.sh: INTERLEAVED_PIPELINE=12, ACT_CKPT_GRANULARITY=null; run_and_time.sh: SEQ_PARALLEL:=True
        assert {k: got[k] for k in ("tp", "pp", "vp", "cp", "dp", "micro_batch_size", "sequence_parallel",
                                    "recompute", "zero_stage")} == {
            "tp": 4, "pp": 8, "vp": 12, "cp": 1, "dp": 16, "micro_batch_size": 1, "sequence_parallel": 1,
            "recompute": "none", "zero_stage": None}
        assert got["layout_source"] == "implementation_configs"
        assert got["layout_config"].endswith("config_DGXH100_64x8x128x4x8_mbs1.sh")
        assert "SEQ_PARALLEL unset, default True (run_and_time.sh)" in got["layout_evidence"]
        assert "1 by the log's 128 micro-batches" in got["layout_evidence"]

    def test_gpt3_without_context_parallelism_needs_the_logs_micro_batch_count(self):
        from perfmodel.importers.mlperf import implementation_layout

        files = _implementation("v3.0", "NVIDIA", "gpt3")
        system = json.loads(_GPT3_SYSTEM.read_text())
        # no CP setting in this implementation: without the log's count, cp (and dp) are not fixed: no layout
        assert implementation_layout(files, "dgxh100_n64_nemo", system, device="H100-SXM5-80GB",
                                     global_batch_size=2048) is None
        # a count that does not fit tp x pp x dp = 512 devices: not this run's layout
        assert implementation_layout(files, "dgxh100_n64_nemo", system, device="H100-SXM5-80GB",
                                     global_batch_size=2048, accumulation=64) is None
        # another size than the configs': none of them
        assert implementation_layout(files, "dgxh100_n64_nemo", dict(system, number_of_nodes="32"),
                                     device="H100-SXM5-80GB", global_batch_size=1024, accumulation=128) is None

    def test_llama_lora_from_the_yaml_bindings(self):
        from perfmodel.importers.mlperf import implementation_layout

        files = _implementation("v4.0", "NVIDIA", "llama2_70b_lora")
        got = implementation_layout(files, "eos_ngc24.04_nemo", _H100x8, global_batch_size=8, accumulation=4)
        # README-eos_ngc24.04_nemo.md names nemo/config_DGXH100_1x8x4xtp4pp1cp1.sh: TP=4 PP=1 CP=1 SP=1;
        # configs/config_common.sh: MBS=1; conf/megatron_gpt_peft_tuning_config.yaml: VP default 1, ACG null
        assert (got["tp"], got["pp"], got["vp"], got["cp"], got["dp"], got["micro_batch_size"]) == (4, 1, 1, 1, 2, 1)
        assert (got["sequence_parallel"], got["recompute"], got["zero_stage"]) == (1, "none", None)
        assert (got["layout_source"], got["layout_config"]) == ("implementation_config", _LORA_CONFIG)
        assert "TP=4 (config_DGXH100_1x8x4xtp4pp1cp1.sh)" in got["layout_evidence"]
        assert "VP unset, default 1 (megatron_gpt_peft_tuning_config.yaml)" in got["layout_evidence"]
        # the log's global batch must divide by dp x micro-batch, and match its micro-batch count
        assert implementation_layout(files, "eos_ngc24.04_nemo", _H100x8, global_batch_size=8, accumulation=2) is None
        # without the YAML nothing says which variable sets what: no layout
        no_yaml = {p: t for p, t in files.items() if not p.endswith(".yaml")}
        assert implementation_layout(no_yaml, "eos_ngc24.04_nemo", _H100x8, global_batch_size=8) is None

    def test_nemo2_keys_count_only_where_the_code_reads_them(self):
        from perfmodel.importers.mlperf import implementation_layout

        folder = "x/benchmarks/llama31_405b/implementations/impl"
        yaml = ("model:\n  tensor_model_parallel_size: ${oc.decode:${oc.env:TP}}\n"
                "  pipeline_model_parallel_size: ${oc.decode:${oc.env:PP}}\n"
                "  context_parallel_size: ${oc.decode:${oc.env:CP,4}}\n"
                "  micro_batch_size: ${oc.decode:${oc.env:MBS}}\n"
                "  virtual_pipeline_model_parallel_size: ${oc.decode:${oc.env:VP,12}}\n"
                "  activations_checkpoint_granularity: ${oc.decode:${oc.env:ACG,null}}\n")
        code = ("from nemo import lightning as nl\n"
                "tp = cfg.model.tensor_model_parallel_size\npp = cfg.model.pipeline_model_parallel_size\n"
                "cp = cfg.model.context_parallel_size\nvp = cfg.model.virtual_pipeline_model_parallel_size\n"
                "mbs = cfg.model.micro_batch_size\n")
        files = {f"{folder}/config_box.sh": "export TP=4\nexport PP=8\nexport MBS=1\n",
                 f"{folder}/conf/custom.yaml": yaml, f"{folder}/pretrain.py": code}
        system = {"number_of_nodes": "64", "accelerators_per_node": "8"}
        got = implementation_layout(files, "box", system, global_batch_size=1152, accumulation=288)
        assert (got["tp"], got["pp"], got["cp"], got["vp"], got["dp"]) == (4, 8, 4, 12, 4)
        assert got["recompute"] is None  # bound in the YAML, never read by the NeMo 2 code
        files[f"{folder}/pretrain.py"] = code + "g = cfg.model.activations_checkpoint_granularity\n"
        assert implementation_layout(files, "box", system, global_batch_size=1152, accumulation=288)[
            "recompute"] == "none"

    def test_candidates_must_agree(self):
        from perfmodel.importers.mlperf import implementation_layout

        folder = "x/benchmarks/b/implementations/impl"
        yaml = "model:\n" + "".join(f"  {k}: ${{oc.decode:${{oc.env:{v},1}}}}\n" for k, v in (
            ("tensor_model_parallel_size", "TP"), ("pipeline_model_parallel_size", "PP"),
            ("context_parallel_size", "CP"), ("micro_batch_size", "MBS")))
        files = {f"{folder}/conf/c.yaml": yaml,
                 f"{folder}/config_DGXH100_1x8x1_a.sh": "export DGXNNODES=1\nexport DGXNGPU=8\nexport TP=4\n",
                 f"{folder}/config_DGXH100_1x8x1_b.sh": "export DGXNNODES=1\nexport DGXNGPU=8\nexport TP=2\n"}
        assert implementation_layout(files, "box", _one_node(), device="H100-SXM5-80GB", global_batch_size=8) is None
        files[f"{folder}/config_DGXH100_1x8x1_b.sh"] = files[f"{folder}/config_DGXH100_1x8x1_b.sh"].replace("2", "4")
        got = implementation_layout(files, "box", _one_node(), device="H100-SXM5-80GB", global_batch_size=8)
        assert got["tp"] == 4 and got["layout_source"] == "implementation_configs" and ";" in got["layout_config"]

    def test_records_get_shapes_and_devices_per_node(self, runs):
        # the Dell excerpt has no implementation files: the shape and the node are filled, the layout is not
        lora = runs.loc["llama2_70b_lora"]
        assert (lora["n_layers"], lora["d_model"], lora["n_heads"], lora["n_kv_heads"], lora["vocab"]) == (
            80, 8192, 64, 8, 32000)
        assert lora["ffn_hidden"] == 28672 and lora["n_experts"] == 0 and lora["gpus_per_node"] == 8
        assert pd.isna(lora["tp"]) and pd.isna(lora["layout_source"])
        assert runs.loc["bert", ["n_layers", "gpus_per_node", "tp"]].isna().all()  # not a language-model row

    def test_gpus_per_node_is_not_the_tray_of_a_rack(self):
        from perfmodel.importers.mlperf import gpus_per_node

        assert gpus_per_node("H100-SXM5-80GB", 8) == 8 and gpus_per_node("H100-PCIE-80GB", 4) == 4
        assert gpus_per_node("GB200", 4) is None  # 4 per tray, 72 per NVLink domain: not stated in a field
        assert gpus_per_node(None, 8) is None and gpus_per_node("H100-SXM5-80GB", None) is None

    def test_from_mlperf_writes_the_layout_and_it_loads(self, tmp_path):
        # the Dell Llama 2 LoRA log (global batch 8, 4 micro-batches) as a run of NVIDIA's eos_ngc24.04_nemo system,
        # next to NVIDIA's implementation files (this checks where the files are looked for and what is written)
        sub = tmp_path / "v4.0" / "NVIDIA"
        (sub / "results" / "eos_ngc24.04_nemo" / "llama2_70b_lora").mkdir(parents=True)
        shutil.copy(LLAMA, sub / "results" / "eos_ngc24.04_nemo" / "llama2_70b_lora" / "result_0.txt")
        (sub / "systems").mkdir()
        shutil.copy(DELL_SYSTEM, sub / "systems" / "eos_ngc24.04_nemo.json")
        shutil.copytree(DATA / "v4.0/NVIDIA/benchmarks", sub / "benchmarks")
        runs = from_mlperf([tmp_path])
        row = runs.iloc[0]
        assert (row["tp"], row["cp"], row["dp"], row["micro_batch_size"], row["recompute"]) == (4, 1, 2, 1, "none")
        assert row["layout_config"] == _LORA_CONFIG
        got = load_runs(loadable(runs))
        assert (got.loc[0, "tp"], got.loc[0, "dp"], got.loc[0, "gpus_per_node"]) == (4, 2, 8)
