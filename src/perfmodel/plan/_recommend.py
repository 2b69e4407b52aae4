"""Choosing hardware: rank device types and counts for the same work by cost, and predicted scaling."""

from __future__ import annotations

import warnings
from collections.abc import Mapping
from dataclasses import dataclass, field

import numpy as np
import pandas as pd

from .._methods import METHOD_CHOICES
from .._validation import check_choice, check_confidence, check_positive_float, check_positive_int
from ..analysis import DEFAULT_EFFICIENCY_THRESHOLD
from ..exceptions import ExtrapolationWarning, LayoutError, UnknownPriceError, UnsupportedQueryError
from ..fitting import DEFAULT_METHOD
from ..hardware import check_precision, resolve_gpu_type
from ..predict import BasePredictor, default_precision, model_spec, predict_many, resolve_history
from ._cost import estimate_cost, load_prices, no_price_reason
from ._llm import plan_llm_job
from ._memory import OPTIMIZERS, estimate_memory

__all__ = ["recommend", "scaling_from_model", "WORK_MODES"]


#: How ``recommend`` keeps the work fixed across configurations.
WORK_MODES = ("global_batch", "per_device_batch")


def _first_sentence(text: object) -> str:
    text = " ".join(str(text).split())
    cut = text.find(". ")
    text = text if cut < 0 else text[: cut + 1]
    return text[:1].lower() + text[1:]


_MEMORY_KEYS = ("seq_len", "n_layers", "d_model", "n_heads", "vocab", "optimizer", "zero_stage",
                "activation_checkpointing", "flash_attention", "overhead_bytes", "tensor_parallel",
                "pipeline_parallel")


def _check_memory(memory) -> dict:
    if memory is None:
        return {}
    if not isinstance(memory, dict):
        raise TypeError(f"The 'memory' parameter of recommend must be a dict of estimate_memory arguments "
                        f"({', '.join(_MEMORY_KEYS)}). Got {type(memory).__name__}.")
    unknown = sorted(set(memory) - set(_MEMORY_KEYS))
    if unknown:
        raise ValueError(f"The 'memory' parameter of recommend has unknown keys {unknown}; allowed: "
                         f"{', '.join(_MEMORY_KEYS)}.")
    if "optimizer" in memory:
        check_choice(memory["optimizer"], "memory['optimizer']", "recommend", OPTIMIZERS)
    return dict(memory)


def _split_batch(global_batch: int, n: int, max_device_batch: int) -> tuple[int, int] | None:
    """(per-device micro-batch, accumulation steps) with micro × accumulation × n == global_batch, the smallest
    accumulation whose micro-batch fits ``max_device_batch``; None when n devices cannot share the batch."""
    if global_batch % n:
        return None
    per_device = global_batch // n
    for k in range(1, per_device + 1):
        if per_device % k == 0 and per_device // k <= max_device_batch:
            return per_device // k, k
    return None


_LLM_MODEL_KEYS = ("params", "n_layers", "d_model", "vocab", "n_heads", "n_kv_heads", "ffn_mult", "ffn_hidden",
                   "hf_config", "shape", "name")
_LLM_LAYOUT_KEYS = ("tensor_parallel", "pipeline_parallel", "context_parallel", "expert_parallel", "virtual_stages",
                    "micro_batch", "zero_stage", "sequence_parallel", "recompute", "activation_checkpointing",
                    "flash_attention", "optimizer")


