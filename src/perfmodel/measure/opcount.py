"""Op-level features of one training step: FLOPs and bytes moved per op class, kernel count, activation memory.

A :class:`~torch.utils._python_dispatch.TorchDispatchMode` (beside torch's ``FlopCounterMode``, whose registered
formulas it reuses for matmul, convolution and attention FLOPs) watches every aten op of forward + loss + backward,
on the meta device by default (no real memory, no real compute), and sorts each op into a class.

Feature set ``OP_FEATURE_VERSION = 2``
--------------------------------------
Op classes (:data:`OP_CLASSES`):

``matmul``
    mm, addmm, bmm, baddbmm, mv, dot (``nn.Linear`` lowers to these). FLOPs: torch's formulas (2 per MAC).
``conv_dense``, ``conv_depthwise``, ``conv_grouped``
    ``aten.convolution`` and its backward, split by ``groups``: 1 (dense), one input channel per group
    (depthwise), other ``groups > 1`` (grouped). FLOPs: torch's formula forward; backward, the forward's FLOPs
    for each gradient computed (input, weight) — torch's backward formula overcounts grouped weight gradients.
``attention``
    Fused scaled-dot-product-attention kernels (``F.scaled_dot_product_attention``; on the meta device it is
    routed to the CPU flash kernel's op, so that meta and CPU counts agree). FLOPs: torch's SDPA formulas (the
    full score matrix, causal or not): ``4·h·L·S·E`` forward and ``10·h·L·S·E`` backward (scores recomputed). *Explicit* attention (``q @ k.T``, softmax, ``@ v`` written out) is counted
    as what it is: matmuls plus a softmax (``matmul`` and ``reduction``).
``recurrent``
    Every op inside an ``nn.RNNBase`` module (LSTM/GRU/RNN), in forward and backward. A fused CPU kernel
    (``mkldnn_rnn_layer``) is counted analytically: ``2 · time·batch · (|W_ih| + |W_hh|)`` forward, twice that
    backward; on the meta device the layers unroll to matmuls and gates, which are not counted again (every cell's
    FLOPs and bytes are the analytic ones). Kernels follow torch's CPU path: an LSTM's fused kernel, a GRU's or
    plain RNN's unrolled per-time-step ops (see ``op_kernels`` below).
``norm``
    batch, layer, group and RMS normalisation, forward and backward.
``elementwise``
    Ops torch tags *pointwise* (activations, adds, dropout masks, their backwards) and plain copies
    (clone, copy, cat, stack).
``embedding``
    embedding and its backward, index/gather/scatter ops.
``reduction``
    softmax/log-softmax and their backwards, sums/means/max, losses, pooling.
``other``
    Every other op that launches a kernel (fills, factories, ...).
``optimizer``
    Not traced: counted analytically per parameter (:data:`OPTIMIZER_COST`; AdamW ~ 12 FLOPs and 28 bytes per
    fp32 parameter, one elementwise pass over param, grad and two moments; SGD with momentum 3 FLOPs, 20 bytes).

FLOPs of a non-matmul/conv/attention op are its output elements (one operation per element — a convention).
Bytes are the sizes of an op's input and output tensors (each read or written once: an approximation that ignores
caches and re-reads inside a kernel). Views, aliases and ``detach`` launch no kernel and count nothing.

Units: the step is traced at two batch sizes and every quantity is split exactly into a part proportional to the
batch (**per sample**) and a part that is not (**per step**: weight and gradient traffic, the optimizer, kernel
launches). Columns (:meth:`OpFeatures.to_columns`):

* ``op_<class>_flops``, ``op_<class>_bytes`` for each traced class: per sample (comparable with
  ``flops_per_sample``);
* ``op_step_bytes``: per step, batch-independent bytes over all traced classes (weights read, gradients written);
* ``op_optimizer_flops``, ``op_optimizer_bytes``: per step;
* ``op_kernels``: ops dispatched in one step (traced ops plus the optimizer's, :data:`OPTIMIZER_COST`) — a
  launch-overhead proxy, per step. A recurrent module counts what torch dispatches on CPU: one fused kernel per
  layer and direction each way for an LSTM; for a GRU or plain RNN, which torch does not fuse on CPU, the unrolled
  per-time-step ops (counted on a tiny CPU replica of the module; version 1 counted 2 per layer as for an LSTM,
  about 500 times too few for a 32-step GRU);
* ``op_act_bytes``: activation memory, bytes saved for backward (parameters excluded), per sample — the one
  quantity that depends on where the count runs: a fused CPU RNN kernel saves a workspace, the meta device's
  unrolled cells save their gates;
* ``op_<class>_intensity`` is *not* stored: :meth:`OpFeatures.intensity` derives it (FLOPs / bytes per sample);
* ``op_feature_version``: :data:`OP_FEATURE_VERSION`.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

__all__ = ["OP_CLASSES", "TRACED_CLASSES", "OP_FEATURE_VERSION", "OpFeatures", "count_ops", "count_workload_ops",
           "op_column_names", "OPTIMIZER_COST"]

from ..schema import OP_FEATURE_VERSION  # the schema owns the columns
from ..schema import OP_TRACED_CLASSES as TRACED_CLASSES
from .flops import count_params

OP_CLASSES = TRACED_CLASSES + ("optimizer",)
#: optimizer -> (FLOPs per parameter element, bytes per fp32 parameter element, kernels per parameter tensor).
#: AdamW (torch's per-tensor CPU implementation): read param, grad, two moments, write param and moments (7 x 4 B);
#: ~12 elementwise operations; ~10 small kernels per tensor. SGD with momentum: read param, grad, buffer, write
#: param and buffer (5 x 4 B), 3 operations, 3 kernels per tensor.
OPTIMIZER_COST = {"adamw": (12.0, 28.0, 10), "sgd": (3.0, 20.0, 3), None: (0.0, 0.0, 0)}

_MATMUL = {"mm", "addmm", "bmm", "baddbmm", "mv", "addmv", "dot", "_addmm_activation", "addbmm", "matmul"}
_CONV = {"convolution", "_convolution", "convolution_backward", "mkldnn_convolution", "_slow_conv2d_forward",
         "_slow_conv2d_backward", "_conv_depthwise2d", "cudnn_convolution", "convolution_overrideable",
         "slow_conv3d_forward", "slow_conv_dilated2d", "slow_conv_transpose2d"}
_NORM_WORDS = ("batch_norm", "layer_norm", "group_norm", "rms_norm", "instance_norm")
_EMBED = {"embedding", "embedding_dense_backward", "embedding_backward", "_embedding_bag",
          "_embedding_bag_backward", "_embedding_bag_dense_backward", "index_select", "gather", "scatter",
          "scatter_add", "scatter_add_", "scatter_", "index", "index_put", "index_put_", "_index_put_impl_",
          "index_add", "index_add_", "take", "masked_select", "embedding_renorm_", "_unsafe_index",
          "_unsafe_index_put", "index_select_backward", "gather_backward", "scatter_reduce"}
_REDUCE_WORDS = ("softmax", "sum", "mean", "amax", "amin", "max", "min", "nll_loss", "mse_loss", "l1_loss",
                 "cross_entropy", "binary_cross_entropy", "smooth_l1", "huber", "kl_div", "logsumexp", "var", "std",
                 "norm", "pool", "argmax", "argmin", "cumsum", "prod", "any", "all", "topk", "sort")
_COPY = {"clone", "copy_", "copy", "cat", "stack", "_to_copy", "contiguous", "constant_pad_nd", "repeat",
         "flip", "roll", "_unsafe_view_copy", "tril", "triu", "where", "masked_fill", "masked_fill_", "fill_",
         "zero_", "lift_fresh_copy"}
_NO_KERNEL = {"detach", "view", "_unsafe_view", "t", "transpose", "permute", "expand", "select", "slice",
              "unsqueeze", "squeeze", "as_strided", "alias", "split", "split_with_sizes", "unbind", "unsafe_split",
              "unsafe_split_with_sizes", "reshape", "_reshape_alias", "view_as", "expand_as", "narrow",
              "chunk", "empty", "empty_like", "empty_strided", "new_empty", "new_empty_strided", "lift_fresh",
              "sym_size", "sym_stride", "sym_numel", "_local_scalar_dense", "set_", "resize_", "is_same_size",
              "_has_compatible_shallow_copy_type", "unflatten", "flatten", "diagonal", "movedim", "_neg_view",
              "_conj", "real", "imag", "view_as_real", "view_as_complex"}
_RNN_WORDS = ("rnn", "lstm", "gru")


@dataclass(frozen=True)
class OpFeatures:
    """Op-level features of one model's training step (see the module docstring for units and classes).

    ``flops`` and ``bytes`` map each traced class to per-sample amounts; ``step_bytes``, ``optimizer_flops``,
    ``optimizer_bytes`` and ``kernels`` are per step; ``act_bytes`` is per sample.

    Attributes
    ----------
    flops : dict
        Traced class -> forward+backward FLOPs per sample.
    bytes : dict
        Traced class -> bytes moved per sample.
    step_bytes : float, default=0.0
        Batch-independent bytes per step over all traced classes (weights read, gradients written).
    optimizer_flops : float, default=0.0
        The optimizer update's FLOPs per step (:data:`OPTIMIZER_COST` times the trainable parameters).
    optimizer_bytes : float, default=0.0
        The optimizer update's bytes per step.
    kernels : float, default=0.0
        Ops dispatched in one step, traced ones plus the optimizer's.
    act_bytes : float, default=0.0
        Bytes saved for backward per sample (parameters excluded).
    params : int, default=0
        Trainable parameters of the model.
    device : str, default="meta"
        Where the step was traced (``"meta"`` or ``"cpu"``).
    version : int, default=OP_FEATURE_VERSION
        The feature set's version (:data:`OP_FEATURE_VERSION`).
    """

    flops: dict = field(default_factory=dict)
    bytes: dict = field(default_factory=dict)
    step_bytes: float = 0.0
    optimizer_flops: float = 0.0
    optimizer_bytes: float = 0.0
    kernels: float = 0.0
    act_bytes: float = 0.0
    params: int = 0
    device: str = "meta"
    version: int = OP_FEATURE_VERSION

    @property
    def total_flops(self) -> float:
        """Forward+backward FLOPs per sample over every traced class."""
        return float(sum(self.flops.values()))

    def intensity(self, cls: str) -> float:
        """Arithmetic intensity of a class per sample: FLOPs / bytes (nan where it moves no bytes).

        Parameters
        ----------
        cls : str
            A traced op class (:data:`TRACED_CLASSES`); an unknown one counts as moving no bytes.

        Returns
        -------
        float
            FLOPs per byte moved, NaN where the class moves no bytes.
        """
        b = self.bytes.get(cls, 0.0)
        return float(self.flops.get(cls, 0.0) / b) if b > 0 else math.nan

    def to_columns(self) -> dict:
        """Flat history columns (names in :func:`op_column_names`).

        Returns
        -------
        dict
            ``op_<class>_flops`` and ``op_<class>_bytes`` for each traced class, ``op_step_bytes``,
            ``op_optimizer_flops``, ``op_optimizer_bytes``, ``op_kernels``, ``op_act_bytes`` (floats) and
            ``op_feature_version`` (int).
        """
        out = {}
        for c in TRACED_CLASSES:
            out[f"op_{c}_flops"] = float(self.flops.get(c, 0.0))
            out[f"op_{c}_bytes"] = float(self.bytes.get(c, 0.0))
        out["op_step_bytes"] = float(self.step_bytes)
        out["op_optimizer_flops"] = float(self.optimizer_flops)
        out["op_optimizer_bytes"] = float(self.optimizer_bytes)
        out["op_kernels"] = float(self.kernels)
        out["op_act_bytes"] = float(self.act_bytes)
        out["op_feature_version"] = int(self.version)
        return out


def op_column_names() -> tuple[str, ...]:
    """The history columns :meth:`OpFeatures.to_columns` writes, in order.

    Returns
    -------
    tuple of str
        The column names.
    """
    return tuple(OpFeatures().to_columns())


# ------------------------------------------------------------------------------------------------ classifying
def _tensors(obj):
    import torch
    from torch.utils._pytree import tree_flatten

    return [t for t in tree_flatten(obj)[0] if isinstance(t, torch.Tensor)]


def _nbytes(tensors) -> float:
    return float(sum(t.numel() * t.element_size() for t in tensors))


def _conv_class(name: str, args) -> str:
    groups = 1
    weight = None
    if name == "convolution_backward" and len(args) > 9:
        groups, weight = int(args[9]), args[2]
    elif name in ("convolution", "_convolution") and len(args) > 8:
        groups, weight = int(args[8]), args[1]
    elif name == "_conv_depthwise2d":
        return "conv_depthwise"
    if groups <= 1:
        return "conv_dense"
    if weight is not None and weight.dim() >= 2 and int(weight.shape[1]) == 1:
        return "conv_depthwise"
    return "conv_grouped"


def _classify(func, name: str, args, in_rnn: bool) -> str | None:
    """The op class of one aten op, or None for an op that launches no kernel (a view, an alias)."""
    import torch

    if name in _NO_KERNEL or getattr(func, "is_view", False):
        return None
    if in_rnn or any(w in name for w in _RNN_WORDS):
        return "recurrent"
    if name in _MATMUL:
        return "matmul"
    if name in _CONV:
        return _conv_class(name, args)
    if "scaled_dot_product" in name or "flash_attention" in name or "efficient_attention" in name:
        return "attention"
    if any(w in name for w in _NORM_WORDS):
        return "norm"
    if name in _EMBED:
        return "embedding"
    if name in _COPY or torch.Tag.pointwise in getattr(func, "tags", ()):
        return "elementwise"
    base = name.rstrip("_")
    if any(w in base for w in _REDUCE_WORDS):
        return "reduction"
    return "other"


def _conv_backward_flops(args) -> float:
    """FLOPs of ``convolution_backward(grad_out, input, weight, bias_sizes, stride, padding, dilation, transposed,
    output_padding, groups, output_mask)``: the forward convolution's FLOPs once for the input gradient and once
    for the weight gradient, as the mask asks. (torch's formula counts the weight gradient of a grouped convolution
    as if it were dense, ``groups`` times too many.)"""
    grad_out, x, w = args[0], args[1], args[2]
    transposed, mask = bool(args[7]), args[10]
    per_weight = math.prod(int(d) for d in w.shape[1:])
    fwd = 2.0 * (x.numel() if transposed else grad_out.numel()) * per_weight
    return fwd * (int(bool(mask[0])) + int(bool(mask[1])))


def _rnn_flops(name: str, args) -> float:
    """Analytic FLOPs of a fused recurrent kernel (mkldnn_rnn_layer and its backward: input, W_ih, W_hh first)."""
    if "mkldnn_rnn_layer" not in name or len(args) < 3:
        return 0.0
    x, w_ih, w_hh = args[0], args[1], args[2]
    rows = x.numel() / max(int(x.shape[-1]), 1)  # time steps x batch
    fwd = 2.0 * rows * (w_ih.numel() + w_hh.numel())
    return 2.0 * fwd if "backward" in name else fwd


def _fused_rnn(module) -> bool:
    """Whether torch runs ``module`` (an ``nn.RNNBase``) as one fused kernel per layer and direction on CPU:
    LSTM (oneDNN's ``mkldnn_rnn_layer``, forward and backward). GRU and plain RNN cells are not fused on CPU:
    torch unrolls them into a matmul and a handful of elementwise ops per time step (about 45 dispatched ops per
    step for a one-layer GRU and 20 for a tanh RNN, forward + backward, against one kernel each way for an
    LSTM), which is what the meta device's trace shows for every cell."""
    return getattr(module, "mode", "") == "LSTM"


def _rnn_hook(tally: _Tally):
    """A forward hook adding an RNN module's analytic counts (forward and backward) to ``tally``.

    Per layer and direction, with ``rows`` = time steps x batch, ``G`` gate rows (4H LSTM, 3H GRU, H RNN):
    FLOPs ``2 · rows · (|W_ih| + |W_hh|)`` forward and twice that backward; bytes ``4 · (rows · (in + H + G) +
    |W_ih| + |W_hh|)`` forward (input, output, gate workspace, weights) and twice that backward. Kernels: for an
    LSTM one fused kernel forward and one backward per layer and direction (oneDNN on CPU, cuDNN on GPU), whatever
    device the count runs on; for a GRU or plain RNN, which torch does not fuse on CPU, the ops the CPU path
    dispatches (:func:`_unfused_rnn_kernels`; the meta device's unrolled path differs: it projects the input
    time step by time step, where the CPU path does it in one matmul).
    """

    def hook(module, args, _out):
        x: Any = args[0] if args else None
        data = getattr(x, "data", x)  # a PackedSequence's data is (sum of lengths, features)
        if data is None or not hasattr(data, "numel"):
            return
        rows = data.numel() / max(int(data.shape[-1]), 1)
        dirs = 2 if module.bidirectional else 1
        for layer in range(module.num_layers):
            for d in range(dirs):
                sfx = f"_l{layer}" + ("_reverse" if d else "")
                w_ih, w_hh = getattr(module, "weight_ih" + sfx), getattr(module, "weight_hh" + sfx)
                gates, hidden = int(w_ih.shape[0]), int(w_hh.shape[1])
                w = float(w_ih.numel() + w_hh.numel())
                flops = 2.0 * rows * w
                moved = 4.0 * (rows * (int(w_ih.shape[1]) + hidden + gates) + w)
                tally.flops["recurrent"] += 3.0 * flops
                tally.bytes["recurrent"] += 3.0 * moved
                if _fused_rnn(module):
                    tally.kernels += 2
        if not _fused_rnn(module):  # kernels counted after the trace, on a CPU replica (_unfused_rnn_kernels)
            steps = (len(x.batch_sizes) if hasattr(x, "batch_sizes")
                     else int(data.shape[1 if module.batch_first and data.dim() == 3 else 0]))
            tally.unfused_rnn.append((_rnn_config(module), steps))

    return hook


def _rnn_config(module) -> tuple:
    """What the kernel count of an unfused recurrent module depends on (not its sizes)."""
    return (module.mode, int(module.num_layers), bool(module.bias), bool(module.batch_first),
            bool(module.bidirectional))


_UNFUSED_RNN_KERNELS: dict = {}


def _unfused_rnn_kernels(config: tuple, steps: int) -> int:
    """Kernels torch dispatches on CPU for forward + backward of an unfused recurrent module (GRU, RNN) of this
    configuration over ``steps`` time steps: counted once on a CPU replica with one feature, one hidden unit and a
    batch of two (the count does not depend on the sizes; a batch of one takes a path with one op fewer per layer),
    outside any other counting mode, and cached. A packed sequence counts as an unpacked one of its longest length
    (an approximation: the packed path's own op count is not checked)."""
    import torch
    from torch.utils._python_dispatch import TorchDispatchMode, _disable_current_modes

    key = (config, int(steps))
    if key in _UNFUSED_RNN_KERNELS:
        return _UNFUSED_RNN_KERNELS[key]
    mode, layers, bias, batch_first, bidirectional = config
    count = [0]

    class Count(TorchDispatchMode):
        def __torch_dispatch__(self, func, types, args=(), kwargs=None):
            out = func(*args, **(kwargs or {}))
            if _classify(func, func._overloadpacket.__name__, args, False) is not None:
                count[0] += 1
            return out

    with _disable_current_modes(), torch.autograd.graph.saved_tensors_hooks(lambda t: t, lambda t: t):
        kind = {"GRU": torch.nn.GRU, "RNN_TANH": torch.nn.RNN, "RNN_RELU": torch.nn.RNN}.get(mode, torch.nn.GRU)
        extra = {"nonlinearity": "relu"} if mode == "RNN_RELU" else {}
        rep = kind(1, 1, layers, bias=bias, batch_first=batch_first, bidirectional=bidirectional, device="cpu",
                   **extra)
        x = torch.zeros((2, max(int(steps), 1), 1) if batch_first else (max(int(steps), 1), 2, 1), device="cpu")
        out, _ = rep(x)
        grad = torch.ones_like(out)
        with Count():
            out, _ = rep(x)
            torch.autograd.backward(out, grad)
    _UNFUSED_RNN_KERNELS[key] = count[0]
    return count[0]


class _Tally:
    def __init__(self) -> None:
        self.flops = dict.fromkeys(TRACED_CLASSES, 0.0)
        self.bytes = dict.fromkeys(TRACED_CLASSES, 0.0)
        self.kernels = 0
        self.unfused_rnn: list = []  # (config, time steps) of each unfused recurrent module's forward
        self.act_bytes = 0.0


def _make_mode(tally: _Tally, tracker, rnn_names: set):
    from torch.utils._python_dispatch import TorchDispatchMode
    from torch.utils.flop_counter import flop_registry

    class OpCounterMode(TorchDispatchMode):
        def __torch_dispatch__(self, func, types, args=(), kwargs=None):
            kwargs = kwargs or {}
            out = func(*args, **kwargs)
            packet = func._overloadpacket
            name = packet.__name__
            if rnn_names and not rnn_names.isdisjoint(tracker.parents):
                return out  # inside an RNN module: counted analytically by _rnn_hook
            cls = _classify(func, name, args, False)
            if cls is None:
                return out
            flops = 0.0
            if name == "convolution_backward":
                flops = _conv_backward_flops(args)
            elif packet in flop_registry:
                flops = float(flop_registry[packet](*args, **kwargs, out_val=out))
            elif "_for_cpu" in name and "scaled_dot_product" in name:
                flops = _sdpa_cpu_flops(name, args, out)
            elif cls == "recurrent" and "mkldnn_rnn_layer" in name:
                flops = _rnn_flops(name, args)
            if flops == 0.0 and cls not in ("matmul", "conv_dense", "conv_depthwise", "conv_grouped", "attention"):
                flops = float(sum(t.numel() for t in _tensors(out)))
            tally.flops[cls] += flops
            tally.bytes[cls] += _nbytes(_tensors(args) + _tensors(kwargs) + _tensors(out))
            tally.kernels += 1
            return out

    return OpCounterMode()


def _sdpa_cpu_flops(name: str, args, out) -> float:
    from torch.utils.flop_counter import sdpa_backward_flop_count, sdpa_flop_count

    if name.endswith("_backward"):  # (grad_out, query, key, value, out, logsumexp, ...)
        return float(sdpa_backward_flop_count(args[0].shape, args[1].shape, args[2].shape, args[3].shape))
    return float(sdpa_flop_count(args[0].shape, args[1].shape, args[2].shape))


class _SdpaRedirect:
    """Within the context, ``F.scaled_dot_product_attention`` on meta tensors calls the CPU flash kernel's aten op
    (whose meta kernel and autograd formula exist): otherwise meta tensors take the math path (explicit matmuls and
    a softmax) and meta and CPU counts would disagree. It patches the ``torch.nn.functional`` attribute (which
    ``nn.MultiheadAttention`` looks up at call time) and restores it on exit; code that bound the function at
    import time keeps the math path on meta."""

    def __enter__(self):
        import torch
        import torch.nn.functional as F

        self._orig = orig = F.scaled_dot_product_attention

        def sdpa(query, key, value, attn_mask=None, dropout_p=0.0, is_causal=False, scale=None, **kwargs):
            if query.device.type == "meta" and not kwargs and (attn_mask is None or attn_mask.dtype != torch.bool):
                try:
                    return torch.ops.aten._scaled_dot_product_flash_attention_for_cpu(
                        query, key, value, float(dropout_p), bool(is_causal), attn_mask=attn_mask, scale=scale)[0]
                except (RuntimeError, TypeError, ValueError):
                    pass
            return orig(query, key, value, attn_mask=attn_mask, dropout_p=dropout_p, is_causal=is_causal,
                        scale=scale, **kwargs)

        F.scaled_dot_product_attention = sdpa  # type: ignore[assignment]  # same call, same result
        return self

    def __exit__(self, *exc):
        import torch.nn.functional as F

        F.scaled_dot_product_attention = self._orig
        return False


# ------------------------------------------------------------------------------------------------- counting
def _trace(module, make_inputs, loss_fn, batch: int, device) -> _Tally:
    import torch
    from torch.utils.module_tracker import ModuleTracker

    tally = _Tally()
    root = type(module).__name__
    rnn_names = {root if not n else f"{root}.{n}" for n, m in module.named_modules()
                 if isinstance(m, torch.nn.RNNBase)}
    param_storages = {p.untyped_storage()._cdata for p in module.parameters()}
    seen: set = set()

    def pack(t):
        try:
            st = t.untyped_storage()
            key = st._cdata
            if key not in param_storages and key not in seen:
                seen.add(key)
                tally.act_bytes += float(st.nbytes())
        except (RuntimeError, NotImplementedError):  # a tensor without storage (a wrapper subclass)
            tally.act_bytes += float(t.numel() * t.element_size())
        return t

    handles = [m.register_forward_hook(_rnn_hook(tally)) for m in module.modules()
               if isinstance(m, torch.nn.RNNBase)]
    inputs, target = make_inputs(batch, device)
    try:
        with torch.autograd.graph.saved_tensors_hooks(pack, lambda t: t):
            with ModuleTracker() as tracker, _SdpaRedirect(), _make_mode(tally, tracker, rnn_names):
                out = module(*inputs)
                loss = loss_fn(out, inputs, target)
                loss.backward()
    finally:
        for h in handles:
            h.remove()
    tally.kernels += sum(_unfused_rnn_kernels(config, steps) for config, steps in tally.unfused_rnn)
    module.zero_grad(set_to_none=True)
    return tally


def count_ops(module, make_inputs, loss_fn, *, device: str = "meta", optimizer: str | None = "adamw",
              batches: tuple[int, int] = (2, 4)) -> OpFeatures:
    """Op-level features of one training step of ``module``.

    Parameters
    ----------
    module : torch.nn.Module
        Moved to ``device`` (on ``"meta"`` its parameters become storage-less; pass a module you own).
    make_inputs : callable ``(batch_size, device) -> (inputs tuple, target)``
        Synthetic batch maker (as :class:`perfmodel.measure.workload.Workload` has).
    loss_fn : callable ``(output, inputs, target) -> scalar tensor``
    device : {"meta", "cpu"}, default="meta"
    optimizer : {"adamw", "sgd", None}, default="adamw"
        Optimizer whose update is added analytically (:data:`OPTIMIZER_COST`).
    batches : (int, int), default=(2, 4)
        The two batch sizes traced; quantities are split into per-sample and per-step parts by their difference.

    Returns
    -------
    OpFeatures
    """
    import torch

    if not isinstance(module, torch.nn.Module):
        raise TypeError(f"count_ops expects a torch.nn.Module. Got {type(module).__name__}.")
    if device not in ("meta", "cpu"):
        raise ValueError(f"The 'device' parameter of count_ops must be 'meta' or 'cpu'. Got {device!r}.")
    if optimizer not in OPTIMIZER_COST:
        raise ValueError(f"The 'optimizer' parameter of count_ops must be 'adamw', 'sgd' or None. Got {optimizer!r}.")
    b1, b2 = (int(b) for b in batches)
    if not (0 < b1 < b2):
        raise ValueError(f"The 'batches' parameter of count_ops must be two increasing positive ints. Got {batches!r}.")
    dev = torch.device(device)
    module = module.to(dev)
    was_training = module.training
    module.train()
    try:
        t1 = _trace(module, make_inputs, loss_fn, b1, dev)
        t2 = _trace(module, make_inputs, loss_fn, b2, dev)
    finally:
        module.train(was_training)
    span = float(b2 - b1)

    def slope(a, b):
        return max((b - a) / span, 0.0)

    def intercept(a, b):
        return max(a - b1 * (b - a) / span, 0.0)

    flops = {c: slope(t1.flops[c], t2.flops[c]) for c in TRACED_CLASSES}
    bytes_ = {c: slope(t1.bytes[c], t2.bytes[c]) for c in TRACED_CLASSES}
    step_bytes = sum(intercept(t1.bytes[c], t2.bytes[c]) for c in TRACED_CLASSES)
    trainable = [p for p in module.parameters() if p.requires_grad]  # one optimizer kernel set per tensor
    n_params = count_params(module)
    f_per, b_per, k_per = OPTIMIZER_COST[optimizer]
    return OpFeatures(
        flops=flops, bytes=bytes_, step_bytes=float(step_bytes),
        optimizer_flops=f_per * n_params, optimizer_bytes=b_per * n_params,
        kernels=float(max(t1.kernels, t2.kernels) + k_per * len(trainable)),
        act_bytes=slope(t1.act_bytes, t2.act_bytes), params=n_params, device=device)


def count_workload_ops(workload, *, device: str = "meta", optimizer: str | None = "adamw") -> OpFeatures:
    """:func:`count_ops` for a :class:`~perfmodel.measure.workload.Workload` (zoo, Hugging Face or factory).

    On ``"meta"`` the workload's module is deep-copied first, so the caller's module keeps its weights; its
    batches are made on the CPU and moved to the meta device.

    Parameters
    ----------
    workload : Workload
        The workload to trace (:func:`~perfmodel.measure.workload.resolve_workload`).
    device : {"meta", "cpu"}, default="meta"
        Where to trace the step. On ``"cpu"`` the workload's own module is moved and traced.
    optimizer : {"adamw", "sgd", None}, default="adamw"
        Optimizer whose update is added analytically (:data:`OPTIMIZER_COST`).

    Returns
    -------
    OpFeatures
        What :func:`count_ops` returns for its module, batch maker and loss (batches 2 and 4).
    """
    import copy

    module = workload.module
    if device == "meta":
        module = copy.deepcopy(module)

    def make_inputs(batch, dev):
        inputs, target = workload.make_inputs(batch, "cpu" if dev.type == "meta" else dev)
        if dev.type == "meta":
            inputs = tuple(t.to(dev) for t in inputs)
            target = None if target is None else target.to(dev)
        return inputs, target

    return count_ops(module, make_inputs, workload.loss, device=device, optimizer=optimizer)


# ------------------------------------------------------------------------------------------------ recording
def workload_op_columns(spec: str, *, knobs: dict | None = None, seq_len: int | None = None,
                        optimizer: str | None = "adamw") -> dict:
    """The op columns of a model spec (zoo name, ``hf:...`` or factory), built and counted on the meta device.

    What the measuring worker records for each run (once per model). Raises on failure.
    """
    import torch

    from .workload import resolve_workload

    with torch.device("meta"):
        wl = resolve_workload(spec, knobs=knobs or {}, seq_len=seq_len)
    return count_workload_ops(wl, device="meta", optimizer=optimizer).to_columns()


def add_op_features(runs, *, overwrite: bool = False):
    """Backfill the op columns (:func:`op_column_names`) of a run history by rebuilding its zoo models by name.

    Each distinct (model, seq_len, optimizer) whose ``model`` is a zoo name (any name
    :func:`perfmodel.measure.zoo.known_models` lists, with its default knobs; a recorded ``seq_len`` is applied)
    is counted once on the meta device. Rows whose model cannot be rebuilt (not a zoo name, a Hugging Face or
    bring-your-own model, a build that fails) keep empty op columns; nothing else changes.

    Parameters
    ----------
    runs : DataFrame
        A run history (as :func:`perfmodel.io.load_runs` returns).
    overwrite : bool, default=False
        Recount rows that already have op columns (default: fill only the rows without them).

    Returns
    -------
    DataFrame
        A copy of ``runs`` with the op columns; ``.attrs["op_features_skipped"]`` maps each model name left empty
        to the reason.
    """
    import numpy as np
    import pandas as pd

    from .zoo import known_models

    if not isinstance(runs, pd.DataFrame):
        raise TypeError(f"add_op_features expects a DataFrame of runs. Got {type(runs).__name__}.")
    if "model" not in runs.columns:
        raise ValueError("add_op_features needs a 'model' column naming each run's model.")
    out = runs.copy()
    names = op_column_names()
    for c in names:
        if c not in out.columns:
            out[c] = pd.array([pd.NA] * len(out), dtype="Int64" if c == "op_feature_version" else "Float64")
    todo = np.ones(len(out), dtype=bool) if overwrite else out["op_feature_version"].isna().to_numpy()
    zoo = set(known_models())
    source = out["model_source"].astype("string") if "model_source" in out.columns else pd.Series(
        pd.NA, index=out.index, dtype="string")
    seq = pd.to_numeric(out["seq_len"], errors="coerce") if "seq_len" in out.columns else pd.Series(
        np.nan, index=out.index)
    opt = out["optimizer"].astype("string").fillna("adamw") if "optimizer" in out.columns else pd.Series(
        "adamw", index=out.index, dtype="string")
    skipped: dict = {}
    cache: dict = {}
    for i in np.flatnonzero(todo):
        model = str(out["model"].iloc[i])
        src = source.iloc[i]
        if model not in zoo or (not pd.isna(src) and str(src) not in ("zoo", "")):
            skipped.setdefault(model, "not a zoo model" if model not in zoo else f"model_source {src}")
            continue
        s = seq.iloc[i]
        key = (model, None if pd.isna(s) else int(s), str(opt.iloc[i]))
        if key not in cache:
            try:
                cache[key] = workload_op_columns(model, seq_len=key[1], optimizer=key[2] if key[2] in (
                    "adamw", "sgd") else "adamw")
            except Exception as exc:  # noqa: BLE001 - any failure leaves the row empty, reported
                cache[key] = None
                skipped.setdefault(model, f"{type(exc).__name__}: {str(exc).splitlines()[0] if str(exc) else ''}")
        cols = cache[key]
        if cols is None:
            continue
        for c in names:
            out.iloc[i, out.columns.get_loc(c)] = cols[c]
    out.attrs["op_features_skipped"] = skipped
    return out
