"""``perfmodel plan-llm``: plan an LLM training job from its shape (time, FLOPs, memory fit, cost), and say
whether it meets a deadline or a budget."""

from __future__ import annotations

import json
import math

from ._flags import METHOD_CHOICES, add_layout_flags, add_llm_model_flags, count


def add_plan_llm_parser(sub) -> None:
    ll = sub.add_parser("plan-llm", help="plan an LLM training job from its shape: tokens, sequence length, "
                                         "global batch, devices or nodes, parallelism (time, FLOPs, memory fit)")
    add_llm_model_flags(ll)
    ll.add_argument("--seq-len", type=count, required=True, help="tokens per sequence")
    work = ll.add_mutually_exclusive_group(required=True)
    work.add_argument("--tokens", type=count, help="training tokens, e.g. 100e9")
    work.add_argument("--samples", type=count, help="training sequences")
    work.add_argument("--steps", type=count, help="optimizer steps")
    ll.add_argument("--global-batch", type=count, required=True, help="sequences per optimizer step, all devices")
    ll.add_argument("--gpu-type", required=True, help="device name, e.g. H100, MI300X")
    ll.add_argument("--gpu-count", type=count, help="devices in all (or --nodes and --gpus-per-node)")
    ll.add_argument("--nodes", type=count)
    ll.add_argument("--gpus-per-node", type=count, help="devices per node / NVLink domain (default 8; 72 on GB200 "
                                                        "NVL72)")
    ll.add_argument("--inter-node-gbps", type=float,
                    help="your scale-out network per device, GB/s one way (e.g. 50 for a 400 Gb/s NIC per GPU; "
                         "default: the device table's reference system, where it has one)")
    add_layout_flags(ll, plan=True)
    ll.add_argument("--deadline-hours", type=float, help="say whether the job ends in time (on the interval's upper "
                                                         "bound)")
    ll.add_argument("--budget", type=float, help="say whether the job's cost (upper bound) stays within this many "
                                                 "dollars")
    ll.add_argument("--optimizer", choices=["adamw", "sgd"], default="adamw")
    ll.add_argument("--precision", default=None,
                    help="fp32, tf32, fp16, bf16 or fp8 (default: what most of the history's runs on the device used)")
    ll.add_argument("--confidence", type=float, default=0.9)
    ll.add_argument("--method", default="auto", choices=METHOD_CHOICES)
    ll.add_argument("--history", action="append", help="run history (default: the bundled public LLM history)")
    ll.add_argument("--provider", help="price from this provider (default: the cheapest in the table)")
    ll.add_argument("--prices", help="your price table (CSV)")
    ll.add_argument("--json", action="store_true", help="print the result as JSON")


#: How plan-llm names the layout in its messages: by its flags.
_PLAN_LLM_NAMES = {"tp": "--tensor-parallel", "pp": "--pipeline-parallel", "cp": "--context-parallel",
                   "dp": "the data-parallel degree", "ep": "--expert-parallel", "vp": "--virtual-stages",
                   "micro_batch": "--micro-batch", "global_batch": "--global-batch", "devices": "--gpu-count",
                   "search": "--search-layouts", "allow_no_fit": "--allow-no-fit"}


def cmd_plan_llm(args) -> int:
    from ..exceptions import UnknownPriceError
    from ..plan import plan_llm_job

    history = args.history if not args.history or len(args.history) > 1 else args.history[0]
    for flag, value in (("--deadline-hours", args.deadline_hours), ("--budget", args.budget)):
        if value is not None and not (math.isfinite(value) and value > 0):
            raise ValueError(f"{flag} must be a positive number. Got {value!r}.")
    job = plan_llm_job(params=args.params, n_layers=args.n_layers, d_model=args.d_model, vocab=args.vocab,
                       n_heads=args.n_heads, n_kv_heads=args.n_kv_heads, ffn_mult=args.ffn_mult,
                       ffn_hidden=args.ffn_hidden, hf_config=args.hf_config, seq_len=args.seq_len,
                       tokens=args.tokens, samples=args.samples, steps=args.steps, global_batch=args.global_batch,
                       gpu_type=args.gpu_type, gpu_count=args.gpu_count, nodes=args.nodes,
                       gpus_per_node=args.gpus_per_node, inter_node_gbps=args.inter_node_gbps,
                       zero_stage=args.zero_stage, tensor_parallel=args.tensor_parallel,
                       pipeline_parallel=args.pipeline_parallel, context_parallel=args.context_parallel,
                       expert_parallel=args.expert_parallel, virtual_stages=args.virtual_stages,
                       micro_batch=args.micro_batch, sequence_parallel=args.sequence_parallel,
                       recompute=args.recompute, activation_checkpointing=args.activation_checkpointing,
                       flash_attention=args.flash_attention, optimizer=args.optimizer, precision=args.precision,
                       history=history, confidence=args.confidence, method=args.method,
                       search=args.search_layouts, allow_no_fit=args.allow_no_fit, names=_PLAN_LLM_NAMES)
    try:
        cost, no_price = job.cost(provider=args.provider, prices=args.prices), None
    except UnknownPriceError as exc:
        cost, no_price = None, " ".join(str(exc).split())
    verdicts: dict[str, bool | None] = {}
    if args.deadline_hours is not None:
        verdicts["meets_deadline"] = bool(job.upper <= args.deadline_hours * 3600)
    if args.budget is not None:
        verdicts["within_budget"] = None if cost is None else bool(cost.upper <= args.budget)
    if args.json:
        out = job.to_dict()
        out["cost"] = None if cost is None else cost.to_dict()
        out.update(verdicts)
        print(json.dumps(out, indent=2, allow_nan=False))
    else:
        print(job)
        print(f"cost: {cost}" if cost is not None else f"cost: not priced ({no_price})")
        if "meets_deadline" in verdicts:
            print(f"deadline {args.deadline_hours:g} h: {'met' if verdicts['meets_deadline'] else 'NOT met'} on the "
                  f"interval's upper bound ({job.upper / 3600:.3g} h)")
        if "within_budget" in verdicts:  # None exactly when the job has no price
            print(f"budget ${args.budget:,.0f}: " + ("not priced" if cost is None else
                                                     ("within" if verdicts["within_budget"] else "NOT within") +
                                                     f" on the cost's upper bound (${cost.upper:,.0f})"))
    return 0
