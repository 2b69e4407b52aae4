"""Build data/public_megatron_bridge.csv from NVIDIA Megatron-Bridge's LLM pre-training performance tables.

Source: https://github.com/NVIDIA-NeMo/Megatron-Bridge (Apache-2.0), files ``docs/performance-summary.md`` (the
latest NeMo container release) and ``docs/performance-summary-archive.md`` (the earlier releases): markdown tables
of measured pre-training throughput of NVIDIA's performance recipes (``scripts/performance``) per release, system
(DGX-H100, DGX-B200, DGX-B300, DGX-GB200, DGX-GB300), model, GPU count, precision and parallel layout, with
``Tokens / sec / GPU`` and ``Model TFLOP / sec / GPU``. Each pre-training table row is one measured configuration
and becomes one run-history row in perfmodel's schema. SFT and LoRA tables are not imported.

The script reads both files from a git snapshot (no network): ``--git-dir`` a bare or non-bare clone (e.g. the one
the ``fetch`` tool brings) at ``--commit`` (default HEAD), or
``--docs`` a directory holding copies of the two files (then ``--commit`` must name the commit they came from).

Usage::

    PYTHONPATH=src python scripts/derive_public_megatron_bridge.py \\
        --git-dir CLONE --out data/public_megatron_bridge.csv

Derivations (stated once here, repeated in data/README.md):

* ``step_time_s = GBS · seq / (Tokens/sec/GPU · #-GPUs)``: the global batch's tokens over the measured global
  throughput.
* ``gpu_count = #-GPUs`` (every device of the job, whatever its tensor/pipeline/context/expert layout) and
  ``batch_size = GBS / #-GPUs`` (samples per device per optimizer step, as in ``data/mlperf_steps.csv``): the
  work per device-step is then the job's work over its devices; it is fractional where GBS is not a multiple of
  the GPU count, which perfmodel's schema allows only where devices split a replica (TP x PP x CP > 1: every such
  row here); a fractional row with TP x PP x CP = 1 would be left out. The micro-batch (``micro_batch_size``) and
  the table's gradient accumulation (``ga_reported``) are kept; perfmodel's ``grad_accum`` is left empty.
* The layout, in the schema's columns (``perfmodel.schema.LAYOUT_COLUMNS``): ``global_batch_size = GBS``,
  ``tp``, ``pp``, ``cp`` as in the table; ``vp`` and ``ep`` as in the table, where a cell ``n/a`` is a degree of 1
  (no interleaved schedule: the recipes' ``virtual_pipeline_model_parallel_size`` None; no expert parallelism);
  the raw cells are kept in ``vp_reported`` / ``ep_reported``, the table's FSDP column (0 = off, else the FSDP
  degree) in ``fsdp``. ``dp = #-GPUs / (TP x PP x CP)``. ``zero_stage``: 3 where FSDP > 0 (Megatron FSDP with
  ``data_parallel_sharding_strategy="optim_grads_params"``), 1 otherwise (the recipes' Megatron distributed
  optimizer), empty for the Muon rows (Kimi K2: a layer-wise distributed optimizer, not a ZeRO stage); the
  recipe files are cited in ``zero_stage_source``. ``sequence_parallel = 1`` iff TP > 1: the performance
  recipes' rule (``WorkloadBaseConfig.sequence_parallel`` in ``scripts/performance/utils/utils.py``, applied by
  ``set_workload_base_configs`` in ``scripts/performance/utils/overrides.py``, releases r0.2.0 - r0.6.0; every
  flat recipe in ``src/megatron/bridge/perf_recipes`` at the commit sets it the same way). ``recompute`` is not
  written: the recipes' recomputation is set per release, model and system (partial full recomputation of N
  layers, selective recomputation of named modules such as ``moe_act`` or ``mla_up_proj``, CPU offloading of
  layers) and was not resolved per row. ``gpus_per_node`` = devices per NVLink domain: 8 for DGX-H100/B200/B300,
  72 for DGX-GB200/GB300 (NVL72 racks).
* The model's shape (``n_layers``, ``d_model``, ``n_heads``, ``n_kv_heads``, ``ffn_hidden``, ``vocab``,
  ``n_experts``, ``experts_per_token``, ``moe_ffn_hidden``, plus ``dense_layers`` and ``shared_experts``) from the
  model providers of the same repository (table ``SHAPES``, each with its file and commit in ``shape_source``).
* ``flops_per_sample`` (one sequence, forward + backward) is NVIDIA's own count, recovered from the row:
  ``Model TFLOP/sec/GPU · 1e12 / (Tokens/sec/GPU) · seq`` (``flops_method=reported``). For a mixture of experts
  it counts the active parameters' FLOPs, as the recipes' MFU does.
* ``params`` is the model's *total* parameter count (every expert), from the model's own publication (table
  ``MODELS`` below, with its source); ``active_params`` the parameters one token passes through. Models whose
  count is not cited here (the Nemotron 3 family, DeepSeek V4 Flash) are left out.
* ``precision``: ``FP8``, ``FP8-CS`` (per-tensor current scaling), ``FP8-MX`` / ``MXFP8`` (32-element block
  scaling) -> ``fp8`` (all run on the FP8 tensor cores); ``BF16`` -> ``bf16``; ``NVFP4`` rows are left out
  (perfmodel's spec table has no FP4 peaks). ``precision_reported`` keeps the label. The 25.09 tables state no
  precision per row and are left out.
* A cell ``a (b)`` gives two measured configurations (the footnotes: another quantisation granularity, or another
  layout): one row with every ``a``, one with every ``b`` (cells without parentheses shared). In the model column
  a parenthesis annotates the model (``DeepSeekV3 (w/o MTP)``) and goes to ``note``, with any footnote name, the
  bullet lines under a model's own table (``Muon optimizer was used for pre-training Kimi-K2.``) and, where the
  table's GA disagrees with ``GBS / (MBS · GPUs / (TP · PP · CP))``, that disagreement (GA is not used).
* ``gpu_type``: DGX-H100 -> H100-SXM5-80GB, DGX-B200 -> B200, DGX-B300 -> B300, DGX-GB200 -> GB200, DGX-GB300 ->
  GB300. ``nodes``: 8 GPUs per DGX node, 4 per GB200/GB300 compute tray (as MLPerf's GB200 systems).
"""

