"""Saving and loading fitted models — safely by default.

The default format (``perfmodel-safe/1``) is a NumPy ``.npz`` archive read with ``allow_pickle=False``: a JSON
description of the fitted state (numbers, strings, lists, tables) plus numeric arrays. Loading it constructs
only perfmodel's own estimator classes and scikit-learn's ``Pipeline`` from that data, so a model file handed to
you cannot run code. Parts that have no plain-data form are rebuilt deterministically on load: the statsmodels
results of an OLS fit (refit on the stored design matrix) and the trees of the gbm method (refit with the same
data and seed).

joblib/pickle files execute code when loaded. :func:`load_model` refuses them unless ``trusted=True`` is given
explicitly, and says why. Every file records the perfmodel version and the feature schema; a file from an
incompatible version is refused with a message instead of predicting garbage.
"""

from __future__ import annotations

import io
import json
import os
from pathlib import Path

import numpy as np
import pandas as pd

from . import __version__

__all__ = ["save_model", "load_model", "SAFE_FORMAT"]

SAFE_FORMAT = "perfmodel-safe/1"
_PICKLE_FORMAT = "perfmodel-model/1"
_ZIP_MAGIC = b"PK\x03\x04"
# Attributes rebuilt on load instead of stored (no plain-data form).
_REBUILT = {"OLSRegressor": ("results_",), "GBMRegressor": ("estimator_",), "TrainingTimeModel": ("_domain_tree",)}


def _safe_classes() -> dict:
    from .features import RunFeaturizer
    from .models import GBMRegressor, OLSRegressor, PhysicsRegressor, RooflineRegressor, TrainingTimeModel

    return {c.__name__: c for c in (TrainingTimeModel, RunFeaturizer, OLSRegressor, GBMRegressor, PhysicsRegressor,
                                    RooflineRegressor)}


class _Encoder:
    def __init__(self):
        self.arrays: dict[str, np.ndarray] = {}
        self.classes = _safe_classes()

    def array(self, a: np.ndarray):
        if a.dtype.kind in "biuf":
            key = f"a{len(self.arrays)}"
            self.arrays[key] = np.ascontiguousarray(a)
            return {"__array__": key}
        if a.dtype.kind in "OUS":
            return {"__objarray__": [self.enc(v) for v in a.tolist()], "shape": list(a.shape)}
        raise TypeError(f"cannot store an array of dtype {a.dtype} in a safe model file")

    def enc(self, v):
        from sklearn.pipeline import Pipeline

        if v is None or isinstance(v, (bool, int, float, str)):
            return v
        if isinstance(v, np.generic):
            return v.item()
        if v is pd.NA:
            return None
        if isinstance(v, np.ndarray):
            return self.array(v)
        if isinstance(v, tuple):
            return {"__tuple__": [self.enc(x) for x in v]}
        if isinstance(v, list):
            return [self.enc(x) for x in v]
        if isinstance(v, dict):
            return {"__dict__": [[self.enc(k), self.enc(x)] for k, x in v.items()]}
        if isinstance(v, pd.DataFrame):
            return {"__frame__": {
                "columns": [str(c) for c in v.columns],
                "dtypes": [str(t) for t in v.dtypes],
                "index": self.array(np.asarray(v.index, dtype=object if v.index.dtype == object or
                                               str(v.index.dtype).startswith(("str", "string")) else None)),
                "index_name": v.index.name,
                "data": [self.array(np.asarray(v[c].astype(object) if v[c].dtype.kind not in "biuf" else v[c]))
                         for c in v.columns]}}
        if isinstance(v, Pipeline):
            return {"__pipeline__": [[name, self.enc(step)] for name, step in v.steps]}
        name = type(v).__name__
        if name in self.classes and type(v) is self.classes[name]:
            skip = _REBUILT.get(name, ())
            return {"__object__": name, "state": {k: self.enc(x) for k, x in vars(v).items() if k not in skip}}
        raise TypeError(f"cannot store a {type(v).__name__} in a safe model file")


class _Decoder:
    def __init__(self, arrays):
        self.arrays = arrays
        self.classes = _safe_classes()

    def dec(self, v):
        from sklearn.pipeline import Pipeline

        if isinstance(v, list):
            return [self.dec(x) for x in v]
        if not isinstance(v, dict):
            return v
        if "__array__" in v:
            return np.array(self.arrays[v["__array__"]])
        if "__objarray__" in v:
            out = np.empty(len(v["__objarray__"]), dtype=object)
            out[:] = [self.dec(x) for x in v["__objarray__"]]
            return out.reshape(v["shape"])
        if "__tuple__" in v:
            return tuple(self.dec(x) for x in v["__tuple__"])
        if "__dict__" in v:
            return {self.dec(k): self.dec(x) for k, x in v["__dict__"]}
        if "__frame__" in v:
            f = v["__frame__"]
            data = {c: self.dec(a) for c, a in zip(f["columns"], f["data"])}
            frame = pd.DataFrame(data, index=pd.Index(self.dec(f["index"]), name=f["index_name"]))
            for c, t in zip(f["columns"], f["dtypes"]):
                try:
                    frame[c] = frame[c].astype(t)
                except (TypeError, ValueError):
                    pass
            return frame
        if "__pipeline__" in v:
            return Pipeline([(name, self.dec(step)) for name, step in v["__pipeline__"]])
        if "__object__" in v:
            cls = self.classes.get(v["__object__"])
            if cls is None:
                raise ValueError(f"the model file names an unknown class {v['__object__']!r}")
            obj = cls.__new__(cls)
            obj.__dict__.update({k: self.dec(x) for k, x in v["state"].items()})
            if hasattr(obj, "_restore"):
                obj._restore()
            return obj
        raise ValueError("the model file holds an unrecognised entry")


