"""Every public result serialises: ``json.dumps(result.to_dict(), allow_nan=False)`` works, numbers stay numbers."""

from __future__ import annotations

import json
import math

import numpy as np
import pandas as pd
from conftest import make_history

import perfmodel
from perfmodel import TrainingTimeModel
from perfmodel._format import to_plain
from perfmodel.plan import OnlineEstimator, diagnose, erlang_c, estimate_cost, simulate_queue

PRICES = pd.DataFrame({"gpu_type": ["A100"], "provider": ["x"], "on_demand_usd_per_hour": [2.0],
                       "spot_usd_per_hour": [np.nan]})


def _strict(d):
    return json.loads(json.dumps(d, allow_nan=False))


class TestToDict:
    def test_prediction_cost_online(self):
        fitted = TrainingTimeModel(method="loglinear").fit(make_history())
        r = perfmodel.predict_training_time("m1", batch_size=16, gpu_type="A100", steps=100, history=fitted)
        d = _strict(r.to_dict())
        assert isinstance(d["query"]["batch_size"], int) and isinstance(d["seconds"], float)
        cost = estimate_cost(r, prices=PRICES)
        assert _strict(cost.to_dict())["devices"] == 1
        est = OnlineEstimator.from_prediction(r)
        for t in (r.step_seconds,) * 4:
            est.update(t)
        e = est.estimate()
        assert e["total"] == e.total and _strict(e.to_dict())["steps_done"] == 4

    def test_queue_results(self):
        assert _strict(erlang_c(2.0, 1.0, 3).to_dict())["mean_response"] > 1
        sim = simulate_queue(jobs=[{"arrival": 0.0, "duration": 1.0}], servers=1)
        d = _strict(sim.to_dict())  # one job: no batch-means standard error -> null
        assert d["stderr_wait"] is None and d["n_arrivals"] == 1 and d["mean_response"] == 1.0

    def test_diagnosis(self):
        d = _strict(diagnose(make_history()).to_dict())
        assert len(d["runs"]) == len(make_history()) and d["runs"][0]["mfu"] is None or \
            isinstance(d["runs"][0]["mfu"], float)

    def test_evaluation_has_no_nan(self):
        from perfmodel.evaluate import evaluate

        ev = evaluate(make_history(), methods=("loglinear",), splits=("leave-one-batch-size-out",))
        d = _strict(ev.to_dict())
        assert d["table"] and all(isinstance(row["median_ape"], float) for row in d["table"])
        json.loads(ev.to_json())

    def test_to_plain(self):
        assert to_plain({"a": np.int64(2), "b": np.float32(math.nan), "c": pd.NA, "d": (np.bool_(True),)}) == \
            {"a": 2, "b": None, "c": None, "d": [True]}
