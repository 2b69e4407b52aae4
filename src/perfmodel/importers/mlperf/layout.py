"""The layout of a language-model run (tensor, pipeline and context parallel degrees, micro-batch, ...), read from
the launch config of its system (:func:`implementation_layout`).

The language-model benchmarks (``gpt3``, ``llama2_70b_lora``, ``llama31_405b``) of NVIDIA, and of the submitters
who run copies of NVIDIA's code, are NeMo programs started by ``run_and_time.sh``; the launch config
(``config_<system>.sh``, found as for the precision: :func:`~perfmodel.importers.mlperf.configs.select_configs`)
exports the run's settings as environment variables, and the implementation itself says which variable sets
which NeMo/Megatron setting, and its default. Nothing here knows a variable's name: the bindings are read from
the implementation folder of the chosen config, in two forms:

- a Hydra YAML key bound to a variable, ``tensor_model_parallel_size: ${oc.decode:${oc.env:TP,1}}`` (the default
  after the comma; none: the variable must be set). E.g. v4.0 NVIDIA ``llama2_70b_lora/implementations/nemo/
  conf/megatron_gpt_peft_tuning_config.yaml`` binds ``TP``, ``PP``, ``CP`` (default 1 each), ``MBS`` (1),
  ``SP`` (False), ``VP`` (1) and ``ACG``/``ACM``/``ACL`` (activation checkpointing, null); v4.0 NVIDIA
  ``gpt3/implementations/nemo/conf/custom.yaml`` binds ``TENSOR_MODEL_PARALLEL``, ``PIPELINE_MODEL_PARALLEL``,
  ``MICRO_BATCH_SIZE`` (no defaults), ``INTERLEAVED_PIPELINE`` (12), ``SEQ_PARALLEL`` (True) and
  ``ACT_CKPT_GRANULARITY`` (null); v5.0 NVIDIA ``llama31_405b/.../conf/custom.yaml`` adds ``CONTEXT_PARALLEL``
  (4) and ``use_distributed_optimizer: ${oc.env:USE_DIST_OPTIMIZER,True}``.
- a Hydra override on ``run_and_time.sh``'s command line, ``model.tensor_model_parallel_size=${TENSOR_MODEL_PARALLEL}``,
  with the script's default ``: "${SEQ_PARALLEL:=True}"`` (v3.0 / v3.1 NVIDIA ``gpt3/implementations/pytorch/
  run_and_time.sh``, which also turns ``INTERLEAVED_PIPELINE=0`` into ``null``: no interleaving). An override
  outranks the YAML, as in Hydra.

A key bound twice to different variables or defaults in one folder is not used. Where the implementation's Python
code is NeMo 2 (it imports ``nemo.lightning``), the YAML is the script's own and a key counts only where that code
reads it (``cfg.model.tensor_model_parallel_size``): v5.0 ``llama31_405b`` binds activation checkpointing in its
YAML but its ``pretrain.py`` never reads it, so ``recompute`` is left empty there. NeMo 1 code reads its model
config itself (the YAML is NeMo's ``megatron_gpt_config``, overridden).

The columns:

- ``tp``, ``pp``, ``cp``, ``micro_batch_size`` from ``tensor_model_parallel_size``, ``pipeline_model_parallel_size``,
  ``context_parallel_size``, ``micro_batch_size``; ``vp`` from ``virtual_pipeline_model_parallel_size`` (``null``
  or unset where ``pp`` = 1: 1, no pipeline to interleave).
- ``cp`` where the implementation has no context-parallel setting at all (NeMo 1 GPT-3): 1 only where the log's
  ``gradient_accumulation_steps`` (the number of micro-batches per step: Megatron's ``get_num_microbatches()``
  in v3.0 NVIDIA ``gpt3/.../custom_callbacks.py``, ``MINIBS / micro_batch_size`` in v5.0 ``pretrain.py``) makes
  ``dp = global_batch / (accumulation × micro_batch_size)`` equal ``gpu_count / (tp × pp)``; else empty.
- ``dp`` = ``gpu_count / (tp × pp × cp)``.
- ``sequence_parallel`` from ``sequence_parallel`` (0 where ``tp`` = 1: no tensor-parallel ranks to split the
  sequence over).
- ``recompute`` from ``activations_checkpoint_granularity``: null -> ``none``, ``selective`` -> ``selective``,
  ``full`` with ``activations_checkpoint_method`` ``uniform`` -> ``full`` (every layer, in groups); ``full`` with
  ``block`` (the first N layers of each stage only) is left empty.
- ``zero_stage`` 1 where ``use_distributed_optimizer`` is true (Megatron's distributed optimizer shards the
  optimizer state), 0 where false; empty where the implementation has no such key (NeMo 1's
  ``distributed_fused_adam`` is chosen by name, not stated as a stage).

A layout is given only where it fits the run: only configs whose ``DGXNNODES`` / ``DGXNGPU``, where stated, are
the system's count; ``tp × pp × cp`` divides the device count; the global batch divides by
``dp × micro_batch_size``; and, where the log states its micro-batch count, ``global_batch = accumulation ×
micro_batch_size × dp``. Where several candidate configs are found, they must give the same layout.
"""

