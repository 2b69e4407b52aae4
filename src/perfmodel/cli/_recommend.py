"""``perfmodel recommend``: rank device types and counts by cost for a job, with intervals (an LLM job, with
``--seq-len``, gets a parallel layout per configuration, as ``plan-llm`` plans it)."""

from __future__ import annotations

import json
import sys

from ._flags import add_layout_flags, add_llm_model_flags, count, csv_list, model_arg


def add_recommend_parser(sub) -> None:
    r = sub.add_parser("recommend", help="rank device types and counts by cost for a job, with intervals")
    r.add_argument("--model", help="model name in the history (or a label with --params)")
    r.add_argument("--params", type=float)
    r.add_argument("--flops-per-sample", type=float)
    r.add_argument("--seq-len", type=count,
                   help="plan an LLM job (tokens per sequence): --batch-size is the global batch in sequences, the "
                        "model is --params or the shape flags below, and each configuration gets the layout flags "
                        "given, or the fastest layout that fits in memory; the same answer as plan-llm")
    add_llm_model_flags(r, params=False)
    r.add_argument("--gpus-per-node", type=count, help="with --seq-len: devices per node / NVLink domain")
    r.add_argument("--inter-node-gbps", type=float, help="with --seq-len: the network per device, GB/s one way")
    add_layout_flags(r, plan=False)
    r.add_argument("--batch-size", type=count, required=True,
                   help="the global batch (per-device batch with --work per_device_batch)")
    r.add_argument("--work", default="global_batch", choices=["global_batch", "per_device_batch"],
                   help="what stays fixed across configurations besides the samples: the global batch (default; "
                        "per-device batch = global / n, with gradient accumulation above --max-device-batch) "
                        "or the per-device batch")
    r.add_argument("--max-device-batch", type=count, help="largest per-device batch that fits (default: the "
                                                          "largest in the history)")
    r.add_argument("--gpu-types", type=csv_list(str), required=True, help="e.g. A100,H100,cpu")
    r.add_argument("--gpu-counts", type=csv_list(count), default=[1, 2, 4, 8])
    r.add_argument("--steps", type=count)
    r.add_argument("--epochs", type=count)
    r.add_argument("--dataset-size", type=count)
    r.add_argument("--deadline-hours", type=float)
    r.add_argument("--budget", type=float, help="dollars")
    r.add_argument("--confidence", type=float, default=0.9)
    r.add_argument("--prices", help="your price table (CSV: gpu_type,provider,on_demand_usd_per_hour,...)")
    r.add_argument("--precision", default=None,
                   help="fp32, tf32, fp16, bf16 or fp8 (default: what most of the history's runs on each device used)")
    r.add_argument("--provider", help="price from this provider (default: the cheapest in the table)")
    r.add_argument("--providers", type=csv_list(str),
                   help="compare these providers, one row per provider and configuration, e.g. aws,lambda")
    r.add_argument("--spot", action="store_true")
    rsrc = r.add_mutually_exclusive_group()
    rsrc.add_argument("--history")
    rsrc.add_argument("--fitted")
    r.add_argument("--trusted", action="store_true", help="allow a pickle-based (joblib) model file")
    r.add_argument("--json", action="store_true")


def cmd_recommend(args) -> int:
    from ..persistence import load_model
    from ..plan import recommend

    if args.fitted:
        history = load_model(args.fitted, trusted=args.trusted)
    else:
        history = args.history if not args.history or len(args.history) > 1 else args.history[0]
    llm: dict = {}
    if args.seq_len is not None:
        if args.fitted:
            raise ValueError("recommend --seq-len plans LLM jobs from a history (--history), not --fitted.")
        model, llm = _llm_job(args)
    else:
        _refuse_llm_flags(args)
        model = model_arg(args)
    out = recommend(model, batch_size=args.batch_size, steps=args.steps, epochs=args.epochs,
                    dataset_size=args.dataset_size, gpu_types=args.gpu_types, gpu_counts=args.gpu_counts,
                    work=args.work, max_device_batch=args.max_device_batch,
                    history=history, deadline=None if args.deadline_hours is None else args.deadline_hours * 3600,
                    budget=args.budget, confidence=args.confidence, prices=args.prices,
                    provider=args.providers or args.provider, spot=args.spot, precision=args.precision, **llm)
    if out.empty:
        print("perfmodel: error: no configuration could be predicted (see the warning above)", file=sys.stderr)
        return 1
    if args.json:
        from .._format import to_plain

        print(json.dumps(to_plain(out), indent=2, allow_nan=False))  # unpriced rows: cost null, price_note why
    else:
        _print_table(out)
    return 0