from __future__ import annotations

import argparse
import re
import subprocess
import sys
from pathlib import Path

import pandas as pd

SOURCE_REPO = "https://github.com/NVIDIA-NeMo/Megatron-Bridge"
SOURCE_PATHS = ("docs/performance-summary.md", "docs/performance-summary-archive.md")
#: model label -> (name in perfmodel, family, total params, active params, source of the counts)
MODELS = {
    "LLAMA3_8B": ("llama3-8b", "decoder", 8_030_261_248, 8_030_261_248,
                  "Meta Llama 3 model card (meta-llama/Meta-Llama-3-8B): 8,030,261,248 parameters"),
    "LLAMA3_70B": ("llama3-70b", "decoder", 70_553_706_496, 70_553_706_496,
                   "Meta Llama 3 model card (meta-llama/Meta-Llama-3-70B): 70,553,706,496 parameters"),
    "LLAMA3.1_405B": ("llama3.1-405b", "decoder", 405_853_388_800, 405_853_388_800,
                      "Meta Llama 3.1 model card (meta-llama/Llama-3.1-405B): 405,853,388,800 parameters"),
    "DeepSeekV3": ("deepseek-v3", "moe", 671e9, 37e9,
                   "DeepSeek-V3 Technical Report (arXiv:2412.19437): 671B total, 37B activated per token"),
    "GPT OSS 120B": ("gpt-oss-120b", "moe", 116.8e9, 5.1e9,
                     "OpenAI gpt-oss model card (2025): gpt-oss-120b 116.8B total, 5.1B active per token"),
    "Qwen3_30B_a3B": ("qwen3-30b-a3b", "moe", 30.5e9, 3.3e9,
                      "Qwen3 model card (Qwen/Qwen3-30B-A3B): 30.5B total, 3.3B activated"),
    "Qwen3_235B_a22B": ("qwen3-235b-a22b", "moe", 235e9, 22e9,
                        "Qwen3 model card (Qwen/Qwen3-235B-A22B): 235B total, 22B activated"),
    "Kimi_K2": ("kimi-k2", "moe", 1.04e12, 32e9,
                "Kimi K2 model card (moonshotai/Kimi-K2-Base): 1.04T total, 32B activated"),
}
_R030 = "8301abfc0d5667cf7c681fb5d2c7d08c7db98c99"  # branch r0.3.0 (the 26.02 container), where the providers still live
_HEAD = "067f987df03b8355b03192d88d70f1709fedf51a"
_LLAMA_SRC = (f"Megatron-Bridge src/megatron/bridge/models/llama/llama_provider.py @ {_R030}: {{cls}} (num_query_groups 8 "
              f"from Llama3ModelProvider); vocab 128256: the perf recipes' cfg.tokenizer.vocab_size "
              f"(src/megatron/bridge/perf_recipes/llama/h100/llama3.py @ {_HEAD})")
