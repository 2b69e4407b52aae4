"""What a Hugging Face run says about itself, read without torch: shared by the importers and the HF callback.

Every function here takes plain values (a ``config.json`` dict, MLflow params as strings, a JSON file) and returns
plain values, so the MLflow importer, the output-dir importer and :class:`perfmodel.integrations.hf.PerfModelCallback`
map one run to the same record.
"""

from __future__ import annotations

import json
import math
import struct
from pathlib import Path

__all__ = ["params_from_config", "count_safetensors_params", "model_name_from_config", "precision_from_flags",
           "as_bool", "as_int", "as_float", "world_from_throughput", "FLOPS_METHOD"]

#: ``flops_method`` of a record whose FLOPs per sample come from the Trainer's ``total_flos``
#: (``6 · non-embedding params · tokens``, the Trainer's own estimate, summed over the run).
FLOPS_METHOD = "hf_total_flos"

# Architectures whose parameter count follows from config.json alone (decoder-only families whose layers are
# fully described by the config). Anything else is counted from model.safetensors, or not at all.
_LLAMA_LIKE = {"llama": False, "mistral": False, "qwen2": True}  # model_type -> q/k/v projections have biases


def as_bool(value) -> bool | None:
    """``True``/``False`` from a bool or the strings MLflow stores (``"True"``, ``"false"``, ``"1"``); else None."""
    if isinstance(value, bool):
        return value
    if value is None:
        return None
    text = str(value).strip().lower()
    if text in ("true", "1", "yes"):
        return True
    if text in ("false", "0", "no", ""):
        return False
    return None


def as_float(value) -> float | None:
    """A finite float from a number or a numeric string; None for anything else (``"None"``, ``""``, NaN)."""
    if value is None or isinstance(value, bool):
        return None
    try:
        out = float(value)
    except (TypeError, ValueError, OverflowError):  # OverflowError: an int beyond the float range (10**400)
        return None
    return out if math.isfinite(out) else None


def as_int(value) -> int | None:
    """A whole number from an int, an integral float or a numeric string; None otherwise."""
    out = as_float(value)
    if out is None or not out.is_integer():
        return None
    return int(out)


def _get(cfg: dict, *names, default=None):
    for name in names:
        value = cfg.get(name)
        if value is not None and str(value) != "None":
            return value
    return default


def params_from_config(cfg: dict) -> int | None:
    """Parameter count of the architecture a ``config.json`` (or the config fields in MLflow params) describes.

    Exact for GPT-2 (``model_type`` ``gpt2``) and the Llama-style decoders ``llama``, ``mistral`` and ``qwen2``
    (tied or untied output embeddings); None for any other architecture or a config missing a needed field.
    Values may be strings, as MLflow stores them.
    """
    kind = str(cfg.get("model_type", "")).strip().lower()
    tie = as_bool(cfg.get("tie_word_embeddings"))
    if kind == "gpt2":
        d, L, V, P = (as_int(_get(cfg, k)) for k in ("n_embd", "n_layer", "vocab_size", "n_positions"))
        if d is None or L is None or V is None or P is None:
            return None
        inner = as_int(_get(cfg, "n_inner")) or 4 * d
        layer = (2 * d) + (d * 3 * d + 3 * d) + (d * d + d) + (2 * d) + (d * inner + inner) + (inner * d + d)
        total = V * d + P * d + L * layer + 2 * d
        if tie is False:
            total += V * d
        return total
    if kind in _LLAMA_LIKE:
        d, L, V, inter, heads = (as_int(_get(cfg, k)) for k in
                                 ("hidden_size", "num_hidden_layers", "vocab_size", "intermediate_size",
                                  "num_attention_heads"))
        if d is None or L is None or V is None or inter is None or heads is None:
            return None
        kv = as_int(_get(cfg, "num_key_value_heads")) or heads
        hd = as_int(_get(cfg, "head_dim")) or d // heads
        qkv_bias = _LLAMA_LIKE[kind] or bool(as_bool(cfg.get("attention_bias")))
        o_bias = kind != "qwen2" and bool(as_bool(cfg.get("attention_bias")))
        mlp_bias = bool(as_bool(cfg.get("mlp_bias")))
        attn = d * heads * hd + 2 * d * kv * hd + heads * hd * d
        attn += (heads * hd + 2 * kv * hd) * qkv_bias + d * o_bias
        mlp = 3 * d * inter + (2 * inter + d) * mlp_bias
        total = V * d + L * (attn + mlp + 2 * d) + d
        if tie is not True:  # these families default to untied output embeddings (Qwen2 small models tie)
            total += V * d
        return total
    return None


