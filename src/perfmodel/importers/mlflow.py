"""Import training runs from MLflow tracking (extra ``mlflow``): the Hugging Face Trainer's logs and common scripts'.

Runs are read through the real MLflow client, so a file store (``file:./mlruns`` or a path), a database
(``sqlite:///mlflow.db``) and a tracking server (``http://host:5000``) work the same. What is read, per run:

==========================  =========================================================================================
column                      from
==========================  =========================================================================================
``model``                   the model config the Trainer logs as params: ``<model_type>-<layers>x<width>``
``params``                  a ``num_parameters`` / ``params`` / ``model_num_parameters`` param, else counted from the
                            logged config (GPT-2, Llama, Mistral, Qwen2)
``batch_size``              ``per_device_train_batch_size`` (per device, one micro-batch)
``grad_accum``              ``gradient_accumulation_steps``
``gpu_count``               ``world_size`` / ``num_devices`` (× ``n_gpu``) params or tags; else from
                            ``train_samples_per_second / train_steps_per_second`` (the global batch) when that fixes it
``gpu_type``                a ``gpu_type`` / ``gpu_name`` / ``gpu`` / ``device_name`` param or tag; ``cpu`` when
                            ``use_cpu`` / ``no_cuda`` is true
``precision``               ``bf16`` / ``fp16`` / ``tf32`` params
``wall_time_s``, ``steps``  the ``train_runtime`` metric and the step it was logged at (the global step)
``flops_per_sample``        ``total_flos`` over the samples trained
==========================  =========================================================================================

Runs that are not ``FINISHED``, or lack a required column, are skipped with a reason each. A tracking server
that does not accept a connection within :data:`CONNECT_TIMEOUT_S` seconds is an error of one line. ``mapping``
(``{"param, metric or tag": "column"}``) and ``values`` (``{"column": value}`` for every run) fill the rest.
"""

from __future__ import annotations

import contextlib
import logging
import os
import statistics
from datetime import datetime, timezone
from pathlib import Path

from ._hf import as_bool, as_float, as_int, model_name_from_config, params_from_config, precision_from_flags
from ._records import ImportResult, build_record, check_mapping, check_values, finish, mapped_columns

__all__ = ["from_mlflow"]

logger = logging.getLogger(__name__)

_PARAMS_KEYS = ("num_parameters", "params", "model_num_parameters", "n_params")
_GPU_KEYS = ("gpu_type", "gpu_name", "gpu", "device_name")
_WORLD_KEYS = ("world_size", "num_devices", "num_processes")


def _client(tracking_uri):
    try:
        import mlflow
    except ImportError:
        raise ImportError("perfmodel import mlflow needs the mlflow client: pip install 'perfmodel[mlflow]'") from None
    return mlflow.MlflowClient(tracking_uri=tracking_uri)


@contextlib.contextmanager
def _file_store_allowed(uri):
    """Let MLflow open a legacy file store (``./mlruns``) for reading: MLflow 3 refuses one unless
    ``MLFLOW_ALLOW_FILE_STORE`` is set. Only for the duration of the import; a value the user set is kept."""
    is_file = uri is not None and (uri.startswith("file:") or "://" not in uri) and not str(uri).endswith(".db")
    if not is_file or "MLFLOW_ALLOW_FILE_STORE" in os.environ:
        yield
        return
    os.environ["MLFLOW_ALLOW_FILE_STORE"] = "true"
    try:
        yield
    finally:
        os.environ.pop("MLFLOW_ALLOW_FILE_STORE", None)


#: For a tracking server: seconds to wait for a connection before the import fails with one line (MLflow's own
#: defaults retry 7 times with exponential backoff, 4 minutes against a server that is down).
CONNECT_TIMEOUT_S = 5.0
_HTTP_SETTINGS = {"MLFLOW_HTTP_REQUEST_MAX_RETRIES": "2", "MLFLOW_HTTP_REQUEST_BACKOFF_FACTOR": "1",
                  "MLFLOW_HTTP_REQUEST_TIMEOUT": "30"}