#: model name -> shape (perfmodel.schema.SHAPE_COLUMNS, plus dense_layers: layers with a dense MLP, and
#: shared_experts), and where it is stated. ffn_hidden is the dense MLP's width; empty where no layer is dense.
SHAPES = {
    "llama3-8b": (dict(n_layers=32, d_model=4096, n_heads=32, n_kv_heads=8, ffn_hidden=14336, vocab=128256,
                       n_experts=0, dense_layers=32), _LLAMA_SRC.format(cls="Llama3ModelProvider8B")),
    "llama3-70b": (dict(n_layers=80, d_model=8192, n_heads=64, n_kv_heads=8, ffn_hidden=28672, vocab=128256,
                        n_experts=0, dense_layers=80), _LLAMA_SRC.format(cls="Llama3ModelProvider70B")),
    "llama3.1-405b": (dict(n_layers=126, d_model=16384, n_heads=128, n_kv_heads=8, ffn_hidden=53248, vocab=128256,
                           n_experts=0, dense_layers=126), _LLAMA_SRC.format(cls="Llama31ModelProvider405B")),
    "deepseek-v3": (dict(n_layers=61, d_model=7168, n_heads=128, n_kv_heads=128, ffn_hidden=18432, vocab=129280,
                         n_experts=256, experts_per_token=8, moe_ffn_hidden=2048, dense_layers=3, shared_experts=1),
                    "DeepSeek-V3's Hugging Face config.json as copied in Megatron-Bridge tests/unit_tests/models/"
                    f"deepseek/test_deepseek_bridges.py @ {_HEAD} (fixture ds_v3_config: num_hidden_layers 61, "
                    "hidden_size 7168, num_attention_heads 128, num_key_value_heads 128 (MLA), intermediate_size "
                    "18432, moe_intermediate_size 2048, n_routed_experts 256, num_experts_per_tok 8, n_shared_experts "
                    "1, first_k_dense_replace 3, vocab_size 129280); the MTP layer is not counted"),
    "gpt-oss-120b": (dict(n_layers=36, d_model=2880, n_heads=64, n_kv_heads=8, vocab=201088, n_experts=128,
                          experts_per_token=4, moe_ffn_hidden=2880, dense_layers=0, shared_experts=0),
                     f"Megatron-Bridge src/megatron/bridge/models/gpt_oss/gpt_oss_provider.py @ {_R030}: "
                     "GPTOSSProvider120B (36 layers, 128 experts) and GPTOSSProvider (hidden 2880, 64 heads, 8 query "
                     "groups, top-4, moe_ffn_hidden_size 2880, vocab 201088); every layer is a mixture of experts "
                     "(ffn_hidden_size 2880 unused); alternate layers use a 128-token sliding window"),
    "qwen3-30b-a3b": (dict(n_layers=48, d_model=2048, n_heads=32, n_kv_heads=4, vocab=151936, n_experts=128,
                           experts_per_token=8, moe_ffn_hidden=768, dense_layers=0, shared_experts=0),
                      f"Megatron-Bridge src/megatron/bridge/models/qwen/qwen_provider.py @ {_R030}: "
                      "Qwen3MoEModelProvider30B_A3B (and Qwen3MoEModelProvider: 128 experts, top-8, vocab 151936); "
                      "every layer is a mixture of experts (ffn_hidden_size 6144 unused)"),
    "qwen3-235b-a22b": (dict(n_layers=94, d_model=4096, n_heads=64, n_kv_heads=4, vocab=151936, n_experts=128,
                             experts_per_token=8, moe_ffn_hidden=1536, dense_layers=0, shared_experts=0),
                        f"Megatron-Bridge src/megatron/bridge/models/qwen/qwen_provider.py @ {_R030}: "
                        "Qwen3MoEModelProvider235B_A22B (and Qwen3MoEModelProvider: 128 experts, top-8, vocab "
                        "151936); every layer is a mixture of experts (ffn_hidden_size 12288 unused)"),
    "kimi-k2": (dict(n_layers=61, d_model=7168, n_heads=64, ffn_hidden=18432, vocab=163840, n_experts=384,
                     experts_per_token=8, moe_ffn_hidden=2048, dense_layers=1, shared_experts=1),
                f"Megatron-Bridge src/megatron/bridge/models/kimi/kimi_provider.py @ {_R030}: KimiK2Provider "
                "(61 layers, hidden 7168, 64 heads, ffn 18432, 384 experts of 2048, top-8, 1 shared expert, first "
                "layer dense, vocab 163840); MLA attention: the provider states no KV-head count (n_kv_heads empty)"),
}
_SHAPE_KEYS = ("n_layers", "d_model", "n_heads", "n_kv_heads", "ffn_hidden", "vocab", "n_experts", "experts_per_token",
               "moe_ffn_hidden", "dense_layers", "shared_experts")
