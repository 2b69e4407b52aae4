"""The shape of a transformer and the work it does: the one place the package counts its parameters and FLOPs.

A :class:`TransformerShape` is what a parallel layout divides and what its communication moves: layers ``L``,
hidden size ``d``, ``h`` query heads of size ``hd`` (``d/h`` by default), ``kv`` key/value heads (grouped-query
attention), an MLP of ``ffn`` hidden units (gated — SwiGLU, three matrices — or plain, two), a vocabulary ``V``,
and for a mixture of experts ``E`` routed experts of ``ffn_e`` hidden units, of which each token visits ``k``, plus
``s`` shared experts and ``n_dense`` leading dense layers (DeepSeek's ``first_k_dense_replace``).

**Parameters.** Per layer: attention ``d·hd·(2·h + 2·kv)`` (the Q and output projections ``h·hd`` wide, K and V
``kv·hd`` wide); a dense MLP ``m·d·ffn`` (``m`` = 3 gated, 2 plain); a mixture-of-experts layer ``(E + s)·m·d·ffn_e``
and a router ``d·E``. Embeddings ``V·d`` (twice when the output head is not tied), learned positions ``P·d``.
Biases and norms (``O(L·d)``) are left out; :func:`hf_config_shape` counts them for a config's exact total.

**FLOPs** (:func:`transformer_flops`, forward + backward of one sequence of ``seq`` tokens, the convention of
Megatron-LM (Narayanan et al. 2021, eq. 3), PaLM's appendix B and MosaicML's MFU: no saving counted for the
causal mask):

* dense (GEMM) work ``6·N_a·seq``: ``N_a`` the matmul parameters a token passes through — every layer's attention
  projections and MLP (a mixture's ``k + s`` experts and its router) and the output head ``V·d``; not the input
  embedding or the position table, which are lookups;
* attention scores and values ``12·L·h·hd·seq²`` (``QKᵀ`` and ``AV``, forward ``4·h·hd·seq²`` per layer, backward
  twice that);
* recomputation adds what is run again: ``full`` the whole forward pass (``2·N_a·seq + 4·L·h·hd·seq²``),
  ``selective`` the attention core only (``4·L·h·hd·seq²``; Korthikanti et al. 2022). Model FLOPs (what MFU is
  measured against) leave recomputation out; hardware FLOPs include it.

With ``h·hd = d`` and a dense model this is the familiar ``6·N·seq + 12·L·d·seq²``.

**A model given by its size only** (:func:`standard_shape`) gets the shape such models have: a Llama-style gated
MLP of ``8/3·d`` rounded up to a multiple of 256, heads of 128, ``d ≈ 128·L`` (the aspect ratio of GPT-3 175B,
Llama 7B and 405B: 128, 128 and 130), ``d`` rounded so that the heads divide over tensor-parallel degrees up to 8,
and ``L`` the whole number of layers that brings the parameter count nearest the size given.
"""

from __future__ import annotations

import json
import math
import numbers
import os
from dataclasses import asdict, dataclass, replace
from pathlib import Path
from typing import SupportsInt, cast

from ._validation import check_positive_float, check_positive_int

__all__ = ["TransformerShape", "TransformerFlops", "transformer_flops", "standard_shape", "hf_config_shape",
           "sequence_for_flops", "RECOMPUTE_MODES"]

#: Activation recomputation modes: nothing, the attention core (selective), every layer's forward pass (full).
RECOMPUTE_MODES = ("none", "selective", "full")


def _positive(value, name: str, where: str) -> int:
    return check_positive_int(value, name, where)


def _nonnegative(value, name: str, where: str) -> int:
    if value in (0, None):
        return 0
    return check_positive_int(value, name, where)


