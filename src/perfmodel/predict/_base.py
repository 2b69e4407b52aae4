"""The Predictor of one history (:class:`BasePredictor`: read and validated once, fitted lazily per kind of
query), answering from a back-end chosen once (:mod:`perfmodel.predict._backend`: a fitted model or runs)."""

from __future__ import annotations

import math
import warnings
from collections.abc import Mapping

import numpy as np
import pandas as pd

from .._methods import METHOD_CHOICES
from .._validation import check_choice, check_confidence, check_positive_int
from ..exceptions import DataQualityWarning
from ..fitting import DEFAULT_METHOD
from ..hardware import check_precision, resolve_gpu_type
from ..history import BUNDLED_PREFIX, LoadedHistory, history_parts, part_label
from ..layout_features import layout_priceable
from ..models import StackShift, TrainingTimeModel
from ..schema import check_queries
from ._backend import backend_for
from ._job import (
    WHERE,
    default_precision,
    global_batch_of,
    implied_sequence,
    job_columns,
    job_steps,
    model_spec,
    query_row,
    standard_sized,
)
from ._memo import check_history_type, kept_predictor
from ._queries import (
    check_positive_columns,
    distinct_query_rows,
    fill_implied_sequences,
    fill_model_columns,
    fill_precision,
    resolve_query_devices,
    sized_decoders,
    split_attention,
)
from ._result import (
    PREDICTION_COLUMNS,
    TrainingTimePrediction,
    breakdown_of,
    fit_answers,
    job_prediction,
    predict_frame,
)
from ._shifted import SHIFTED, own_scores, prior_queries, prior_steps, shifted_answers
from ._support import (
    LAYOUT_METHOD,
    check_support,
    domain_warnings,
    prior_note,
    unpriced_layout_note,
    warn_notes,
)