#: the data-parallel sharding of the performance recipes (zero_stage) and where it is stated
ZERO_FSDP = (3, "Megatron FSDP (the table's FSDP column > 0): data_parallel_sharding_strategy optim_grads_params "
                "(scripts/performance/utils/overrides.py _set_megatron_fsdp_overrides @ r0.5.0; "
                f"src/megatron/bridge/recipes/common.py _pretrain_common @ {_HEAD})")
ZERO_DISTOPT = (1, "Megatron distributed optimizer: cfg.ddp.use_distributed_optimizer = True in the pre-training "
                   f"recipes (src/megatron/bridge/recipes/common.py _pretrain_common @ {_HEAD}; "
                   "src/megatron/bridge/recipes/<family>/<model>.py pretrain configs @ r0.5.0)")
ZERO_MUON = (None, "Muon optimizer (the table's note): the recipes switch Megatron's distributed optimizer off and "
                   "use dist_muon's layer-wise distributed optimizer (src/megatron/bridge/recipes/kimi/kimi_k2.py, "
                   "scripts/performance/configs/kimi/kimi_llm_pretrain.py @ r0.5.0): not one of the ZeRO stages")
SYSTEMS = {"DGX-H100": ("H100-SXM5-80GB", 8), "DGX-B200": ("B200", 8), "DGX-B300": ("B300", 8),
           "DGX-GB200": ("GB200", 4), "DGX-GB300": ("GB300", 4)}
#: devices per NVLink domain (gpus_per_node): 8 in a DGX H100/B200/B300, 72 in a GB200/GB300 NVL72 rack
NVLINK_DOMAIN = {"DGX-H100": 8, "DGX-B200": 8, "DGX-B300": 8, "DGX-GB200": 72, "DGX-GB300": 72}
PRECISIONS = {"FP8": "fp8", "FP8-CS": "fp8", "FP8-MX": "fp8", "MXFP8": "fp8", "BF16": "bf16"}
EXCLUDED_PRECISIONS = {"NVFP4": "NVFP4: perfmodel's spec table has no FP4 peaks"}
_LAYOUT = (("FSDP", "fsdp"), ("TP", "tp"), ("PP", "pp"), ("CP", "cp"), ("VP", "vp"), ("EP", "ep"))
COLUMNS = ["run_id", "status", "model", "family", "params", "active_params", "flops_per_sample", "flops_method",
           "batch_size", "gpu_count", "gpu_type", "precision", "fp32_mode", "seq_len", "step_time_s",
           "samples_per_s", "nodes", "source", "protocol", "release", "global_batch_size", "micro_batch_size",
           "ga_reported", "fsdp", "tp", "pp", "cp", "vp", "ep", "throughput_tokens_per_s_per_gpu",
           "model_tflops_per_gpu_reported", "system_reported", "precision_reported", "note", "params_source",
           "source_repo", "source_path", "source_commit",
           # the schema's layout columns (perfmodel.schema.LAYOUT_COLUMNS) and the model's shape (SHAPE_COLUMNS)
           "dp", "zero_stage", "sequence_parallel", "gpus_per_node", "vp_reported", "ep_reported", "zero_stage_source",
           "n_layers", "d_model", "n_heads", "n_kv_heads", "ffn_hidden", "vocab", "n_experts", "experts_per_token",
           "moe_ffn_hidden", "dense_layers", "shared_experts", "shape_source"]
PROTOCOL = ("NVIDIA Megatron-Bridge performance recipe (scripts/performance) in the NeMo container of the release; "
            "throughput as published in the performance summary; step_time_s = GBS x seq / (tokens/s/GPU x GPUs)")


#: where each SHAPES entry is stated, checked against a clone by check_shapes: (commit, path, class or fixture,
#: {field in that file: SHAPES key}); a class's own fields first, then its bases' (the first class holding a field)
_LLAMA = "src/megatron/bridge/models/llama/llama_provider.py"
_LLAMA_FIELDS = {"num_layers": "n_layers", "hidden_size": "d_model", "num_attention_heads": "n_heads",
                 "num_query_groups": "n_kv_heads", "ffn_hidden_size": "ffn_hidden"}
