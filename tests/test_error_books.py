"""The error books: the least interval an answer gets where its runs never saw the user's set (issue #36 item 1).

The books are package data built by ``scripts/build_transfer_error_book.py`` and ``scripts/build_layout_error_book.py``;
these tests check what the predict layer does with them, not their numbers (``benchmarks/transfer_intervals.py``
measures those).
"""

import json
import math
import subprocess
import sys
import warnings
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from conftest import make_history

import perfmodel
from perfmodel import predict_many, predict_training_time
from perfmodel.datasets import bundled_runs_path
from perfmodel.models import (
    LAYOUT_BOOK,
    TRANSFER_BOOK,
    conformal_quantile,
    layout_floor,
    read_error_book,
    transfer_floor,
)
from perfmodel.transformer import TransformerShape

ROOT = Path(__file__).resolve().parents[1]
# a model of one's own (not one of MLPerf's five), as a user gives it: size, FLOPs and family
OWN_CNN = {"params": 60_000_000, "flops_per_sample": 3.5e10, "family": "cnn"}


def _quantile(entry, confidence=0.9):
    return conformal_quantile(np.asarray(entry["scores"], dtype=float), confidence)


def _half(result):
    return float(np.log(result.upper / result.seconds))


@pytest.fixture(autouse=True)
def quiet():
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        yield


