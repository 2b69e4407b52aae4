"""Planning with predictions: cost, choice of hardware, scaling, cluster queueing and online remaining-time
estimates. Every figure carries the prediction's interval through.

- :mod:`~perfmodel.plan._cost`: :func:`load_prices`, :func:`price_per_hour`, :func:`estimate_cost`.
- :mod:`~perfmodel.plan._recommend`: :func:`recommend` (the same work on each configuration),
  :func:`scaling_from_model`.
- :mod:`~perfmodel.plan._llm`: :func:`plan_llm_job` (an LLM job from its shape: tokens, sequence length, global
  batch, nodes, parallelism), :func:`decoder_params`, :func:`decoder_flops_per_sample`.
- :mod:`~perfmodel.plan._memory`: :func:`estimate_memory` (per-device memory and whether it fits).
- :mod:`~perfmodel.plan._queue`: :func:`erlang_c`, :func:`simulate_queue`.
- :mod:`~perfmodel.plan._online`: :class:`OnlineEstimator`.
- :func:`scaling` and :func:`diagnose` (statistics of measured runs, no model) live in :mod:`perfmodel.analysis`
  and are re-exported here.
"""

from __future__ import annotations

from ..analysis import DEFAULT_EFFICIENCY_THRESHOLD, Diagnosis, Finding, diagnose, scaling
from ._cost import CostEstimate, estimate_cost, load_prices, price_per_hour, price_quote
from ._llm import LLMJobPlan, decoder_flops_per_sample, decoder_params, plan_llm_job, search_layouts
from ._memory import MemoryEstimate, estimate_memory
from ._online import OnlineEstimate, OnlineEstimator
from ._queue import QueueResult, SimulationResult, erlang_c, simulate_queue
from ._recommend import recommend, scaling_from_model

__all__ = ["load_prices", "price_per_hour", "price_quote", "estimate_cost", "CostEstimate", "recommend", "scaling",
           "scaling_from_model", "diagnose", "Diagnosis", "Finding", "erlang_c", "QueueResult", "simulate_queue",
           "SimulationResult", "OnlineEstimator", "OnlineEstimate", "DEFAULT_EFFICIENCY_THRESHOLD",
           "plan_llm_job", "LLMJobPlan", "decoder_params", "decoder_flops_per_sample", "estimate_memory",
           "MemoryEstimate", "search_layouts"]