_MOE_FIELDS = {"num_layers": "n_layers", "hidden_size": "d_model", "num_attention_heads": "n_heads",
               "num_query_groups": "n_kv_heads", "vocab_size": "vocab", "num_moe_experts": "n_experts",
               "moe_router_topk": "experts_per_token", "moe_ffn_hidden_size": "moe_ffn_hidden"}
SHAPE_CHECKS = {
    "llama3-8b": (_R030, _LLAMA, ["Llama3ModelProvider8B", "Llama3ModelProvider"], _LLAMA_FIELDS),
    "llama3-70b": (_R030, _LLAMA, ["Llama3ModelProvider70B", "Llama3ModelProvider"], _LLAMA_FIELDS),
    "llama3.1-405b": (_R030, _LLAMA, ["Llama31ModelProvider405B", "Llama31ModelProvider", "Llama3ModelProvider"],
                      _LLAMA_FIELDS),
    "gpt-oss-120b": (_R030, "src/megatron/bridge/models/gpt_oss/gpt_oss_provider.py",
                     ["GPTOSSProvider120B", "GPTOSSProvider"], _MOE_FIELDS),
    "qwen3-30b-a3b": (_R030, "src/megatron/bridge/models/qwen/qwen_provider.py",
                      ["Qwen3MoEModelProvider30B_A3B", "Qwen3MoEModelProvider"], _MOE_FIELDS),
    "qwen3-235b-a22b": (_R030, "src/megatron/bridge/models/qwen/qwen_provider.py",
                        ["Qwen3MoEModelProvider235B_A22B", "Qwen3MoEModelProvider"], _MOE_FIELDS),
    "kimi-k2": (_R030, "src/megatron/bridge/models/kimi/kimi_provider.py", ["KimiK2Provider"],
                {**_MOE_FIELDS, "ffn_hidden_size": "ffn_hidden", "num_query_groups": None}),
    "deepseek-v3": (_HEAD, "tests/unit_tests/models/deepseek/test_deepseek_bridges.py", ["ds_v3_config"],
                    {"num_hidden_layers": "n_layers", "hidden_size": "d_model", "num_attention_heads": "n_heads",
                     "num_key_value_heads": "n_kv_heads", "intermediate_size": "ffn_hidden", "vocab_size": "vocab",
                     "n_routed_experts": "n_experts", "num_experts_per_tok": "experts_per_token",
                     "moe_intermediate_size": "moe_ffn_hidden", "n_shared_experts": "shared_experts",
                     "first_k_dense_replace": "dense_layers"}),
}


def _block(text: str, name: str) -> str:
    """The body of ``class name`` or ``def name`` in a Python file: up to the next top-level or same-level
    definition."""
    m = re.search(rf"^( *)(?:class|def) {re.escape(name)}\b.*?$", text, re.M)
    if not m:
        raise ValueError(f"no class or function {name}")
    indent = len(m.group(1))
    end = re.compile(rf"^ {{0,{indent}}}(?:@|class |def )", re.M).search(text, m.end())
    return text[m.end(): end.start() if end else len(text)]


def check_shapes(git_dir: Path) -> None:
    """Check SHAPES against the files they cite (raises ValueError on the first disagreement)."""
    for model, (commit, path, blocks, fields) in SHAPE_CHECKS.items():
        text = _git(git_dir, "show", f"{commit}:{path}")
        bodies = [_block(text, b) for b in blocks]
        for field, key in fields.items():
            if key is None:  # the file must not state it (left empty here)
                if any(re.search(rf"^\s+{field}\s*:", b, re.M) for b in bodies):
                    raise ValueError(f"{model}: {path} states {field}, which SHAPES leaves empty")
                continue
            for body in bodies:
                m = re.search(rf"^\s+\"?{field}\"?\s*(?::\s*[\w\[\], ]+)?\s*[=:]\s*(\d+)", body, re.M)
                if m:
                    break
            else:
                raise ValueError(f"{model}: {path}@{commit[:9]} does not state {field}")
            if int(m.group(1)) != SHAPES[model][0].get(key):
                raise ValueError(f"{model}: {path} states {field} = {m.group(1)}, SHAPES has "
                                 f"{key} = {SHAPES[model][0].get(key)}")
    recipe = _git(git_dir, "show", f"{_HEAD}:src/megatron/bridge/perf_recipes/llama/h100/llama3.py")
    if set(re.findall(r"cfg\.tokenizer\.vocab_size = (\d+)", recipe)) != {"128256"}:
        raise ValueError("the Llama perf recipes' cfg.tokenizer.vocab_size is not 128256 throughout")


