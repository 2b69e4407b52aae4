"""Saving and loading fitted models — safely by default.

The default format (``perfmodel-safe/1``) is a zip archive of NumPy ``.npy`` members: a JSON description of the
fitted state (numbers, strings, lists, tables) plus numeric arrays. Loading it constructs only perfmodel's own
classes and scikit-learn's ``Pipeline`` from that data, so a model file handed to you cannot run code, and it
never fits anything: the gbm method's trees are stored as arrays (:class:`perfmodel.models.TreeEnsemble`) and the
statsmodels results of an OLS fit are rebuilt from the stored coefficients and covariance.

Loading is bounded before anything is decompressed: only the members a perfmodel file has (``__meta__.npy`` and
``a<N>.npy``) are accepted, their declared sizes must add up to at most ``max_bytes`` (default
:data:`MAX_BYTES`, 1 GiB), each member's declared size must be possible for its compressed bytes (deflate
expands at most ~1032-fold), and each array's header (shape × dtype) must match its member exactly before it is
read; only plain numeric dtypes are read. The JSON description is bounded too: at most ``max_bytes / 64``
characters and ``max_bytes / 1024`` values (16 Mi and 1 Mi by default), nested at most 128 deep, all counted
before it is parsed. Only the arrays the description refers to are read, each once, straight into its final
array, so loading costs about the arrays' size once and time linear in the bytes read. A file whose content is inconsistent (a tree that points backwards, a table
of the wrong shape, a model that cannot predict) is refused with a ``ValueError``.

Every file records the versions of perfmodel, scikit-learn, statsmodels, NumPy, SciPy and pandas it was written
with. A different perfmodel major.minor version is refused (the stored state may mean something else). For the
libraries the stored state is plain arrays, so a different version is accepted, with a
:class:`~perfmodel.exceptions.DataQualityWarning` when the major version (for 0.x releases, the minor version)
differs.

joblib/pickle files execute code when loaded. :func:`load_model` refuses them unless ``trusted=True`` is given
explicitly, and says why.
"""

from __future__ import annotations

import io
import json
import math
import re
import warnings
import zipfile
from pathlib import Path

import numpy as np
import pandas as pd

from ._version import __version__
from .exceptions import DataQualityWarning, NotAModelFileError
from .schema import SHAPE_COLUMNS

__all__ = ["save_model", "load_model", "is_model_file", "probe_query", "SAFE_FORMAT", "MAX_BYTES"]

#: Default bound on the total uncompressed size of a safe model file's members.
MAX_BYTES = 2**30
_MAX_MEMBERS = 100_000
_MAX_DEPTH = 64
_MAX_JSON_DEPTH = 128
_LIBRARIES = ("sklearn", "statsmodels", "numpy", "scipy", "pandas")

SAFE_FORMAT = "perfmodel-safe/1"
_PICKLE_FORMAT = "perfmodel-model/1"
_ZIP_MAGIC = b"PK\x03\x04"
# Attributes rebuilt on load instead of stored (no plain-data form).
_REBUILT = {"OLSRegressor": ("results_",), "GBMRegressor": ("estimator_",), "TrainingTimeModel": ("_domain_tree",)}


def _library_versions() -> dict:
    import importlib

    out = {}
    for name in _LIBRARIES:
        try:
            out[name] = str(importlib.import_module(name).__version__)
        except Exception:  # pragma: no cover - all are dependencies
            out[name] = "?"
    return out


def _semver_major(version: str) -> tuple:
    parts = [p for p in str(version).split(".")[:2]]
    try:
        nums = [int("".join(ch for ch in p if ch.isdigit()) or "0") for p in parts]
    except ValueError:
        return (str(version),)
    return tuple(nums[:2]) if nums and nums[0] == 0 else tuple(nums[:1])


