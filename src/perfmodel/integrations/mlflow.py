"""Log a perfmodel prediction to an MLflow run, beside the run's actual time (extra ``mlflow``).

Example
-------
::

    import mlflow, perfmodel
    from perfmodel.integrations.mlflow import log_prediction

    r = perfmodel.predict_training_time("gpt2-12x768", batch_size=8, gpu_type="A100", steps=20_000, history=model)
    with mlflow.start_run():
        log_prediction(r)           # perfmodel.predicted_seconds, ..._lower_s, ..._upper_s, tags perfmodel.*
        trainer.train()             # the Trainer's MLflow logging adds train_runtime
"""

from __future__ import annotations

import math
from datetime import datetime, timezone

from .._version import __version__

__all__ = ["log_prediction"]


def log_prediction(result, *, run_id: str | None = None, tracking_uri: str | None = None,
                   prefix: str = "perfmodel.") -> dict:
    """Log a :class:`~perfmodel.TrainingTimePrediction` to an MLflow run.

    Numbers go in as metrics (``<prefix>predicted_seconds``, ``predicted_lower_s``, ``predicted_upper_s``,
    ``predicted_step_s``, ``predicted_step_lower_s``, ``predicted_step_upper_s``, ``predicted_steps``,
    ``confidence``, ``r2``, ``n_runs``, ``nearest_run_distance``); the method and provenance (the histories it
    learned from, the query's kind, whether it was inside the fitted domain, its warnings, perfmodel's version and
    the time of the prediction) as tags. Tags rather than
    params, because MLflow params cannot change and a prediction may be made again.

    Parameters
    ----------
    result : TrainingTimePrediction
        What :func:`perfmodel.predict_training_time` returned.
    run_id : str, optional
        The run to log to; default: the active run (``mlflow.start_run()``).
    tracking_uri : str, optional
        With ``run_id``: the tracking store (default: MLflow's own).
    prefix : str, default="perfmodel."
        Prefix of every key.

    Returns
    -------
    dict
        ``{"run_id", "metrics", "tags"}`` as logged.
    """
    needed = ("seconds", "lower", "upper", "confidence", "step_seconds", "method", "n_runs")
    if not all(hasattr(result, name) for name in needed):
        raise TypeError(f"log_prediction expects a TrainingTimePrediction (from perfmodel.predict_training_time). "
                        f"Got {type(result).__name__}.")
    if not isinstance(prefix, str):
        raise TypeError(f"The 'prefix' parameter of log_prediction must be a str. Got {prefix!r}.")
    import mlflow

    if run_id is None:
        active = mlflow.active_run()
        if active is None:
            raise ValueError("log_prediction: there is no active MLflow run; call it inside mlflow.start_run(), "
                             "or pass run_id=.")
        run_id = active.info.run_id
    metrics = {
        "predicted_seconds": result.seconds, "predicted_lower_s": result.lower, "predicted_upper_s": result.upper,
        "predicted_step_s": result.step_seconds, "predicted_step_lower_s": getattr(result, "step_lower", None),
        "predicted_step_upper_s": getattr(result, "step_upper", None), "predicted_steps": getattr(result, "steps", None),
        "confidence": result.confidence, "r2": getattr(result, "r2", None), "n_runs": result.n_runs,
        "nearest_run_distance": getattr(result, "nearest_run_distance", None),
    }
    metrics = {prefix + k: float(v) for k, v in metrics.items()
               if v is not None and not isinstance(v, bool) and math.isfinite(float(v))}
    warnings = list(getattr(result, "warnings", []) or [])
    tags = {
        "method": result.method,
        "inside_domain": str(bool(getattr(result, "inside_domain", True))).lower(),
        "warnings": " | ".join(warnings)[:5000] if warnings else "",
        "query_kind": str(getattr(result, "query_kind", "") or ""),
        "history": ", ".join(map(str, getattr(result, "provenance", []) or []))[:5000],
        "version": __version__,
        "predicted_at": datetime.now(timezone.utc).isoformat(timespec="seconds"),
        "prediction": str(result),
    }
    tags = {prefix + k: v for k, v in tags.items()}
    client = mlflow.MlflowClient(tracking_uri=tracking_uri)
    from mlflow.entities import Metric, RunTag

    now = int(datetime.now(timezone.utc).timestamp() * 1000)
    client.log_batch(run_id, metrics=[Metric(k, v, now, 0) for k, v in metrics.items()],
                     tags=[RunTag(k, str(v)) for k, v in tags.items()])
    return {"run_id": run_id, "metrics": metrics, "tags": tags}
