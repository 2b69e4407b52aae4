"""``perfmodel.Predictor``: one history, validated once and fitted lazily per kind of query, with prediction,
planning and evaluation in one object.

It is :class:`perfmodel.predict.BasePredictor` (``.predict()``, ``.predict_many()``, ``.model()``) plus
``.recommend()`` (:func:`perfmodel.plan.recommend`) and ``.evaluate()`` (:func:`perfmodel.evaluate.evaluate`) on
the same history: planning and evaluation sit above prediction, so this class sits above both.
"""

from __future__ import annotations

from .evaluate import DEFAULT_EVAL_METHODS, DEFAULT_SPLITS, Evaluation, evaluate
from .models import TrainingTimeModel
from .plan import recommend
from .predict import BasePredictor

__all__ = ["Predictor"]


class Predictor(BasePredictor):
    """Predict training jobs from one history: read and validated once, fitted lazily for each kind of query.

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
    >>> p = perfmodel.Predictor("cpu")
    >>> r = p.predict("gpt-s", batch_size=16, gpu_count=2, gpu_type="cpu", steps=1000)
    >>> r.lower < r.seconds < r.upper
    True
    """

    def recommend(self, model, **kwargs):
        """Rank device types and counts for the same work by cost (:func:`perfmodel.plan.recommend`, on this
        Predictor's history, method and confidence).

        Parameters
        ----------
        model : str or dict
            A model name in the history, or a dict with ``params`` (and optionally ``flops_per_sample``).
        **kwargs
            The other arguments of :func:`perfmodel.plan.recommend` (``batch_size``, ``steps``,
            ``gpu_types``...), but not ``history``, ``method`` or ``confidence`` (TypeError): the
            Predictor's own are used.

        Returns
        -------
        pandas.DataFrame
            One row per configuration, as :func:`perfmodel.plan.recommend` returns it.
        """
        for name in ("history", "method", "confidence"):
            if name in kwargs:
                raise TypeError(f"Predictor.recommend takes no {name!r}: it uses the Predictor's own.")
        return recommend(model, history=self, method=self.method, confidence=self.confidence, **kwargs)

    def evaluate(self, *, methods=DEFAULT_EVAL_METHODS, splits=DEFAULT_SPLITS, **kwargs) -> Evaluation:
        """Grouped cross-validation of ``methods`` on this Predictor's runs
        (:func:`perfmodel.evaluate.evaluate`).

        Parameters
        ----------
        methods : sequence of str, default=DEFAULT_EVAL_METHODS
            Methods to compare (:data:`~perfmodel.models.METHODS` and ``"auto"``).
        splits : sequence of str, default=DEFAULT_SPLITS
            Splits to run (:data:`perfmodel.evaluate.SPLITS`).
        **kwargs
            The other arguments of :func:`perfmodel.evaluate.evaluate` (``baselines``, ``n_jobs``,
            ``host_peak_flops``, ``confidence``: by default the Predictor's).

        Returns
        -------
        Evaluation
            The per-row predictions, the metric table and the noise floor.

        Raises
        ------
        TypeError
            When the Predictor has no runs of its own (``history=None`` or a fitted model).
        """
        if isinstance(self.history, TrainingTimeModel) or self.history is None:
            raise TypeError("Predictor.evaluate needs the runs: give the Predictor a history (a path, DataFrame or "
                            "bundled name), not None or a fitted model.")
        return evaluate(self.runs().runs, methods=methods, splits=splits,
                        confidence=kwargs.pop("confidence", self.confidence), **kwargs)
