"""What a :class:`~perfmodel.predict.BasePredictor` answers from, chosen once when it is made (:func:`backend_for`):
a fitted model given as the history (:class:`FittedBackend`), or runs read and fitted lazily per kind of query
(:class:`RunsBackend`). Each answers the same questions — the runs, the model table, the precisions by device,
the model for a kind of query, the models for query rows — so that the Predictor asks without telling them apart.
The layout model of the bundled LLM history, which an organisation's own runs calibrate, is fitted here too
(:func:`bundled_layout_model`)."""

from __future__ import annotations

import os
from collections.abc import Callable

import numpy as np
import pandas as pd

from .._validation import check_choice
from ..fitting import PRECISION_TRANSFER_METHOD, fit_cached, fit_history, stored_fit
from ..hardware import resolve_gpu_type
from ..history import (
    HistoryFiles,
    LoadedHistory,
    default_history,
    history_parts,
    model_table,
    peek_history,
    precision_by_device,
    read_history,
)
from ..kinds import KIND_NAMES, classify
from ..layout_features import layout_priceable
from ..models import METHODS, TrainingTimeModel
from ..models._conformal import MIN_GROUPS
from ._calibration import calibrated_layout
from ._shifted import SHIFTED
from ._support import LAYOUT_METHOD

#: In a history of the caller's own runs beside perfmodel's bundled ones, a query on a device type the caller's
#: runs have is answered from the caller's runs alone (a model they lack: when they hold enough models) once
#: there are at least this many of them
#: (9: the fewest whose 90% split-conformal quantile is finite, ceil(0.9 (n + 1)) <= n).
MIN_OWN_RUNS = 9

#: The models answering distinct query rows, by key (None: every row; :data:`SHIFTED`: no model of its own).
RowFits = dict[str | None, TrainingTimeModel | None]


def backend_for(history, method: str) -> FittedBackend | RunsBackend:
    """What a Predictor of ``history`` and (checked) ``method`` answers from: a fitted model given as the history
    (checked, and ``method`` checked against it), or the runs.

    Parameters
    ----------
    history : None, path, DataFrame, bundled name, list of these, or TrainingTimeModel
        The Predictor's history (its type already checked).
    method : str
        The Predictor's method (already one of the choices).

    Returns
    -------
    FittedBackend or RunsBackend
        The back-end the Predictor asks.
    """
    if isinstance(history, TrainingTimeModel):
        return FittedBackend(history, method)
    return RunsBackend(history, method)


class Backend:
    """The questions a Predictor asks of what it answers from; these answers are those of a history without the
    caller's own runs beside bundled ones (no own runs: nothing answered by them alone)."""

    def own(self, source) -> LoadedHistory | None:
        """The caller's own runs beside bundled ones (:meth:`perfmodel.predict.BasePredictor.own`); None here."""
        return None

    def own_layout_runs(self, source) -> int:
        """How many of the caller's own runs are transformer training with a layout (0 without own runs)."""
        return 0

    def answered_by_own(self, rows: pd.DataFrame, source) -> tuple[np.ndarray, np.ndarray | None]:
        """Per row: whether the caller's own runs answer it alone, and its kind with respect to them (none here)."""
        return np.zeros(len(rows), dtype=bool), None