from __future__ import annotations

import re
from collections.abc import Mapping

from .catalogue import LLM_SHAPES
from .configs import Configs, impl_folder, select_configs, selection_files
from .devices import gpus_per_node
from .log import as_int

__all__ = ["LAYOUT_KEYS", "implementation_layout", "implementation_bindings"]

#: The NeMo / Megatron settings read, by key.
LAYOUT_KEYS = ("tensor_model_parallel_size", "pipeline_model_parallel_size", "virtual_pipeline_model_parallel_size",
               "context_parallel_size", "micro_batch_size", "sequence_parallel", "activations_checkpoint_granularity",
               "activations_checkpoint_method", "use_distributed_optimizer")
_KEYS = "|".join(LAYOUT_KEYS)
_ENV = r"\$\{oc\.env:([A-Za-z_]\w*)(?:,([^{}]*))?\}"
#: ``key: ${oc.decode:${oc.env:VAR,default}}`` or ``key: ${oc.env:VAR,default}`` (a comment may follow).
_YAML_BINDING = re.compile(rf"^\s*({_KEYS})\s*:\s*(?:\$\{{oc\.decode:{_ENV}\}}|{_ENV})\s*(?:#.*)?$")
#: ``model.key=${VAR}`` on a command line (``+``/``++`` prefixes and nested keys such as ``model.optim.key``).
_OVERRIDE = re.compile(rf"""(?:^|\s)\+{{0,2}}model\.(?:\w+\.)*({_KEYS})"""
                       r"""=["']?\$\{?([A-Za-z_]\w*)\}?["']?(?=\s|\\|$)""")
_RUN_DEFAULT = re.compile(r"""^:\s+["']?\$\{([A-Za-z_]\w*):?=([^}]*)\}["']?""")
_NULL_IF_ZERO = re.compile(r"""\[\s*"?\$\{?([A-Za-z_]\w*)\}?"?\s*==?\s*"?0"?\s*\]\s*&&\s*\1=null""")
_TRUE, _FALSE = frozenset({"true", "1", "yes", "on"}), frozenset({"false", "0", "no", "off"})
_NULL = frozenset({"null", "none", "~", ""})


def _yaml_bindings(files: Mapping[str, str], folder: str) -> dict:
    found: dict = {}
    for path in sorted(p for p in files if p.endswith((".yaml", ".yml")) and impl_folder(p) == folder):
        for line in files[path].splitlines():
            m = _YAML_BINDING.match(line)
            if m:
                var, default = (m.group(2), m.group(3)) if m.group(2) else (m.group(4), m.group(5))
                found.setdefault(m.group(1), set()).add((var, None if default is None else default.strip(), path))
    return found


