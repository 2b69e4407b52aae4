"""How a model-parallel training job splits its devices: :class:`ParallelLayout`, the frameworks' rules for a valid
one (:func:`check_layout`), and every valid layout of a job (:func:`enumerate_layouts`).

A job runs on ``G = tp·pp·cp·dp`` devices (Megatron-LM's order: tensor-parallel ranks innermost, then context,
then data, then pipeline stages):

* ``tp`` — tensor parallelism: each layer's matrices split over ``tp`` devices (with ``sequence_parallel`` the
  norms and dropouts split the sequence too);
* ``pp`` — pipeline stages, each holding ``L/pp`` layers, ``vp`` virtual stages per device for the interleaved
  1F1B schedule;
* ``cp`` — context parallelism: each sequence split over ``cp`` devices (ring attention);
* ``dp`` — data parallelism: ``dp`` model replicas, each taking ``global_batch / dp`` sequences per step in
  ``micro_batch``-sized passes; ``zero_stage`` shards the optimizer state (1), the gradients too (2), and the
  weights too (3: FSDP ``FULL_SHARD``, ZeRO-3) over them;
* ``ep`` — expert parallelism (a mixture of experts): the experts split over ``ep`` of the ``tp·cp·dp`` devices of
  a pipeline stage (Megatron-Core's "MoE parallel folding").

**The frameworks' rules** (:func:`check_layout`; Megatron-LM ``arguments.py``/``parallel_state``, torchtitan's
``ParallelDims``): ``tp·pp·cp·dp = G``; the global batch a multiple of ``dp·micro_batch`` (it need not be a
multiple of ``G``); query heads and key/value heads (query groups) divisible by ``tp``; the sequence divisible by
``tp·cp`` with sequence parallelism; at least one layer per virtual stage, the embedding and the
loss counting as one each (``L + 2 ≥ pp·vp``, Megatron's ``account_for_embedding/loss_in_pipeline_split``: Llama 3.1
405B's 126 layers on 16 × 8 stages); an uneven split (DeepSeek-V3's 61 layers on 4 or 16 stages) is allowed; the
sequence divisible by
``2·cp`` when ``cp > 1`` (the load-balanced causal split); for a mixture of experts, experts divisible by ``ep`` and
``ep`` dividing ``tp·cp·dp``; ``vp > 1`` only with ``pp > 1``.
"""

from __future__ import annotations

import math
from collections.abc import Iterator
from dataclasses import asdict, dataclass, replace

import numpy as np
import pandas as pd

from ._validation import check_positive_int
from .exceptions import LayoutError
from .transformer import RECOMPUTE_MODES, TransformerShape

__all__ = ["ParallelLayout", "LayoutError", "check_layout", "layout_problems", "enumerate_layouts", "divisors",
           "DEFAULT_GPUS_PER_NODE", "LAYOUT_FAMILIES", "is_layout_job", "job_layout", "implied_micro_batch"]

#: Devices per node (per NVLink domain) assumed where neither the run nor the query says.
DEFAULT_GPUS_PER_NODE = 8
#: Model families a layout describes (decoder-only transformers, dense or mixtures of experts).
LAYOUT_FAMILIES = ("decoder", "moe", "transformer")