def save_model(model, path, *, format: str = "safe") -> Path:
    """Write a fitted :class:`~perfmodel.models.TrainingTimeModel` to ``path`` atomically.

    Parameters
    ----------
    format : {"safe", "joblib"}, default="safe"
        ``safe``: the pickle-free format (loads without running code). ``joblib``: a pickle, only loadable with
        ``load_model(path, trusted=True)``.
    """
    from .models import TrainingTimeModel

    if not isinstance(model, TrainingTimeModel):
        raise TypeError(f"save_model expects a fitted TrainingTimeModel. Got {type(model).__name__}.")
    if format not in ("safe", "joblib"):
        raise ValueError(f"The 'format' parameter of save_model must be 'safe' or 'joblib'. Got {format!r}.")
    model._check()
    path = Path(path)
    meta = {"format": SAFE_FORMAT, "perfmodel_version": __version__, "method": model.method,
            "features": model.feature_names_}
    tmp = path.with_name(f".{path.name}.tmp")
    try:
        if format == "joblib":
            import joblib

            joblib.dump({**meta, "format": _PICKLE_FORMAT, "model": model}, tmp)
        else:
            enc = _Encoder()
            meta["model"] = enc.enc(model)
            buf = io.BytesIO()
            np.savez_compressed(buf, __meta__=np.array(json.dumps(meta)), **enc.arrays)
            with open(tmp, "wb") as fh:
                fh.write(buf.getvalue())
                fh.flush()
                os.fsync(fh.fileno())
        os.replace(tmp, path)
    finally:
        if tmp.exists():
            tmp.unlink()
    return path


def _check_version(saved: str, path: Path) -> None:
    if str(saved).split(".")[:2] != __version__.split(".")[:2]:
        raise ValueError(
            f"{str(path)!r} was saved by perfmodel {saved}; this is perfmodel {__version__}. Refit the model "
            "with this version (perfmodel fit RUNS -o MODEL)."
        )


def load_model(path, *, trusted: bool = False):
    """Load a model written by :func:`save_model`.

    Parameters
    ----------
    trusted : bool, default=False
        Allow a pickle-based (joblib) file. Unpickling runs whatever code the file carries: pass True only for
        files you made yourself. Safe-format files never need it.

    Raises
    ------
    FileNotFoundError
        If ``path`` does not exist.
    ValueError
        If the file is pickle-based and ``trusted`` is False; if it is not a perfmodel model file; or if it was
        written by an incompatible perfmodel version.
    """
    path = Path(path)
    if not path.is_file():
        raise FileNotFoundError(f"Model file {str(path)!r} does not exist.")
    with open(path, "rb") as fh:
        magic = fh.read(4)
    if magic == _ZIP_MAGIC:
        try:
            with np.load(path, allow_pickle=False) as archive:
                meta = json.loads(str(archive["__meta__"]))
                arrays = {k: archive[k] for k in archive.files if k != "__meta__"}
        except Exception as exc:
            raise ValueError(f"{str(path)!r} is not a readable perfmodel model file ({type(exc).__name__}: "
                             f"{exc}).") from None
        if meta.get("format") != SAFE_FORMAT:
            raise ValueError(f"{str(path)!r} is not a perfmodel model file (expected format {SAFE_FORMAT}).")
        _check_version(meta.get("perfmodel_version", "?"), path)
        model = _Decoder(arrays).dec(meta["model"])
        if model.feature_names_ != meta.get("features"):
            raise ValueError(f"{str(path)!r}: the stored feature schema does not match the model; refit it.")
        return model
    if not trusted:
        raise ValueError(
            f"{str(path)!r} is a pickle-based (joblib) file. Loading it can run arbitrary code, so perfmodel "
            "refuses by default. If you made this file yourself, pass trusted=True (CLI: --trusted); otherwise "
            "ask for the model in perfmodel's safe format (model.save(path), the default)."
        )
    import joblib

    try:
        payload = joblib.load(path)
    except Exception as exc:
        raise ValueError(f"{str(path)!r} is not a readable perfmodel model file ({type(exc).__name__}: {exc}).") from None
    if not isinstance(payload, dict) or payload.get("format") != _PICKLE_FORMAT:
        raise ValueError(f"{str(path)!r} is not a perfmodel model file (expected format {_PICKLE_FORMAT}).")
    _check_version(payload.get("perfmodel_version", "?"), path)
    return payload["model"]