def _override_bindings(files: Mapping[str, str], folder: str) -> dict:
    found: dict = {}
    for path in sorted(p for p in files if p.rsplit("/", 1)[-1] == "run_and_time.sh" and impl_folder(p) == folder):
        text = files[path]
        defaults = {m.group(1): m.group(2).strip().strip("\"'") for m in map(_RUN_DEFAULT.match, text.splitlines())
                    if m}
        nulled = set(_NULL_IF_ZERO.findall(text))
        for m in _OVERRIDE.finditer(text):
            var = m.group(2)
            default = defaults.get(var)
            note = path + (f" ({var}=0 -> null)" if var in nulled else "")
            found.setdefault(m.group(1), set()).add((var, default, note))
    return found


_NEMO2 = re.compile(r"\bnemo\.lightning\b|from nemo import lightning")


def _nemo2(files: Mapping[str, str], folder: str) -> bool:
    """Whether the folder's Python code is NeMo 2 (imports ``nemo.lightning``)."""
    return any(p.endswith(".py") and "lightning" in t and impl_folder(p) == folder and _NEMO2.search(t)
               for p, t in files.items())


def _read_by_code(files: Mapping[str, str], folder: str, key: str) -> bool:
    """Whether the folder's Python code reads a config key (``cfg.model.key``, ``cfg["key"]``, ``.get("key"``)."""
    pat = re.compile(rf"\.{key}\b|\[\s*['\"]{key}['\"]\s*\]|\.get\(\s*['\"]{key}['\"]")
    return any(p.endswith(".py") and key in t and impl_folder(p) == folder and pat.search(t)
               for p, t in files.items())


def implementation_bindings(files: Mapping[str, str], folder: str) -> dict:
    """Which launch-config variable sets each NeMo setting of :data:`LAYOUT_KEYS` in one implementation folder.

    Parameters
    ----------
    files : mapping of str to str
        Path -> text of a benchmark's implementation files (YAML configs, ``run_and_time.sh``, Python files),
        paths as in the results repository.
    folder : str
        The implementation folder (the path part after ``implementations/``).

    Returns
    -------
    dict
        ``{key: (variable, default, where)}``: ``default`` is the text after the comma of ``${oc.env:VAR,
        default}`` or ``run_and_time.sh``'s ``: "${VAR:=default}"`` (None: none); ``where`` names the file.
        Keys bound ambiguously, or (NeMo 2 code) not read by the code, are left out.
    """
    overrides, yaml = _override_bindings(files, folder), _yaml_bindings(files, folder)
    nemo2 = _nemo2(files, folder)
    out = {}
    for key in LAYOUT_KEYS:
        found = overrides.get(key) or yaml.get(key)
        if not found or len({(v, d) for v, d, _ in found}) != 1:
            continue
        if nemo2 and key in yaml and not overrides.get(key) and not _read_by_code(files, folder, key):
            continue  # NeMo 2: the script's own YAML; a key its code does not read sets nothing
        var, default, where = sorted(found)[0]
        out[key] = (var, default, where)
    return out


def _value(key: str, bindings: dict, variables: dict):
    """``(text, evidence)`` of a setting for one config, or ``(None, why)`` where it is not stated."""
    if key not in bindings:
        return None, "not bound"
    var, default, where = bindings[key]
    if var in variables:
        value, path, _ = variables[var]
        if value is None:
            return None, f"{var} not readable in {path}"
        text, source = value, f"{var}={value} ({path.rsplit('/', 1)[-1]})"
    elif default is not None:
        text, source = default, f"{var} unset, default {default} ({where.rsplit('/', 1)[-1]})"
    else:
        return None, f"{var} unset"
    if "-> null" in where and text.strip() == "0":
        text = "null"
    return text.strip().strip("\"'"), source


def _positive(text):
    n = as_int(text)
    return n if n is not None and n >= 1 else None


def _flag(text):
    low = str(text).strip().lower()
    return 1 if low in _TRUE else 0 if low in _FALSE else None


def _recompute(granularity, method):
    g = None if granularity is None else str(granularity).strip().lower()
    if g in _NULL:
        return "none"
    if g == "selective":
        return "selective"
    if g == "full" and method is not None and str(method).strip().lower() == "uniform":
        return "full"
    return None