def divisors(n: int) -> list[int]:
    """The positive divisors of ``n``, ascending.

    Parameters
    ----------
    n : int
        A positive integer.

    Returns
    -------
    list of int
        Every ``k`` with ``n % k == 0``.

    Examples
    --------
    >>> divisors(12)
    [1, 2, 3, 4, 6, 12]
    """
    n = check_positive_int(n, "n", "divisors")
    small = [k for k in range(1, math.isqrt(n) + 1) if n % k == 0]
    return sorted(set(small + [n // k for k in small]))


@dataclass(frozen=True)
class ParallelLayout:
    """A model-parallel layout of one training job (module docstring).

    Parameters
    ----------
    tp, pp, cp, dp, ep, vp : int, default=1
        Tensor-, pipeline-, context-, data- and expert-parallel degrees, and virtual pipeline stages per device.
    micro_batch : int, default=1
        Sequences per forward/backward pass on one replica.
    zero_stage : {0, 1, 2, 3}, default=0
        What is sharded over the data-parallel ranks: nothing, the optimizer state, also the gradients, also the
        weights (FSDP full sharding).
    sequence_parallel : bool, default=False
        Tensor-parallel ranks also split the sequence in norms and dropouts (meaningful only with ``tp > 1``).
    recompute : {"none", "selective", "full"}, default="none"
        Activation recomputation.

    Examples
    --------
    >>> lay = ParallelLayout(tp=8, pp=4, dp=2, micro_batch=1)
    >>> lay.devices, lay.microbatches(global_batch=64)
    (64, 32)
    """

    tp: int = 1
    pp: int = 1
    cp: int = 1
    dp: int = 1
    ep: int = 1
    vp: int = 1
    micro_batch: int = 1
    zero_stage: int = 0
    sequence_parallel: bool = False
    recompute: str = "none"

    def __post_init__(self):
        where = "ParallelLayout"
        for name in ("tp", "pp", "cp", "dp", "ep", "vp", "micro_batch"):
            object.__setattr__(self, name, check_positive_int(getattr(self, name), name, where))
        if isinstance(self.zero_stage, bool) or self.zero_stage not in (0, 1, 2, 3):
            raise LayoutError(f"The 'zero_stage' parameter of {where} must be 0, 1, 2 or 3. Got "
                              f"{self.zero_stage!r}.")
        object.__setattr__(self, "zero_stage", int(self.zero_stage))
        if not isinstance(self.sequence_parallel, bool):
            raise TypeError(f"The 'sequence_parallel' parameter of {where} must be a bool. Got "
                            f"{self.sequence_parallel!r}.")
        if self.recompute not in RECOMPUTE_MODES:
            raise LayoutError(f"The 'recompute' parameter of {where} must be one of {', '.join(RECOMPUTE_MODES)}. "
                              f"Got {self.recompute!r}.")
        if self.vp > 1 and self.pp == 1:
            raise LayoutError(f"{where}: vp={self.vp} virtual stages need pipeline parallelism (pp > 1).")

    @property
    def devices(self) -> int:
        """``tp·pp·cp·dp``: the devices the layout uses."""
        return self.tp * self.pp * self.cp * self.dp

    @property
    def stage_devices(self) -> int:
        """``tp·cp·dp``: the devices of one pipeline stage (among which experts are split)."""
        return self.tp * self.cp * self.dp

    def microbatches(self, global_batch: int) -> int:
        """Micro-batches per optimizer step on each replica.

        Parameters
        ----------
        global_batch : int
            Sequences per optimizer step over all replicas.

        Returns
        -------
        int
            ``global_batch / (dp·micro_batch)`` (rounded down; :func:`check_layout` refuses a remainder).
        """
        return check_positive_int(global_batch, "global_batch", "ParallelLayout.microbatches") // (
            self.dp * self.micro_batch)

    def describe(self) -> str:
        """One line, e.g. ``tp 8 × pp 4 (vp 2) × dp 2, micro-batch 1, ZeRO-1, sequence parallel``.

        Returns
        -------
        str
            The degrees above 1 (dp always), the micro-batch, the sharding and the recomputation.
        """
        parts = [f"tp {self.tp}"] if self.tp > 1 else []
        if self.pp > 1:
            parts.append(f"pp {self.pp}" + (f" (vp {self.vp})" if self.vp > 1 else ""))
        if self.cp > 1:
            parts.append(f"cp {self.cp}")
        parts.append(f"dp {self.dp}")
        text = " × ".join(parts) + (f" (ep {self.ep})" if self.ep > 1 else "")
        text += f", micro-batch {self.micro_batch}"
        text += {0: "", 1: ", ZeRO-1", 2: ", ZeRO-2", 3: ", FSDP/ZeRO-3"}[self.zero_stage]
        if self.sequence_parallel and self.tp > 1:
            text += ", sequence parallel"
        if self.recompute != "none":
            text += f", {self.recompute} recomputation"
        return text

    def to_dict(self) -> dict:
        """The fields by name.

        Returns
        -------
        dict
            Plain Python types.
        """
        return asdict(self)

    def with_(self, **changes) -> ParallelLayout:
        """A copy with some fields changed.

        Parameters
        ----------
        **changes
            Fields and their new values.

        Returns
        -------
        ParallelLayout
            The copy, validated again.
        """
        return replace(self, **changes)


def implied_micro_batch(share: int, *, accum: int | None = None, pp: int = 1) -> tuple[int, str | None]:
    """The micro-batch of a run that states its accumulation but not its micro-batch: a replica's ``share`` of the
    step (global batch / dp) over its ``accum`` passes where there are more than one and they divide it; else,
    under a pipeline, one micro-batch per stage (torchtitan's default); else the whole share in one pass (the
    history's meaning of ``batch_size`` with ``grad_accum`` 1). Passes that do not divide the share are said in
    the note.

    Parameters
    ----------
    share : int
        Sequences per optimizer step on one model replica.
    accum : int, optional
        Passes per optimizer step (``grad_accum``).
    pp : int, default=1
        Pipeline stages.

    Returns
    -------
    (int, str or None)
        The micro-batch, and a sentence when it was assumed (the pipeline's default), else None.
    """
    share = max(1, int(share))
    if accum and accum > 1 and share % accum == 0:
        return share // accum, None
    odd = (f"; {accum} passes do not divide a replica's {share} sequences" if accum and accum > 1 else "")
    if pp > 1:
        mb = max(1, share // pp)
        return mb, f"micro-batch: {mb} ({pp} micro-batches per replica, one per pipeline stage{odd})"
    return share, (f"micro-batch: {share} (one pass{odd})" if odd else None)


def job_layout(layout=None, *, devices: int, where: str = "job_layout") -> tuple[ParallelLayout, list[str]]:
    """A job's layout, the frameworks' usual settings filling what is not given: the one place
    :func:`perfmodel.predict_training_time`, :func:`perfmodel.plan.plan_llm_job` and
    :func:`perfmodel.plan.recommend` take their defaults from, so the same job gets the same answer.

    Not given: ``tp``, ``pp``, ``cp``, ``ep``, ``vp`` 1; ``dp`` the devices left, ``devices / (tp·pp·cp)``;
    ``micro_batch`` 1 (one sequence per pass); ``zero_stage`` 1 (the distributed optimizer); sequence parallelism
    on when ``tp > 1``; no recomputation.

    Parameters
    ----------
    layout : ParallelLayout, dict or None
        A :class:`ParallelLayout` is taken as it is; a dict of its fields is completed; None: data parallel over
        every device.
    devices : int
        Devices of the job.
    where : str, default="job_layout"
        The caller, for messages.

    Returns
    -------
    (ParallelLayout, list of str)
        The layout and a sentence for each default a dict left to it that matters to the answer.

    Raises
    ------
    TypeError
        ``layout`` of another type.
    ValueError
        An unknown field, or a degree that is not a positive integer.
    LayoutError
        ``tp·pp·cp`` does not divide the devices (no ``dp`` given).
    """
    if isinstance(layout, ParallelLayout):
        return layout, []
    if layout is not None and not isinstance(layout, dict):
        from collections.abc import Mapping

        if not isinstance(layout, Mapping):
            raise TypeError(f"The 'layout' parameter of {where} must be a ParallelLayout or a dict of its fields. "
                            f"Got {type(layout).__name__}.")
    given = dict(layout or {})
    unknown = set(given) - set(ParallelLayout.__dataclass_fields__)
    if unknown:
        raise ValueError(f"The 'layout' parameter of {where} names unknown fields {sorted(unknown)}; known: "
                         f"{', '.join(ParallelLayout.__dataclass_fields__)}.")
    if "dp" not in given:
        split = 1
        for k in ("tp", "pp", "cp"):
            split *= check_positive_int(given.get(k, 1), k, where)
        if devices % split:
            raise LayoutError(f"Invalid parallel layout: tp x pp x cp = {split} does not divide the {devices} "
                              "devices of the job.")
        given["dp"] = devices // split
    notes = []
    if layout is not None and "micro_batch" not in given:
        notes.append("micro-batch not given: 1 sequence per pass (the frameworks' usual)")
    given.setdefault("micro_batch", 1)
    given.setdefault("zero_stage", 1)
    given.setdefault("sequence_parallel", int(given.get("tp", 1)) > 1)
    return ParallelLayout(**given), notes


def layout_problems(layout: ParallelLayout, *, devices: int, global_batch: int, shape: TransformerShape | None = None,
                    seq_len: int | None = None, names: dict | None = None) -> list[str]:
    """Every framework rule ``layout`` breaks for a job (module docstring); empty when it is valid.

    Parameters
    ----------
    layout : ParallelLayout
        The layout.
    devices : int
        Devices of the job.
    global_batch : int
        Sequences per optimizer step.
    shape : TransformerShape, optional
        The model (its heads, layers and experts are checked where given).
    seq_len : int, optional
        Tokens per sequence (checked against ``cp``).
    names : dict, optional
        How to name each degree in the messages (e.g. ``{"tp": "--tensor-parallel"}`` at the CLI); default the
        field names.

    Returns
    -------
    list of str
        One sentence per broken rule.
    """
    n = {k: k for k in ("tp", "pp", "cp", "dp", "ep", "vp", "micro_batch", "global_batch", "devices")}
    n.update(names or {})
    out = []
    if layout.devices != devices:
        out.append(f"{n['tp']} x {n['pp']} x {n['cp']} x {n['dp']} = {layout.tp} x {layout.pp} x {layout.cp} x "
                   f"{layout.dp} = {layout.devices} is not the {devices} devices of the job")
    if global_batch % (layout.dp * layout.micro_batch):
        out.append(f"{n['global_batch']} {global_batch} is not a multiple of {n['dp']} x {n['micro_batch']} = "
                   f"{layout.dp} x {layout.micro_batch} (each replica takes whole micro-batches)")
    if shape is not None:
        assert shape.n_kv_heads is not None  # set by TransformerShape itself
        if shape.n_heads % layout.tp:
            out.append(f"the model's {shape.n_heads} attention heads do not divide over {n['tp']} {layout.tp}")
        elif shape.n_kv_heads % layout.tp:  # Megatron-Core splits the key/value groups too
            out.append(f"the model's {shape.n_kv_heads} key/value heads (query groups) do not divide over {n['tp']} "
                       f"{layout.tp}")
        if shape.n_layers + 2 < layout.pp * layout.vp:
            out.append(f"{shape.n_layers} layers (and the embedding and loss) cannot fill {n['pp']} x {n['vp']} = "
                       f"{layout.pp * layout.vp} pipeline stages")
        if shape.is_moe:
            if shape.n_experts % layout.ep:
                out.append(f"the model's {shape.n_experts} experts do not divide over {n['ep']} {layout.ep}")
            if layout.stage_devices % layout.ep:
                out.append(f"{n['ep']} {layout.ep} does not divide the {layout.stage_devices} devices of a "
                           f"pipeline stage ({n['tp']} x {n['cp']} x {n['dp']})")
        elif layout.ep > 1:
            out.append(f"{n['ep']} {layout.ep}: the model has no experts")
    elif layout.ep > 1 and layout.stage_devices % layout.ep:
        out.append(f"{n['ep']} {layout.ep} does not divide the {layout.stage_devices} devices of a pipeline stage")
    if seq_len is not None and layout.sequence_parallel and layout.tp > 1 and seq_len % (layout.tp * layout.cp):
        out.append(f"the sequence of {seq_len} tokens does not divide over {n['tp']} {layout.tp} (sequence "
                   "parallelism splits it over the tensor-parallel ranks)")
    if seq_len is not None and layout.cp > 1 and seq_len % (2 * layout.cp):
        out.append(f"the sequence of {seq_len} tokens is not a multiple of 2 x {n['cp']} = {2 * layout.cp} (context "
                   "parallelism splits it into 2·cp balanced chunks)")
    return out


def check_layout(layout: ParallelLayout, *, devices: int, global_batch: int, shape: TransformerShape | None = None,
                 seq_len: int | None = None, names: dict | None = None) -> ParallelLayout:
    """Refuse a layout the training frameworks would not run.

    Parameters
    ----------
    layout, devices, global_batch, shape, seq_len, names
        As in :func:`layout_problems`.

    Returns
    -------
    ParallelLayout
        ``layout``, when it is valid.

    Raises
    ------
    LayoutError
        Naming every broken rule.

    Examples
    --------
    >>> check_layout(ParallelLayout(tp=8, dp=2), devices=16, global_batch=6).describe()
    'tp 8 × dp 2, micro-batch 1'
    >>> layout_problems(ParallelLayout(tp=8, dp=2, micro_batch=4), devices=16, global_batch=6)
    ['global_batch 6 is not a multiple of dp x micro_batch = 2 x 4 (each replica takes whole micro-batches)']
    """
    problems = layout_problems(layout, devices=devices, global_batch=global_batch, shape=shape, seq_len=seq_len,
                               names=names)
    if problems:
        raise LayoutError("Invalid parallel layout: " + "; ".join(problems) + ".")
    return layout


def enumerate_layouts(*, devices: int, global_batch: int, shape: TransformerShape, seq_len: int,
                      gpus_per_node: int = DEFAULT_GPUS_PER_NODE, micro_batches=(1, 2, 4, 8),
                      zero_stages=(1, 3), recompute=("none", "selective", "full"), max_cp: int = 8,
                      tp_across_nodes: bool = False) -> Iterator[ParallelLayout]:
    """Every valid layout of a job in a search space the frameworks offer.

    Tensor groups stay within a node (``tp ≤ gpus_per_node``) unless ``tp_across_nodes``; sequence parallelism is
    on wherever ``tp > 1`` (it moves the same bytes and saves memory); virtual stages are tried at 1 and at the
    largest power of two that fills the stages evenly (up to 8); expert parallelism (a mixture of experts) at every
    divisor of the experts that divides a stage's devices.

    Parameters
    ----------
    devices, global_batch, shape, seq_len
        The job.
    gpus_per_node : int, default=8
        Devices per node (NVLink domain).
    micro_batches : sequence of int, default=(1, 2, 4, 8)
        Micro-batch sizes tried.
    zero_stages : sequence of int, default=(1, 3)
        Sharding tried: the distributed optimizer (1) and full sharding (3).
    recompute : sequence of str, default=("none", "selective", "full")
        Recomputation modes tried.
    max_cp : int, default=8
        The largest context-parallel degree tried (powers of two).
    tp_across_nodes : bool, default=False
        Also try tensor groups larger than a node.

    Yields
    ------
    ParallelLayout
        Each valid layout (:func:`check_layout`), in a deterministic order.
    """
    devices = check_positive_int(devices, "devices", "enumerate_layouts")
    global_batch = check_positive_int(global_batch, "global_batch", "enumerate_layouts")
    gpus_per_node = check_positive_int(gpus_per_node, "gpus_per_node", "enumerate_layouts")
    for tp in divisors(devices):
        if shape.n_heads % tp or (tp > gpus_per_node and not tp_across_nodes):
            continue
        for cp in (c for c in divisors(devices // tp) if c <= max_cp and c & (c - 1) == 0):
            if cp > 1 and seq_len % (2 * cp):
                continue
            for pp in divisors(devices // (tp * cp)):
                if pp > shape.n_layers + 2:
                    continue
                dp = devices // (tp * cp * pp)
                vps = [1]
                if pp > 1:
                    best = max((v for v in (2, 4, 8) if shape.n_layers % (pp * v) == 0), default=1)
                    if best > 1:
                        vps.append(best)
                eps = [1]
                if shape.is_moe:
                    eps = [e for e in divisors(shape.n_experts) if (tp * cp * dp) % e == 0]
                for mb in micro_batches:
                    if global_batch % (dp * mb):
                        continue
                    for vp in vps:
                        for ep in eps:
                            for zero in zero_stages:
                                for rc in recompute:
                                    lay = ParallelLayout(tp=tp, pp=pp, cp=cp, dp=dp, ep=ep, vp=vp, micro_batch=mb,
                                                         zero_stage=zero, sequence_parallel=tp > 1, recompute=rc)
                                    if not layout_problems(lay, devices=devices, global_batch=global_batch,
                                                           shape=shape, seq_len=seq_len):
                                        yield lay


def is_layout_job(runs: pd.DataFrame) -> np.ndarray:
    """Per row, whether it describes transformer training a layout model can price.

    A row does when it has a ``seq_len`` and either a transformer shape (``n_layers`` and ``d_model``) or a family
    of :data:`LAYOUT_FAMILIES`.

    Parameters
    ----------
    runs : pandas.DataFrame
        Runs or queries.

    Returns
    -------
    numpy.ndarray of bool
    """
    n = len(runs)
    seq = (pd.to_numeric(runs["seq_len"], errors="coerce").notna().to_numpy() if "seq_len" in runs.columns
           else np.zeros(n, dtype=bool))
    shaped = np.ones(n, dtype=bool)
    for c in ("n_layers", "d_model"):
        shaped &= (pd.to_numeric(runs[c], errors="coerce").notna().to_numpy() if c in runs.columns
                   else np.zeros(n, dtype=bool))
    fam = (runs["family"].astype("string").fillna("").str.lower().isin(LAYOUT_FAMILIES).to_numpy(dtype=bool)
           if "family" in runs.columns else np.zeros(n, dtype=bool))
    return seq & (shaped | fam)
