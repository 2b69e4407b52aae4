"""Turning what an external system knows about a run into one schema record, or a stated reason to skip it.

Shared by the MLflow and Hugging Face output-dir importers. Nothing is guessed: a required column that the source
does not give (and the user does not map or set) skips the run with a reason.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass, field
from pathlib import Path

import pandas as pd

from ..exceptions import PerfModelError, SchemaError
from ..io import append_new_runs
from ..schema import COLUMNS, validate_runs
from ._hf import FLOPS_METHOD, as_float, as_int, world_from_throughput

__all__ = ["ImportResult", "build_record", "check_mapping", "read_mapping_file"]

#: Each column's kind; the per-device batch the importers read is a whole number of samples (a fractional share
#: exists only in a model-parallel layout, which these sources do not state).
_KIND = {**{c.name: c.kind for c in COLUMNS}, "batch_size": "int"}


@dataclass
class ImportResult:
    """What an import read, skipped and wrote.

    Attributes
    ----------
    runs : DataFrame
        The records built (validated), one per imported run, before deduplication against ``output``.
    skipped : list of (str, str)
        ``(source id, reason)`` for each run that lacked what the schema needs.
    added, duplicates : int or None
        Records appended to ``output`` and records already there (same ``source_id``); None without ``output``.
    """

    runs: pd.DataFrame
    skipped: list[tuple[str, str]] = field(default_factory=list)
    added: int | None = None
    duplicates: int | None = None

    def summary(self) -> str:
        """What the import did, as text.

        Returns
        -------
        str
            One line of counts, then one line per skipped run with its reason.
        """
        head = f"imported {len(self.runs)} runs"
        if self.added is not None:
            head += f" ({self.added} new, {self.duplicates} already in the history)"
        head += f"; skipped {len(self.skipped)}"
        lines = [head] + [f"  skipped {sid}: {reason}" for sid, reason in self.skipped]
        return "\n".join(lines)

    def __str__(self) -> str:
        return self.summary()


def check_mapping(mapping, what: str) -> dict[str, str]:
    """Validate ``{source key: schema column}``; unknown target columns raise naming the known ones."""
    if mapping is None:
        return {}
    if not isinstance(mapping, dict):
        raise TypeError(f"The {what!r} parameter must be a dict. Got {type(mapping).__name__}.")
    out = {}
    for key, column in mapping.items():
        if not isinstance(key, str) or not isinstance(column, str) or not key or not column:
            raise TypeError(f"The {what!r} parameter must map non-empty str keys to str column names. "
                            f"Got {key!r}: {column!r}.")
        if column not in _KIND:
            raise ValueError(f"The {what!r} parameter maps {key!r} to {column!r}, which is not a run-history column. "
                             f"Known columns: {', '.join(_KIND)}.")
        out[key] = column
    return out


def check_values(values, what: str) -> dict:
    """Validate ``{schema column: value}`` (values that hold for every imported run)."""
    if values is None:
        return {}
    if not isinstance(values, dict):
        raise TypeError(f"The {what!r} parameter must be a dict. Got {type(values).__name__}.")
    for column in values:
        if column not in _KIND:
            raise ValueError(f"The {what!r} parameter sets {column!r}, which is not a run-history column. "
                             f"Known columns: {', '.join(_KIND)}.")
    return dict(values)


def read_json_file(path, what: str, error: type = ValueError):
    """The JSON document in ``path``; a missing file or invalid JSON raises an error naming ``what`` and the path
    (``error``, a ValueError subclass, for invalid JSON)."""
    try:
        return json.loads(Path(path).read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise FileNotFoundError(f"{what} {str(path)!r} does not exist.") from None
    except ValueError as exc:  # UnicodeDecodeError is a ValueError too
        raise error(f"{what} {str(path)!r} is not valid JSON: {exc}") from None
    except RecursionError:
        raise error(f"{what} {str(path)!r} is not usable JSON: nested too deeply.") from None


def read_mapping_file(path) -> dict[str, str]:
    """A mapping file: a JSON object ``{"source key": "column", ...}``."""
    data = read_json_file(path, "Mapping file")
    if not isinstance(data, dict):
        raise ValueError(f"Mapping file {str(path)!r} must hold a JSON object of \"source key\": \"column\" pairs.")
    return check_mapping(data, "mapping file")


def _convert(column: str, value):
    kind = _KIND[column]
    if kind == "str":
        return None if value is None else str(value)
    if kind == "int":
        return as_int(value)
    return as_float(value)


def mapped_columns(lookup, mapping: dict[str, str], values: dict) -> tuple[dict, list[str]]:
    """Columns from ``mapping`` (source keys looked up with ``lookup(key)``) and ``values``; plus problems."""
    cols, problems = {}, []
    for key, column in mapping.items():
        raw = lookup(key)
        if raw is None:
            continue
        value = _convert(column, raw)
        if value is None:
            problems.append(f"{key}={raw!r} is not a valid {column}")
        else:
            cols[column] = value
    for column, raw in values.items():
        value = _convert(column, raw)
        if value is None:
            raise ValueError(f"Cannot set {column}={raw!r}: {column} must be {_KIND[column]}.")
        cols[column] = value
    return cols, problems


def build_record(facts: dict, cols: dict, *, source: str, source_id: str, protocol: str) -> dict | str:
    """One record from a source's ``facts`` and the user's mapped/set ``cols`` (which win); or the skip reason.

    ``facts`` keys: ``model``, ``params``, ``micro_batch`` (per-device batch of one micro-batch: the schema's
    ``batch_size``; with ``grad_accum`` k an optimizer step covers k of them), ``grad_accum``,
    ``processes``, ``gpus_per_process``, ``gpu_type``, ``precision``, ``steps``, ``wall_time_s``, ``total_flos``,
    ``samples_per_s``, ``steps_per_s``, ``timestamp``, ``step_time_s`` (a steady-state step time, where the
    source times the steps themselves), ``why`` (a dict of reasons for facts the source lacked).

    Gradient accumulation, like precision, is optional in the schema (default 1): it is left empty where nothing
    says what it was, but a run whose speed metrics show that it could be either accumulation or more processes
    is skipped.
    """
    why = dict(facts.get("why", {}))
    rec = {"run_id": facts.get("run_id")}
    # Counts the source gives must be positive integers: a 0 or negative one is a broken record, skipped with the
    # value named (never divided by, never written).
    bad = [f"{name}={value!r} is not a positive integer" for name, value in (
        ("per-device batch size", cols.get("batch_size", facts.get("micro_batch"))),
        ("gradient_accumulation_steps", cols.get("grad_accum", facts.get("grad_accum"))),
        ("process count", facts.get("processes")), ("gpu_count", cols.get("gpu_count")),
        ("n_gpu", facts.get("gpus_per_process")), ("steps", cols.get("steps", facts.get("steps"))))
        if value is not None and not (isinstance(value, int) and not isinstance(value, bool) and value >= 1)]
    if bad:
        return "; ".join(bad)
    gpp = max(1, facts.get("gpus_per_process") or 1)
    micro = cols.get("batch_size", facts.get("micro_batch"))  # the schema's batch_size: per device, per micro-batch
    accum = cols.get("grad_accum", facts.get("grad_accum"))
    processes = facts.get("processes")
    if "gpu_count" in cols:
        processes = cols["gpu_count"] // gpp if cols["gpu_count"] % gpp == 0 else None
    if micro is not None and (accum is None or processes is None):
        # The Trainer's speed metrics give the global batch per optimizer step, micro-batch × GPUs per process ×
        # accumulation × processes: it fixes whichever factor is missing, and both only when their product is 1.
        k = world_from_throughput(facts.get("samples_per_s"), facts.get("steps_per_s"), micro * gpp)
        if k is None:
            why.setdefault("gpu_count", "device count unknown (no world_size/num_devices, and the speed metrics "
                                        "do not give the global batch)")
        elif accum is not None and processes is None and k % accum == 0:
            processes = k // accum
        elif processes is not None and accum is None and k % processes == 0:
            accum = int(k // processes)
        elif accum is None and processes is None and k == 1:
            accum, processes = 1, 1
        elif accum is None and processes is None:
            why["gpu_count"] = (f"gradient accumulation and process count unknown: the speed metrics give a global "
                                f"batch of {k} × the per-process batch, which could be either")
    batch = micro
    gpu_count = cols.get("gpu_count", None if processes is None else int(processes) * gpp)
    rec.update(model=cols.get("model", facts.get("model")), params=cols.get("params", facts.get("params")),
               batch_size=batch, grad_accum=accum, gpu_count=gpu_count,
               gpu_type=cols.get("gpu_type", facts.get("gpu_type")),
               precision=cols.get("precision", facts.get("precision")),
               steps=cols.get("steps", facts.get("steps")),
               wall_time_s=cols.get("wall_time_s", facts.get("wall_time_s")),
               step_time_s=cols.get("step_time_s", facts.get("step_time_s")))
    missing = []
    for column, hint in (("model", "no model name (no model_type in the config)"),
                         ("params", "parameter count unknown"),
                         ("batch_size", "per-device batch size unknown"),
                         ("gpu_count", "device count unknown"),
                         ("gpu_type", "device type unknown"),
                         ("steps", "optimizer step count unknown"),
                         ("wall_time_s", "no train_runtime")):
        if rec.get(column) is None and not (column in ("steps", "wall_time_s") and "step_time_s" in cols):
            missing.append(why.get(column, hint))
    if missing:
        return "; ".join(dict.fromkeys(missing))
    total_flos = as_float(facts.get("total_flos"))
    global_step = facts.get("global_step") or rec["steps"]
    if "flops_per_sample" not in cols and total_flos and global_step and accum is not None:
        rec["flops_per_sample"] = total_flos / (global_step * rec["batch_size"] * rec["grad_accum"]
                                                * rec["gpu_count"])
        rec["flops_method"] = FLOPS_METHOD
    rec.update(cols)
    rec.update(source=source, source_id=source_id, status="ok", protocol=protocol, timestamp=facts.get("timestamp"))
    if rec.get("run_id") is None:
        import hashlib

        rec["run_id"] = hashlib.sha1(source_id.encode()).hexdigest()[:12]
    return {k: v for k, v in rec.items() if v is not None}


def finish(records: list[dict], skipped: list[tuple[str, str]], output) -> ImportResult:
    """Validate the built records (a record the schema refuses is skipped with the schema's message) and write."""
    good = []
    for rec in records:
        try:
            validate_runs(pd.DataFrame([rec]), include_failed=True)
        except (SchemaError, PerfModelError, ValueError) as exc:
            skipped.append((rec["source_id"], " ".join(str(exc).split())))
            continue
        good.append(rec)
    runs = validate_runs(pd.DataFrame(good), include_failed=True) if good else pd.DataFrame(
        columns=["run_id", "model", "params", "batch_size", "gpu_count", "gpu_type", "step_time_s"])
    result = ImportResult(runs=runs, skipped=skipped)
    if output is not None and good:
        result.added, result.duplicates = append_new_runs(good, os.fspath(output), key="source_id")
    elif output is not None:
        result.added, result.duplicates = 0, 0
    return result