def _config_layout(cf: Configs, path: str, files: Mapping[str, str], gpu_count: int, gbs: float | None,
                   accumulation: float | None) -> tuple[dict | None, str]:
    """The layout one config states for a run of ``gpu_count`` devices, with the evidence (or None, why)."""
    variables = cf.variables(path)
    if "*" in variables:
        return None, f"{path}: not readable"
    bindings = implementation_bindings(files, impl_folder(path))
    raw, notes = {}, []
    for key in LAYOUT_KEYS:
        raw[key], why = _value(key, bindings, variables)
        if raw[key] is not None:
            notes.append(f"{key}: {why}")
    tp, pp = _positive(raw["tensor_model_parallel_size"]), _positive(raw["pipeline_model_parallel_size"])
    mbs = _positive(raw["micro_batch_size"])
    if tp is None or pp is None or mbs is None:
        return None, f"{path}: tensor/pipeline parallel size or micro-batch not stated"
    cp = _positive(raw["context_parallel_size"])
    if cp is None and "context_parallel_size" in bindings:
        return None, f"{path}: context_parallel_size not readable"
    if cp is None:  # no context parallelism in the implementation: 1 only where the log's micro-batch count says so
        dp_log = gbs / (accumulation * mbs) if gbs and accumulation else None
        if dp_log is None or dp_log * tp * pp != gpu_count:
            return None, f"{path}: no context-parallel setting, and the log does not fix the data-parallel degree"
        cp = 1
        notes.append(f"context_parallel_size: none in the implementation; 1 by the log's {accumulation:g} "
                     f"micro-batches of {mbs} per step (dp {dp_log:g})")
    if gpu_count % (tp * pp * cp):
        return None, f"{path}: tp {tp} x pp {pp} x cp {cp} does not divide {gpu_count} devices"
    dp = gpu_count // (tp * pp * cp)
    if gbs and gbs % (dp * mbs):
        return None, f"{path}: global batch {gbs:g} not divisible by dp {dp} x micro-batch {mbs}"
    if gbs and accumulation and gbs != accumulation * mbs * dp:
        return None, f"{path}: global batch {gbs:g} != {accumulation:g} micro-batches x {mbs} x dp {dp}"
    vp_text = raw["virtual_pipeline_model_parallel_size"]
    if vp_text is None:  # not stated: with one stage there is nothing to interleave
        vp = 1 if pp == 1 else None
        if pp == 1:
            notes.append("virtual pipeline: 1 (one pipeline stage)")
    elif vp_text.lower() in _NULL:  # null: no interleaving
        vp = 1
    else:
        vp = _positive(vp_text)
        vp = None if pp == 1 and vp != 1 else vp
    sp = raw["sequence_parallel"]
    dist = raw["use_distributed_optimizer"]
    layout = {
        "tp": tp, "pp": pp, "vp": vp, "cp": cp, "dp": dp, "micro_batch_size": mbs,
        "sequence_parallel": 0 if tp == 1 else (None if sp is None else _flag(sp)),
        "recompute": (_recompute(raw["activations_checkpoint_granularity"], raw["activations_checkpoint_method"])
                      if "activations_checkpoint_granularity" in bindings else None),
        "zero_stage": None if dist is None or _flag(dist) is None else _flag(dist),
    }
    return layout, "; ".join(notes)