def _safe_classes() -> dict:
    from .features import RunFeaturizer
    from .models import (
        GBMRegressor,
        LayoutRegressor,
        MFURegressor,
        OLSRegressor,
        OpsRegressor,
        PhysicsRegressor,
        RatioRegressor,
        RooflineRegressor,
        TrainingTimeModel,
    )

    return {c.__name__: c for c in (TrainingTimeModel, RunFeaturizer, OLSRegressor, GBMRegressor, PhysicsRegressor,
                                    RooflineRegressor, OpsRegressor, MFURegressor, RatioRegressor, LayoutRegressor)}


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
        from .models import TreeEnsemble

        if type(v) is TreeEnsemble:
            return {"__trees__": {k: self.enc(x) for k, x in v.to_arrays().items()}}
        name = type(v).__name__
        if name in self.classes and type(v) is self.classes[name]:
            skip = _REBUILT.get(name, ())
            return {"__object__": name, "state": {k: self.enc(x) for k, x in vars(v).items() if k not in skip}}
        raise TypeError(f"cannot store a {type(v).__name__} in a safe model file")


class _Decoder:
    def __init__(self, arrays):
        self.arrays = arrays
        self.classes = _safe_classes()
        self.depth = 0
        self.used: set = set()

    def dec(self, v):
        self.depth += 1
        try:
            if self.depth > _MAX_DEPTH:
                raise ValueError(f"the stored state is nested more than {_MAX_DEPTH} levels deep")
            return self._dec(v)
        finally:
            self.depth -= 1

    def _dec(self, v):
        from sklearn.pipeline import Pipeline

        from .models import TreeEnsemble

        if isinstance(v, list):
            return [self.dec(x) for x in v]
        if not isinstance(v, dict):
            return v
        if "__array__" in v:
            key = v["__array__"]
            if key in self.used:
                raise ValueError(f"the stored state refers to array {str(key)[:20]!r} twice")
            self.used.add(key)
            return self.arrays[key]
        if "__objarray__" in v:
            items = [self.dec(x) for x in v["__objarray__"]]
            if any(isinstance(x, (dict, list, np.ndarray)) for x in items):
                raise ValueError("an object array holds nested containers")
            out = np.empty(len(items), dtype=object)
            out[:] = items
            return out.reshape(v["shape"])
        if "__tuple__" in v:
            return tuple(self.dec(x) for x in v["__tuple__"])
        if "__dict__" in v:
            return {self.dec(k): self.dec(x) for k, x in v["__dict__"]}
        if "__trees__" in v:
            return TreeEnsemble.from_arrays({k: self.dec(x) for k, x in v["__trees__"].items()})
        if "__frame__" in v:
            f = v["__frame__"]
            if len(f["columns"]) != len(f["data"]) or len(f["columns"]) != len(f["dtypes"]):
                raise ValueError("a stored table has mismatched columns")
            data = {str(c): self.dec(a) for c, a in zip(f["columns"], f["data"])}
            frame = pd.DataFrame(data, index=pd.Index(self.dec(f["index"]), name=f["index_name"]))
            for c, t in zip(f["columns"], f["dtypes"]):
                if str(t) not in _FRAME_DTYPES:
                    continue
                try:
                    frame[c] = frame[c].astype(str(t))
                except (TypeError, ValueError):
                    pass
            return frame
        if "__pipeline__" in v:
            return Pipeline([(str(name), self.dec(step)) for name, step in v["__pipeline__"]])
        if "__object__" in v:
            cls = self.classes.get(v["__object__"])
            if cls is None:
                raise ValueError(f"the model file names an unknown class {v['__object__']!r}")
            state = v["state"]
            for key in state:
                if not isinstance(key, str) or key.startswith("__") or callable(getattr(cls, key, None)) \
                        or isinstance(getattr(cls, key, None), property):
                    raise ValueError(f"the stored state of {cls.__name__} sets {key!r}, which is not data")
            obj = cls.__new__(cls)
            obj.__dict__.update({k: self.dec(x) for k, x in state.items()})
            if hasattr(obj, "_restore"):
                obj._restore()
            return obj
        raise ValueError("the model file holds an unrecognised entry")


