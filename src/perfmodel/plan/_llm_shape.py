"""The model and the work of an LLM job as :func:`perfmodel.plan.plan_llm_job` is given them: the model's
arguments (:class:`ModelArgs`) resolved into its shape and parameter count (:class:`ModelShape`), and the amount
of work in whole steps (:class:`JobWork`). The module docstring of :mod:`perfmodel.plan._llm` describes both."""

from __future__ import annotations

import math
import numbers
from dataclasses import dataclass
from typing import Any

from .._validation import check_positive_float, check_positive_int
from ..transformer import TransformerShape, hf_config_shape, standard_shape

#: How the planner's messages name it.
WHERE = "plan_llm_job"


def si(x: float) -> str:
    """``100B``, ``1.3B``, ``350M``: counts as LLM people write them."""
    for div, unit in ((1e12, "T"), (1e9, "B"), (1e6, "M"), (1e3, "K")):
        if abs(x) >= div:
            return f"{x / div:.4g}{unit}"
    return f"{x:g}"


def whole_count(value: Any, name: str, shown: str | None = None) -> int:
    """A positive whole number, also given as a float such as ``100e9`` (``shown``: how messages name it, e.g. a
    CLI flag)."""
    what = f"The {name!r} parameter of {WHERE}" if shown is None or shown == name else shown
    if isinstance(value, bool) or not isinstance(value, numbers.Real):
        raise TypeError(f"{what} must be a positive whole number. Got {value!r} of type {type(value).__name__} "
                        "instead.")
    if not math.isfinite(float(value)) or float(value) <= 0 or not float(value).is_integer():
        raise ValueError(f"{what} must be a positive whole number. Got {value!r} instead.")
    return check_positive_int(value, name, WHERE)  # a whole float becomes its int there, as int(value) did


@dataclass(frozen=True)
class ModelShape:
    """The job's model: its shape, the parameter count reported and how it was obtained, and the HF config read.

    Attributes
    ----------
    shape : TransformerShape
        The shape every estimate uses.
    params : float
        The parameter count reported (given, the HF config's count, or the shape's).
    params_formula : str
        How ``params`` was obtained.
    hf : dict or None
        What :func:`perfmodel.transformer.hf_config_shape` read, when ``hf_config=`` was given.
    """

    shape: TransformerShape
    params: float
    params_formula: str
    hf: dict | None = None