class TestTransferBook:
    def test_the_book_ships_and_covers_the_transfer_kinds(self):
        book = read_error_book(TRANSFER_BOOK)
        assert book is not None and set(book["entries"]) == {"new_model", "new_device"}
        assert book["applies_to"] == ["bundled:mlperf_steps.csv"]
        for entry in book["entries"].values():
            assert len(entry["sets"]) >= 2 and entry["scores"] == sorted(entry["scores"])
            assert "transfer book" in entry["name"]

    def test_a_model_of_ones_own_out_of_the_box_is_at_least_the_books_band(self):
        r = predict_training_time(OWN_CNN, batch_size=64, gpu_count=8, gpu_type="H100", precision="bf16", steps=100)
        entry = read_error_book(TRANSFER_BOOK)["entries"]["new_model"]
        assert r.query_kind == "new_model"
        assert _half(r) >= _quantile(entry) - 1e-9
        assert entry["name"] in r.interval_rule

    def test_the_band_follows_the_confidence(self):
        entry = read_error_book(TRANSFER_BOOK)["entries"]["new_model"]
        lo = predict_training_time(OWN_CNN, batch_size=64, gpu_type="H100", precision="bf16", steps=100,
                                   confidence=0.5)
        assert _half(lo) >= _quantile(entry, 0.5) - 1e-9
        assert _quantile(entry, 0.5) < _quantile(entry, 0.9)

    def test_a_new_precision_of_a_new_model_takes_the_new_device_band(self):
        r = predict_training_time(OWN_CNN, batch_size=64, gpu_type="A100", precision="fp32", steps=100)
        entry = read_error_book(TRANSFER_BOOK)["entries"]["new_device"]
        assert r.query_kind == "new_device" and _half(r) >= _quantile(entry) - 1e-9

    def test_a_model_the_runs_have_is_not_floored(self):
        r = predict_training_time("resnet50-v1.5", batch_size=32, gpu_count=8, gpu_type="A100-SXM4-80GB",
                                  precision="bf16", steps=100)
        assert "transfer book" not in r.interval_rule

    def test_a_history_of_ones_own_is_not_floored(self):
        own = make_history()  # a DataFrame: its runs are the caller's own set
        r = predict_training_time({"params": 5e6, "flops_per_sample": 1e9}, batch_size=16, gpu_type="A100",
                                  steps=10, history=own)
        assert "transfer book" not in r.interval_rule
        assert transfer_floor(["DataFrame (40 runs)"]) is None
        assert transfer_floor(["my_runs.csv", "bundled:mlperf_steps.csv"]) is not None  # mixed: the bundled part

    def test_predict_many_and_predict_training_time_agree(self):
        q = pd.DataFrame([{**OWN_CNN, "model": "my-cnn", "batch_size": 64, "gpu_count": 8, "gpu_type": "H100",
                           "precision": "bf16", "steps": 100}])
        many = predict_many(q).iloc[0]
        one = predict_training_time(OWN_CNN, batch_size=64, gpu_count=8, gpu_type="H100", precision="bf16",
                                    steps=100)
        assert many["upper"] == pytest.approx(one.upper, rel=1e-9)
        assert many["interval_rule"] == one.interval_rule
        assert many["method"] == one.method

    @pytest.mark.slow  # fits and saves the bundled GPU history (~9 s)
    def test_one_fit_one_answer_whichever_entry_point(self, tmp_path):
        fitted = perfmodel.fit("gpu", kind="new_model")
        q = pd.DataFrame([{**OWN_CNN, "model": "my-cnn", "batch_size": 64, "gpu_count": 1, "gpu_type": "H100",
                           "precision": "bf16"}])
        direct = fitted.predict_interval(q, 0.9).iloc[0]
        via = predict_training_time(OWN_CNN, batch_size=64, gpu_type="H100", precision="bf16", steps=1,
                                    history=fitted)
        assert "transfer book" in direct["interval_rule"] and direct["interval_rule"] == via.interval_rule
        assert direct["step_upper"] == pytest.approx(via.step_upper, rel=1e-9)
        perfmodel.save_model(fitted, tmp_path / "m.perfmodel")  # a saved fit follows the installed book
        loaded = perfmodel.load_model(tmp_path / "m.perfmodel")
        assert loaded.predict_interval(q, 0.9).iloc[0]["step_upper"] == pytest.approx(direct["step_upper"], rel=1e-9)

    def test_a_copy_of_the_bundled_file_is_ones_own_whatever_was_asked_before(self, tmp_path):
        copy_ = tmp_path / "my_mlperf.csv"
        copy_.write_bytes(Path(bundled_runs_path("mlperf_steps.csv")).read_bytes())
        ask = dict(batch_size=64, gpu_count=8, gpu_type="H100", precision="bf16", steps=100)
        for order in (("gpu", str(copy_)), (str(copy_), "gpu")):
            rules = {h: predict_training_time(OWN_CNN, history=h, **ask).interval_rule for h in order}
            assert "transfer book" in rules["gpu"] and "transfer book" not in rules[str(copy_)], order

    def test_more_confidence_never_narrows_the_band(self):
        ask = dict(batch_size=64, gpu_type="A100", precision="fp32", steps=100)
        uppers = []
        for level in (0.5, 0.9, 0.99, 0.997, 0.998):
            try:
                uppers.append(predict_training_time(OWN_CNN, confidence=level, **ask).upper)
            except ValueError:  # too few errors anywhere for this level: refused, not narrowed
                uppers.append(math.inf)
        assert uppers == sorted(uppers)

    def test_a_harder_query_never_gets_a_narrower_book_band(self):
        bf16 = predict_training_time(OWN_CNN, batch_size=64, gpu_type="H100", precision="bf16", steps=100)
        fp32 = predict_training_time(OWN_CNN, batch_size=64, gpu_type="A100", precision="fp32", steps=100)
        assert fp32.query_kind == "new_device" and bf16.query_kind == "new_model"
        assert _half(fp32) >= _half(bf16) - 1e-9

    def test_a_point_fit_still_has_no_interval_for_a_row_no_book_bounds(self):
        from perfmodel.history import read_history

        point = perfmodel.TrainingTimeModel(method="roofline", conformal=False).fit(read_history("gpu").runs)
        point.provenance_ = ["bundled:mlperf_steps.csv"]  # as perfmodel.fit("gpu") labels it
        q = pd.DataFrame([{"model": "resnet50-v1.5", "params": 25_557_032, "flops_per_sample": 2.454e10,
                           "family": "cnn", "batch_size": 32, "gpu_count": 8, "gpu_type": "A100-SXM4-80GB",
                           "precision": "bf16"}])
        with pytest.raises(ValueError, match="point fit"):
            point.predict_interval(q, 0.9)
        own = pd.concat([q.assign(model="my-cnn", params=6e7, flops_per_sample=3.5e10)], ignore_index=True)
        assert "transfer book" in point.predict_interval(own, 0.9).iloc[0]["interval_rule"]  # the book bounds it

    def test_an_unreadable_book_leaves_the_runs_own_intervals(self, tmp_path, monkeypatch):
        (tmp_path / TRANSFER_BOOK).write_text("{not json")
        monkeypatch.setenv("PERFMODEL_DATA", str(tmp_path))
        assert read_error_book(TRANSFER_BOOK) is None and transfer_floor(["bundled:mlperf_steps.csv"]) is None
        r = predict_training_time(OWN_CNN, batch_size=64, gpu_type="H100", precision="bf16", steps=100)
        assert "transfer book" not in r.interval_rule and r.lower < r.seconds < r.upper

    def test_the_shipped_book_is_up_to_date(self):
        out = subprocess.run([sys.executable, str(ROOT / "scripts" / "build_transfer_error_book.py"), "--check"],
                             capture_output=True, text=True, timeout=300)
        assert out.returncode == 0, out.stdout + out.stderr