class FittedBackend(Backend):
    """A fitted model given as the history: it answers every query itself, and has no runs.

    Parameters
    ----------
    fitted : TrainingTimeModel
        The model (checked here).
    method : str
        The Predictor's method: ``"auto"`` or the model's own (ValueError otherwise).
    """

    def __init__(self, fitted: TrainingTimeModel, method: str):
        fitted._check()
        if method not in ("auto", fitted.method):
            raise ValueError(
                f"The 'method' parameter of Predictor is {method!r} but the fitted model given as history uses "
                f"{fitted.method!r}; pass method='auto' or refit.")
        self.fitted = fitted

    def runs(self, source) -> LoadedHistory:
        """No runs: TypeError."""
        raise TypeError("This Predictor answers from a fitted model; it has no runs.")

    def model(self, kind: str, source, *, own: bool = False, method: str | None = None) -> TrainingTimeModel:
        """The given model, whatever the kind of query."""
        return self.fitted

    def layout_history(self) -> bool:
        """Whether the given model is the layout model."""
        return self.fitted.method == LAYOUT_METHOD

    def kinds(self, source, rows: pd.DataFrame) -> np.ndarray:
        """The kind of each row with respect to the runs the model was fitted on."""
        return self.fitted.query_kinds(rows)

    def table(self, source) -> pd.DataFrame:
        """The model table the model was fitted with."""
        return self.fitted.models_

    def by_device(self, source) -> dict:
        """The precision each device type's runs used, as the model was fitted with."""
        return self.fitted.precision_by_device_

    def max_batch(self, gpu_type: str) -> int:
        """The largest per-device batch of the model's domain."""
        return int(self.fitted.domain_.loc["batch_size", "max"])

    def source_of(self, gpu_type: str, query: dict | None = None) -> str | None:
        """No bundled history to choose: None."""
        return None

    def fitted_for(self, q: pd.DataFrame, source) -> tuple[TrainingTimeModel, str | None]:
        """The given model, and no kind of its own."""
        return self.fitted, None

    def row_fits(self, rows: pd.DataFrame, source,
                 shifted_rows: Callable[[pd.DataFrame, str | None], np.ndarray]) -> tuple[RowFits, np.ndarray]:
        """The given model answers every row (key None)."""
        return {None: self.fitted}, np.full(len(rows), None, dtype=object)


