"""Hugging Face models built from a config only, with random weights (optional extra ``hf``: ``transformers``).

Spec: ``hf:<model type>[?key=value&...]`` or ``hf:<path/to/config.json>[?key=value&...]``.

* ``hf:gpt2``, ``hf:bert``, ``hf:llama?hidden_size=512&num_hidden_layers=4`` — the model type's default config
  (``AutoConfig.for_model``) with the overrides; values are read as int, float, ``true``/``false`` or text.
* ``hf:./my-config.json`` — a local config file (its ``architectures`` picks the class).
* ``head=causal-lm | masked-lm | classification | base`` overrides the head. By default: the config's
  ``architectures`` if it names one, else a masked-LM head for types that have one (BERT-like encoders), else a
  causal-LM head, else sequence classification, else the bare model.

Nothing is downloaded: a hub name (``hf:meta-llama/Llama-3-8B``) is refused with an error that says how to
build the model from its type or a local config instead. Inputs are random token ids of ``seq_len`` tokens
(default 128, the run's ``--seq-len``); the loss is next-token cross-entropy for a causal LM, cross-entropy
against the inputs for a masked LM, against class 0 for classification, and the mean hidden state for a bare
model.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from typing import Any
from urllib.parse import parse_qsl

__all__ = ["parse_hf_spec", "hf_workload", "DEFAULT_SEQ_LEN", "HEADS"]

DEFAULT_SEQ_LEN = 128
HEADS = ("causal-lm", "masked-lm", "classification", "base")
_HEAD_FAMILY = {"causal-lm": "decoder", "masked-lm": "encoder", "classification": "encoder", "base": None}


def _value(text: str):
    low = text.lower()
    if low in ("true", "false"):
        return low == "true"
    for cast in (int, float):
        try:
            return cast(text)
        except ValueError:
            pass
    return text


def parse_hf_spec(spec: str) -> tuple[str, bool, dict, str | None]:
    """Split ``hf:target?k=v`` into ``(target, is_file, overrides, head)``; raise ValueError on a bad form.

    Parameters
    ----------
    spec : str
        ``hf:<model type>[?key=value&...]`` or ``hf:<path/to/config.json>[?key=value&...]``.

    Returns
    -------
    target : str
        The model type or the config file's path.
    is_file : bool
        Whether ``target`` is a config file (it ends in ``.json`` or is an existing file).
    overrides : dict
        The ``key=value`` pairs, values read as int, float, bool or text; without ``head``.
    head : str or None
        The ``head=`` override (one of ``HEADS``), None when not given.

    Raises
    ------
    ValueError
        The spec does not start with ``hf:``, names no target, has malformed overrides or an unknown head, or
        looks like a Hub name (which would need a download).
    """
    if not spec.startswith("hf:"):
        raise ValueError(f"A Hugging Face model spec starts with 'hf:'. Got {spec!r}.")
    body = spec[3:]
    target, _, query = body.partition("?")
    if not target:
        raise ValueError(f"{spec!r} names no model type: use e.g. 'hf:gpt2' or 'hf:./config.json'.")
    overrides = {}
    if query:
        pairs = parse_qsl(query, keep_blank_values=True, strict_parsing=False)
        if not pairs or any(not k or v == "" for k, v in pairs):
            raise ValueError(f"The overrides of {spec!r} must be key=value pairs joined by '&'. Got {query!r}.")
        overrides = {k: _value(v) for k, v in pairs}
    head = overrides.pop("head", None)
    if head is not None and head not in HEADS:
        raise ValueError(f"head must be one of {', '.join(HEADS)}. Got {head!r} in {spec!r}.")
    is_file = target.endswith(".json") or os.path.isfile(target)
    if not is_file and ("/" in target or os.sep in target):
        raise ValueError(
            f"{spec!r} looks like a Hugging Face Hub name, which would need a download; perfmodel builds models "
            "from a config only. Give the model type with overrides (e.g. 'hf:llama?hidden_size=2048') or a local "
            "config.json ('hf:./config.json')."
        )
    return target, is_file, overrides, head


def _config(target: str, is_file: bool, overrides: dict):
    from transformers import AutoConfig, PretrainedConfig

    if is_file:
        if not os.path.isfile(target):
            raise FileNotFoundError(f"config file {target!r} does not exist")
        import json

        with open(target, encoding="utf-8") as fh:
            data = json.load(fh)
        model_type = data.get("model_type")
        if not model_type:
            raise ValueError(f"{target!r} has no 'model_type'; it is not a Hugging Face config.json.")
        data.update(overrides)
        data.pop("model_type")
        config = AutoConfig.for_model(model_type, **data)
    else:
        from transformers.models.auto.configuration_auto import CONFIG_MAPPING_NAMES

        if target not in CONFIG_MAPPING_NAMES:
            import difflib

            close = difflib.get_close_matches(target, list(CONFIG_MAPPING_NAMES), n=3, cutoff=0.5)
            hint = f" Did you mean {', '.join(close)}?" if close else ""
            raise ValueError(f"Unknown Hugging Face model type {target!r}.{hint} Known types are those of "
                             "transformers' CONFIG_MAPPING (e.g. gpt2, bert, llama); a local config.json works too.")
        config = AutoConfig.for_model(target, **overrides)
    assert isinstance(config, PretrainedConfig)
    known = set(type(config)().to_dict()) | set(getattr(type(config), "attribute_map", {}) or {})
    unknown = [k for k in overrides if k not in known]
    if unknown:
        raise ValueError(f"{type(config).__name__} has no attribute(s) {', '.join(map(repr, unknown))}.")
    return config


def _pick_head(config, head: str | None):
    import transformers
    from transformers.models.auto import modeling_auto as ma

    if head is None and getattr(config, "architectures", None):
        cls = getattr(transformers, config.architectures[0], None)
        if cls is not None:
            name = cls.__name__
            guessed = ("causal-lm" if "CausalLM" in name or "LMHead" in name else
                       "masked-lm" if "MaskedLM" in name else
                       "classification" if "SequenceClassification" in name else "base")
            return cls, guessed
    mt = config.model_type
    # model type -> class name (or names); the mappings differ in their value types
    table: dict[str, Mapping[str, Any]] = {
        "masked-lm": ma.MODEL_FOR_MASKED_LM_MAPPING_NAMES, "causal-lm": ma.MODEL_FOR_CAUSAL_LM_MAPPING_NAMES,
        "classification": ma.MODEL_FOR_SEQUENCE_CLASSIFICATION_MAPPING_NAMES, "base": ma.MODEL_MAPPING_NAMES}
    order = [head] if head else ["masked-lm", "causal-lm", "classification", "base"]
    for h in order:
        cls_name = table[h].get(mt)
        if isinstance(cls_name, (tuple, list)):
            cls_name = cls_name[0]
        if cls_name and hasattr(transformers, cls_name):
            return getattr(transformers, cls_name), h
    raise ValueError(f"transformers has no {head or 'training'} head for model type {mt!r}.")


def _max_positions(config) -> int | None:
    for key in ("max_position_embeddings", "n_positions", "max_seq_len", "seq_length"):
        v = getattr(config, key, None)
        if isinstance(v, int) and v > 0:
            return v
    return None


def hf_workload(spec: str, *, name: str | None = None, seq_len: int | None = None):
    """Build the :class:`~perfmodel.measure.workload.Workload` of a ``hf:`` spec (random weights, no download).

    Parameters
    ----------
    spec : str
        A ``hf:`` spec (see :func:`parse_hf_spec` and the module docstring).
    name : str, optional
        The workload's name; default the spec itself.
    seq_len : int, optional
        Tokens per sample; default ``DEFAULT_SEQ_LEN``. It must not exceed the model's positions.

    Returns
    -------
    Workload
        Source ``"hf"``, the family of the chosen head, the randomly initialised module, random token-id inputs
        and the head's loss; ``analytic_flops`` is None.

    Raises
    ------
    ImportError
        transformers (the ``hf`` extra) is not installed.
    ValueError
        A bad spec, an unknown model type or attribute, no suitable head, or ``seq_len`` above the model's
        positions.
    """
    try:
        import transformers  # noqa: F401
    except ImportError:
        raise ImportError("Hugging Face models need the 'hf' extra: pip install 'perfmodel[hf]' "
                          "(installs transformers)") from None
    import torch
    import torch.nn.functional as F

    from ._workload_types import Workload

    os.environ.setdefault("HF_HUB_OFFLINE", "1")  # never reach the network from a measured run
    target, is_file, overrides, head = parse_hf_spec(spec)
    config = _config(target, is_file, overrides)
    cls, head = _pick_head(config, head)
    seq = int(seq_len or DEFAULT_SEQ_LEN)
    limit = _max_positions(config)
    if limit is not None and seq > limit:
        raise ValueError(f"seq_len {seq} exceeds the model's {limit} positions; pass a smaller --seq-len.")
    module = cls._from_config(config) if hasattr(cls, "_from_config") else cls(config)
    vocab = int(getattr(config, "vocab_size", 1000) or 1000)

    def make_inputs(batch_size, device):
        return (torch.randint(0, vocab, (int(batch_size), seq), device=device),), None

    def loss(output, inputs, _target):
        ids = inputs[0]
        logits: Any = getattr(output, "logits", None)  # a tensor for the heads that have logits
        if head == "causal-lm":
            return F.cross_entropy(logits[:, :-1].reshape(-1, logits.shape[-1]).float(), ids[:, 1:].reshape(-1))
        if head == "masked-lm":
            return F.cross_entropy(logits.reshape(-1, logits.shape[-1]).float(), ids.reshape(-1))
        if head == "classification":
            return F.cross_entropy(logits.float(), torch.zeros(ids.shape[0], dtype=torch.long, device=ids.device))
        hidden = output[0] if isinstance(output, (tuple, list)) else output.last_hidden_state
        return hidden.float().mean()

    return Workload(name or spec, "hf", _HEAD_FAMILY[head], module, make_inputs, loss, None, seq,
                    checkpointing_supported=bool(getattr(module, "supports_gradient_checkpointing", False)))