def _git(git_dir: Path, *args: str) -> str:
    return subprocess.run(["git", "--git-dir", str(git_dir), *args], capture_output=True, text=True,
                          check=True).stdout


def _clean(cell: str) -> str:
    """A cell without footnote markers, links or bold."""
    cell = re.sub(r"\[\^[^\]]*\]", "", cell)
    cell = re.sub(r"\[([^\]]*)\]\([^)]*\)", r"\1", cell)
    return cell.replace("*", "").strip()


def parse_tables(text: str, path: str) -> list[dict]:
    """Every data row of every table, as {header: raw cell}, with its release, table kind and heading, and the
    bullet lines written under a ``Model:`` heading after its table (``_notes``: e.g. "Muon optimizer was used for
    pre-training Kimi-K2."); rows with more or fewer cells than their header come back with ``_malformed`` set."""
    rows, release, kind, heading, header = [], None, None, None, None
    notes: dict = {}
    for line in text.splitlines():
        if line.startswith("- ") and heading is not None and heading.startswith("Model:"):
            # under a model's table a bullet is about that model; after a system's table (25.11's last) the
            # bullets are about the whole release, not that system: they are left to data/README.md
            notes.setdefault((release, kind, heading), []).append(_clean(line[2:]))
            continue
        m = re.match(r"^## (\S+) NeMo Container", line)
        if m:
            release, kind, heading = m.group(1), None, None
            continue
        if line.startswith("### "):
            kind = line[4:].strip()
            continue
        if line.startswith("#### "):
            heading = line[5:].strip()
            continue
        if not line.startswith("|"):
            header = None
            continue
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if header is None:
            header = cells
        elif set("".join(cells)) <= set("-: "):
            continue
        else:
            rows.append({"_path": path, "_release": release, "_kind": kind, "_heading": heading,
                         "_malformed": len(cells) != len(header), "_line": line, **dict(zip(header, cells))})
    for r in rows:
        r["_notes"] = notes.get((r["_release"], r["_kind"], r["_heading"]), [])
    return rows


def _variants(row: dict, fields) -> list[dict]:
    """One dict per measured configuration of a row: cells ``a (b)`` split into a first and a second."""
    first, second, split = {}, {}, False
    for f in fields:
        cell = _clean(row.get(f, ""))
        m = re.fullmatch(r"(.*?)\s*\((.*)\)", cell)
        if f == "Model":  # "DeepSeekV3 (w/o MTP)": an annotation of the model, not a second configuration
            first[f] = second[f] = cell
        elif m and m.group(1):
            first[f], second[f], split = m.group(1).strip(), m.group(2).strip(), True
        else:
            first[f] = second[f] = cell
    return [first, second] if split else [first]


def _int(cell: str) -> int | None:
    cell = cell.replace(",", "")
    return None if cell in ("", "n/a", "-") else int(cell)