class TestLayoutBook:
    def test_a_decoder_given_by_its_size_alone_takes_the_unstated_shape_entry(self):
        book = read_error_book(LAYOUT_BOOK)
        unstated = book["entries"]["bundled/unstated_shape"]
        r = predict_training_time({"params": 7e9, "flops_per_sample": 6 * 7e9 * 4096, "family": "decoder"},
                                  batch_size=1, gpu_count=64, gpu_type="H100", precision="bf16", steps=100)
        assert r.method == "layout"
        assert unstated["name"] in r.interval_rule and _half(r) >= _quantile(unstated) - 1e-9

    def test_a_stated_shape_takes_the_bundled_entry(self):
        bundled = read_error_book(LAYOUT_BOOK)["entries"]["bundled"]
        shape = TransformerShape(n_layers=32, d_model=4096, n_heads=32, ffn_hidden=11008, gated_mlp=True,
                                 vocab=32000, tied_embeddings=False)
        r = predict_training_time({"params": 6.7e9, "family": "decoder", "shape": shape}, seq_len=4096,
                                  batch_size=1, gpu_count=64, gpu_type="H100", precision="bf16", steps=100)
        assert r.method == "layout" and "size alone" not in r.interval_rule, r.interval_rule
        assert _half(r) >= _quantile(bundled) - 1e-9

    def test_the_floor_dict_names_the_unstated_entry_only_out_of_the_box(self):
        assert layout_floor(None)["unstated_shape"]["name"].endswith("data/layout_error_book.json)")
        assert "unstated_shape" not in layout_floor(3)

    def test_a_non_numeric_shape_cell_is_a_sentence_not_a_traceback(self):
        q = pd.DataFrame([{"model": "my-llm", "family": "decoder", "params": 7e9, "flops_per_sample": 6 * 7e9 * 4096,
                           "batch_size": 1, "gpu_count": 64, "gpu_type": "H100", "precision": "bf16",
                           "n_layers": "abc", "d_model": 4096, "steps": 10}])
        try:
            p = predict_many(q)
        except (ValueError, TypeError) as exc:
            assert "could not convert" not in str(exc) and "n_layers" in str(exc)
        else:
            assert np.isfinite(p["step_time_s"]).all() and (p["step_upper"] > p["step_time_s"]).all()

    def test_ones_own_layout_fit_is_not_floored_by_the_bundled_book(self):
        from perfmodel.models import floor_for

        assert floor_for("layout", ["my_llm_runs.csv"]) is None
        assert floor_for("layout", ["my_llm_runs.csv"], calibration_runs=3)["name"] == layout_floor(3)["name"]
        assert floor_for("layout", ["bundled:public_llmfoundry.csv"])["name"] == layout_floor(0)["name"]
        assert floor_for("linear", ["bundled:mlperf_steps.csv"]) is None

    def test_the_tie_factor_of_two_layouts_comes_from_the_within_job_entry(self):
        from perfmodel.models import WITHIN_JOB, layout_tie_factor

        scores = read_error_book(LAYOUT_BOOK)["entries"][WITHIN_JOB]["scores"]
        assert layout_tie_factor(0.9) == pytest.approx(math.exp(conformal_quantile(scores, 0.9)))
        assert 1.0 <= layout_tie_factor(0.5) <= layout_tie_factor(0.9) <= layout_tie_factor(0.99)

    def test_pair_differences_take_distinct_layouts_of_one_job(self):
        sys.path.insert(0, str(ROOT / "scripts"))
        try:
            from build_layout_error_book import layout_pair_differences
        finally:
            sys.path.pop(0)
        job = {"model": "m", "seq_len": 2048, "global_batch_size": 64, "gpu_count": 8, "gpu_type": "H100",
               "precision": "bf16"}
        runs = pd.DataFrame([{**job, "tp": 1}, {**job, "tp": 1}, {**job, "tp": 2}, {**job, "model": "n", "tp": 4}])
        # rows 0 and 1 repeat one layout (noise, not ranking); row 3 is another job
        d, jobs = layout_pair_differences(runs, np.log([1.0, 1.2, 1.5, 3.0]))
        assert sorted(np.round(d, 6)) == sorted(np.round([np.log(1.5), np.log(1.5 / 1.2)], 6))
        assert len(set(jobs)) == 1  # both pairs are of one job
        # another release of one model and layout is not another layout of the same job
        _, none = layout_pair_differences(runs.iloc[[0, 2]].assign(release=["a", "b"]), np.log([1.0, 1.5]))
        assert len(none) == 0

    @pytest.mark.slow
    def test_the_shipped_book_is_up_to_date(self):
        out = subprocess.run([sys.executable, str(ROOT / "scripts" / "build_layout_error_book.py"), "--check"],
                             capture_output=True, text=True, timeout=900)
        assert out.returncode == 0, out.stdout + out.stderr