def _llm_rows(model, *, seq_len, batch_size, samples, types, names, counts, layout, gpus_per_node,
              inter_node_gbps, history, method, confidence, precision, skipped, unfit) -> list:
    """One planned job per device type and count (:func:`perfmodel.plan.plan_llm_job`): the given layout's
    degrees, or the fastest layout that fits (a search)."""
    if isinstance(model, str) or not isinstance(model, Mapping):
        raise TypeError("recommend with seq_len= plans an LLM job: give the model as a dict of plan_llm_job's model "
                        f"arguments ({', '.join(_LLM_MODEL_KEYS)}). Got {type(model).__name__}.")
    unknown = sorted(set(model) - set(_LLM_MODEL_KEYS))
    if unknown:
        raise ValueError(f"recommend: the LLM model dict has unknown keys {unknown}; allowed: "
                         f"{', '.join(_LLM_MODEL_KEYS)}.")
    if layout is not None:
        if not isinstance(layout, Mapping):
            raise TypeError(f"The 'layout' parameter of recommend must be a dict of plan_llm_job's layout arguments "
                            f"({', '.join(_LLM_LAYOUT_KEYS)}). Got {type(layout).__name__}.")
        bad = sorted(set(layout) - set(_LLM_LAYOUT_KEYS))
        if bad:
            raise ValueError(f"The 'layout' parameter of recommend has unknown keys {bad}; allowed: "
                             f"{', '.join(_LLM_LAYOUT_KEYS)}.")
    degrees = {"tensor_parallel", "pipeline_parallel", "context_parallel", "expert_parallel", "virtual_stages",
               "micro_batch"}
    search = layout is None or not (set(layout) & degrees)
    rows = []
    for g, g_name in zip(types, names):
        for n in counts:
            args = {k: v for k, v in dict(model).items() if k != "name"}
            n_steps = -(-samples // batch_size)
            try:
                with warnings.catch_warnings():
                    warnings.simplefilter("ignore", ExtrapolationWarning)
                    job = plan_llm_job(**args, name=str(model.get("name", "llm")), seq_len=seq_len,
                                       global_batch=batch_size, gpu_type=g, gpu_count=n, steps=n_steps,
                                       gpus_per_node=gpus_per_node, inter_node_gbps=inter_node_gbps,
                                       precision=precision, history=history, method=method, confidence=confidence,
                                       search=search, allow_no_fit=not search, **(layout or {}))
            except (UnsupportedQueryError, LayoutError) as exc:
                skipped.setdefault(_first_sentence(exc), []).append(f"{g_name} x{n}")
                continue
            if job.memory.fits is False:
                unfit.append(f"{g_name} x{n} ({job.memory.short()})")
            rows.append((job, n, n_steps))
    return rows


def recommend(model, *, batch_size, steps=None, epochs=None, dataset_size=None, gpu_types=("cpu",),
              gpu_counts=(1, 2, 4, 8), work="global_batch", max_device_batch=None, history=None, deadline=None,
              budget=None, confidence=0.9, precision=None, provider=None, prices=None, spot=False,
              method=DEFAULT_METHOD, memory=None, seq_len=None, layout=None, gpus_per_node=None,
              inter_node_gbps=None) -> pd.DataFrame:
    """Rank configurations (device type × count) for the same work by cost, with time and cost intervals.

    Every configuration does **the same work**: the same number of samples, and by default the same global batch
    (so the same optimisation):

    * ``work="global_batch"`` (default): ``batch_size`` is the global batch B. On n devices each takes B / n
      samples per step; where that exceeds ``max_device_batch`` the step is split into k micro-batches of
      B / (n·k) (gradient accumulation; a step then costs ≈ k micro-steps, slightly pessimistic since the
      optimizer and all-reduce run once). A count that does not divide B is left out. ``steps`` are optimizer
      steps at the global batch (or ``epochs`` × ``dataset_size`` samples): the same on every row.
    * ``work="per_device_batch"``: ``batch_size`` is per device on every configuration, so the global batch grows
      with n; the number of samples stays fixed (``steps × batch_size``, the steps one device would take, or
      ``epochs × dataset_size``), so n devices take ``ceil(samples / (batch_size·n))`` steps.

    Each configuration is predicted as :func:`~perfmodel.predict.predict_training_time` predicts it alone (with
    ``history=None`` from the bundled runs of its own kind of device, CPU or GPU; with ``method="auto"`` by the
    fit chosen for its own kind of query), so adding a device type or count never changes another row.
    ``meets_deadline`` uses the interval's upper bound, not the point; ``within_budget`` the cost's upper bound.
    Configurations the history cannot predict (:class:`~perfmodel.exceptions.UnsupportedQueryError`) are left
    out with one warning giving one reason per kind; any other error (bad input) is raised. A configuration that
    is predicted but that no provider asked for prices is **kept**, with an empty cost (NaN) and
    ``price_note = "no price: <reason>"`` (the price table's note on the device and its date,
    ``perfmodel.plan._cost.no_price_reason``), and named in a warning; with ``budget`` its ``within_budget`` is None
    (unknown). Where a list of providers is compared, a provider that does not price a configuration the others
    price is named in the left-out warning. Rows are sorted feasible first, then by cost (unpriced rows after the
    priced ones).

    Every row carries a per-device memory estimate (:func:`~perfmodel.plan.estimate_memory`, with the row's
    ``device_batch`` and precision): ``memory_gb`` against the device's ``device_memory_gb``, and ``fits_memory``
    (None where the device memory is unknown, e.g. ``cpu``). Without ``memory=`` it is the model state (16-bit
    weights and gradients and AdamW state, 16 bytes per parameter, unsharded) plus the fixed overhead, a lower
    bound (``memory_lower_bound`` True): a row that does not fit then certainly does not. A row that does not
    fit is kept, flagged, sorted after those that fit, and named in one warning with its estimate.

    Parameters
    ----------
    model : str or dict
        A model name in the history, or a dict with ``params`` (and optionally ``flops_per_sample``), as
        :func:`~perfmodel.predict.predict_training_time` takes them (a module needs an ``example_input``, which
        recommend does not take: count it first, :func:`perfmodel.measure.flops.count_module`).
    batch_size : int
        The global batch (``work="global_batch"``) or the per-device batch (``work="per_device_batch"``).
    steps : int, optional
        Optimizer steps at ``batch_size``; or give ``epochs`` and ``dataset_size``.
    epochs, dataset_size : int, optional
        The amount of work as ``epochs × dataset_size`` samples, instead of ``steps``.
    gpu_types : sequence of str, default=("cpu",)
        Device types to compare (any alias); a list, not a str.
    gpu_counts : sequence of int, default=(1, 2, 4, 8)
        Device counts to compare; a list, not an int.
    work : {"global_batch", "per_device_batch"}, default="global_batch"
        How the work is kept fixed across configurations (above).
    max_device_batch : int, optional
        Largest per-device batch that fits (memory). Default: the largest per-device batch in the history's runs.
    history : None, path, DataFrame, bundled name, list of these, TrainingTimeModel or BasePredictor, optional
        The runs to learn from, as in :func:`~perfmodel.predict.predict_training_time`; a
        :class:`~perfmodel.predict.BasePredictor` (e.g. a :class:`perfmodel.Predictor`) is used as it is, with
        its own method and confidence.
    deadline : float, optional
        Seconds; ``meets_deadline`` is whether the time interval's upper bound is within it (True without one).
    budget : float, optional
        Dollars; ``within_budget`` is whether the cost interval's upper bound is within it (True without one).
    confidence : float, default=0.9
        Level of the time and cost intervals.
    precision : {"fp32", "tf32", "fp16", "bf16", "fp8"}, optional
        What the job runs in; default per device type, as :func:`~perfmodel.predict.predict_training_time`
        assumes it.
    provider : str or list of str, optional
        Price from this provider; a list compares them (one row per provider and configuration). Default: the
        cheapest provider in the table for each device. Each row names its ``provider`` and ``usd_per_device_hour``.
    prices : DataFrame or path, optional
        Your own price table (:func:`~perfmodel.plan.load_prices`); default the bundled one.
    spot : bool, default=False
        Spot prices, with the interruption overhead of :func:`~perfmodel.plan.estimate_cost` added to the time.
    method : str, default=DEFAULT_METHOD
        A method of :data:`~perfmodel.models.METHODS`, or ``"auto"`` (chosen per configuration's kind of query).
    memory : dict, optional
        The job's shape for the memory estimate: keyword arguments of :func:`~perfmodel.plan.estimate_memory`
        (``seq_len``, ``n_layers``, ``d_model``, ``n_heads``, ``vocab``, ``optimizer``, ``zero_stage``,
        ``activation_checkpointing``, ``flash_attention``, ``overhead_bytes``, ``tensor_parallel``,
        ``pipeline_parallel``); ``params``, the device, precision and micro-batch come from each row.
    seq_len : int, optional
        Plan an **LLM job** (tokens per sequence): ``model`` is then a dict of
        :func:`~perfmodel.plan.plan_llm_job`'s model arguments (``params``, ``n_layers``, ``d_model``,
        ``hf_config``, ``shape``, ...), ``batch_size`` the global batch in sequences, and each device type and
        count is planned by :func:`~perfmodel.plan.plan_llm_job` — the same answer as the plan and as
        :func:`~perfmodel.predict.predict_training_time` for that job — with the given ``layout``, or, without
        degrees in it, the fastest layout that fits in memory (a search). ``memory`` and ``max_device_batch`` do
        not apply.
    layout : dict, optional
        plan_llm_job's layout arguments (``tensor_parallel``, ``pipeline_parallel``, ``context_parallel``,
        ``expert_parallel``, ``virtual_stages``, ``micro_batch``, ``zero_stage``, ``sequence_parallel``,
        ``recompute``, ``activation_checkpointing``, ``flash_attention``, ``optimizer``), with ``seq_len``.
    gpus_per_node : int, optional
        Devices per node (NVLink domain), with ``seq_len``.
    inter_node_gbps : float, optional
        The network per device, GB/s one way, with ``seq_len``.

    Returns
    -------
    DataFrame
        ``gpu_type, gpu_count, device_batch, accumulation, global_batch, steps, samples, seconds, lower, upper,
        provider, usd_per_device_hour, cost, cost_lower, cost_upper, useful_pflop_per_dollar, memory_gb,
        device_memory_gb, fits_memory, memory_lower_bound, precision, meets_deadline, within_budget,
        inside_domain, price_note``, one row per configuration and provider (one per configuration that no
        provider prices, ``price_note`` saying why; None on priced rows), feasible first, then by cost. With
        ``seq_len``, also ``layout`` (in words); ``device_batch`` is then the micro-batch and ``accumulation``
        the micro-batches per step of a replica.

    Raises
    ------
    ValueError
        For bad values (no amount of work, both ``steps`` and ``epochs``, an unknown ``work``, precision or
        method, empty lists, unknown ``memory`` keys).
    TypeError
        For a str ``gpu_types``, an int ``gpu_counts``, or a ``provider`` or ``memory`` of the wrong type.
    """
    confidence = check_confidence(confidence, "recommend")
    batch_size = check_positive_int(batch_size, "batch_size", "recommend")
    if work not in WORK_MODES:
        raise ValueError(f"The 'work' parameter of recommend must be one of {', '.join(WORK_MODES)}. "
                         f"Got {work!r} instead.")
    if deadline is not None:
        check_positive_float(deadline, "deadline", "recommend")
    if budget is not None:
        check_positive_float(budget, "budget", "recommend")
    if isinstance(gpu_types, str) or isinstance(gpu_counts, (int, np.integer)):
        raise TypeError("recommend takes lists: gpu_types=[...], gpu_counts=[...].")
    counts = [check_positive_int(n, "gpu_counts", "recommend") for n in gpu_counts]
    if not counts or not len(gpu_types):
        raise ValueError("recommend needs at least one device type and one device count.")
    if precision is not None:
        check_precision(precision, "recommend")
    samples = _samples(batch_size, steps=steps, epochs=epochs, dataset_size=dataset_size)
    types = [resolve_gpu_type(g) for g in gpu_types]
    if max_device_batch is not None:
        max_device_batch = check_positive_int(max_device_batch, "max_device_batch", "recommend")
    check_choice(method, "method", "recommend", METHOD_CHOICES)
    providers = _providers(provider)
    memory = _check_memory(memory)
    llm = seq_len is not None
    _check_llm_options(llm, work=work, memory=memory, max_device_batch=max_device_batch, history=history,
                       layout=layout, gpus_per_node=gpus_per_node, inter_node_gbps=inter_node_gbps)
    # each configuration as predict_training_time answers it alone: the fit for its own kind of query
    fits = history if isinstance(history, BasePredictor) else BasePredictor(history, method=method,
                                                                             confidence=confidence)
    table = _Table(providers=providers, prices=load_prices(prices),  # read and check once, not per configuration
                   spot=spot, budget=budget, deadline=deadline)
    if llm:
        planned = _llm_rows(model, seq_len=seq_len, batch_size=batch_size, samples=samples, types=types,
                            names=list(gpu_types), counts=counts, layout=layout, gpus_per_node=gpus_per_node,
                            inter_node_gbps=inter_node_gbps, history=history, method=method, confidence=confidence,
                            precision=precision, skipped=table.skipped, unfit=table.unfit)
        for job, n, n_steps in planned:
            table.add_llm_job(job, n, n_steps)
    else:
        for g, g_name in zip(types, gpu_types):
            for n in counts:
                _add_configuration(table, fits, model, g, g_name, n, work=work, batch_size=batch_size,
                                   samples=samples, max_device_batch=max_device_batch, precision=precision,
                                   memory=memory)
    table.warn(stacklevel=3)
    return table.ranked(llm)


def _samples(batch_size: int, *, steps, epochs, dataset_size) -> int:
    """The work: samples, identical on every configuration (``steps`` at ``batch_size``, or ``epochs`` of
    ``dataset_size``)."""
    if steps is not None and (epochs is not None or dataset_size is not None):
        raise ValueError("recommend takes either 'steps' or 'epochs' with 'dataset_size', not both.")
    if steps is not None:
        return check_positive_int(steps, "steps", "recommend") * batch_size
    if epochs is not None and dataset_size is not None:
        return check_positive_int(epochs, "epochs", "recommend") * check_positive_int(dataset_size, "dataset_size", "recommend")
    raise ValueError("recommend needs the amount of work: 'steps', or 'epochs' and 'dataset_size'.")


def _providers(provider) -> list[str | None]:
    """The providers to price with: one (None: the cheapest) or a list of names, each once."""
    if provider is None or isinstance(provider, str):
        return [provider]
    if isinstance(provider, (list, tuple)) and provider and all(isinstance(x, str) for x in provider):
        return list(dict.fromkeys(provider))
    raise TypeError(f"The 'provider' parameter of recommend must be a provider name or a list of them. "
                    f"Got {provider!r}.")


def _check_llm_options(llm: bool, *, work, memory: dict, max_device_batch, history, layout, gpus_per_node,
                       inter_node_gbps) -> None:
    """Refuse the options of an LLM job without ``seq_len``, and those an LLM job does not take."""
    if not llm and (layout is not None or gpus_per_node is not None or inter_node_gbps is not None):
        raise ValueError("recommend: layout=, gpus_per_node= and inter_node_gbps= plan LLM jobs; give seq_len= too.")
    if llm:
        if work != "global_batch" or memory or max_device_batch is not None:
            raise ValueError("recommend with seq_len= keeps the global batch (work='global_batch') and estimates "
                             "memory per layout itself: leave out memory= and max_device_batch=.")
        if isinstance(history, BasePredictor):
            raise TypeError("recommend with seq_len= takes the history as predict_training_time does, not a "
                            "Predictor.")


#: The columns of :func:`recommend`'s table (``layout`` too for an LLM job).
_COLUMNS = ["gpu_type", "gpu_count", "device_batch", "accumulation", "global_batch", "steps", "samples", "seconds",
            "lower", "upper", "provider", "usd_per_device_hour", "cost", "cost_lower", "cost_upper",
            "useful_pflop_per_dollar", "memory_gb", "device_memory_gb", "fits_memory", "memory_lower_bound",
            "precision", "meets_deadline", "within_budget", "inside_domain", "price_note"]


@dataclass
class _Table:
    """:func:`recommend`'s rows as they are added, and what it says once about the configurations: those left
    out (by reason), the predictions' notes, those that do not fit and those no provider prices."""

    providers: list[str | None]
    prices: pd.DataFrame
    spot: bool
    budget: float | None
    deadline: float | None
    rows: list[dict] = field(default_factory=list)
    skipped: dict[str, list[str]] = field(default_factory=dict)
    notes: dict[str, type[Warning]] = field(default_factory=dict)
    unfit: list[str] = field(default_factory=list)
    unpriced: dict[str, list[str]] = field(default_factory=dict)

    def meets_deadline(self, upper: float) -> bool:
        """Whether the time interval's upper bound is within the deadline (True without one)."""
        return True if self.deadline is None else bool(upper <= self.deadline)

    def add(self, base: dict, r, useful: float, n: int, g_name: str) -> None:
        """The rows of one predicted configuration, priced by each provider (:func:`_priced_rows`)."""
        _priced_rows(self.rows, base, r, useful, self.providers, self.prices, self.spot, self.budget,
                     self.unpriced, self.skipped, n, g_name)

    def add_llm_job(self, job, n: int, n_steps: int) -> None:
        """The rows of one planned LLM job (:func:`perfmodel.plan.plan_llm_job`) on ``n`` devices."""
        r, mem = job.prediction, job.memory
        base = {
            "gpu_type": job.gpu_type, "gpu_count": n, "device_batch": job.micro_batch,
            "accumulation": job.accumulation, "global_batch": job.global_batch, "steps": n_steps,
            "samples": job.global_batch * n_steps, "seconds": job.seconds, "lower": job.lower, "upper": job.upper,
            "memory_gb": mem.total_gb, "device_memory_gb": mem.device_gb, "fits_memory": mem.fits,
            "memory_lower_bound": mem.lower_bound, "precision": job.precision,
            "meets_deadline": self.meets_deadline(job.upper),
            "inside_domain": r.inside_domain, "layout": job.layout.describe(),
        }
        useful = job.flops_per_sample * job.global_batch * n_steps
        self.add(base, r, useful, n, job.gpu_type)

    def warn(self, *, stacklevel: int) -> None:
        """One warning per kind: the configurations left out, unpriced, not fitting, and the predictions' notes."""
        if self.skipped:
            parts = [f"{', '.join(where)} ({reason.rstrip('.')})" for reason, where in self.skipped.items()]
            warnings.warn("recommend left out: " + "; ".join(parts), ExtrapolationWarning, stacklevel=stacklevel)
        if self.unpriced:
            where = [w for ws in self.unpriced.values() for w in ws]
            warnings.warn(f"recommend: no price for {', '.join(where)}: kept with an empty cost, and price_note "
                          "says why", ExtrapolationWarning, stacklevel=stacklevel)
        if self.unfit:
            warnings.warn("recommend: these configurations do not fit in device memory (kept, flagged fits_memory="
                          "False): " + "; ".join(self.unfit), ExtrapolationWarning, stacklevel=stacklevel)
        for message, category in self.notes.items():
            warnings.warn(message, category, stacklevel=stacklevel)

    def ranked(self, llm: bool) -> pd.DataFrame:
        """The table: feasible first, then by cost (unpriced rows after the priced ones), then by time."""
        out = pd.DataFrame(self.rows, columns=_COLUMNS + (["layout"] if llm else []))
        for col in ("provider", "price_note", "within_budget"):  # None, not NaN, where unknown
            out[col] = out[col].astype(object).where(out[col].notna(), None)
        if len(out):
            out["_feasible"] = (out["meets_deadline"] & (out["within_budget"] == True)  # noqa: E712 - None: unknown
                                & (out["fits_memory"] != False))  # noqa: E712
            out = out.sort_values(["_feasible", "cost", "seconds"], ascending=[False, True, True],
                                  na_position="last").drop(columns="_feasible")
        return out.reset_index(drop=True)


def _add_configuration(table: _Table, fits: BasePredictor, model, g: str, g_name: str, n: int, *, work: str,
                       batch_size: int, samples: int, max_device_batch: int | None, precision,
                       memory: dict) -> None:
    """Predict one device type and count for the same work (``work``), estimate its memory and add its rows; a
    configuration that cannot share the batch or that the history cannot predict is left out, with the reason."""
    if work == "global_batch":
        split = _split_batch(batch_size, n, max_device_batch or fits.max_batch(g))
        if split is None:
            reason = (f"the global batch {batch_size} does not divide over these device counts"
                      if batch_size % n else
                      f"no micro-batch <= max_device_batch={max_device_batch or fits.max_batch(g)}")
            table.skipped.setdefault(reason, []).append(f"{g_name} x{n}")
            return
        micro, accum = split
        n_steps = -(-samples // batch_size)
    else:
        micro, accum = batch_size, 1
        n_steps = -(-samples // (batch_size * n))
    try:
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            r = fits.predict(model, batch_size=micro, gpu_count=n, gpu_type=g, steps=n_steps * accum,
                             precision=precision)
        for w in caught:  # per-configuration notes, said once for the whole table
            if not issubclass(w.category, ExtrapolationWarning):
                table.notes.setdefault(str(w.message), w.category)
    except UnsupportedQueryError as exc:
        table.skipped.setdefault(_first_sentence(exc), []).append(f"{g_name} x{n}")
        return
    mem = estimate_memory(params=float(r.query["params"]), gpu_type=r.query["gpu_type"],
                          precision=str(r.query["precision"]), micro_batch=micro,
                          data_parallel=max(1, n // (memory.get("tensor_parallel", 1)
                                                     * memory.get("pipeline_parallel", 1))), **memory)
    if mem.fits is False:
        table.unfit.append(f"{g_name} x{n} ({mem.short()})")
    fps = r.query.get("flops_per_sample")
    useful = (fps or 6 * r.query["params"]) * micro * n * accum * n_steps
    base = {
        "gpu_type": r.query["gpu_type"], "gpu_count": n, "device_batch": micro, "accumulation": accum,
        "global_batch": micro * n * accum, "steps": n_steps, "samples": micro * n * accum * n_steps,
        "seconds": r.seconds, "lower": r.lower, "upper": r.upper, "memory_gb": mem.total_gb,
        "device_memory_gb": mem.device_gb, "fits_memory": mem.fits, "memory_lower_bound": mem.lower_bound,
        "precision": str(r.query["precision"]), "meets_deadline": table.meets_deadline(r.upper),
        "inside_domain": r.inside_domain,
    }
    table.add(base, r, useful, n, g_name)


def _priced_rows(rows, base, r, useful, providers, prices, spot, budget, unpriced, skipped, n, g_name) -> None:
    """The rows of one configuration: one per provider that prices it, or one with the reason none does."""
    missing = []
    for prov in providers:
        try:
            cost = estimate_cost(r, provider=prov, prices=prices, spot=spot)
        except UnknownPriceError:
            missing.append(prov)
            continue
        rows.append({
            **base, "provider": cost.provider, "usd_per_device_hour": cost.usd_per_device_hour,
            "cost": cost.dollars, "cost_lower": cost.lower, "cost_upper": cost.upper,
            "useful_pflop_per_dollar": useful / 1e15 / cost.dollars if cost.dollars > 0 else np.inf,
            "within_budget": True if budget is None else bool(cost.upper <= budget), "price_note": None,
        })
    asked = [p for p in providers if p is not None]
    if len(missing) == len(providers):  # priced by none: kept, with the reason
        reason = no_price_reason(r.query["gpu_type"], provider=asked or None, spot=spot, prices=prices)
        rows.append({
            **base, "provider": asked[0] if len(asked) == 1 else None, "usd_per_device_hour": np.nan,
            "cost": np.nan, "cost_lower": np.nan, "cost_upper": np.nan, "useful_pflop_per_dollar": np.nan,
            "within_budget": True if budget is None else None, "price_note": f"no price: {reason}",
        })
        unpriced.setdefault(reason, []).append(f"{g_name} x{n}")
    else:
        for prov in missing:  # another provider asked for prices it
            reason = no_price_reason(r.query["gpu_type"], provider=prov, spot=spot, prices=prices)
            assert reason is not None  # prov gave no price for the device, so the table says why
            skipped.setdefault(reason.split(";")[0], []).append(f"{g_name} x{n} at {prov}")


def scaling_from_model(model, *, batch_size, gpu_type, gpu_counts=(1, 2, 4, 8), mode="weak", history=None,
                       threshold=DEFAULT_EFFICIENCY_THRESHOLD, precision=None) -> pd.DataFrame:
    """Predicted speedup and efficiency vs device count (with the interval of the step time), and, for the
    physics and ops methods, the communication share of each step.

    The model is the ``auto`` fit for the most demanding kind of query among the counts asked (1 is always
    added: it is the baseline).

    Parameters
    ----------
    model : str or dict
        A model name in the history, or a dict with ``params`` (and optionally ``flops_per_sample``).
    batch_size : int
        The per-device batch (``mode="weak"``) or the global batch, split over the devices (``mode="strong"``:
        ``max(1, batch_size // n)`` per device).
    gpu_type : str
        The device (any alias).
    gpu_counts : sequence of int, default=(1, 2, 4, 8)
        Device counts to predict.
    mode : {"weak", "strong"}, default="weak"
        Weak scaling (fixed per-device batch) or strong scaling (fixed global batch).
    history : None, path, DataFrame, bundled name, list of these, or TrainingTimeModel, optional
        The runs to learn from; default the bundled ``cpu`` or ``gpu`` history, by ``gpu_type``.
    threshold : float, default=DEFAULT_EFFICIENCY_THRESHOLD
        The efficiency below which ``below_threshold`` is True.
    precision : str, optional
        Default: what most of the history's runs on ``gpu_type`` used.

    Returns
    -------
    pandas.DataFrame
        One row per count: ``gpu_count``, ``batch_size`` (per device), ``global_batch``, ``step_time_s``,
        ``step_lower``, ``step_upper``, ``speedup`` (against 1 device), ``efficiency``, ``below_threshold``,
        ``comm_share`` (only for a fit that decomposes a step) and ``inside_domain``.
    """
    # checked before anything is fitted: a NumPy integer becomes a Python int, so no arithmetic below runs in a
    # narrow type (np.uint8(200) // 300 raised OverflowError) and 10**400 is a ValueError, not an OverflowError
    batch_size = check_positive_int(batch_size, "batch_size", "scaling_from_model")
    counts = [check_positive_int(n, "gpu_counts", "scaling_from_model") for n in gpu_counts]
    if mode not in ("weak", "strong"):
        raise ValueError(f"The 'mode' parameter of scaling_from_model must be 'weak' or 'strong'. Got {mode!r}.")
    threshold = check_positive_float(threshold, "threshold", "scaling_from_model")
    if history is None:
        history = "cpu" if resolve_gpu_type(gpu_type) == "cpu" else "gpu"
    if 1 not in counts:
        counts = [1] + counts
    # every count asked (a count the history lacks makes it a new_count query, and auto chooses for that)
    fitted = resolve_history(history, "auto", query=pd.DataFrame({
        "model": model if isinstance(model, str) else "", "gpu_type": resolve_gpu_type(gpu_type),
        "gpu_count": counts, "batch_size": batch_size}))
    per_device = [batch_size if mode == "weak" else max(1, batch_size // n) for n in counts]
    spec = model_spec(model, None, fitted)
    g = resolve_gpu_type(gpu_type)
    if precision is None:
        precision = default_precision(fitted.precision_by_device_, g)[0]
    q = pd.DataFrame({"model": spec["model"], "params": spec["params"], "flops_per_sample": spec["flops_per_sample"],
                      "batch_size": per_device, "gpu_count": counts, "gpu_type": g,
                      "precision": precision, "steps": 1})
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ExtrapolationWarning)
        pred = predict_many(q, history=fitted)
    t = pred["step_time_s"].to_numpy()
    base = t[counts.index(1)]
    gb = np.array(per_device) * np.array(counts)
    if mode == "weak":
        speed = (gb / t) / (per_device[counts.index(1)] / base)
    else:
        speed = base / t
    out = pd.DataFrame({"gpu_count": counts, "batch_size": per_device, "global_batch": gb, "step_time_s": t,
                        "step_lower": pred["step_lower"].to_numpy(), "step_upper": pred["step_upper"].to_numpy(),
                        "speedup": speed, "efficiency": speed / np.array(counts)})
    out["below_threshold"] = out["efficiency"] < threshold
    reg = fitted.pipeline_.named_steps["regressor"]
    if hasattr(reg, "decompose"):
        parts = reg.decompose(fitted.pipeline_.named_steps["features"].transform(q))
        out["comm_share"] = parts["communication_s"].to_numpy() / t
    out["inside_domain"] = pred["inside_domain"].to_numpy()
    return out
