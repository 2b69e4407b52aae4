"""Import training runs from Hugging Face Trainer output dirs (no extra needed: plain JSON, never a pickle).

A run's output dir holds what the Trainer and the example scripts write:

- ``trainer_state.json`` (``Trainer.save_state``; else the newest ``checkpoint-*/trainer_state.json``):
  ``global_step``, ``total_flos``, ``train_batch_size`` (per process) and ``log_history``, whose last entry has the
  speed metrics;
- ``all_results.json`` / ``train_results.json``: ``train_runtime``, ``train_samples_per_second``,
  ``train_steps_per_second``, ``total_flos``;
- ``README.md``, the model card ``Trainer.create_model_card`` writes: ``num_devices``,
  ``gradient_accumulation_steps``, ``total_train_batch_size``, ``mixed_precision_training`` (fp16);
- ``config.json``: the architecture (params counted from it, or from the ``model.safetensors`` headers).

``training_args.bin`` is a pickle and is never read. An output dir does not say which device it ran on: pass
``values={"gpu_type": ...}`` (CLI ``--set gpu_type=A100``) or map a key of ``all_results.json`` that does.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import re
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from ._hf import as_float, as_int, count_safetensors_params, model_name_from_config, params_from_config
from ._records import ImportResult, build_record, check_mapping, check_values, finish, mapped_columns

__all__ = ["from_hf_output_dirs", "find_output_dirs"]

logger = logging.getLogger(__name__)

_MARKERS = ("trainer_state.json", "all_results.json", "train_results.json")
_CARD_LINE = re.compile(r"^- ([A-Za-z0-9_]+): (.+)$")


def _read_json(path: Path) -> dict:
    if not path.is_file():
        return {}
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise ValueError(f"{str(path)!r} is not readable JSON ({exc}).") from None
    except RecursionError:
        raise ValueError(f"{str(path)!r} is not usable JSON: nested too deeply.") from None
    return data if isinstance(data, dict) else {}


def _card_hyperparameters(path: Path) -> dict | None:
    """The "Training hyperparameters" list of a Trainer model card, or None without one."""
    if not path.is_file():
        return None
    try:
        text = path.read_text(encoding="utf-8", errors="replace")
    except OSError:
        return None
    if "### Training hyperparameters" not in text:
        return None
    section = text.split("### Training hyperparameters", 1)[1].split("\n#", 1)[0]
    out = {}
    for line in section.splitlines():
        match = _CARD_LINE.match(line.strip())
        if match:
            out[match.group(1)] = match.group(2).strip()
    return out or None


def _is_run_dir(path: Path) -> bool:
    return any((path / m).is_file() for m in _MARKERS) or any(path.glob("checkpoint-*/trainer_state.json"))


def find_output_dirs(paths) -> list[Path]:
    """The Hugging Face Trainer run dirs in ``paths``.

    A run dir holds ``trainer_state.json``, ``all_results.json`` or ``train_results.json``, or a
    ``checkpoint-*/trainer_state.json``.

    Parameters
    ----------
    paths : iterable of str or path-like
        Directories: each that is a run dir is taken as it is, else the run dirs below it are found (the
        search does not descend into ``checkpoint-*`` or hidden folders, nor below a run dir).

    Returns
    -------
    list of pathlib.Path
        The run dirs, in the order found, each once.

    Raises
    ------
    FileNotFoundError
        For a path that does not exist.
    ValueError
        For a path that is not a directory.
    """
    found = []
    for raw in paths:
        path = Path(raw)
        if not path.exists():
            raise FileNotFoundError(f"Output dir {str(path)!r} does not exist.")
        if not path.is_dir():
            raise ValueError(f"{str(path)!r} is not a directory (pass Hugging Face Trainer output dirs).")
        if _is_run_dir(path):
            found.append(path)
            continue
        for dirpath, dirnames, _ in os.walk(path):
            dirnames[:] = sorted(d for d in dirnames if not d.startswith(("checkpoint-", ".")))
            sub = Path(dirpath)
            if sub != path and _is_run_dir(sub):
                found.append(sub)
                dirnames[:] = []
    return list(dict.fromkeys(found))


def _latest_checkpoint_state(path: Path) -> dict:
    best, best_step = None, -1
    for state in path.glob("checkpoint-*/trainer_state.json"):
        step = as_int(state.parent.name.split("-", 1)[1])
        if step is not None and step > best_step:
            best, best_step = state, step
    return _read_json(best) if best else {}


def _facts(path: Path) -> tuple[dict, dict]:
    """The facts of one output dir, and a flat dict of every key it holds (for ``mapping``)."""
    state = _read_json(path / "trainer_state.json") or _latest_checkpoint_state(path)
    results = {**_read_json(path / "train_results.json"), **_read_json(path / "all_results.json")}
    log_history = state.get("log_history")
    final = next((e for e in reversed(log_history if isinstance(log_history, list) else []) if isinstance(e, dict)
                  and "train_runtime" in e), {})
    speed = {**final, **results}
    config = _read_json(path / "config.json")
    card = _card_hyperparameters(path / "README.md")
    flat = {**config, **{k: v for k, v in state.items() if not isinstance(v, (list, dict))}, **(card or {}),
            **speed}
    why: dict[str, str] = {}
    facts: dict[str, Any] = {"why": why, "model": model_name_from_config(config)}
    if not config:
        why["model"] = "no config.json (model name and size unknown)"
    params = params_from_config(config) if config else None
    if params is None:
        params = count_safetensors_params(path)
    if params is None:
        why["params"] = (f"parameter count unknown (model_type {config.get('model_type', 'none')!r} is not one "
                         "perfmodel counts from config.json, and there is no model.safetensors)")
    facts["params"] = params
    per_process = as_int(state.get("train_batch_size"))
    if per_process is None and card is not None:
        per_process = as_int(card.get("train_batch_size"))
    facts["micro_batch"] = per_process
    if per_process is None:
        why["batch_size"] = "per-device batch size unknown (no train_batch_size in trainer_state.json or model card)"
    if card is not None:  # the card lists these only when they are not 1
        facts["grad_accum"] = as_int(card.get("gradient_accumulation_steps", 1))
        facts["processes"] = as_int(card.get("num_devices", 1))
        facts["precision"] = "fp16" if "mixed_precision_training" in card else None
    wall_time_s = as_float(speed.get("train_runtime"))
    facts["wall_time_s"] = wall_time_s
    if wall_time_s is None:
        why["wall_time_s"] = ("no train_runtime (no all_results.json/train_results.json, and trainer_state.json has "
                              "no final log entry: the run did not finish, or save_state was not called)")
    facts["samples_per_s"] = speed.get("train_samples_per_second")
    facts["steps_per_s"] = speed.get("train_steps_per_second")
    facts["total_flos"] = speed.get("total_flos", state.get("total_flos"))
    global_step = as_int(state.get("global_step")) or as_int(final.get("step"))
    facts["global_step"] = global_step
    steps = global_step
    sps = as_float(facts["steps_per_s"])
    if sps and steps and wall_time_s:
        in_call = round(sps * wall_time_s)
        if abs(in_call - steps) > max(2, 0.02 * steps):  # resumed: the runtime covers the last call only
            steps = in_call or None
    if steps is None:
        why["steps"] = "optimizer step count unknown (no global_step in trainer_state.json)"
    facts["steps"] = steps
    gpu = next((flat[k] for k in ("gpu_type", "gpu_name") if flat.get(k)), None)
    facts["gpu_type"] = None if gpu is None else str(gpu)
    if gpu is None:
        why["gpu_type"] = "an output dir does not record its device: pass --set gpu_type=NAME (values=)"
    return facts, flat


#: The files whose bytes identify a run (what the importer reads; ``training_args.bin`` is never read).
_CONTENT_FILES = ("trainer_state.json", "train_results.json", "all_results.json", "config.json", "README.md")


def content_id(path: Path) -> str:
    """A digest of what an output dir holds (the files the importer reads, by name and bytes): the same run
    touched, copied or moved keeps its id; a dir trained again (new results) gets a new one."""
    h = hashlib.sha256()
    files = [path / name for name in _CONTENT_FILES]
    if not (path / "trainer_state.json").is_file():
        files += sorted(path.glob("checkpoint-*/trainer_state.json"))
    for f in files:
        try:
            data = f.read_bytes()
        except OSError:  # absent (or unreadable: the facts say why)
            continue
        rel = f.relative_to(path).as_posix()
        h.update(f"{rel}\0{len(data)}\0".encode())
        h.update(data)
    return h.hexdigest()[:24]


def _marker_mtime(path: Path) -> float:
    times = [(path / m).stat().st_mtime for m in _MARKERS if (path / m).is_file()]
    times += [p.stat().st_mtime for p in path.glob("checkpoint-*/trainer_state.json")]
    return max(times)


def from_hf_output_dirs(dirs, *, output=None, mapping=None, values=None) -> ImportResult:
    """Read Hugging Face Trainer output dirs into run-history records.

    Parameters
    ----------
    dirs : path or list of paths
        Output dirs, or folders searched (recursively) for them.
    output : path, optional
        History to append to, skipping runs already imported (``source_id`` ``hf_output:<digest>``, a digest of
        the files the importer reads, by name and content: a dir touched, copied or moved is the same run; a dir
        trained again holds new results and is imported again). The dir is recorded in ``source_path``.
    mapping : dict, optional
        ``{"key in config.json, trainer_state.json, all_results.json or the model card": "column"}``.
    values : dict, optional
        ``{"column": value}`` for every run, e.g. ``{"gpu_type": "A100"}`` (an output dir does not name its device).

    Returns
    -------
    ImportResult
    """
    mapping = check_mapping(mapping, "mapping")
    values = check_values(values, "values")
    if isinstance(dirs, (str, os.PathLike)):
        dirs = [dirs]
    records, skipped = [], []
    for path in find_output_dirs(list(dirs)):
        mtime = _marker_mtime(path)
        sid = f"hf_output:{content_id(path)}"
        try:
            facts, flat = _facts(path)
        except ValueError as exc:
            skipped.append((f"{sid} ({path})", str(exc)))
            continue
        facts["timestamp"] = datetime.fromtimestamp(mtime, timezone.utc).isoformat(timespec="seconds")
        cols, problems = mapped_columns(flat.get, mapping, values)
        if problems:
            skipped.append((f"{sid} ({path})", "; ".join(problems)))
            continue
        rec = build_record(facts, cols, source="hf_output", source_id=sid,
                           protocol="hf_output: train_runtime over the run's optimizer steps (start-up, logging, "
                                    "evaluation and saving included)")
        if isinstance(rec, str):
            skipped.append((f"{sid} ({path})", rec))
        else:
            rec.setdefault("source_path", str(path.resolve()))
            records.append(rec)
    if not records and not skipped:
        raise ValueError(f"No Hugging Face output dir (with {', '.join(_MARKERS)}) found in "
                         f"{', '.join(map(str, dirs))}.")
    return finish(records, skipped, output)