def implementation_layout(files: Mapping[str, str], system: str, system_info: Mapping | None = None, *,
                          device: str | None = None, global_batch_size: float | None = None,
                          accumulation: float | None = None) -> dict | None:
    """The layout the launch config of a system's language-model run states (the module docstring).

    Parameters
    ----------
    files : mapping of str to str
        Path -> text of the benchmark's implementation files (``config_*.sh``, READMEs, YAML configs,
        ``run_and_time.sh``, Python files; see :func:`~perfmodel.importers.mlperf.is_implementation_file`).
    system : str
        The system's name (``results/<system>/``).
    system_info : mapping, optional
        The parsed system description: ``number_of_nodes`` and ``accelerators_per_node`` give the device count
        (required: without it there is no layout).
    device : str, optional
        The run's device type, for finding configs named for it (as for the precision).
    global_batch_size : float, optional
        The log's global batch (sequences per step), checked against the layout.
    accumulation : float, optional
        The log's ``gradient_accumulation_steps`` (micro-batches per step), checked against the layout.

    Returns
    -------
    dict or None
        ``tp``, ``pp``, ``vp``, ``cp``, ``dp``, ``micro_batch_size``, ``sequence_parallel``, ``recompute``,
        ``zero_stage`` (None where not stated), ``layout_source`` (``implementation_config`` where the config
        is identified as the system's, ``implementation_configs`` where every candidate agrees),
        ``layout_config`` (the config's path; several joined by ``;``) and ``layout_evidence`` (where each
        value comes from); None where no config gives a layout that fits the run.

    Raises
    ------
    TypeError
        If ``files`` is not a mapping.
    """
    if not isinstance(files, Mapping):
        raise TypeError(f"implementation_layout expects a mapping of path -> text. Got {type(files).__name__}.")
    per_node = as_int(system_info.get("accelerators_per_node")) if isinstance(system_info, Mapping) else None
    nodes = as_int(system_info.get("number_of_nodes")) if isinstance(system_info, Mapping) else None
    if not per_node or not nodes or per_node < 1 or nodes < 1:
        return None
    cf = Configs(selection_files(files))
    found = select_configs(cf, system, system_info, device=device)
    if found is None:
        return None
    how, source, chosen = found
    # a config for another size is not this run's (a README may name the configs of several sizes)
    chosen = [p for p in chosen if all(cf.settings(p).get(var, (None,))[0] in (None, want)
                                       for var, want in (("DGXNNODES", nodes), ("DGXNGPU", per_node)))]
    layouts = []
    for path in chosen:
        layout, evidence = _config_layout(cf, path, files, per_node * nodes, global_batch_size, accumulation)
        if layout is None:
            return None
        layouts.append((layout, evidence))
    if not layouts or any(lay != layouts[0][0] for lay, _ in layouts):
        return None
    return {**layouts[0][0], "layout_source": source, "layout_config": ";".join(chosen),
            "layout_evidence": f"{how}: {layouts[0][1]}"}


#: The columns :func:`layout_columns` gives every record, in order.
LAYOUT_RECORD_COLUMNS = ("micro_batch_size", "tp", "pp", "vp", "cp", "dp", "sequence_parallel", "recompute",
                         "zero_stage", "gpus_per_node", "n_layers", "d_model", "n_heads", "n_kv_heads", "ffn_hidden",
                         "vocab", "n_experts", "experts_per_token", "moe_ffn_hidden", "active_params",
                         "layout_source", "layout_config", "layout_evidence")


def layout_columns(benchmark: str, implementation: Mapping[str, str] | None, system: str | None,
                   system_info: Mapping | None, gpu_type: str | None, global_batch_size: float | None,
                   accumulation: float | None) -> dict:
    """The layout and shape columns of a run record (:data:`LAYOUT_RECORD_COLUMNS`): for a language-model
    benchmark (:data:`~perfmodel.importers.mlperf.catalogue.LLM_SHAPES`), the catalogue's shape, the devices per
    NVLink domain (:func:`~perfmodel.importers.mlperf.devices.gpus_per_node`) and the layout its launch config
    states (:func:`implementation_layout`); None elsewhere, and for what is not stated."""
    out = dict.fromkeys(LAYOUT_RECORD_COLUMNS)
    shape = LLM_SHAPES.get(benchmark)
    if shape is None:
        return out
    out.update(n_layers=shape.n_layers, d_model=shape.d_model, n_heads=shape.n_heads, n_kv_heads=shape.n_kv_heads,
               ffn_hidden=shape.ffn_hidden, vocab=shape.vocab, n_experts=shape.n_experts,
               experts_per_token=shape.experts_per_token or None, moe_ffn_hidden=shape.moe_ffn_hidden,
               active_params=shape.active_params())
    info = system_info if isinstance(system_info, Mapping) else {}
    out["gpus_per_node"] = gpus_per_node(gpu_type, as_int(info.get("accelerators_per_node")))
    if implementation and system:
        found = implementation_layout(implementation, system, info, device=gpu_type,
                                      global_batch_size=global_batch_size, accumulation=accumulation)
        if found is not None:
            out.update(found)
    return out