def _check_server(uri) -> None:
    """A tracking server must accept a connection within :data:`CONNECT_TIMEOUT_S`; else one clear error."""
    import socket
    from urllib.parse import urlsplit

    if uri is None or not str(uri).lower().startswith(("http://", "https://")):
        return
    parts = urlsplit(uri)
    try:
        port = parts.port or (443 if parts.scheme.lower() == "https" else 80)
    except ValueError:
        raise ValueError(f"MLflow tracking URI {uri!r} has an invalid port.") from None
    if not parts.hostname:
        raise ValueError(f"MLflow tracking URI {uri!r} names no host.")
    try:
        with socket.create_connection((parts.hostname, port), timeout=CONNECT_TIMEOUT_S):
            pass
    except OSError as exc:
        reason = "timed out" if isinstance(exc, socket.timeout) else (exc.strerror or str(exc) or type(exc).__name__)
        raise ConnectionError(f"MLflow tracking server {uri} is not reachable ({reason}, within "
                              f"{CONNECT_TIMEOUT_S:g} s): check the URI and that the server is running.") from None


@contextlib.contextmanager
def _quick_http(uri):
    """Few, short retries against a tracking server for the duration of the import (values the user set are
    kept), and MLflow's errors as one line."""
    is_http = uri is not None and str(uri).lower().startswith(("http://", "https://"))
    added = [k for k in _HTTP_SETTINGS if is_http and k not in os.environ]
    for k in added:
        os.environ[k] = _HTTP_SETTINGS[k]
    try:
        yield
    except Exception as exc:
        if type(exc).__module__.split(".")[0] not in ("mlflow", "requests", "urllib3"):
            raise
        first = next((ln.strip() for ln in str(exc).splitlines() if ln.strip()), type(exc).__name__)
        error = ConnectionError if is_http else ValueError
        raise error(f"MLflow at {uri or 'the default tracking URI'} failed: {first[:300]}") from None
    finally:
        for k in added:
            os.environ.pop(k, None)


def _check_local_store(uri) -> None:
    """A local store that does not exist is an error (MLflow would silently create an empty one)."""
    if uri is None:
        return
    if not isinstance(uri, str) or not uri:
        raise TypeError(f"The 'tracking_uri' parameter of from_mlflow must be a non-empty str. Got {uri!r}.")
    path = None
    if uri.startswith("sqlite:///"):
        path = uri[len("sqlite:///"):]
    elif uri.startswith("file:"):
        path = uri[len("file:"):]
        path = path[2:] if path.startswith("//") else path
    elif "://" not in uri:
        path = uri
    if path is not None and path != ":memory:" and not Path(path).exists():
        raise FileNotFoundError(f"MLflow tracking store {uri!r} does not exist ({path}).")


def _first(sources, keys):
    for key in keys:
        for src in sources:
            value = src.get(key)
            if value is not None and str(value).strip() not in ("", "None"):
                return value
    return None


#: Training metrics the Hugging Face Trainer logs every ``logging_steps``, whose timestamps time the steps between.
_STEP_METRICS = ("loss", "train_loss", "grad_norm", "learning_rate")
MIN_LOGGED_SPAN_S = 1.0