class RunsBackend(Backend):
    """Runs: read and validated once, fitted lazily for each kind of query (through the disk cache for files).

    Parameters
    ----------
    history : None, path, DataFrame, bundled name, or list of these
        The runs (None: perfmodel's bundled runs, chosen per query by ``source``).
    method : str
        The Predictor's method (``"auto"`` or one of :data:`~perfmodel.models.METHODS`).
    """

    def __init__(self, history, method: str):
        self.history = history
        self.method = method
        self._loaded: dict = {}
        #: fitted models by (source, kind, own runs alone), and by (method, source, kind) where a query names a
        #: method; the model table and the devices' precisions by source
        self._fits: dict[tuple, TrainingTimeModel] = {}
        self._method_fits: dict[tuple, TrainingTimeModel] = {}
        self._tables: dict = {}
        self._precisions: dict = {}

    def _key(self, source) -> str | None:
        """The source a cache is keyed by: which bundled history for ``history=None``, else None."""
        return source if self.history is None else None

    def _parts(self, source) -> object:
        """What :func:`~perfmodel.history.read_history` reads: the history, or the bundled one named."""
        return source if self.history is None else self.history

    # ------------------------------------------------------------------------------------------ the runs
    def runs(self, source) -> LoadedHistory:
        """The runs, read and validated once."""
        key = self._key(source)
        if key not in self._loaded:
            self._loaded[key] = read_history(self._parts(source))
        return self._loaded[key]

    def own(self, source) -> LoadedHistory | None:
        """The caller's own runs alone, when the history mixes them with bundled runs; else None."""
        if self.history is None:
            return None
        files = self.files(source)
        if files is not None and not files.mixed:  # known from the file names, without reading the runs
            return None
        loaded = self.runs(source)
        if not loaded.mixed:
            return None
        if ("own", source) not in self._loaded:
            self._loaded[("own", source)] = loaded.own_runs()
        return self._loaded[("own", source)]

    def own_layout_runs(self, source) -> int:
        """How many of the caller's own runs are transformer training with a layout the layout model can price
        (:func:`~perfmodel.layout_features.layout_priceable`; 0 without own runs)."""
        own = self.own(source)
        return 0 if own is None else int(layout_priceable(own.runs).sum())

    def answered_by_own(self, rows: pd.DataFrame, source) -> tuple[np.ndarray, np.ndarray | None]:
        """Per row: whether the caller's own runs answer it alone, and its kind with respect to them. They do when
        there are at least :data:`MIN_OWN_RUNS` and the row's device type is in them — the bundled runs inform only
        a device the caller has not run on — and, for a model they lack, when they hold enough models to score
        a new one (:data:`perfmodel.models._conformal.MIN_GROUPS`)."""
        own = self.own(source)
        if own is None:
            return np.zeros(len(rows), dtype=bool), None
        kinds = classify(own.runs, rows)
        models_enough = own.runs["model"].nunique() >= MIN_GROUPS
        answer = (kinds != "new_device") & ((kinds != "new_model") | models_enough)
        answer &= len(own.runs) >= MIN_OWN_RUNS
        if self.method == "auto" and self.own_layout_runs(source):
            # transformer training: the layout model calibrated on the own runs answers it, whatever their count
            # (the bundled LLM history's coefficients are the prior; the error book sizes the interval)
            layout_rows = layout_priceable(rows)
            answer = np.where(layout_rows, True, answer)
            if self.own_layout_runs(source) == len(own.runs):  # their fit is the layout model: only such jobs
                answer &= layout_rows
        return answer, kinds

    # ------------------------------------------------------------------------------------------- models
    def model(self, kind: str, source, *, own: bool = False, method: str | None = None) -> TrainingTimeModel:
        """The model fitted for queries of ``kind`` (:meth:`perfmodel.predict.BasePredictor.model`)."""
        check_choice(kind, "kind", "Predictor.model", KIND_NAMES)
        if self.history is None and source is None:
            raise ValueError("Predictor.model: this Predictor has no history of its own (history=None): name the "
                             "bundled one to fit, source='cpu', 'gpu' or 'llm'.")
        if method is not None:
            return self._method_model(kind, source, method)
        key = (self._key(source), kind, bool(own))
        if key not in self._fits and not own:
            stored = self.stored(kind, key[0])
            if stored is not None:
                self._fits[key] = stored
        if key not in self._fits:
            loaded = self.runs(key[0])
            if own:
                own_runs = self.own(key[0])
                if own_runs is None:
                    raise ValueError("Predictor.model(own=True): the history does not mix own and bundled runs.")
                loaded = own_runs
            method = self.answering_method(key[0], loaded)
            if method == LAYOUT_METHOD and self.history is not None:
                fitted = calibrated_layout(loaded, kind, bundled_layout_model)
            elif self._paths(source):
                fitted = fit_cached(loaded, method, kind)
            else:
                fitted = fit_history(loaded, method, kind=kind)
            fitted.provenance_ = list(loaded.labels)
            self._fits[key] = fitted
        return self._fits[key]

    def _paths(self, source) -> bool:
        """Whether the history is made of files (or bundled names) only: its fits go through the disk cache."""
        return all(isinstance(p, (str, os.PathLike)) for p in history_parts(self._parts(source)))

    def _method_model(self, kind: str, source, method: str) -> TrainingTimeModel:
        """:meth:`model` with ``method`` fitted on the whole history instead of the Predictor's (shipped or in the
        disk cache where stored for these files)."""
        check_choice(method, "method", "Predictor.model", tuple(METHODS))
        key = (method, self._key(source), kind)
        files = self.files(key[1]) if key not in self._method_fits else None
        if files is not None and not files.mixed:  # shipped or in the disk cache: nothing parsed
            stored = stored_fit(files.digest, method, kind)
            if stored is not None:
                stored.provenance_ = list(files.labels)
                self._method_fits[key] = stored
        if key not in self._method_fits:
            loaded = self.runs(key[1])
            fitted = fit_cached(loaded, method, kind) if self._paths(source) else fit_history(loaded, method,
                                                                                                kind=kind)
            fitted.provenance_ = list(loaded.labels)
            self._method_fits[key] = fitted
        return self._method_fits[key]

    def layout_history(self) -> bool:
        """Whether a history of the caller's own is answered by the layout model (``method="layout"``, or under
        ``auto`` runs that are all transformer training with a layout; in a history that mixes them with bundled
        runs, the own runs). Worked out once (it reads the runs, unless a fit stored for the files says)."""
        if self.history is None or self.method not in ("auto", LAYOUT_METHOD):
            return False
        if ("layout history",) not in self._loaded:
            files = self.files(None)
            stored = self.stored("seen", None) if files is not None and not files.mixed else None
            if stored is not None:  # a fit stored for these files says which method answers, with nothing parsed
                self._loaded[("layout history",)] = stored.method == LAYOUT_METHOD
                return self._loaded[("layout history",)]
            loaded = self.runs(None)
            own = self.own(None) if loaded.mixed else None
            self._loaded[("layout history",)] = (self.answering_method(None, loaded) == LAYOUT_METHOD or (
                own is not None and len(own.runs) > 0 and bool(layout_priceable(own.runs).all())))
        return self._loaded[("layout history",)]

    def answering_method(self, source, loaded: LoadedHistory | None = None) -> str:
        """The method that answers: ``auto`` is the layout model (:data:`LAYOUT_METHOD`) for the bundled LLM
        history, and for a history whose runs are all transformer training with a layout on devices whose figures
        price it (:func:`~perfmodel.layout_features.layout_priceable`: one run the layout model cannot price, and
        the history's generic fit answers); else the Predictor's method."""
        if self.method != "auto":
            return self.method
        if source == "llm" or (loaded is not None and len(loaded.runs)
                               and bool(layout_priceable(loaded.runs).all())):
            return LAYOUT_METHOD
        return self.method

    # ------------------------------------------------------------------ answers without reading the runs
    def files(self, source) -> HistoryFiles | None:
        """The history's labels and content digest from its files' bytes, taken once
        (:func:`~perfmodel.history.peek_history`); None when it is not made of files only."""
        key = ("files", self._key(source))
        if key not in self._loaded:
            self._loaded[key] = peek_history(self._parts(source))
        return self._loaded[key]

    def stored(self, kind: str, source) -> TrainingTimeModel | None:
        """The model :meth:`model` gives for ``kind`` when one is stored for these files, shipped or in the
        disk cache (:func:`~perfmodel.fitting.stored_fit`, by the files' digest: nothing parsed); None when
        none is, or when the history is not made of files only or mixes own and bundled runs (which
        :meth:`own` splits)."""
        files = self.files(source)
        if files is None or files.mixed:
            return None
        fitted = stored_fit(files.digest, self.answering_method(self._key(source)), kind)
        if fitted is not None:
            fitted.provenance_ = list(files.labels)
        return fitted

    def reference(self, source) -> TrainingTimeModel | None:
        """While the runs are unread: a stored model fitted on them (:meth:`stored`; a fit keeps the runs'
        model table, precisions and configurations as ``models_``, ``precision_by_device_`` and ``configs_``),
        which then answers for the runs. None once they are read, or when no model is stored."""
        src = self._key(source)
        if src in self._loaded:
            return None
        for (fit_source, _, own), fitted in self._fits.items():
            if fit_source == src and not own:
                return fitted
        if ("reference", src) not in self._loaded:  # looked up once: None means the runs are read
            self._loaded[("reference", src)] = self.stored("seen", src)
            if self._loaded[("reference", src)] is not None:
                self._fits[(src, "seen", False)] = self._loaded[("reference", src)]
        return self._loaded[("reference", src)]

    def kinds(self, source, rows: pd.DataFrame) -> np.ndarray:
        """The kind of each row with respect to the history's runs (:func:`~perfmodel.kinds.classify`)."""
        ref = self.reference(source)
        return ref.query_kinds(rows) if ref is not None else classify(self.runs(source).runs, rows)

    def table(self, source) -> pd.DataFrame:
        """The runs' model table (:func:`~perfmodel.history.model_table`), taken once."""
        if source not in self._tables:
            ref = self.reference(source)
            self._tables[source] = ref.models_.copy() if ref is not None else model_table(self.runs(source).runs)
        return self._tables[source]

    def by_device(self, source) -> dict:
        """Per device type: the precision its runs used. With own runs beside bundled ones, the own runs' say
        first (the caller's stack), then the bundled runs' for devices the own runs lack — unless the own runs
        have GPU runs, whose usual precision is then assumed for every GPU they lack (``"*gpu*"``)."""
        ref = self.reference(source) if source not in self._precisions else None
        if ref is not None:  # a history that does not mix own and bundled runs (stored)
            self._precisions[source] = dict(ref.precision_by_device_)
        if source not in self._precisions:
            by = precision_by_device(self.runs(source).runs)
            own = self.own(source)
            if own is not None:
                mine = precision_by_device(own.runs)
                gpu = [p for g, (p, _) in mine.items() if g != "cpu"]
                by = {**by, **mine}
                if gpu:
                    by["*gpu*"] = (max(set(gpu), key=gpu.count), False)
            self._precisions[source] = by
        return self._precisions[source]

    def max_batch(self, gpu_type: str) -> int:
        """The largest per-device batch in the runs a query on ``gpu_type`` is predicted from."""
        source = self.source_of(resolve_gpu_type(gpu_type))
        return int(pd.to_numeric(self.runs(source).runs["batch_size"]).max())

    def source_of(self, gpu_type: str, query: dict | None = None) -> str | None:
        """For ``history=None``: the bundled history answering a query on ``gpu_type`` (None otherwise)."""
        if self.history is not None:
            return None
        return default_history(pd.DataFrame([{**(query or {}), "gpu_type": gpu_type}]))

    # ------------------------------------------------------------------------------- models for query rows
    def fitted_for(self, q: pd.DataFrame, source) -> tuple[TrainingTimeModel, str | None]:
        """The model answering a one-row query, and the row's kind: by the caller's own runs where they answer
        it alone (:meth:`answered_by_own`), else by the whole history's runs."""
        by_own, own_kinds = self.answered_by_own(q, source)
        if by_own[0]:
            assert own_kinds is not None  # given where the own runs answer
            kind = str(own_kinds[0])
            return self.model(kind, source, own=True), kind
        kind = str(self.kinds(source, q)[0])
        fitted = self.model(kind, source)
        if self._new_precision(q, fitted)[0]:
            return self.model(kind, source, method=PRECISION_TRANSFER_METHOD), kind
        return fitted, kind

    def _new_precision(self, rows: pd.DataFrame, fitted: TrainingTimeModel) -> np.ndarray:
        """Per row: whether ``auto`` hands it to :data:`~perfmodel.fitting.PRECISION_TRANSFER_METHOD` — its precision
        is one no run of the history used, and ``fitted`` (the model its kind gets) is not the layout model, which
        prices every precision from the datasheet itself."""
        if self.method != "auto" or fitted.method in (LAYOUT_METHOD, PRECISION_TRANSFER_METHOD):
            return np.zeros(len(rows), dtype=bool)
        return ~rows["precision"].astype(str).isin(fitted.precisions_).to_numpy()

    def row_fits(self, rows: pd.DataFrame, source,
                 shifted_rows: Callable[[pd.DataFrame, str | None], np.ndarray]) -> tuple[RowFits, np.ndarray]:
        """The models answering distinct query ``rows``, by key, and each row's key. Each row is answered as
        :func:`~perfmodel.predict.predict_training_time` answers it alone: by the fit chosen for its own kind of
        query (``own:<kind>`` where the caller's own runs answer it alone, :meth:`answered_by_own`), a precision no
        run used by the rule chosen for it (``precision:<kind>``), and the rows ``shifted_rows`` gives to the
        bundled answer shifted by the own runs by :data:`SHIFTED` (no model of its own)."""
        by_own, own_kinds = self.answered_by_own(rows, source)
        kinds = self.kinds(source, rows).astype(object)
        if by_own.any():
            assert own_kinds is not None  # given where the own runs answer
            kinds[by_own] = own_kinds[by_own]
        keys = np.where(by_own, np.char.add("own:", kinds.astype(str)), kinds.astype(str)).astype(object)
        keys[shifted_rows(rows, source)] = SHIFTED  # the bundled answer shifted by the own runs
        order = sorted(set(keys.tolist()) - {SHIFTED}, key=lambda k: (k.startswith("own:"), KIND_NAMES.index(
            k.removeprefix("own:"))))
        models = {k: self.model(k.removeprefix("own:"), source, own=k.startswith("own:")) for k in order}
        fits: RowFits = {k: fitted for k, fitted in models.items()}
        if (keys == SHIFTED).any():
            fits[SHIFTED] = None
        for k, fitted in models.items():  # a precision no run used: the rule chosen for it answers
            at = np.flatnonzero(keys == k)
            moved = at[self._new_precision(rows.iloc[at], fitted)] if not k.startswith("own:") else at[:0]
            if len(moved):
                keys[moved] = f"precision:{k}"
                fits[f"precision:{k}"] = self.model(k, source, method=PRECISION_TRANSFER_METHOD)
        return {k: fit for k, fit in fits.items() if k in set(keys.tolist())}, keys


_BUNDLED_LAYOUT: list = []


def bundled_layout_model() -> TrainingTimeModel:
    """The layout model of the bundled LLM history (shipped, or fitted once per process): the prior that an
    organisation's own runs calibrate.

    Returns
    -------
    TrainingTimeModel
        Method ``layout``, fitted on :data:`perfmodel.history.BUNDLED_HISTORIES` ``"llm"``.
    """
    if not _BUNDLED_LAYOUT:
        _BUNDLED_LAYOUT.append(RunsBackend(None, LAYOUT_METHOD).model("seen", "llm"))
    return _BUNDLED_LAYOUT[0]