def build(texts: dict, commit: str) -> tuple[pd.DataFrame, pd.DataFrame]:
    """The run rows, and the table rows left out with the reason (one row each)."""
    out, dropped = [], []
    for path, text in texts.items():
        for r in parse_tables(text, path):
            if r["_kind"] != "Pre-Training Performance":
                continue
            head = r["_heading"] or ""
            fields = [k for k in r if not k.startswith("_")]
            where = f"{r['_release']} {head}"

            def drop(reason, label=None):
                dropped.append({"release": r["_release"], "heading": head, "row": label or r["_line"],
                                "reason": reason, "source_path": path})

            if r["_malformed"]:
                drop("malformed row: its cells do not match the header")
                continue
            for v in _variants(r, fields):
                model_cell = v.get("Model") or head.removeprefix("Model:").strip()
                m = re.fullmatch(r"(.*?)\s*\((.*)\)", model_cell)
                model_raw, annotation = (m.group(1).strip(), m.group(2).strip()) if m else (model_cell, "")
                system_raw = v.get("System") or head.removeprefix("System:").strip()
                label = f"{model_raw} | {system_raw} | " + " | ".join(v.get(f, "") for f in fields
                                                                    if f not in ("Model", "System"))
                if "Precision" not in v:
                    drop("the table states no precision per row", label)
                    continue
                prec_raw = v["Precision"]
                if prec_raw in EXCLUDED_PRECISIONS:
                    drop(EXCLUDED_PRECISIONS[prec_raw], label)
                    continue
                if prec_raw not in PRECISIONS:
                    raise ValueError(f"{where}: unknown precision {prec_raw!r}")
                if system_raw not in SYSTEMS:
                    raise ValueError(f"{where}: unknown system {system_raw!r}")
                if model_raw not in MODELS:
                    drop("no cited parameter count for this model", label)
                    continue
                name, family, params, active, params_source = MODELS[model_raw]
                gpu_type, per_node = SYSTEMS[system_raw]
                gpus, gbs, seq = _int(v["#-GPUs"]), _int(v["GBS"]), _int(v["Sequence Length"])
                tok = float(v["Tokens / sec / GPU"].replace(",", ""))
                tflops = float(v["Model TFLOP / sec / GPU"].replace(",", ""))
                step = gbs * seq / (tok * gpus)
                layout = {col: _int(v.get(key, "")) for key, col in _LAYOUT}
                notes = [annotation] * bool(annotation) + re.findall(r"\[\^([^\]]*)\]", r["_line"]) + r["_notes"]
                ga, mbs = _int(v.get("GA", "")), _int(v["MBS"])
                model_parallel = (layout["tp"] or 1) * (layout["pp"] or 1) * (layout["cp"] or 1)
                if gbs % gpus and model_parallel == 1:
                    drop(f"global batch {gbs} is not a whole number of samples per device on {gpus} GPUs, each "
                         "holding a whole model replica", label)
                    continue
                if gpus % model_parallel:
                    raise ValueError(f"{where}: {gpus} GPUs do not divide into TP x PP x CP = {model_parallel}")
                if layout["fsdp"]:
                    zero, zero_source = ZERO_FSDP
                elif any("Muon" in n for n in notes):
                    zero, zero_source = ZERO_MUON
                else:
                    zero, zero_source = ZERO_DISTOPT
                shape, shape_source = SHAPES[name]
                if ga is not None and gpus % model_parallel == 0 and ga * mbs * (gpus // model_parallel) != gbs:
                    notes.append(f"GA {ga} in the table, but GBS / (MBS x data-parallel size) = "
                                 f"{gbs / (mbs * (gpus // model_parallel)):g}")
                run_id = (f"megatron-bridge/{r['_release']}/{name}/{system_raw}/gpus{gpus}/{prec_raw}/gbs{gbs}/"
                          f"mbs{v['MBS']}/seq{seq}/" + "-".join(f"{c}{'na' if layout[c] is None else layout[c]}"
                                                                for c in layout))
                out.append({
                    "run_id": run_id, "status": "ok", "model": name, "family": family, "params": params,
                    "active_params": active, "flops_per_sample": tflops * 1e12 / tok * seq,
                    "flops_method": "reported", "batch_size": gbs / gpus, "gpu_count": gpus, "gpu_type": gpu_type,
                    "precision": PRECISIONS[prec_raw], "fp32_mode": "", "seq_len": seq, "step_time_s": step,
                    "samples_per_s": gbs / step, "nodes": max(1, -(-gpus // per_node)),
                    "source": "megatron-bridge", "protocol": PROTOCOL, "release": r["_release"],
                    "global_batch_size": gbs, "micro_batch_size": mbs, "ga_reported": ga,
                    **layout, "throughput_tokens_per_s_per_gpu": tok, "model_tflops_per_gpu_reported": tflops,
                    "system_reported": system_raw, "precision_reported": prec_raw,
                    "note": "; ".join(notes), "params_source": params_source,
                    "source_repo": SOURCE_REPO, "source_path": path, "source_commit": commit,
                    # "n/a" in VP (no interleaving: the recipes' virtual_pipeline_model_parallel_size None) and in EP
                    # (no expert parallelism) is a degree of 1
                    "vp": 1 if layout["vp"] is None else layout["vp"], "ep": 1 if layout["ep"] is None else layout["ep"],
                    "vp_reported": v.get("VP", ""), "ep_reported": v.get("EP", ""),
                    "dp": gpus // model_parallel, "zero_stage": zero, "zero_stage_source": zero_source,
                    "sequence_parallel": int((layout["tp"] or 1) > 1), "gpus_per_node": NVLINK_DOMAIN[system_raw],
                    **{k: shape.get(k) for k in _SHAPE_KEYS}, "shape_source": shape_source,
                })
    df = pd.DataFrame(out, columns=COLUMNS)
    for col in ("ga_reported", *(c for _, c in _LAYOUT), "dp", "zero_stage", "sequence_parallel", "gpus_per_node",
                *_SHAPE_KEYS):
        df[col] = df[col].astype("Int64")  # n/a and absent columns: empty
    dup = df["run_id"].duplicated(keep=False)
    if dup.any():
        raise ValueError(f"duplicate configurations: {df.loc[dup, 'run_id'].tolist()}")
    return df, pd.DataFrame(dropped, columns=["release", "heading", "row", "reason", "source_path"])


def write(df: pd.DataFrame, path: Path) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    df.to_csv(path, index=False, lineterminator="\n", float_format="%.10g")


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(prog=Path(__file__).name, description=__doc__.split("\n\n")[0])
    src = ap.add_mutually_exclusive_group(required=True)
    src.add_argument("--git-dir", type=Path, help="clone of NVIDIA-NeMo/Megatron-Bridge (bare is fine)")
    src.add_argument("--docs", type=Path, help="a directory holding copies of the two docs/ files")
    ap.add_argument("--commit", default="HEAD", help="commit to read (with --docs: the commit they came from)")
    ap.add_argument("--out", type=Path, default=Path("data/public_megatron_bridge.csv"))
    args = ap.parse_args(argv)
    if args.docs and not re.fullmatch(r"[0-9a-f]{40}", args.commit):
        ap.error("--docs needs --commit <40-hex commit the files came from>")
    try:
        if args.git_dir:
            commit = _git(args.git_dir, "rev-parse", args.commit).strip()
            texts = {p: _git(args.git_dir, "show", f"{commit}:{p}") for p in SOURCE_PATHS}
            check_shapes(args.git_dir)
        else:
            commit = args.commit
            texts = {p: (args.docs / Path(p).name).read_text(encoding="utf-8") for p in SOURCE_PATHS}
        df, dropped = build(texts, commit)
    except subprocess.CalledProcessError as e:  # not a clone, or no such commit or file in it
        first = ((e.stderr or "").strip().splitlines() or ["failed"])[0]
        ap.exit(2, f"{ap.prog}: git {' '.join(e.cmd[3:])}: {first}\n")
    except (OSError, ValueError) as e:  # a missing copy, or a table this builder cannot read
        ap.exit(2, f"{ap.prog}: {e}\n")
    from perfmodel.io import load_runs

    # validated before it replaces the file: a build perfmodel cannot load leaves the old file as it was
    tmp = args.out.with_name(args.out.stem + ".tmp.csv")
    write(df, tmp)
    try:
        runs = load_runs(str(tmp))
    except Exception:
        tmp.unlink()
        raise
    tmp.replace(args.out)
    print(f"wrote {len(df)} rows to {args.out} (load_runs: {len(runs)} rows) from {SOURCE_REPO}@{commit}")
    print(df.groupby(["gpu_type", "precision"]).size().to_string())
    print(df.groupby("model").size().to_string())
    mfu = df["model_tflops_per_gpu_reported"] / [get_peak(g, p) for g, p in zip(df["gpu_type"], df["precision"])]
    print(f"implied MFU at the spec table's dense peak: min {mfu.min():.3f}, median {mfu.median():.3f}, "
          f"max {mfu.max():.3f}")
    same = ["model", "gpu_type", "gpu_count", "precision_reported", "global_batch_size", "micro_batch_size", "seq_len",
            "fsdp", "tp", "pp", "cp", "vp", "ep"]
    spread = df.groupby(same, dropna=False)["step_time_s"].agg(["min", "max", "size"])
    spread = spread[spread["size"] > 1]
    ratio = spread["max"] / spread["min"]
    print(f"{len(spread)} configurations measured in more than one release: slowest / fastest step time median "
          f"{ratio.median():.2f}, max {ratio.max():.2f}")
    job = ["model", "seq_len", "global_batch_size", "gpu_count", "gpu_type", "precision"]
    layouts = df.groupby(job)[["tp", "pp", "cp", "vp", "ep", "dp", "zero_stage", "micro_batch_size"]].apply(
        lambda d: len(d.drop_duplicates()))
    print(f"{len(layouts)} jobs (model, seq, global batch, GPUs, device, precision); {(layouts >= 3).sum()} measured "
          f"in 3 or more layouts")
    print(f"left out: {len(dropped)} configurations")
    print(dropped.groupby("reason").size().to_string())
    return 0


def get_peak(gpu_type: str, precision: str) -> float:
    from perfmodel.hardware import get_spec

    return get_spec(gpu_type).peak_tflops(precision)


if __name__ == "__main__":
    sys.exit(main())