def _logged_step_time(client, run_id: str, metrics: dict, wall_time_s, steps) -> tuple[float, str] | None:
    """The steady-state seconds per optimizer step from a training metric's history: the median, over the
    intervals between its logged steps after the first (warm-up), of elapsed time over steps taken. None when no
    metric was logged at four or more steps over at least a second (MLflow's timestamps are milliseconds), or
    when the answer exceeds runtime / steps, which includes everything else."""
    for key in _STEP_METRICS:
        if key not in metrics:
            continue
        try:
            history = client.get_metric_history(run_id, key)
        except Exception:  # noqa: BLE001 - no history: fall back to the runtime
            return None
        points = sorted({int(h.step): h.timestamp / 1000.0 for h in history if h.step is not None}.items())
        if len(points) < 4:
            continue
        points = points[1:]  # the first interval holds the warm-up (compilation, the first batches)
        rates = [(t1 - t0) / (s1 - s0) for (s0, t0), (s1, t1) in zip(points, points[1:]) if s1 > s0]
        if not rates or min(rates) <= 0 or points[-1][1] - points[0][1] < MIN_LOGGED_SPAN_S:
            continue
        step = statistics.median(rates)
        if wall_time_s and steps and step > wall_time_s / steps:
            return None
        return step, (f"mlflow: median seconds per optimizer step between the logged steps of {key!r} "
                      f"({len(rates)} intervals, the first logged interval left out as warm-up)")
    return None


def _facts(run, client) -> dict:
    p, m, t = run.data.params, run.data.metrics, run.data.tags
    why: dict[str, str] = {}
    facts = {"run_id": run.info.run_id, "why": why}
    facts["model"] = model_name_from_config(p)
    params = as_int(_first([p, t], _PARAMS_KEYS))
    if params is None:
        params = params_from_config(p)
        if params is None:
            why["params"] = (f"parameter count unknown (no num_parameters param, and model_type "
                             f"{p.get('model_type', 'none')!r} is not one perfmodel counts from a config)")
    facts["params"] = params
    facts["micro_batch"] = as_int(p.get("per_device_train_batch_size"))
    if facts["micro_batch"] is None:
        why["batch_size"] = "no per_device_train_batch_size param"
    facts["grad_accum"] = as_int(p.get("gradient_accumulation_steps"))
    facts["processes"] = as_int(_first([p, t], _WORLD_KEYS))
    facts["gpus_per_process"] = as_int(_first([p, t], ("n_gpu",)))
    gpu = _first([t, p], _GPU_KEYS)
    if gpu is None and (as_bool(p.get("use_cpu")) or as_bool(p.get("no_cuda"))):
        gpu = "cpu"
    if gpu is None:
        why["gpu_type"] = ("device type unknown (no gpu_type/gpu_name tag or param, and use_cpu is not set): "
                           "pass --set gpu_type=NAME or --map KEY=gpu_type")
    facts["gpu_type"] = None if gpu is None else str(gpu)
    facts["precision"] = precision_from_flags(bf16=p.get("bf16"), fp16=p.get("fp16"), tf32=p.get("tf32"))
    facts["wall_time_s"] = as_float(m.get("train_runtime"))
    if facts["wall_time_s"] is None:
        why["wall_time_s"] = "no train_runtime metric (training did not finish through Trainer.train)"
    facts["samples_per_s"] = m.get("train_samples_per_second")
    facts["steps_per_s"] = m.get("train_steps_per_second")
    facts["total_flos"] = m.get("total_flos")
    steps = None
    if facts["wall_time_s"] is not None:
        history = client.get_metric_history(run.info.run_id, "train_runtime")
        global_step = history[-1].step if history else None
        facts["global_step"] = global_step or None
        steps = global_step or None
        sps = as_float(facts["steps_per_s"])
        if sps and steps:
            in_call = round(sps * facts["wall_time_s"])
            if abs(in_call - steps) > max(2, 0.02 * steps):  # resumed from a checkpoint: runtime is this call's
                steps = in_call or None
    if steps is None:
        why.setdefault("steps", "optimizer step count unknown (train_runtime was not logged at a step)")
    facts["steps"] = steps
    per_step = _logged_step_time(client, run.info.run_id, m, facts["wall_time_s"], steps)
    if per_step is not None:
        facts["step_time_s"], facts["protocol"] = per_step
    end = run.info.end_time or run.info.start_time
    if end:
        facts["timestamp"] = datetime.fromtimestamp(end / 1000, timezone.utc).isoformat(timespec="seconds")
    return facts