def test_the_books_are_package_data():
    for name in (TRANSFER_BOOK, LAYOUT_BOOK):
        assert json.loads(Path(bundled_runs_path(name)).read_text())["entries"]


def _sourced_history(offsets=(1.0, 1.0, 3.0), runs_per_model=12):
    """Three sources of the generated power law (make_history), each its own models; source ``i``'s runs are
    ``offsets[i]`` times slower (another cluster, framework or publisher)."""
    parts = []
    for i, k in enumerate(offsets):
        h = make_history(n_models=3, seed=10 + i).head(3 * runs_per_model)
        parts.append(h.assign(model=h["model"] + f"-s{i}", source=f"set{i}", step_time_s=h["step_time_s"] * k))
    return pd.concat(parts, ignore_index=True)


class TestSourceFloor:
    """Rule 5 of perfmodel.models._conformal: a history of several sources is scored one whole source held out, and a
    transfer query is never narrower than that (what the history itself can say about a set it never saw)."""

    def test_a_transfer_query_is_at_least_the_leave_one_source_out_band(self):
        from perfmodel.models import TrainingTimeModel

        runs = _sourced_history()
        m = TrainingTimeModel(method="loglinear", held_out=("new_model",)).fit(runs)
        src = m.source_scores_
        assert src is not None and src["groups"] == 3 and src["split"] == "leave-one-source-out"
        # the slow source held out is predicted ~3× too fast: the band must reach that far
        assert conformal_quantile(src["scores"], 0.9) > math.log(2.0)
        q = make_history(n_models=1, seed=99).head(2).assign(model="brand-new")
        out = m.predict_interval(q)
        assert (out["query_kind"] == "new_model").all()
        half = np.log(out["step_upper"] / out["step_time_s"]).to_numpy()
        assert (half >= conformal_quantile(src["scores"], 0.9) - 1e-9).all()
        assert all("leave-one-source-out (3 sources)" in r for r in out["interval_rule"])

    def test_a_seen_query_keeps_its_own_band(self):
        from perfmodel.models import TrainingTimeModel

        runs = _sourced_history()
        m = TrainingTimeModel(method="loglinear", held_out=("new_model",)).fit(runs)
        out = m.predict_interval(runs.drop(columns="step_time_s").head(3))
        assert (out["query_kind"] == "seen").all()
        assert not any("source" in r for r in out["interval_rule"])

    @pytest.mark.parametrize("history", [
        lambda: _sourced_history(offsets=(1.0, 3.0)),  # two sources: each refit would learn from one set
        lambda: _sourced_history().assign(source="sweep"),  # one source
        lambda: _sourced_history().drop(columns="source"),  # no source column
        lambda: _sourced_history(runs_per_model=3),  # sources of 9 runs: too few to be held out as one
    ])
    def test_no_source_floor_without_three_sources_of_enough_runs(self, history):
        from perfmodel.models import TrainingTimeModel

        m = TrainingTimeModel(method="loglinear", held_out=("new_model",)).fit(history())
        assert m.source_scores_ is None

    def test_a_fit_for_seen_queries_does_not_refit_per_source(self):
        from perfmodel.models import TrainingTimeModel

        assert TrainingTimeModel(method="loglinear").fit(_sourced_history()).source_scores_ is None

    def test_predict_training_time_with_such_a_history_names_the_band(self):
        r = predict_training_time({"model": "brand-new", "params": 2_000_000, "flops_per_sample": 1e8},
                                  batch_size=32, gpu_count=2, gpu_type="A100", precision="fp32", steps=10,
                                  history=_sourced_history(), method="loglinear")
        assert r.query_kind == "new_model" and "leave-one-source-out" in r.interval_rule

    def test_an_unbounded_band_names_the_scores_it_rests_on(self):
        from perfmodel.exceptions import PredictionError

        with pytest.raises(PredictionError, match=r"unbounded .* Its band: leave-one-model-out \(9 groups\)"):
            predict_training_time({"model": "brand-new", "params": 2_000_000, "flops_per_sample": 1e8},
                                  batch_size=32, gpu_count=2, gpu_type="A100", precision="fp32", steps=10,
                                  history=_sourced_history(), method="loglinear", confidence=0.999)

    def test_the_source_scores_survive_a_safe_save(self, tmp_path):
        from perfmodel.models import TrainingTimeModel
        from perfmodel.persistence import load_model, save_model

        m = TrainingTimeModel(method="loglinear", held_out=("new_model",)).fit(_sourced_history())
        save_model(m, tmp_path / "m.perfmodel")
        back = load_model(tmp_path / "m.perfmodel")
        q = make_history(n_models=1, seed=99).head(2).assign(model="brand-new")
        pd.testing.assert_frame_equal(m.predict_interval(q), back.predict_interval(q))
        np.testing.assert_allclose(back.source_scores_["scores"], m.source_scores_["scores"])

    def test_missing_sources_however_written_are_one_source(self):
        from perfmodel.models._conformal import source_splits

        blanks = [pd.NA] * 4 + [float("nan")] * 3 + [None] * 2 + ["  "] * 2  # 11 runs of no stated source
        splits, groups = source_splits(blanks + ["a"] * 10 + ["b"] * 12)
        assert len(splits) == 3 and set(groups) == {"", "a", "b"}

    def test_a_source_larger_than_the_rest_is_not_held_out(self):
        # a team's runs beside a much larger public table: the table is never predicted from the team's runs
        runs = _sourced_history()
        big = pd.concat([(h := make_history(n_models=8, seed=40 + i)).assign(model=f"big{i}-" + h["model"])
                         for i in range(2)], ignore_index=True)  # 192 runs: more than the two others' 72
        runs = pd.concat([runs.loc[runs["source"] != "set2"], big.assign(source="bundled")], ignore_index=True)
        from perfmodel.models import TrainingTimeModel
        from perfmodel.models._conformal import source_splits

        held = [set(runs["source"].to_numpy()[te]) for _, te in source_splits(runs["source"].to_numpy())[0]]
        assert held == [{"set0"}, {"set1"}]
        m = TrainingTimeModel(method="loglinear", held_out=("new_model",)).fit(runs)
        assert m.source_scores_ is not None and m.source_scores_["groups"] == 2

    def test_auto_keeps_the_source_scores(self):
        from perfmodel.fitting import fit_history

        m = fit_history(_sourced_history(), "auto", kind="new_model")
        assert m.source_scores_ is not None and m.source_scores_["groups"] == 3

    def test_the_layout_model_takes_no_source_scores(self):
        from perfmodel.models import TrainingTimeModel

        runs = pd.read_csv(bundled_runs_path("public_llmfoundry.csv"), comment="#")
        parts = [runs.iloc[i::3].assign(source=f"part{i}") for i in range(3)]  # three sources of 72 runs
        m = TrainingTimeModel(method="layout", held_out=("new_model",)).fit(pd.concat(parts, ignore_index=True))
        assert m.source_scores_ is None
        # the same runs under a generic method do get them: the exemption is the method's
        g = TrainingTimeModel(method="ratio", held_out=("new_model",)).fit(pd.concat(parts, ignore_index=True))
        assert g.source_scores_ is not None

    def test_the_within_set_record_leaves_the_rule_out(self):
        from perfmodel.models import TrainingTimeModel

        m = TrainingTimeModel(method="loglinear", held_out=("new_model",)).fit(_sourced_history())
        q = make_history(n_models=1, seed=99).head(2).assign(model="brand-new")
        with_rule = m.predict_interval(q)
        without = m.predict_interval(q, source_floor=False)
        assert (without["step_upper"] < with_rule["step_upper"]).all()
        assert not any("source" in r for r in without["interval_rule"])