@dataclass(frozen=True)
class ModelArgs:
    """The model's arguments of :func:`perfmodel.plan.plan_llm_job`, as given (one of: ``shape``, ``hf_config``,
    ``n_layers`` and ``d_model`` with the rest, or ``params`` alone)."""

    params: Any = None
    shape: Any = None
    hf_config: Any = None
    n_layers: Any = None
    d_model: Any = None
    vocab: Any = None
    n_heads: Any = None
    n_kv_heads: Any = None
    ffn_mult: Any = None
    ffn_hidden: Any = None

    def sizes_given(self) -> dict:
        """The architecture's sizes that were given, by name."""
        return {k: v for k, v in (("n_layers", self.n_layers), ("d_model", self.d_model), ("vocab", self.vocab),
                                  ("n_heads", self.n_heads), ("n_kv_heads", self.n_kv_heads),
                                  ("ffn_mult", self.ffn_mult), ("ffn_hidden", self.ffn_hidden)) if v is not None}

    def resolve(self, notes: list[str]) -> ModelShape:
        """The job's shape, parameter count and its formula (module docstring, "The model"); what was assumed is
        added to ``notes``."""
        if self.shape is not None or self.hf_config is not None:
            derived = self._given_whole()
        elif self.n_layers is not None or self.d_model is not None:
            derived = self._from_sizes(notes)
        elif self.params is not None:
            params = check_positive_float(self.params, "params", WHERE)
            shape = standard_shape(params)
            notes.append(f"model given by its size only: the standard shape of a {si(params)}-parameter decoder "
                         f"(L={shape.n_layers}, d={shape.d_model}, {shape.n_heads} heads, gated MLP "
                         f"{shape.ffn_hidden}, vocabulary {shape.vocab}); give n_layers/d_model or hf_config= for "
                         "yours")
            return ModelShape(shape, params, "given")
        else:
            raise ValueError(f"{WHERE} needs the model: 'params', 'shape', 'hf_config', or 'n_layers' and 'd_model' "
                             f"(and 'vocab'). Got params=None, n_layers={self.n_layers!r}, d_model={self.d_model!r}.")
        if self.params is not None:
            params = check_positive_float(self.params, "params", WHERE)
            if not 0.75 <= params / derived.params <= 1.33:
                notes.append(f"params={params:.4g} differs from the shape's {derived.params:.4g} by more than a "
                             "third: check the architecture (the time follows the shape)")
            return ModelShape(derived.shape, params, "given", derived.hf)
        return derived

    def _given_whole(self) -> ModelShape:
        """The shape given as ``shape=`` or read from ``hf_config=``, with the count it implies."""
        given = self.sizes_given()
        if self.shape is not None and self.hf_config is not None:
            raise ValueError(f"{WHERE}: give the model's shape one way: shape= or hf_config=, not both.")
        if given:
            raise ValueError(f"{WHERE}: {'shape' if self.shape is not None else 'hf_config'} gives the architecture; "
                             f"leave out {', '.join(f'{k}={v!r}' for k, v in given.items())}.")
        if self.hf_config is not None:
            hf = hf_config_shape(self.hf_config)
            return ModelShape(hf["shape"], float(hf["params"]), hf["formula"], hf)
        if not isinstance(self.shape, TransformerShape):
            raise TypeError(f"The 'shape' parameter of {WHERE} must be a perfmodel.transformer.TransformerShape. "
                            f"Got {type(self.shape).__name__}.")
        return ModelShape(self.shape, float(self.shape.params()), "the shape's (biases and norms left out)")

    def _from_sizes(self, notes: list[str]) -> ModelShape:
        """The shape built from ``n_layers``, ``d_model`` and the rest, with its parameter count's formula."""
        n_layers, d_model, n_heads, ffn_mult, ffn_hidden = (self.n_layers, self.d_model, self.n_heads,
                                                            self.ffn_mult, self.ffn_hidden)
        if n_layers is None or d_model is None:
            raise ValueError(f"{WHERE} needs both 'n_layers' and 'd_model' for the architecture. Got "
                             f"n_layers={n_layers!r}, d_model={d_model!r}.")
        L, d = whole_count(n_layers, "n_layers"), whole_count(d_model, "d_model")
        h = whole_count(n_heads, "n_heads") if n_heads is not None else max(1, d // 128)
        if n_heads is not None and d % h:
            raise ValueError(f"The 'n_heads' parameter of {WHERE} must divide d_model={d}. Got {n_heads!r}.")
        if ffn_hidden is not None and ffn_mult is not None:
            raise ValueError(f"{WHERE}: give the MLP width one way: ffn_hidden= or ffn_mult=.")
        ffn = (whole_count(ffn_hidden, "ffn_hidden") if ffn_hidden is not None else
               max(1, round((4.0 if ffn_mult is None else check_positive_float(ffn_mult, "ffn_mult", WHERE)) * d)))
        V = 0 if self.vocab is None else whole_count(self.vocab, "vocab")
        shape = TransformerShape(n_layers=L, d_model=d, n_heads=h if d % h == 0 else 1, vocab=V, ffn_hidden=ffn,
                                 n_kv_heads=None if self.n_kv_heads is None else whole_count(self.n_kv_heads,
                                                                                             "n_kv_heads"))
        formula = f"L·(4·d² + 2·d·ffn) + vocab·d with L={L}, d={d}, ffn={ffn}, vocab={V}"
        if self.n_kv_heads is not None:
            formula = f"L·(attention with {shape.n_kv_heads} KV heads + 2·d·ffn) + vocab·d with L={L}, d={d}, " \
                      f"ffn={ffn}, vocab={V}"
        if self.vocab is None:
            notes.append("no vocab given: the embedding's vocab·d parameters and the output head are left out")
        return ModelShape(shape, float(shape.params()), formula)


@dataclass(frozen=True)
class JobWork:
    """The job's work in whole optimizer steps: ``steps`` of ``global_batch`` sequences, ``samples`` sequences,
    ``tokens`` tokens."""

    steps: int
    samples: int
    tokens: int


def job_work(tokens: Any, samples: Any, steps: Any, seq_len: int, global_batch: int, notes: list[str]) -> JobWork:
    """The work given as exactly one of ``tokens``, ``samples`` or ``steps``, rounded up to whole steps (said in
    ``notes``)."""
    given = [k for k, v in (("tokens", tokens), ("samples", samples), ("steps", steps)) if v is not None]
    if len(given) != 1:
        raise ValueError(f"{WHERE} needs exactly one of 'tokens', 'samples' or 'steps'. Got "
                         f"{', '.join(given) if given else 'none'}.")
    if tokens is not None:
        tokens = whole_count(tokens, "tokens")
        sequences = -(-tokens // seq_len)  # ceiling divisions: a partial sequence or step still runs
        n_steps = -(-sequences // global_batch)
    elif samples is not None:
        n_steps = -(-whole_count(samples, "samples") // global_batch)
    else:
        n_steps = whole_count(steps, "steps")
    samples_done = n_steps * global_batch
    tokens_done = samples_done * seq_len
    if tokens is not None and tokens_done != tokens:
        notes.append(f"{tokens:,} tokens rounded up to {n_steps:,} whole steps ({tokens_done:,} tokens)")
    return JobWork(steps=n_steps, samples=samples_done, tokens=tokens_done)
