"""What several ``perfmodel`` commands share: the argument types, the one-line usage errors, the flag groups of an
LLM job, and reading ``--model``/``--params``."""

from __future__ import annotations

import argparse

from .. import _methods


def count(text: str) -> int:
    """A whole number, also written as ``1e4`` or ``10_000`` (like ``--params 2e6``)."""
    try:
        value = float(str(text).replace("_", ""))
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a whole number, got {text!r}") from None
    if not value.is_integer():
        raise argparse.ArgumentTypeError(f"expected a whole number, got {text!r}")
    return int(value)


count.__name__ = "int"


def csv_list(kind):
    def parse(text: str):
        try:
            items = [kind(t.strip()) for t in text.split(",") if t.strip()]
        except ValueError:
            raise argparse.ArgumentTypeError(f"expected a comma-separated list of {kind.__name__}, got {text!r}") from None
        if not items:
            raise argparse.ArgumentTypeError("expected at least one value")
        return items

    return parse


def key_value(text: str) -> tuple[str, str]:
    key, sep, value = text.partition("=")
    if not sep or not key.strip() or not value.strip():
        raise argparse.ArgumentTypeError(f"expected KEY=VALUE, got {text!r}")
    return key.strip(), value.strip()


class OneLineParser(argparse.ArgumentParser):
    """argparse, but a usage error is one line (``perfmodel: error: ...``) and exit status 2."""

    def error(self, message):
        sub = self.prog[len("perfmodel"):].strip() if self.prog.startswith("perfmodel") else self.prog
        where = f"{sub}: " if sub else ""  # "perfmodel: error: predict: ...", never "perfmodel: perfmodel:"
        self.exit(2, f"perfmodel: error: {where}{message} (see {self.prog} --help)\n")


#: perfmodel.models.METHODS plus "auto" (kept literal so that --help does not import the models; a test checks it).
METHOD_CHOICES = list(_methods.METHOD_CHOICES)


def add_llm_model_flags(p, *, params: bool = True) -> None:
    """The flags that describe an LLM's shape (plan-llm, recommend --seq-len; recommend has its own --params)."""
    if params:
        p.add_argument("--params", type=float, help="parameter count (or give --n-layers and --d-model, or "
                                                    "--hf-config; alone: the standard shape of that size is assumed)")
    p.add_argument("--hf-config", metavar="PATH",
                   help="a Hugging Face config.json (or the folder holding it), dense or mixture of experts: layers, "
                        "hidden size, heads, MLP width, experts, vocabulary and the parameter count are read from it "
                        "(nothing is downloaded)")
    p.add_argument("--n-layers", type=count)
    p.add_argument("--d-model", type=count)
    p.add_argument("--vocab", type=count)
    p.add_argument("--n-heads", type=count, help="attention heads (default d-model / 128)")
    p.add_argument("--n-kv-heads", type=count, help="key/value heads (grouped-query attention; default --n-heads)")
    p.add_argument("--ffn-mult", type=float, default=None, help="MLP width / d-model (default 4)")
    p.add_argument("--ffn-hidden", type=count, default=None, help="MLP width in units (instead of --ffn-mult)")


def add_layout_flags(p, *, plan: bool) -> None:
    """The flags of an LLM job's parallel layout: plan-llm's (defaults: data parallel) and recommend's (none given:
    the fastest layout that fits, per configuration)."""
    p.add_argument("--zero-stage", type=int, default=1 if plan else None, choices=[0, 1, 2, 3],
                   help="sharding over the data-parallel ranks: 1 = Megatron's distributed optimizer (default), "
                        "3 = FSDP full shard")
    p.add_argument("--tensor-parallel", type=count, default=1 if plan else None)
    p.add_argument("--pipeline-parallel", type=count, default=1 if plan else None)
    p.add_argument("--context-parallel", type=count, default=1 if plan else None)
    p.add_argument("--expert-parallel", type=count, default=1 if plan else None, help="a mixture of experts' expert-parallel degree")
    p.add_argument("--virtual-stages", type=count, default=1 if plan else None, help="interleaved pipeline stages per device")
    p.add_argument("--micro-batch", type=count, help="sequences per pass on one replica (default 1)")
    p.add_argument("--sequence-parallel", action=argparse.BooleanOptionalAction, default=None,
                   help="tensor-parallel ranks split the sequence in norms and dropouts (default: on with "
                        "--tensor-parallel > 1)")
    p.add_argument("--recompute", choices=["none", "selective", "full"], default=None,
                   help="activation recomputation (default none; full with --activation-checkpointing)")
    p.add_argument("--activation-checkpointing", action="store_true", help="the same as --recompute full")
    p.add_argument("--no-flash-attention", dest="flash_attention", action="store_false",
                   help="attention kernels that store the score matrix (memory)")
    if plan:
        p.add_argument("--search-layouts", action="store_true",
                       help="search every valid layout that fits in memory and plan the fastest (the given degrees, "
                            "--zero-stage and --recompute are ignored); the ranking is printed")
        p.add_argument("--allow-no-fit", action="store_true",
                       help="print the time of a layout whose memory estimate does not fit, instead of refusing it")


def model_arg(args):
    if args.params is not None and args.model and is_history_model(args):
        raise ValueError(f"--model {args.model} names a model in the history and --params gives another size; "
                         "pass --model NAME alone to predict that model, or --params N (with --model LABEL only "
                         "as a label for a model that is not in the history).")
    for flag in ("flops_per_sample", "attention_flops_per_sample", "family"):
        if args.params is None and getattr(args, flag, None) is not None:
            raise ValueError(f"--{flag.replace('_', '-')} describes a model given by --params; with --model NAME "
                             "alone the history's own FLOPs of that model are used. Pass --params N too.")
    if args.params is not None:
        model = {"params": args.params, "name": args.model or "custom"}
        if args.flops_per_sample is not None:
            model["flops_per_sample"] = args.flops_per_sample
        if getattr(args, "attention_flops_per_sample", None) is not None:
            model["attention_flops_per_sample"] = args.attention_flops_per_sample
        if getattr(args, "family", None) is not None:
            model["family"] = args.family
        return model
    if args.model:
        return args.model
    raise ValueError(f"{args.command} needs --model NAME (a model in the history) or --params N.")


def is_history_model(args) -> bool:
    """Whether --model names a model of the history the command will use (for the --model/--params conflict)."""
    if getattr(args, "fitted", None):
        from ..persistence import load_model

        return args.model in load_model(args.fitted, trusted=args.trusted).models_.index
    from ..history import model_table, read_history

    history = args.history or None
    if history is None:
        gpu = [g for g in ([getattr(args, "gpu_type", None)] + list(getattr(args, "gpu_types", None) or []))
               if g is not None]
        from ..hardware import resolve_gpu_type

        history = "cpu" if all(resolve_gpu_type(g) == "cpu" for g in gpu) else "gpu"
    elif isinstance(history, list) and len(history) == 1:
        history = history[0]
    return args.model in model_table(read_history(history).runs).index