def _llm_job(args) -> tuple[dict, dict]:
    """The LLM job of ``--seq-len``: its model (--params or the shape flags) and what recommend is told of its
    sequence, layout (the layout flags given; none: the fastest that fits) and network."""
    model = {k: v for k, v in (("params", args.params), ("hf_config", args.hf_config),
                               ("n_layers", args.n_layers), ("d_model", args.d_model), ("vocab", args.vocab),
                               ("n_heads", args.n_heads), ("n_kv_heads", args.n_kv_heads),
                               ("ffn_mult", args.ffn_mult), ("ffn_hidden", args.ffn_hidden),
                               ("name", args.model)) if v is not None}
    layout = {k: v for k, v in (("tensor_parallel", args.tensor_parallel),
                                ("pipeline_parallel", args.pipeline_parallel),
                                ("context_parallel", args.context_parallel),
                                ("expert_parallel", args.expert_parallel),
                                ("virtual_stages", args.virtual_stages), ("micro_batch", args.micro_batch),
                                ("zero_stage", args.zero_stage), ("sequence_parallel", args.sequence_parallel),
                                ("recompute", args.recompute)) if v is not None}
    if args.activation_checkpointing:
        layout["activation_checkpointing"] = True
    if not args.flash_attention:
        layout["flash_attention"] = False
    llm = {"seq_len": args.seq_len, "layout": layout or None, "gpus_per_node": args.gpus_per_node,
           "inter_node_gbps": args.inter_node_gbps}
    return model, llm


def _refuse_llm_flags(args) -> None:
    """The shape, layout and network flags describe an LLM job: without --seq-len they are refused."""
    shape_flags = [f for f in ("hf_config", "n_layers", "d_model", "vocab", "n_heads", "n_kv_heads", "ffn_mult",
                               "ffn_hidden", "gpus_per_node", "inter_node_gbps", "tensor_parallel",
                               "pipeline_parallel", "context_parallel", "expert_parallel", "virtual_stages",
                               "micro_batch", "zero_stage", "sequence_parallel", "recompute")
                   if getattr(args, f) is not None]
    if shape_flags or args.activation_checkpointing or not args.flash_attention:
        raise ValueError(f"--{(shape_flags or ['activation_checkpointing'])[0].replace('_', '-')} describes an "
                         "LLM job: give --seq-len too.")


def _print_table(out) -> None:
    """recommend's ranking as a table: hours, the cost (or "no price") and a line per device left unpriced."""
    import pandas as pd

    show = out.drop(columns="price_note")
    for col in ("seconds", "lower", "upper"):
        show[col] = (show[col] / 3600).round(3)
    show["cost"] = [f"{v:.4g}" if pd.isna(note) else "no price"
                    for v, note in zip(out["cost"], out["price_note"])]
    show = show.rename(columns={"seconds": "hours", "lower": "hours_lo", "upper": "hours_hi",
                                "usd_per_device_hour": "usd_per_h"})
    with pd.option_context("display.width", 250, "display.max_columns", 40):
        print(show.to_string(index=False, float_format=lambda v: f"{v:.4g}", na_rep="-"))
    unpriced = out[out["price_note"].notna()].drop_duplicates(["gpu_type", "price_note"])
    for g, note in zip(unpriced["gpu_type"], unpriced["price_note"]):
        print(f"{g}: {note}")