def count_safetensors_params(folder: str | Path) -> int | None:
    """Elements of every tensor in ``model.safetensors`` (or the shards of ``model.safetensors.index.json``).

    Reads only the JSON headers (8-byte length + JSON), never the tensor data, and never a pickle. Hugging Face
    saves tied weights once, so this is the model's parameter count (plus any persistent buffers, which the
    common architectures do not save). None when there is no safetensors file.
    """
    folder = Path(folder)
    index = folder / "model.safetensors.index.json"
    if index.is_file():
        try:
            files = sorted(set(json.loads(index.read_text(encoding="utf-8"))["weight_map"].values()))
        except (OSError, ValueError, KeyError, TypeError, AttributeError, RecursionError):
            return None
        if not all(isinstance(f, str) and "/" not in f and "\\" not in f and f not in ("", ".", "..")
                   for f in files):
            return None  # shard names are plain file names next to the index
    elif (folder / "model.safetensors").is_file():
        files = ["model.safetensors"]
    else:
        return None
    total = 0
    for name in files:
        path = folder / name
        try:
            with open(path, "rb") as fh:
                (size,) = struct.unpack("<Q", fh.read(8))
                if size > 100_000_000:  # a header this large is not a safetensors header
                    return None
                header = json.loads(fh.read(size))
        except (OSError, struct.error, ValueError, RecursionError):
            return None
        if not isinstance(header, dict):
            return None
        for key, entry in header.items():
            if key == "__metadata__" or not isinstance(entry, dict):
                continue
            shape = entry.get("shape", [])
            if not isinstance(shape, list) or not all(isinstance(s, int) and not isinstance(s, bool) and s >= 0
                                                      for s in shape):
                return None  # not a safetensors header
            total += math.prod(shape)
    return total or None


def model_name_from_config(cfg: dict) -> str | None:
    """A model name from the architecture: ``<model_type>-<layers>x<width>`` (e.g. ``gpt2-12x768``).

    Named by architecture rather than by checkpoint, because the step time depends on the architecture only, and
    because ``config.json`` does not keep the checkpoint name that MLflow's copy of the config has: a run's
    callback record, its MLflow run and its output dir get one name. None without a ``model_type``.
    """
    kind = str(cfg.get("model_type") or "").strip()
    if not kind or kind == "None":
        return None
    layers = as_int(_get(cfg, "n_layer", "num_hidden_layers", "num_layers"))
    width = as_int(_get(cfg, "n_embd", "hidden_size", "d_model"))
    return f"{kind}-{layers}x{width}" if layers and width else kind


def precision_from_flags(*, bf16=None, fp16=None, tf32=None) -> str | None:
    """The schema's precision from the Trainer's flags: ``bf16``/``fp16`` (autocast), ``tf32``, else ``fp32``.

    Returns None when no flag is known at all (the source did not record them).
    """
    bf16, fp16, tf32 = as_bool(bf16), as_bool(fp16), as_bool(tf32)
    if bf16:
        return "bf16"
    if fp16:
        return "fp16"
    if tf32:
        return "tf32"
    if bf16 is None and fp16 is None:
        return None
    return "fp32"


def world_from_throughput(samples_per_s, steps_per_s, per_step_per_process: int, *, tolerance: float = 0.03):
    """Processes in a run from the Trainer's speed metrics, or None when they do not pin it down.

    The Trainer reports ``train_samples_per_second`` and ``train_steps_per_second`` over the same runtime, so
    their ratio is the global batch per optimizer step (``per-process batch × accumulation × processes``; exact
    with ``max_steps``, a little less in epoch mode when the last batch is short). Returns the integer multiple of
    ``per_step_per_process`` that the ratio is within ``tolerance`` of, else None.
    """
    samples, steps = as_float(samples_per_s), as_float(steps_per_s)
    if not samples or not steps or samples <= 0 or steps <= 0 or per_step_per_process <= 0:
        return None
    k = samples / steps / per_step_per_process
    n = round(k)
    if n < 1 or abs(k - n) > tolerance * n:
        return None
    return int(n)