_FRAME_DTYPES = {"float64", "float32", "int64", "int32", "Int64", "Float64", "string", "object", "bool", "boolean",
                 "str"}


#: Deflate cannot expand data more than about 1032-fold; a member declaring more than this per compressed byte
#: (plus a little for headers) lies about its size.
_DEFLATE_MAX_RATIO = 1032
_CHUNK = 1 << 20


def _meta_limits(max_bytes: int) -> tuple[int, int]:
    """(characters, JSON values) a model file's description may hold: from ``max_bytes`` (1 GiB -> 16 Mi
    characters, 1 Mi values), far above what perfmodel writes (about 10,000 characters and 1,000 values for a
    fit on the bundled history)."""
    return max(1 << 16, max_bytes // 64), max(1 << 12, max_bytes // 1024)


def _check_member_sizes(info: zipfile.ZipInfo) -> None:
    """A member's declared size must be possible for its compressed bytes (perfmodel writes stored or deflated
    members only)."""
    if info.compress_type == zipfile.ZIP_STORED:
        if info.file_size != info.compress_size:
            raise ValueError(f"member {info.filename!r} declares {info.file_size} bytes but stores "
                             f"{info.compress_size}")
    elif info.compress_type == zipfile.ZIP_DEFLATED:
        if info.file_size > _DEFLATE_MAX_RATIO * info.compress_size + 4096:
            raise ValueError(f"member {info.filename!r} declares {info.file_size} bytes, more than its "
                             f"{info.compress_size} compressed bytes can hold")
    else:
        raise ValueError(f"member {info.filename!r} uses a compression perfmodel does not write")


_JSON_STRING = re.compile(rb'"(?:[^"\\]|\\.)*"', re.DOTALL)
_BRACKETS_ONLY = bytes(b for b in range(256) if b not in b"[]{}")


def _parse_meta(text: str, max_values: int) -> dict:
    """``json.loads`` of a model file's description, after bounding what it would build: the number of values
    (counted from the separators outside strings) and the nesting depth are checked first, in linear time."""
    raw = text.encode("utf-8", "surrogatepass")
    bare = _JSON_STRING.sub(b'""', raw)
    values = bare.count(b",") + bare.count(b":") + bare.count(b"[") + bare.count(b"{") + 1
    if values > max_values:
        raise ValueError(f"its description holds about {values} values, more than the limit of {max_values} "
                         "(load_model(..., max_bytes=...) raises it)")
    brackets = np.frombuffer(bare.translate(None, _BRACKETS_ONLY), dtype=np.uint8)
    if len(brackets):
        step = np.where((brackets == ord("[")) | (brackets == ord("{")), 1, -1).astype(np.int32)
        depth = int(np.cumsum(step).max())
        if depth > _MAX_JSON_DEPTH:
            raise ValueError(f"its description is nested {depth} levels deep (at most {_MAX_JSON_DEPTH})")
    meta = json.loads(text)
    if not isinstance(meta, dict):
        raise ValueError("its description is not a JSON object")
    return meta


def _array_keys(v, out: set) -> set:
    """The array members the description refers to (``{"__array__": "a<N>"}``)."""
    stack = [v]
    while stack:
        x = stack.pop()
        if isinstance(x, dict):
            key = x.get("__array__")
            if isinstance(key, str):
                out.add(key)
            stack.extend(x.values())
        elif isinstance(x, list):
            stack.extend(x)
    return out


def _read_safe_archive(path: Path, max_bytes: int) -> tuple[dict, dict]:
    """The meta dict and the arrays of a safe model file, reading nothing before its size is bounded.

    Bounded before anything is decompressed: the members' declared sizes (at most ``max_bytes`` in all, each
    possible for its compressed bytes), the description's size (:func:`_meta_limits`). The description is parsed
    only after its values and depth are counted; then only the arrays it refers to are read, each once, straight
    into an array of the size its header declares, which must match the member's size exactly."""
    arrays: dict[str, np.ndarray] = {}
    max_chars, max_values = _meta_limits(max_bytes)
    with zipfile.ZipFile(path) as zf:
        infos = zf.infolist()
        if len(infos) > _MAX_MEMBERS:
            raise ValueError(f"it has {len(infos)} members")
        names = [i.filename for i in infos]
        if len(set(names)) != len(names):
            raise ValueError("it names a member twice")
        for info in infos:
            stem = info.filename[:-4] if info.filename.endswith(".npy") else None
            if stem is None or not (stem == "__meta__" or (stem[:1] == "a" and stem[1:].isdigit())):
                raise ValueError(f"it holds a member perfmodel does not write ({info.filename[:60]!r})")
            _check_member_sizes(info)
        total = sum(i.file_size for i in infos)
        if total > max_bytes:
            raise ValueError(f"its members would take {total / 2**20:.1f} MiB uncompressed, more than the "
                             f"limit of {max_bytes / 2**20:.1f} MiB (load_model(..., max_bytes=...))")
        by_name = {i.filename: i for i in infos}
        meta_info = by_name.get("__meta__.npy")
        if meta_info is None:
            raise ValueError("it has no __meta__ member")
        if meta_info.file_size > 4 * max_chars + 1024:
            raise ValueError(f"its description member takes {meta_info.file_size} bytes, more than the limit of "
                             f"{4 * max_chars + 1024} (load_model(..., max_bytes=...) raises it)")
        with zf.open(meta_info) as fh:
            text = str(_read_npy(fh, meta_info.file_size, meta=True)[()])
        meta = _parse_meta(text, max_values)
        del text
        wanted = _array_keys(meta.get("model"), set())
        stored = {n[:-4] for n in names} - {"__meta__"}
        for key in sorted(wanted & stored):  # an array the description does not use is never read
            info = by_name[key + ".npy"]
            with zf.open(info) as fh:
                arrays[key] = _read_npy(fh, info.file_size, meta=False)
    return meta, arrays


def _read_npy(fh, declared: int, *, meta: bool) -> np.ndarray:
    version = np.lib.format.read_magic(fh)
    if version == (1, 0):
        shape, fortran, dtype = np.lib.format.read_array_header_1_0(fh)
    elif version == (2, 0):
        shape, fortran, dtype = np.lib.format.read_array_header_2_0(fh)
    else:
        raise ValueError(f"an array has an unsupported .npy version {version}")
    allowed = "U" if meta else "biuf"
    if dtype.hasobject or dtype.kind not in allowed or dtype.fields is not None or dtype.subdtype is not None:
        raise ValueError(f"an array has dtype {dtype}, which a perfmodel file does not use")
    if any(int(d) < 0 for d in shape):
        raise ValueError("an array header declares a negative dimension")
    count = math.prod(int(d) for d in shape)
    nbytes = count * dtype.itemsize
    header = fh.tell()
    if header + nbytes != declared:
        raise ValueError(f"an array header declares {nbytes} bytes in a member of {declared - header} bytes "
                         "of data")
    # read in chunks straight into the array (one copy of the data in memory); the member's declared size, which
    # bounds nbytes, was checked against its compressed bytes
    out = np.empty(count, dtype=dtype)
    view = out.reshape(-1).view(np.uint8).data  # a memoryview of its bytes
    got = 0
    while got < nbytes:
        n = fh.readinto(view[got:got + _CHUNK])
        if not n:
            raise ValueError("an array is shorter than its header says")
        got += n
    if fh.read(1):
        raise ValueError("an array member holds more bytes than its header says")
    return out.reshape(shape, order="F" if fortran else "C")


def probe_query(model) -> pd.DataFrame:
    """The one-row query :func:`load_model` asks a loaded model (its probe): the first fitted model at batch 1 on
    the fewest devices it saw, its first device type and precision; for a layout model, a transformer job of its
    shape (a 2,048-token sequence, one per device).

    Parameters
    ----------
    model : TrainingTimeModel
        A fitted model.

    Returns
    -------
    pandas.DataFrame
    """
    models = model.models_
    row = models.iloc[0]
    query = pd.DataFrame([{"model": str(models.index[0]), "params": float(row["params"]),
                           "flops_per_sample": float(row["flops_per_sample"]), "batch_size": 1,
                           # a count the fit has seen (linear/loglinear/gbm refuse others when it saw only one)
                           "gpu_count": int(model.domain_.loc["gpu_count", "min"]),
                           "gpu_type": str(model.gpu_types_[0]), "precision": str(model.precisions_[0]),
                           "steps": 1}])
    if model.pipeline_.named_steps["features"].kind == "layout":
        # a transformer job: the fitted model's shape, a sequence, one sequence per device
        shape = {c.name: row[c.name] for c in SHAPE_COLUMNS if c.name in row.index and pd.notna(row[c.name])}
        query = query.assign(**shape, family=str(row.get("family", "decoder")), seq_len=2048,
                             global_batch_size=query["gpu_count"])
    return query


def _check_model(model, meta: dict, *, probe: bool = True) -> None:
    """The decoded object is a fitted TrainingTimeModel of a known shape that (``probe``) predicts finite times."""
    from sklearn.pipeline import Pipeline

    from .features import RunFeaturizer
    from .models import TrainingTimeModel

    if type(model) is not TrainingTimeModel:
        raise ValueError(f"it holds a {type(model).__name__}, not a TrainingTimeModel")
    pipe = getattr(model, "pipeline_", None)
    if not isinstance(pipe, Pipeline) or [n for n, _ in pipe.steps] != ["features", "regressor"]:
        raise ValueError("its pipeline is not features -> regressor")
    if not isinstance(pipe.named_steps["features"], RunFeaturizer) or not isinstance(
            pipe.named_steps["regressor"], tuple(c for n, c in _safe_classes().items() if n.endswith("Regressor"))):
        raise ValueError("its pipeline steps are not perfmodel's")
    if model.feature_names_ != meta.get("features"):
        raise ValueError("the stored feature schema does not match the model")
    models = model.models_
    if not isinstance(models, pd.DataFrame) or len(models) == 0 or not model.gpu_types_ or not model.precisions_:
        raise ValueError("it has no model, device or precision to predict for")
    if not probe:
        return
    query = probe_query(model)
    out = model.predict_interval(query, 0.5)[["step_time_s", "step_lower", "step_upper"]].to_numpy(dtype=float)
    if out.shape != (1, 3) or np.isnan(out).any():
        raise ValueError("it does not predict a number for a configuration it was fitted on")
    model.domain_distance(query)


def _check_libraries(saved: object, path: Path) -> None:
    if not isinstance(saved, dict):
        return
    here = _library_versions()
    for name in _LIBRARIES:
        theirs = saved.get(name)
        if theirs is None or theirs == here[name]:
            continue
        if _semver_major(theirs) != _semver_major(here[name]):
            warnings.warn(
                f"{str(path)!r} was written with {name} {theirs}; this is {name} {here[name]}. The model is stored "
                "as plain arrays and loads, but refit it if its predictions look wrong.",
                DataQualityWarning, stacklevel=3)


def is_model_file(path) -> bool:
    """Whether ``path`` is a file :func:`save_model` wrote (either format), judged from its first bytes and, for
    the safe format, its zip member names; nothing is loaded or unpickled.

    Parameters
    ----------
    path : str or path-like
        The file.

    Returns
    -------
    bool
        True for a perfmodel model file; False for anything else (a run history, a store, a report).
    """
    try:
        with open(path, "rb") as fh:
            head = fh.read(1 << 16)
    except OSError:
        return False
    if head[:4] == _ZIP_MAGIC:
        try:
            with zipfile.ZipFile(path) as zf:
                return "__meta__.npy" in zf.namelist()
        except (zipfile.BadZipFile, OSError, ValueError):
            return False
    return head[:1] == b"\x80" and _PICKLE_FORMAT.encode() in head


def save_model(model, path, *, format: str = "safe", force: bool = False) -> Path:
    """Write a fitted :class:`~perfmodel.models.TrainingTimeModel` to ``path`` atomically.

    Parameters
    ----------
    model : TrainingTimeModel
        A fitted model.
    path : str or path-like
        The file to write (its directory must exist). An existing model file is replaced atomically; any other
        existing, non-empty file (a run history, a store, a report) is refused unless ``force`` is given.
    format : {"safe", "joblib"}, default="safe"
        ``safe``: the pickle-free format (loads without running code). ``joblib``: a pickle, only loadable with
        ``load_model(path, trusted=True)``.
    force : bool, default=False
        Replace ``path`` even if it is not a model file.

    Returns
    -------
    pathlib.Path
        ``path``.

    Raises
    ------
    TypeError
        If ``model`` is not a :class:`~perfmodel.models.TrainingTimeModel`.
    ValueError
        For another ``format``.
    NotFittedError
        If ``model`` is not fitted.
    NotAModelFileError
        If ``path`` is an existing file that is not a model file (e.g. the run history the model was fitted
        on) and ``force`` is not given.
    """
    from ._atomic import atomic_write, real_target
    from .models import TrainingTimeModel

    if not isinstance(model, TrainingTimeModel):
        raise TypeError(f"save_model expects a fitted TrainingTimeModel. Got {type(model).__name__}.")
    if format not in ("safe", "joblib"):
        raise ValueError(f"The 'format' parameter of save_model must be 'safe' or 'joblib'. Got {format!r}.")
    model._check()
    path = Path(path)
    target = real_target(path)
    if not force and target.is_file() and target.stat().st_size > 0 and not is_model_file(target):
        raise NotAModelFileError(
            f"{str(path)!r} exists and is not a perfmodel model file (a run history?); saving the model there "
            "would replace it. Choose another path, or pass force=True (perfmodel fit --force) to overwrite it.")
    from .models import FIT_FORMAT

    meta = {"format": SAFE_FORMAT, "perfmodel_version": __version__, "fit_format": FIT_FORMAT,
            "method": model.method, "features": model.feature_names_, "libraries": _library_versions()}
    if format == "joblib":
        import joblib

        with atomic_write(path) as fh:
            joblib.dump({**meta, "format": _PICKLE_FORMAT, "model": model}, fh)
    else:
        enc = _Encoder()
        meta["model"] = enc.enc(model)
        buf = io.BytesIO()
        # the arrays are named a0, a1, ...: never savez_compressed's allow_pickle, which mypy cannot know
        np.savez_compressed(buf, __meta__=np.array(json.dumps(meta)), **enc.arrays)  # type: ignore[arg-type]
        with atomic_write(path) as fh:
            fh.write(buf.getvalue())
    return path


def _check_version(saved: str, path: Path, fit_format=None) -> None:
    if str(saved).split(".")[:2] != __version__.split(".")[:2]:
        raise ValueError(
            f"{str(path)!r} was saved by perfmodel {saved}; this is perfmodel {__version__}. Refit the model "
            "with this version (perfmodel fit RUNS -o MODEL)."
        )
    from .models import FIT_FORMAT

    if fit_format != FIT_FORMAT:  # the same release can change what fits compute: refuse, never answer wrongly
        made = "before fits recorded their format" if fit_format is None else f"with fit format {fit_format}"
        raise ValueError(
            f"{str(path)!r} was fitted by a perfmodel {made}; this one computes fit format {FIT_FORMAT}, whose "
            "features and rules differ. Refit the model with this version (perfmodel fit RUNS -o MODEL)."
        )


def _looks_like_pickle(magic: bytes) -> bool:
    """Pickle protocol 2+ starts with 0x80; joblib's compressed pickles with a zlib/gzip/bz2/xz/lz4 header."""
    return magic[:1] == b"\x80" or magic[:2] in (b"\x78\x01", b"\x78\x5e", b"\x78\x9c", b"\x78\xda", b"\x1f\x8b") \
        or magic[:3] == b"BZh" or magic == b"\xfd7zX" or magic == b"\x04\x22\x4d\x18"


def load_model(path, *, trusted: bool = False, max_bytes: int = MAX_BYTES, probe: bool = True):
    """Load a model written by :func:`save_model`.

    Parameters
    ----------
    path : str or path-like
        A file written by :func:`save_model`.
    trusted : bool, default=False
        Allow a pickle-based (joblib) file. Unpickling runs whatever code the file carries: pass True only for
        files you made yourself. Safe-format files never need it.
    max_bytes : int, default=MAX_BYTES (1 GiB)
        Refuse a safe-format file whose members would take more than this uncompressed (checked from the zip
        directory before anything is decompressed).
    probe : bool, default=True
        Predict one configuration the model was fitted on before returning a safe-format model, so that a
        damaged file is refused here (a ValueError) rather than at its first prediction. perfmodel's shipped
        models, which its tests load and predict with, are loaded without it (about the cost of one prediction).

    Returns
    -------
    TrainingTimeModel
        The fitted model, ready to predict.

    Raises
    ------
    FileNotFoundError
        If ``path`` does not exist.
    ValueError
        If the file is pickle-based and ``trusted`` is False; if it is not a perfmodel model file, is damaged
        or inconsistent, or exceeds ``max_bytes``; or if it was written by an incompatible perfmodel version.
    """
    path = Path(path)
    if not path.is_file():
        raise FileNotFoundError(f"Model file {str(path)!r} does not exist.")
    with open(path, "rb") as fh:
        magic = fh.read(4)
    if magic == _ZIP_MAGIC:
        try:
            meta, arrays = _read_safe_archive(path, int(max_bytes))
        except (ValueError, TypeError, KeyError, OSError, EOFError, zipfile.BadZipFile, RecursionError,
                NotImplementedError, MemoryError, OverflowError) as exc:
            raise ValueError(f"{str(path)!r} is not a readable perfmodel model file "
                             f"({type(exc).__name__}: {str(exc)[:200]}).") from None
        if meta.get("format") != SAFE_FORMAT:
            raise NotAModelFileError(f"{str(path)!r} is not a perfmodel model file (expected format {SAFE_FORMAT}).")
        _check_version(meta.get("perfmodel_version", "?"), path, meta.get("fit_format"))
        _check_libraries(meta.get("libraries"), path)
        try:
            model = _Decoder(arrays).dec(meta["model"])
            _check_model(model, meta, probe=probe)
        except Exception as exc:  # untrusted content: any failure to rebuild it means a damaged file
            raise ValueError(f"{str(path)!r} is a damaged or inconsistent perfmodel model file "
                             f"({type(exc).__name__}: {str(exc)[:200]}).") from None
        return model
    if not _looks_like_pickle(magic):
        raise NotAModelFileError(
            f"{str(path)!r} is not a perfmodel model file (write one with 'perfmodel fit RUNS -o MODEL' or "
            "perfmodel.save_model(model, path)); a run history goes in --history / history=, not --fitted."
        )
    if not trusted:
        if magic[:1] != b"\x80":
            raise ValueError(f"{str(path)!r} is not a perfmodel model file (neither the safe format nor joblib).")
        raise ValueError(
            f"{str(path)!r} is a pickle-based (joblib) file. Loading it can run arbitrary code, so perfmodel "
            "refuses by default. If you made this file yourself, pass trusted=True (CLI: --trusted); otherwise "
            "ask for the model in perfmodel's safe format (perfmodel.save_model(model, path), the default)."
        )
    import joblib

    try:
        payload = joblib.load(path)
    except Exception as exc:
        raise ValueError(f"{str(path)!r} is not a readable perfmodel model file ({type(exc).__name__}: {exc}).") from None
    if not isinstance(payload, dict) or payload.get("format") != _PICKLE_FORMAT:
        raise ValueError(f"{str(path)!r} is not a perfmodel model file (expected format {_PICKLE_FORMAT}).")
    _check_version(payload.get("perfmodel_version", "?"), path, payload.get("fit_format"))
    return payload["model"]