def from_mlflow(tracking_uri: str | None = None, *, experiment: str | None = None, output=None, mapping=None,
                values=None, max_runs: int | None = None) -> ImportResult:
    """Read finished training runs from MLflow into run-history records.

    Parameters
    ----------
    tracking_uri : str, optional
        ``sqlite:///mlflow.db``, ``file:./mlruns`` (or a folder path), ``http://host:5000``; default: MLflow's own
        (``$MLFLOW_TRACKING_URI``).
    experiment : str, optional
        Experiment name; default: every active experiment.
    output : path, optional
        History to append the records to (``.csv``/``.parquet``), atomically, skipping runs already imported
        (same ``source_id``, ``mlflow:<run id>``).
    mapping : dict, optional
        ``{"param, metric or tag name": "column"}`` for what the built-in mapping does not know; a mapped value
        wins over the built-in one.
    values : dict, optional
        ``{"column": value}`` that holds for every run (e.g. ``{"gpu_type": "A100"}``).
    max_runs : int, optional
        Read at most this many runs (newest first).

    Returns
    -------
    ImportResult
        ``.runs`` (validated records), ``.skipped`` ((run id, reason) pairs), ``.added`` / ``.duplicates``.
    """
    mapping = check_mapping(mapping, "mapping")
    values = check_values(values, "values")
    if max_runs is not None and (isinstance(max_runs, bool) or not isinstance(max_runs, int) or max_runs < 1):
        raise ValueError(f"The 'max_runs' parameter of from_mlflow must be a positive int. Got {max_runs!r}.")
    _check_local_store(tracking_uri)
    effective = tracking_uri or os.environ.get("MLFLOW_TRACKING_URI")
    _check_server(effective)
    with _file_store_allowed(tracking_uri), _quick_http(effective):
        return _import(tracking_uri, experiment, output, mapping, values, max_runs)


def _import(tracking_uri, experiment, output, mapping, values, max_runs) -> ImportResult:
    client = _client(tracking_uri)
    uri = tracking_uri or "the default tracking URI"
    if experiment is not None:
        exp = client.get_experiment_by_name(experiment)
        if exp is None:
            known = [e.name for e in client.search_experiments()]
            raise ValueError(f"No MLflow experiment named {experiment!r} at {uri}. Known: {', '.join(known) or 'none'}.")
        exp_ids = [exp.experiment_id]
    else:
        exp_ids = [e.experiment_id for e in client.search_experiments()]
    runs, token = [], None
    while exp_ids:
        page = client.search_runs(exp_ids, max_results=min(1000, max_runs or 1000), page_token=token,
                                  order_by=["attributes.start_time DESC"])
        runs.extend(page)
        token = page.token
        if not token or (max_runs is not None and len(runs) >= max_runs):
            break
    runs = runs[:max_runs] if max_runs is not None else runs
    records, skipped = [], []
    for run in runs:
        sid = f"mlflow:{run.info.run_id}"
        if run.info.status != "FINISHED":
            skipped.append((sid, f"run status is {run.info.status}, not FINISHED"))
            continue
        data = run.data

        def lookup(key, data=data):
            for src in (data.params, data.metrics, data.tags):
                if key in src:
                    return src[key]
            return None

        cols, problems = mapped_columns(lookup, mapping, values)
        if problems:
            skipped.append((sid, "; ".join(problems)))
            continue
        facts = _facts(run, client)
        rec = build_record(facts, cols, source="mlflow", source_id=sid,
                           protocol=facts.get("protocol", "mlflow: train_runtime over the run's optimizer steps "
                                                          "(start-up, logging, evaluation and saving included)"))
        if isinstance(rec, str):
            skipped.append((sid, rec))
        else:
            records.append(rec)
    logger.info("Read %d MLflow runs from %s: %d records, %d skipped.", len(runs), uri, len(records), len(skipped))
    return finish(records, skipped, output)