@dataclass(frozen=True)
class TransformerShape:
    """A decoder-only transformer's shape (dense or mixture of experts).

    Parameters
    ----------
    n_layers, d_model, n_heads : int
        Layers ``L``, hidden size ``d``, query heads ``h``.
    vocab : int, default=0
        Vocabulary ``V`` (0: embeddings left out).
    n_kv_heads : int, optional
        Key/value heads (grouped-query attention); default ``n_heads``.
    head_dim : int, optional
        Size of one head; default ``d_model // n_heads``.
    ffn_hidden : int, optional
        Hidden units of a dense layer's MLP; default ``4·d`` (plain) or ``8/3·d`` rounded up to 256 (gated).
    gated_mlp : bool, default=False
        Three MLP matrices (SwiGLU/GeGLU: gate, up, down) instead of two.
    tied_embeddings : bool, default=True
        The output head shares the input embedding (one ``V·d`` matrix).
    positions : int, default=0
        Learned absolute position embeddings (a ``positions × d`` table; 0: rotary or none).
    n_experts, experts_per_token, moe_ffn_hidden : int, default 0, 0, None
        Routed experts per mixture-of-experts layer, experts each token visits (top-k), and one expert's hidden
        units (default ``ffn_hidden``). ``n_experts`` 0: dense.
    n_shared_experts : int, default=0
        Experts every token visits besides the routed ones.
    n_dense_layers : int, default=0
        Leading layers of a mixture of experts that are dense (DeepSeek-V3: 3).

    Examples
    --------
    >>> s = TransformerShape(n_layers=32, d_model=4096, n_heads=32, vocab=32000, ffn_hidden=11008, gated_mlp=True,
    ...                      tied_embeddings=False)
    >>> s.params()
    6738149376
    """

    n_layers: int
    d_model: int
    n_heads: int
    vocab: int = 0
    n_kv_heads: int | None = None
    head_dim: int | None = None
    ffn_hidden: int | None = None
    gated_mlp: bool = False
    tied_embeddings: bool = True
    positions: int = 0
    n_experts: int = 0
    experts_per_token: int = 0
    moe_ffn_hidden: int | None = None
    n_shared_experts: int = 0
    n_dense_layers: int = 0

    def __post_init__(self):
        where = "TransformerShape"
        for name in ("n_layers", "d_model", "n_heads"):
            object.__setattr__(self, name, _positive(getattr(self, name), name, where))
        for name in ("vocab", "positions", "n_experts", "experts_per_token", "n_shared_experts", "n_dense_layers"):
            object.__setattr__(self, name, _nonnegative(getattr(self, name), name, where))
        for name in ("gated_mlp", "tied_embeddings"):
            if not isinstance(getattr(self, name), bool):
                raise TypeError(f"The {name!r} parameter of {where} must be a bool. Got {getattr(self, name)!r}.")
        kv = self.n_heads if self.n_kv_heads is None else _positive(self.n_kv_heads, "n_kv_heads", where)
        if self.n_heads % kv:
            raise ValueError(f"{where}: n_kv_heads={kv} must divide n_heads={self.n_heads} (grouped-query "
                             "attention shares each key/value head among whole groups of query heads).")
        object.__setattr__(self, "n_kv_heads", kv)
        if self.head_dim is None:
            if self.d_model % self.n_heads:
                raise ValueError(f"{where}: d_model={self.d_model} is not a multiple of n_heads={self.n_heads}; "
                                 "give head_dim.")
            object.__setattr__(self, "head_dim", self.d_model // self.n_heads)
        else:
            object.__setattr__(self, "head_dim", _positive(self.head_dim, "head_dim", where))
        if self.ffn_hidden is None:
            ffn = _round_up(8 * self.d_model / 3, 256) if self.gated_mlp else 4 * self.d_model
            object.__setattr__(self, "ffn_hidden", int(ffn))
        else:
            object.__setattr__(self, "ffn_hidden", _positive(self.ffn_hidden, "ffn_hidden", where))
        if self.n_experts:
            if not self.experts_per_token:
                raise ValueError(f"{where}: a mixture of experts (n_experts={self.n_experts}) needs "
                                 "experts_per_token (its top-k).")
            if self.experts_per_token > self.n_experts:
                raise ValueError(f"{where}: experts_per_token={self.experts_per_token} exceeds n_experts="
                                 f"{self.n_experts}.")
            if self.n_dense_layers >= self.n_layers:
                raise ValueError(f"{where}: n_dense_layers={self.n_dense_layers} leaves no mixture-of-experts "
                                 f"layer of the {self.n_layers}.")
            moe = self.ffn_hidden if self.moe_ffn_hidden is None else _positive(self.moe_ffn_hidden,
                                                                                  "moe_ffn_hidden", where)
            object.__setattr__(self, "moe_ffn_hidden", moe)
        else:
            if self.experts_per_token or self.n_shared_experts or self.n_dense_layers:
                raise ValueError(f"{where}: experts_per_token, n_shared_experts and n_dense_layers describe a "
                                 "mixture of experts; give n_experts too (or leave them out).")
            object.__setattr__(self, "moe_ffn_hidden", None)

    # ----------------------------------------------------------------------------------------- counts
    @property
    def is_moe(self) -> bool:
        """True for a mixture of experts."""
        return self.n_experts > 0

    @property
    def attention_width(self) -> int:
        """``h·hd``: the width of the attention scores' and values' products (``d`` unless heads are resized)."""
        assert self.head_dim is not None  # set by __post_init__
        return self.n_heads * self.head_dim

    @property
    def mlp_matrices(self) -> int:
        """3 for a gated MLP, 2 for a plain one."""
        return 3 if self.gated_mlp else 2

    def attention_params(self) -> int:
        """Parameters of one layer's attention projections.

        Returns
        -------
        int
            ``d·hd·(2·h + 2·kv)``.
        """
        assert self.head_dim is not None and self.n_kv_heads is not None  # set by __post_init__
        return self.d_model * self.head_dim * (2 * self.n_heads + 2 * self.n_kv_heads)

    def mlp_params(self, hidden: int | None = None) -> int:
        """Parameters of one MLP.

        Parameters
        ----------
        hidden : int, optional
            Its hidden units (one expert's: ``moe_ffn_hidden``); default a dense layer's ``ffn_hidden``.

        Returns
        -------
        int
            ``m·d·hidden``.
        """
        width = self.ffn_hidden if hidden is None else hidden
        assert width is not None  # ffn_hidden is set by __post_init__
        return self.mlp_matrices * self.d_model * width

    @property
    def moe_layers(self) -> int:
        """Layers with experts (0 for a dense model)."""
        return self.n_layers - self.n_dense_layers if self.is_moe else 0

    def layer_params(self, *, active: bool = False) -> int:
        """Parameters of all layers.

        Parameters
        ----------
        active : bool, default=False
            Count a mixture's routed experts as the ``k`` a token visits, not all ``E``.

        Returns
        -------
        int
            Attention, MLPs (experts and routers) of every layer; biases and norms left out.
        """
        dense = self.n_layers - self.moe_layers
        total = self.n_layers * self.attention_params() + dense * self.mlp_params()
        if self.is_moe:
            experts = (self.experts_per_token if active else self.n_experts) + self.n_shared_experts
            total += self.moe_layers * (experts * self.mlp_params(self.moe_ffn_hidden) + self.d_model * self.n_experts)
        return total

    def embedding_params(self) -> int:
        """Parameters of the embeddings.

        Returns
        -------
        int
            The input embedding, an untied output head and a learned position table.
        """
        return self.vocab * self.d_model * (1 if self.tied_embeddings else 2) + self.positions * self.d_model

    def params(self) -> int:
        """All parameters.

        Returns
        -------
        int
            :meth:`layer_params` + :meth:`embedding_params` (biases and norms left out).
        """
        return self.layer_params() + self.embedding_params()

    def active_params(self) -> int:
        """Parameters one token passes through.

        Returns
        -------
        int
            :meth:`params` with only the ``k + s`` experts a token visits per layer.
        """
        return self.layer_params(active=True) + self.embedding_params()

    def matmul_params(self, *, active: bool = True) -> int:
        """Parameters used as matmul weights for each token.

        Parameters
        ----------
        active : bool, default=True
            Count a mixture's visited experts only.

        Returns
        -------
        int
            The layers and the output head ``V·d``; not the input embedding or the position table (lookups).
        """
        return self.layer_params(active=active) + self.vocab * self.d_model

    def to_dict(self) -> dict:
        """The fields by name.

        Returns
        -------
        dict
            Plain Python types.
        """
        return asdict(self)

    def with_(self, **changes) -> TransformerShape:
        """A copy with some fields changed.

        Parameters
        ----------
        **changes
            Fields and their new values.

        Returns
        -------
        TransformerShape
            The copy, validated again.
        """
        return replace(self, **changes)


def _round_up(x: float, multiple: int) -> int:
    return int(math.ceil(x / multiple) * multiple)


@dataclass(frozen=True)
class TransformerFlops:
    """Forward + backward FLOPs of one sequence (:func:`transformer_flops`).

    Attributes
    ----------
    dense : float
        The GEMMs of the weights a token passes through: ``6·N_a·seq``.
    attention : float
        The attention scores and values: ``12·L·h·hd·seq²``.
    recompute : float
        What recomputation runs again (0 without it).
    """

    dense: float
    attention: float
    recompute: float = 0.0

    @property
    def model(self) -> float:
        """Model FLOPs (what MFU is measured against): ``dense + attention``."""
        return self.dense + self.attention

    @property
    def hardware(self) -> float:
        """Hardware FLOPs: model FLOPs plus recomputation."""
        return self.model + self.recompute


def transformer_flops(shape: TransformerShape | None, seq_len: int, *, recompute: str = "none",
                      frozen_weights: bool = False, matmul_params: float | None = None) -> TransformerFlops:
    """Forward + backward FLOPs of one sequence through ``shape`` (module docstring).

    Parameters
    ----------
    shape : TransformerShape
        The model.
    seq_len : int
        Tokens per sequence.
    recompute : {"none", "selective", "full"}, default="none"
        Activation recomputation: ``full`` runs each layer's forward pass again in the backward pass, ``selective``
        only the attention core.
    frozen_weights : bool, default=False
        The weights get no gradient (LoRA fine-tuning of a frozen base): the backward pass computes the
        activations' gradients only, ``4·N_a·seq`` of dense work instead of ``6·N_a·seq``.
    matmul_params : float, optional
        ``N_a`` as given (a model's stated size beside its shape) instead of the shape's
        :meth:`~TransformerShape.matmul_params`. Required when ``shape`` is None: then the attention term, which
        needs the shape, is left out.

    Returns
    -------
    TransformerFlops
        The dense, attention and recomputation parts.

    Examples
    --------
    >>> s = TransformerShape(n_layers=32, d_model=4096, n_heads=32, vocab=0)
    >>> round(transformer_flops(s, 4096).model / 1e12, 1)  # 6·N·seq + 12·L·d·seq², N = 12·L·d²
    184.7
    """
    if shape is not None and not isinstance(shape, TransformerShape):
        raise TypeError(f"transformer_flops needs a TransformerShape or None. Got {type(shape).__name__}.")
    if shape is None and matmul_params is None:
        raise ValueError("transformer_flops needs a shape, or matmul_params when the shape is not known.")
    seq = check_positive_int(seq_len, "seq_len", "transformer_flops")
    if recompute not in RECOMPUTE_MODES:
        raise ValueError(f"The 'recompute' parameter of transformer_flops must be one of "
                         f"{', '.join(RECOMPUTE_MODES)}. Got {recompute!r}.")
    if matmul_params is None:
        assert shape is not None  # refused above without matmul_params
        n_a = float(shape.matmul_params())
    else:
        n_a = float(check_positive_float(matmul_params, "matmul_params", "transformer_flops"))
    dense = (4.0 if frozen_weights else 6.0) * n_a * seq
    core = 0.0 if shape is None else 4.0 * shape.n_layers * shape.attention_width * seq * seq  # forward QKᵀ, AV
    attention = 3.0 * core
    extra = {"none": 0.0, "selective": core, "full": 2.0 * n_a * seq + core}[recompute]
    return TransformerFlops(dense=dense, attention=attention, recompute=extra)


def standard_shape(params: float, *, vocab: int = 32000, aspect: float = 128.0) -> TransformerShape:
    """The shape of a dense decoder of ``params`` parameters (module docstring, "given by its size only").

    ``d`` is the multiple of 1024 nearest ``(aspect·params/12)^(1/3)`` (of 512 below 4096, of 128 below 2048: so
    that its heads divide over tensor-parallel degrees up to 8, as real models' do), then ``L`` the whole number of
    layers nearest the size.

    Parameters
    ----------
    params : float
        Parameter count.
    vocab : int, default=32000
        Vocabulary (its ``V·d`` embedding counts towards ``params``).
    aspect : float, default=128
        Hidden size per layer, ``d / L``.

    Returns
    -------
    TransformerShape
        Gated MLP, heads of 128 (one head below ``d`` = 128), untied-free (tied) embeddings.

    Examples
    --------
    >>> s = standard_shape(7e9)
    >>> s.n_layers, s.d_model, s.n_heads
    (34, 4096, 32)
    """
    n = check_positive_float(params, "params", "standard_shape")
    v = 0 if vocab in (0, None) else check_positive_int(vocab, "vocab", "standard_shape")
    a = check_positive_float(aspect, "aspect", "standard_shape")
    raw = (a * n / 12.0) ** (1.0 / 3.0)
    step = 1024 if raw >= 4096 else 512 if raw >= 2048 else 128  # heads (d/128) divisible by 8, 4, 1
    d = max(128, _round_up(raw - step / 2, step))  # the nearest multiple

    def build(L: int, d: int) -> TransformerShape:
        return TransformerShape(n_layers=L, d_model=d, n_heads=max(1, d // 128), vocab=v, gated_mlp=True)

    while True:  # a model smaller than its embedding: a narrower width
        layer = build(1, d).layer_params()
        if n - v * d >= layer or d == 128:
            break
        d -= 128
    layer = build(1, d).layer_params()
    L = max(1, round((n - v * d) / layer))
    return build(L, d)


def sequence_for_flops(shape: TransformerShape, flops_per_sample: float, *, shortest: int = 128,
                       longest: int = 1 << 21) -> int | None:
    """The sequence length at which one sequence of ``shape`` costs ``flops_per_sample`` model FLOPs
    (:func:`transformer_flops`, forward and backward), or None when none in ``[shortest, longest]`` does.

    A decoder given by its size and FLOPs per sample but no sequence length states it implicitly: the FLOPs grow
    with the sequence (``6·N·s`` for the matrices, ``12·L·d·s²`` for attention), so only one length matches.

    Parameters
    ----------
    shape : TransformerShape
        The model (e.g. :func:`standard_shape` of its size).
    flops_per_sample : float
        Forward + backward FLOPs of one sequence.
    shortest, longest : int
        The lengths considered.

    Returns
    -------
    int or None

    Examples
    --------
    >>> s = standard_shape(7e9)
    >>> sequence_for_flops(s, transformer_flops(s, 4096).model)
    4096
    """
    target = check_positive_float(flops_per_sample, "flops_per_sample", "sequence_for_flops")
    lo, hi = int(shortest), int(longest)
    if transformer_flops(shape, lo).model > target * 1.005 or transformer_flops(shape, hi).model < target / 1.005:
        return None
    while hi - lo > 1:  # the FLOPs grow with the length: bisect on whole lengths
        mid = (lo + hi) // 2
        if transformer_flops(shape, mid).model < target:
            lo = mid
        else:
            hi = mid
    return min((lo, hi), key=lambda n: abs(transformer_flops(shape, n).model - target))


# ------------------------------------------------------------------------------------------ HF configs
_HF_KEYS = {
    "n_layers": ("num_hidden_layers", "n_layer", "num_layers"),
    "d_model": ("hidden_size", "n_embd", "d_model"),
    "n_heads": ("num_attention_heads", "n_head"),
    "vocab": ("vocab_size",),
}
#: model_type values whose MLP is gated (SwiGLU / GeGLU: gate, up and down projections, 3 matrices).
_GATED_MLP = frozenset({"llama", "mistral", "mixtral", "qwen2", "qwen2_moe", "qwen3", "qwen3_moe", "gemma",
                        "gemma2", "gemma3_text", "phi3", "olmo", "olmo2", "olmoe", "cohere", "internlm2", "stablelm",
                        "granite", "yi", "baichuan", "deepseek", "deepseek_v2", "deepseek_v3", "kimi_k2",
                        "gpt_oss"})
#: model_type values whose MLP is plain (up and down projections, 2 matrices).
_PLAIN_MLP = frozenset({"gpt2", "gpt_neox", "gptj", "gpt_bigcode", "opt", "bloom", "falcon", "phi", "starcoder2",
                        "mpt", "codegen"})
#: model_type values with learned absolute position embeddings (a positions × d table).
_LEARNED_POSITIONS = frozenset({"gpt2", "gpt_bigcode", "opt"})
_EXPERT_KEYS = ("num_local_experts", "num_experts", "n_routed_experts", "moe_num_experts")
_TOPK_KEYS = ("num_experts_per_tok", "num_experts_per_token", "moe_top_k", "top_k")
_EXPERT_FFN_KEYS = ("moe_intermediate_size", "expert_intermediate_size")


def _read_hf_config(config) -> tuple[dict, str]:
    """The config as a dict, and where it came from (a path, ``dict`` or the config class's name)."""
    if isinstance(config, dict):
        return dict(config), "dict"
    if isinstance(config, (str, os.PathLike)):
        path = Path(config)
        if path.is_dir():
            path = path / "config.json"
        if not path.is_file():
            raise FileNotFoundError(f"hf_config {str(config)!r}: no such file. Give the path of a Hugging Face "
                                    "config.json (or of the folder holding it), or a dict; nothing is downloaded.")
        try:
            with open(path, encoding="utf-8") as fh:
                data = json.load(fh)
        except json.JSONDecodeError as exc:
            raise ValueError(f"hf_config {str(path)!r} is not valid JSON ({exc.msg}, line {exc.lineno}).") from None
        except UnicodeDecodeError:
            raise ValueError(f"hf_config {str(path)!r} is not a UTF-8 text file.") from None
        if not isinstance(data, dict):
            raise ValueError(f"hf_config {str(path)!r} must hold a JSON object (a Hugging Face config). Got "
                             f"{type(data).__name__}.")
        return data, str(path)
    to_dict = getattr(config, "to_dict", None)  # a transformers PretrainedConfig (transformers is not imported)
    if callable(to_dict):
        data = to_dict()
        if isinstance(data, dict):
            return dict(data), type(config).__name__
    raise TypeError("The 'hf_config' parameter must be a path to a config.json, a dict or a transformers "
                    f"PretrainedConfig. Got {type(config).__name__}.")


def _hf_int(cfg: dict, keys: tuple, what: str, where: str, default=None, *, zero: bool = False) -> int:
    for key in keys:
        value = cfg.get(key)
        if value is None:
            continue
        if isinstance(value, bool) or not isinstance(value, numbers.Real) or not math.isfinite(float(value)) \
                or float(value) < (0 if zero else 1) or not float(value).is_integer():
            rule = "a whole number >= 0" if zero else "a positive whole number"
            raise ValueError(f"hf_config ({where}): {key!r} must be {rule}. Got {value!r}.")
        return int(cast(SupportsInt, value))  # int() takes any real number; numbers.Real declares no __int__
    if default is not None:
        return default
    names = " or ".join(repr(k) for k in keys)
    raise ValueError(f"hf_config ({where}): no {what}: the config has no {names} (model_type "
                     f"{cfg.get('model_type')!r}). Add it, or give the shape another way.")


def hf_config_shape(config) -> dict:
    """A decoder's shape and exact parameter count from a Hugging Face config (dense or mixture of experts).

    Keys: ``L`` = ``num_hidden_layers`` (GPT-2: ``n_layer``), ``d`` = ``hidden_size`` (``n_embd``), ``h`` =
    ``num_attention_heads`` (``n_head``), ``kv`` = ``num_key_value_heads`` (default ``h``), ``hd`` = ``head_dim``
    (default ``d/h``), ``ffn`` = ``intermediate_size`` (GPT-2: ``n_inner``, default ``4·d``), ``V`` =
    ``vocab_size``; experts from ``num_local_experts`` / ``num_experts`` / ``n_routed_experts``, top-k from
    ``num_experts_per_tok``, an expert's width from ``moe_intermediate_size`` (default ``ffn``), shared experts from
    ``n_shared_experts``, leading dense layers from ``first_k_dense_replace``. The MLP is gated for the model types
    that are (Llama, Mistral, Qwen, Gemma, DeepSeek...; else when ``hidden_act`` is ``silu``); the head is tied per
    ``tie_word_embeddings`` (default true, as in ``transformers``); learned positions (GPT-2's ``n_positions``) add
    ``positions·d``; norms are ``d`` (RMSNorm, configs with ``rms_norm_eps``) or ``2·d`` (LayerNorm) twice per
    layer and once at the end; biases (GPT-2; ``attention_bias`` / ``mlp_bias`` when true) add ``(h + 2·kv)·hd +
    d`` and ``(m − 1)·ffn + d``. GPT-2 small gives 124,439,808 and Llama-2 7B 6,738,415,616, their published
    counts. Attention variants that change the projections' sizes (DeepSeek's multi-head latent attention) are
    counted as plain attention of the config's heads.

    Parameters
    ----------
    config : str, os.PathLike, dict or transformers.PretrainedConfig
        A ``config.json`` path (or the folder holding it), its contents as a dict, or a config object with
        ``to_dict()``. Read locally; nothing is downloaded.

    Returns
    -------
    dict
        ``shape`` (:class:`TransformerShape`), ``params`` (all parameters, biases and norms included),
        ``active_params``, ``matmul_params`` (what a token multiplies by: :meth:`TransformerShape.matmul_params`),
        ``lookups`` (which embeddings are lookups, or None), ``formula`` and ``source``; and for convenience the
        shape's ``n_layers, d_model, n_heads, n_kv_heads, head_dim, ffn, vocab, gated_mlp, tied_embeddings,
        positions``.

    Raises
    ------
    ValueError
        A key the shape needs is missing or not a whole number (the message names it), or the config is an
        encoder-decoder model.
    TypeError, FileNotFoundError
        Not a path, dict or config object; no such file.

    Examples
    --------
    >>> cfg = {"model_type": "gpt2", "n_layer": 12, "n_embd": 768, "n_head": 12, "vocab_size": 50257,
    ...        "n_positions": 1024}
    >>> hf_config_shape(cfg)["params"]
    124439808
    """
    cfg, where = _read_hf_config(config)
    mt = str(cfg.get("model_type") or "")
    if cfg.get("is_encoder_decoder"):
        raise ValueError(f"hf_config ({where}): an encoder-decoder config (model_type {mt!r}); only decoder-only "
                         "models are planned. Pass params= and the decoder's shape instead.")
    gpt2_style = mt == "gpt2" or "n_embd" in cfg
    L = _hf_int(cfg, _HF_KEYS["n_layers"], "layer count", where)
    d = _hf_int(cfg, _HF_KEYS["d_model"], "hidden size", where)
    h = _hf_int(cfg, _HF_KEYS["n_heads"], "attention head count", where)
    V = _hf_int(cfg, _HF_KEYS["vocab"], "vocabulary size", where)
    kv = _hf_int(cfg, ("num_key_value_heads",), "key/value head count", where, default=h)
    if cfg.get("head_dim") is None and d % h:
        raise ValueError(f"hf_config ({where}): the hidden size {d} is not a multiple of the {h} heads, and the "
                         "config gives no 'head_dim'.")
    hd = _hf_int(cfg, ("head_dim",), "head size", where, default=d // h)
    ffn = _hf_int(cfg, ("intermediate_size", "n_inner"), "MLP width", where, default=4 * d if gpt2_style else None)
    act = str(cfg.get("hidden_act") or cfg.get("activation_function") or "")
    if mt in _GATED_MLP:
        gated, why = True, f"model_type {mt!r}"
    elif mt in _PLAIN_MLP or gpt2_style:
        gated, why = False, f"model_type {mt!r}"
    else:
        gated = act.lower() in ("silu", "swish", "swiglu")
        why = f"assumed from hidden_act={act!r}" if act else "assumed: no hidden_act"
    tied = cfg.get("tie_word_embeddings", True)
    if not isinstance(tied, bool):
        raise ValueError(f"hf_config ({where}): 'tie_word_embeddings' must be true or false. Got {tied!r}.")
    positions = 0
    if mt in _LEARNED_POSITIONS or gpt2_style:
        positions = _hf_int(cfg, ("n_positions", "max_position_embeddings"), "position count", where)
    experts = _hf_int(cfg, _EXPERT_KEYS, "expert count", where, default=0, zero=True)
    moe = {}
    if experts > 1:
        moe = {"n_experts": experts,
               "experts_per_token": _hf_int(cfg, _TOPK_KEYS, "experts per token (top-k)", where),
               "moe_ffn_hidden": _hf_int(cfg, _EXPERT_FFN_KEYS, "expert MLP width", where, default=ffn),
               "n_shared_experts": _hf_int(cfg, ("n_shared_experts", "num_shared_experts"), "shared experts", where,
                                           default=0, zero=True),
               "n_dense_layers": _hf_int(cfg, ("first_k_dense_replace",), "leading dense layers", where, default=0,
                                         zero=True)}
    shape = TransformerShape(n_layers=L, d_model=d, n_heads=h, vocab=V, n_kv_heads=kv, head_dim=hd, ffn_hidden=ffn,
                             gated_mlp=gated, tied_embeddings=tied, positions=positions, **moe)
    layer_norm = "rms_norm_eps" not in cfg  # RMSNorm has a scale only; LayerNorm a scale and a bias
    norm = (2 if layer_norm else 1) * d
    attn_bias = bool(cfg.get("attention_bias", gpt2_style))
    mlp_bias = bool(cfg.get("mlp_bias", gpt2_style))
    m = shape.mlp_matrices
    extra_layer = 2 * norm + (((h + 2 * kv) * hd + d) if attn_bias else 0) + (((m - 1) * ffn + d) if mlp_bias
                                                                               else 0)
    extra = L * extra_layer + norm
    params = shape.params() + extra
    active = shape.active_params() + extra
    lookups = " and ".join(x for x in ("the untied input embedding" if not tied else "",
                                       "the position table" if positions else "") if x)
    parts = ["attention 2·d·(h + kv)·hd", f"{'gated ' if gated else ''}MLP {m}·d·ffn ({why})"]
    if moe:
        parts[-1] = (f"{'gated ' if gated else ''}experts (E + shared)·{m}·d·ffn_e + router d·E ({why}; "
                     f"{moe['n_dense_layers']} leading dense layers)")
    if attn_bias or mlp_bias:
        parts.append("biases")
    parts.append(f"2 {'LayerNorms 2·d' if layer_norm else 'RMSNorms d'}")
    emb = f"vocab·d ({'tied' if tied else 'untied: x2'})" + (" + positions·d" if positions else "")
    values = f"L={L}, d={d}, h={h}, kv={kv}, hd={hd}, ffn={ffn}, vocab={V}" + (
        f", positions={positions}" if positions else "") + (
        f", E={experts}, k={moe['experts_per_token']}, ffn_e={moe['moe_ffn_hidden']}, "
        f"shared={moe['n_shared_experts']}" if moe else "")
    formula = f"HF config{f' ({mt})' if mt else ''}: L·({' + '.join(parts)}) + {emb} + final norm with {values}"
    return {"shape": shape, "n_layers": L, "d_model": d, "n_heads": h, "n_kv_heads": kv, "head_dim": hd, "ffn": ffn,
            "vocab": V, "gated_mlp": gated, "tied_embeddings": tied, "positions": positions, "params": int(params),
            "active_params": int(active), "matmul_params": int(shape.matmul_params()), "lookups": lookups or None,
            "formula": formula, "source": where}