# ------------------------------------------------------------------------------------------- predictor
class BasePredictor:
    """Predict training jobs from one history: read and validated once, fitted lazily for each kind of query.

    :class:`perfmodel.Predictor` is this plus planning and evaluation (``.recommend()``, ``.evaluate()``).

    Parameters
    ----------
    history : None, path, DataFrame, bundled name, list of these, or TrainingTimeModel, default=None
        The runs to learn from (:mod:`perfmodel.history`). None: perfmodel's bundled runs, CPU runs for CPU
        queries and the public GPU history for GPU queries. A fitted :class:`~perfmodel.models.TrainingTimeModel`
        answers every query itself.
    method : str, default="auto"
        ``"auto"`` or a method of :data:`perfmodel.models.METHODS` (``perfmodel.models.METHODS`` lists them with
        their descriptions; ``perfmodel --help`` shows them as ``--method`` choices).
        ``auto`` chooses, for each kind of query, by the cross-validation split that matches it
        (:mod:`perfmodel.fitting`).
    confidence : float in (0, 1), default=0.9
        Level of the prediction intervals.

    Examples
    --------
    >>> import perfmodel
    >>> p = perfmodel.Predictor("cpu")  # a BasePredictor with .recommend() and .evaluate()
    >>> r = p.predict("gpt-s", batch_size=16, gpu_count=2, gpu_type="cpu", steps=1000)
    >>> r.lower < r.seconds < r.upper
    True
    """

    def __init__(self, history=None, *, method: str = DEFAULT_METHOD, confidence: float = 0.9):
        check_history_type(history, type(self).__name__)
        self._setup(history, check_choice(method, "method", "Predictor", METHOD_CHOICES),
                    check_confidence(confidence, "Predictor"))

    def _setup(self, history, method: str, confidence: float) -> None:
        """Take checked arguments: the back-end that answers (:func:`~perfmodel.predict._backend.backend_for`, which
        checks a fitted model given as the history) is chosen here, once."""
        self.method = method
        self.confidence = confidence
        self._backend = backend_for(history, method)
        self.history = history
        #: the bundled parts' Predictor and the own runs' shift from it, by source (a history that mixes them)
        self._shared: dict = {}

    # ------------------------------------------------------------------------------------------ history
    def runs(self, source: str | None = None) -> LoadedHistory:
        """The history, read and validated once.

        Parameters
        ----------
        source : {"cpu", "gpu"}, optional
            With ``history=None``, which bundled history; ignored otherwise.

        Returns
        -------
        LoadedHistory
            The runs and their provenance.

        Raises
        ------
        TypeError
            When this Predictor answers from a fitted model (it has no runs).
        """
        return self._backend.runs(source)

    def own(self, source: str | None = None) -> LoadedHistory | None:
        """The caller's own runs, when the history mixes them with perfmodel's bundled runs.

        Parameters
        ----------
        source : {"cpu", "gpu"}, optional
            As in :meth:`runs`.

        Returns
        -------
        LoadedHistory or None
            The caller's runs alone (:meth:`~perfmodel.history.LoadedHistory.own_runs`); None when the history
            does not mix them, is None or is a fitted model.
        """
        return self._backend.own(source)

    def model(self, kind: str = "seen", source: str | None = None, *, own: bool = False,
              method: str | None = None) -> TrainingTimeModel:
        """The model fitted for queries of ``kind``, fitted on first use (through the disk cache for files).

        Parameters
        ----------
        kind : str, default="seen"
            The kind of query (:data:`~perfmodel.kinds.KIND_NAMES`).
        source : {"cpu", "gpu"}, optional
            As in :meth:`runs`.
        own : bool, default=False
            Fit on the caller's own runs alone (a history that mixes them with bundled runs; ValueError
            otherwise).
        method : str, optional
            Fit this method on the whole history instead of the Predictor's (what answers a precision transfer
            under ``auto``: :data:`~perfmodel.fitting.PRECISION_TRANSFER_METHOD`).

        Returns
        -------
        TrainingTimeModel
            The fitted model (the given one, when this Predictor answers from a fitted model).
        """
        return self._backend.model(kind, source, own=own, method=method)

    def fit(self, kind: str = "seen") -> TrainingTimeModel:
        """The model for queries of ``kind`` on this history.

        Parameters
        ----------
        kind : str, default="seen"
            The kind of query (:data:`~perfmodel.kinds.KIND_NAMES`).

        Returns
        -------
        TrainingTimeModel
            :meth:`model` for that kind (``history=None``: on the bundled CPU runs).
        """
        return self.model(kind, "cpu" if self.history is None else None)

    def max_batch(self, gpu_type: str) -> int:
        """The largest per-device batch in the runs a query on ``gpu_type`` is predicted from.

        Parameters
        ----------
        gpu_type : str
            The device (any alias).

        Returns
        -------
        int
            The largest ``batch_size`` of those runs (of the fitted model's domain, for a fitted model).
        """
        return self._backend.max_batch(gpu_type)

    # ------------------------------------------------------------------------------------------ predict
    def predict(self, model, *, batch_size=None, gpu_count=1, gpu_type, steps=None, epochs=None, dataset_size=None,
                precision=None, example_input=None, seq_len=None, global_batch=None, layout=None,
                gpus_per_node=None, inter_node_gbps=None) -> TrainingTimePrediction:
        """Predict the wall-clock time of one training job (as :func:`predict_training_time`).

        Parameters
        ----------
        model : str, dict or torch.nn.Module
            A model name in the history, a dict with ``params`` (and optionally ``flops_per_sample``, a family, a
            transformer's shape), or a module with ``example_input``.
        batch_size : int, optional
            Per-device batch size (or give ``global_batch``).
        gpu_count : int, default=1
            Devices (on CPU, worker processes).
        gpu_type : str
            Device name (any alias in :mod:`perfmodel.hardware`).
        steps : int, optional
            Optimizer steps; or give ``epochs`` and ``dataset_size``.
        epochs, dataset_size : int, optional
            The amount of work instead of ``steps``.
        precision : {"fp32", "tf32", "fp16", "bf16", "fp8"}, optional
            Default: what most of the history's runs on this device type used (:func:`default_precision`).
        example_input : torch.Tensor, optional
            One sample, without the batch dimension, when ``model`` is a module.
        seq_len : int, optional
            Tokens per sequence of transformer training (also accepted in a model dict).
        global_batch : int, optional
            Sequences per optimizer step over all devices, instead of ``batch_size``.
        layout : ParallelLayout or dict, optional
            The parallel layout of transformer training (:class:`perfmodel.layout.ParallelLayout`); default data
            parallel over every device, no accumulation.
        gpus_per_node : int, optional
            Devices per node (NVLink domain); default 8.
        inter_node_gbps : float, optional
            The cluster's network per device, GB/s one way; default the spec table's reference system's.

        Returns
        -------
        TrainingTimePrediction
            The predicted time, its interval and what it rests on.
        """
        gpu_count = check_positive_int(gpu_count, "gpu_count", WHERE)
        global_batch = global_batch_of(batch_size, global_batch, gpu_count)
        if precision is not None:
            check_precision(precision, WHERE)
        canonical = resolve_gpu_type(gpu_type)
        n_steps = job_steps(steps, epochs, dataset_size, global_batch, 1)
        job = {} if seq_len is None else {"seq_len": check_positive_int(seq_len, "seq_len", WHERE)}
        sized = []
        if canonical != "cpu" and seq_len is None and isinstance(model, Mapping):
            implied, note = implied_sequence(model)  # out of the box a decoder is answered by the layout model
            if implied is not None and ((self.history is None and self.method == "auto")
                                        or self._backend.layout_history()):
                model = {**model, "seq_len": implied}
                sized.append(note)
        model, note = standard_sized(model, seq_len)
        sized += [note] if note else []
        job = job_columns(model, job)
        wants_layout = layout is not None or "seq_len" in job
        source = self._backend.source_of(canonical, job if wants_layout else None)
        if source == "llm" or (self.history is None and wants_layout and isinstance(model, str)
                               and canonical != "cpu"):
            source = "llm" if isinstance(model, Mapping) or model in self._backend.table("llm").index else source
        assumed = sized
        if precision is None:
            precision, note = default_precision(self._backend.by_device(source), canonical)
            assumed += [note] if note else []
        if isinstance(model, Mapping) and "seq_len" in job and model.get("seq_len") is None:
            model = {**model, "seq_len": job["seq_len"]}  # a shape's FLOPs and attention share need the sequence
        spec = model_spec(model, example_input, self._backend.table(source))
        row, laid_out = query_row(spec, model, gpu_count=gpu_count, gpu_type=canonical, precision=precision,
                                  steps=n_steps, global_batch=global_batch, seq_len=job.get("seq_len"),
                                  layout=layout, gpus_per_node=gpus_per_node, inter_node_gbps=inter_node_gbps,
                                  wants_layout=wants_layout)
        assumed += laid_out
        q = pd.DataFrame([row])
        check_queries(q, WHERE)
        if self._shifted_rows(q, source)[0]:
            return self._shifted_prediction(q, source, n_steps, assumed)
        fitted, kind = self._backend.fitted_for(q, source)
        provenance = list(getattr(fitted, "provenance_", []) or [])
        notes = check_support(fitted, q) + domain_warnings(fitted, q)[0]
        res = predict_frame(fitted, q, self.confidence).iloc[0]
        breakdown = breakdown_of(fitted, q)
        prior_notes = prior_note(provenance, q, self._own_devices(source)) + unpriced_layout_note(q, [fitted.method])
        warn_notes(notes, prior_notes, stacklevel=3)
        return job_prediction(res, q, fitted, confidence=self.confidence, steps=n_steps,
                              startup=float(fitted.startup_s_), n_runs=int(fitted.n_runs_), inside_domain=not notes,
                              warnings=assumed + notes + prior_notes, provenance=provenance, breakdown=breakdown)

    def _shifted_prediction(self, q: pd.DataFrame, source, n_steps: int, assumed: list) -> TrainingTimePrediction:
        """:meth:`predict`'s answer for a row the shifted prior answers (:meth:`_shifted_rows`)."""
        prior, shift, own = self.prior(source), self.shift(source), self.own(source)
        assert prior is not None and shift is not None and own is not None  # a row is shifted beside own runs only
        asked = prior_queries(q, prior._backend.table(None))
        fitted, _ = prior._backend.fitted_for(asked, None)  # the prior's fit for this row: its statistics, its checks
        res = self._shifted_frame(q, source, positions=np.arange(1)).iloc[0]
        notes = check_support(fitted, asked) + domain_warnings(fitted, asked)[0]
        factor = float(np.exp(shift.offset(q["gpu_type"].astype(str).to_numpy(),
                                           q["model"].astype(str).to_numpy() if "model" in q.columns else None)[0]))
        breakdown = breakdown_of(fitted, asked, factor)
        provenance = list(own.labels) + list(getattr(fitted, "provenance_", []) or [])
        prior_notes = prior_note(provenance, q, self._own_devices(source))
        warn_notes(notes, prior_notes, stacklevel=4)
        return job_prediction(res, q, fitted, confidence=self.confidence, steps=n_steps,
                              startup=float(res["seconds"] - n_steps * res["step_time_s"]),
                              n_runs=int(fitted.n_runs_) + shift.n, inside_domain=not notes,
                              warnings=assumed + notes + prior_notes, provenance=provenance, breakdown=breakdown)

    def _own_startup(self, source) -> float | None:
        """The own runs' median time to first step, where they record it (None otherwise): a shifted answer's
        startup is the caller's, not the bundled stack's."""
        own = self.own(source)
        if own is None or "startup_s" not in own.runs.columns:
            return None
        startup = pd.to_numeric(own.runs["startup_s"], errors="coerce").dropna()
        return float(startup.median()) if len(startup) else None

    def _own_devices(self, source) -> set | None:
        own = self.own(source)
        return None if own is None else set(map(str, pd.unique(own.runs["gpu_type"])))

    # ------------------------------------------------------------------------------------ shifted prior
    def prior(self, source: str | None = None) -> BasePredictor | None:
        """The bundled parts of a history that mixes them with the caller's own runs, as a Predictor of their own:
        the prior the own runs shift (:meth:`shift`).

        Parameters
        ----------
        source : {"cpu", "gpu"}, optional
            As in :meth:`runs`.

        Returns
        -------
        BasePredictor or None
            None when the history does not mix own and bundled runs.
        """
        if self.own(source) is None:
            return None
        if ("prior", source) not in self._shared:
            parts = [part for part in history_parts(self.history) if part_label(part).startswith(BUNDLED_PREFIX)]
            self._shared[("prior", source)] = kept_predictor(checked_predictor, parts, self.method, self.confidence)
        return self._shared[("prior", source)]

    def shift(self, source: str | None = None) -> StackShift | None:
        """How far the caller's own runs sit from the bundled runs' answers (:class:`perfmodel.models.StackShift`):
        each own run asked of :meth:`prior` as a query, its log residual, shrunk per device type toward the shift
        over all of them and that toward none. Under ``auto`` the runs of transformer training with a layout are
        left out (the layout model calibrated on them answers such jobs).

        Parameters
        ----------
        source : {"cpu", "gpu"}, optional
            As in :meth:`runs`.

        Returns
        -------
        StackShift or None
            None when the history does not mix own and bundled runs.
        """
        prior = self.prior(source)
        if prior is None:
            return None
        if ("shift", source) not in self._shared:
            own = self.own(source)
            assert own is not None  # the prior is there only beside own runs
            runs = own.runs
            if self.method == "auto":
                runs = runs.loc[~layout_priceable(runs)]
            residuals = np.full(len(runs), np.nan)
            if len(runs):
                asked = prior_queries(runs.reset_index(drop=True), prior._backend.table(None)).assign(steps=1)
                priced = prior_steps(prior.predict_many, asked)
                residuals = np.log(runs["step_time_s"].to_numpy(dtype=float) / priced)
            self._shared[("shift", source)] = StackShift.fit(residuals, runs["gpu_type"].astype(str).to_numpy(),
                                                             runs["model"].astype(str).to_numpy())
        return self._shared[("shift", source)]

    def _shifted_rows(self, rows: pd.DataFrame, source) -> np.ndarray:
        """Per row of a history that mixes own and bundled runs: whether the bundled answer shifted by the own runs
        (:meth:`shift`) answers it. Only a row the own runs would answer alone
        (:meth:`~perfmodel.predict._backend.RunsBackend.answered_by_own`) can be: it is where their own fit is
        not better on its record — the log half-width of its 50% interval for the row, against the shifted
        prior's leave-one-model-out record (:meth:`perfmodel.models.StackShift.record`) — or cannot answer it
        or bound it at the Predictor's confidence (too few of its scores), and the prior can price the row.
        Rows the own runs do not answer alone (a device type they lack, too few of them, a model they lack when
        they hold fewer than :data:`~perfmodel.models._conformal.MIN_GROUPS`) keep the pooled fit; transformer
        training with a layout under ``auto`` is the layout model's, calibrated on the own runs. Each row is
        decided on its own, so the answer does not depend on the other rows asked with it."""
        if self.own(source) is None:
            return np.zeros(len(rows), dtype=bool)
        by_own, own_kinds = self._backend.answered_by_own(rows, source)
        assert own_kinds is not None  # given beside own runs
        layout = (layout_priceable(rows) if self.method == "auto" and self._backend.own_layout_runs(source)
                  else np.zeros(len(rows), dtype=bool))
        shifted = np.zeros(len(rows), dtype=bool)
        candidates = by_own & ~layout
        if not candidates.any():
            return shifted
        shift = self.shift(source)
        assert shift is not None  # there is one beside own runs
        record = shift.record()
        if not math.isfinite(record):
            return shifted
        for kind in pd.unique(own_kinds[candidates]):
            at = np.flatnonzero(candidates & (own_kinds == kind))
            own_fit = self.model(str(kind), source, own=True)
            if own_fit.method == LAYOUT_METHOD:
                continue
            score, bounded = own_scores(own_fit, rows.iloc[at], self.confidence)
            # the own fit answers where it can, its record is better and it can bound the row at this confidence
            shifted[at] = ~(score < record) | ~bounded
        if shifted.any():  # and the prior must be able to price the row (a precision or device it cannot: own fit)
            at = np.flatnonzero(shifted)
            prior = self.prior(source)
            assert prior is not None  # there is one beside own runs
            asked = prior_queries(rows.iloc[at], prior._backend.table(None)).assign(steps=1)
            shifted[at] = np.isfinite(prior_steps(prior.predict_many, asked))
        return shifted

    def _shifted_frame(self, q: pd.DataFrame, source, *, positions: np.ndarray) -> pd.DataFrame:
        """:data:`PREDICTION_COLUMNS` of rows the shifted prior answers: the prior's answer times the own runs'
        shift, the interval from :meth:`perfmodel.models.StackShift.half_width`."""
        prior, shift = self.prior(source), self.shift(source)
        assert prior is not None and shift is not None  # rows are shifted beside own runs only
        p = prior.predict_many(prior_queries(q, prior._backend.table(None)), _positions=positions)
        return shifted_answers(p, q, shift, self.confidence, self._own_startup(source))

    def predict_many(self, queries: pd.DataFrame, *, _positions=None) -> pd.DataFrame:
        """Predict many configurations at once (as :func:`predict_many`).

        Parameters
        ----------
        queries : pandas.DataFrame
            One row per configuration (the columns :func:`predict_many` describes).

        Returns
        -------
        pandas.DataFrame
            :data:`PREDICTION_COLUMNS`, aligned with ``queries``.
        """
        if not isinstance(queries, pd.DataFrame):
            raise TypeError(f"predict_many expects a DataFrame of queries. Got {type(queries).__name__}.")
        if len(queries) == 0:
            raise ValueError("predict_many got an empty DataFrame of queries.")
        positions = np.arange(len(queries)) if _positions is None else np.asarray(_positions)
        q = queries.copy()
        split_attention(q, positions)  # as in a model spec: the op split the mfu rule reads
        resolve_query_devices(q)
        on_cpu = (q["gpu_type"].astype(str) == "cpu").to_numpy()
        if (self.history is None and self.method == "auto") or (sized_decoders(q, ~on_cpu).any()
                                                                and self._backend.layout_history()):
            fill_implied_sequences(q, ~on_cpu)
        if self.history is None:  # each row from the bundled runs of its own kind: CPU, LLM training, other GPU
            llm = ~on_cpu & layout_priceable(q)
            sources = np.where(on_cpu, "cpu", np.where(llm, "llm", "gpu"))
            kinds = [src for src in ("cpu", "llm", "gpu") if (sources == src).any()]
            if len(kinds) > 1:
                parts = [self._predict_source(queries.iloc[np.flatnonzero(sources == src)],
                                              q.iloc[np.flatnonzero(sources == src)],
                                              positions[np.flatnonzero(sources == src)], src) for src in kinds]
                out = pd.concat(parts)
                order = np.argsort(np.concatenate([np.flatnonzero(sources == src) for src in kinds]), kind="stable")
                out = out.iloc[order]
            else:
                out = self._predict_source(queries, q, positions, kinds[0])
        else:
            out = self._predict_source(queries, q, positions, None)
        for note in unpriced_layout_note(q, out["method"].to_numpy()):
            warnings.warn(f"predict_many: {note}.", DataQualityWarning, stacklevel=2)
        return out

    def _predict_source(self, queries, q, positions, source) -> pd.DataFrame:
        """:meth:`predict_many` of the queries one history answers (``source``: which bundled one, for
        ``history=None``): ``q``, the caller's ``queries`` as read so far, completed and answered once per distinct
        row by the fit its kind of query gets (the back-end's ``row_fits``)."""
        fill_model_columns(q, self._backend.table(source), positions)
        q["gpu_count"] = q["gpu_count"] if "gpu_count" in q.columns else 1
        check_queries(q, "predict_many", positions)
        fill_precision(q, self._backend.by_device(source), positions)
        check_positive_columns(q, positions)
        first, inverse = distinct_query_rows(q, skip=("steps",))  # the steps only scale the per-step prediction
        rows = q.iloc[first]
        fits, kinds = self._backend.row_fits(rows, source, self._shifted_rows)
        pieces = []
        row_kind = kinds[inverse]
        for kind, fitted in fits.items():
            take = np.flatnonzero(row_kind == kind) if kind is not None else np.arange(len(q))
            if kind == SHIFTED:
                part = self._shifted_frame(q.iloc[take], source, positions=positions[take])
                part.index = take
                pieces.append(part)
                continue
            assert fitted is not None  # only the shifted rows have no fit of their own
            at = np.flatnonzero(kinds == kind) if kind is not None else np.arange(len(rows))
            # out of the box, the layout predict_training_time assumes for the same job (a history of one's own
            # reads its runs' missing layout columns with the run schema's defaults: its queries keep them)
            part = fit_answers(fitted, q, rows, at=at, take=take, first=first, inverse=inverse, positions=positions,
                               confidence=self.confidence,
                               default_layouts=fitted.method == LAYOUT_METHOD and self.history is None)
            part.index = take
            pieces.append(part)
        out = pieces[0] if len(pieces) == 1 else pd.concat(pieces).sort_index()
        out.index = queries.index
        out["precision"] = q["precision"].astype(str).to_numpy()
        return out[list(PREDICTION_COLUMNS)]


def checked_predictor(history, method: str, confidence: float) -> BasePredictor:
    """A :class:`BasePredictor` of arguments already checked (by :func:`~perfmodel.predict._memo.shared_predictor`,
    which names its caller in its messages): they are checked once.

    Parameters
    ----------
    history : None, path, DataFrame, bundled name, list of these, or TrainingTimeModel
        The runs to learn from (its type checked).
    method : str
        ``"auto"`` or a method of :data:`perfmodel.models.METHODS` (checked).
    confidence : float
        Level of the prediction intervals (checked).

    Returns
    -------
    BasePredictor
        As ``BasePredictor(history, method=method, confidence=confidence)`` makes it.
    """
    predictor = BasePredictor.__new__(BasePredictor)
    predictor._setup(history, method, confidence)
    return predictor
