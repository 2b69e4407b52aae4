"""Named sweeps: the broader-zoo re-measurement (:data:`ZOO_SWEEP`) and the few-minute host calibration
(:data:`CALIBRATION_SWEEP`), with a plan (run count, expected time) printed before anything runs.

``perfmodel measure --sweep zoo -o runs.csv`` runs :data:`ZOO_SWEEP`; ``perfmodel measure --calibrate -o
calib.csv`` runs :data:`CALIBRATION_SWEEP`; ``--plan`` prints the plan and exits. Both resume like any sweep
(configurations already in the output are skipped) and keep every finished run on Ctrl-C.

The time estimates come from the wall clock of the bundled CPU history's own sweep (``data/runs_cpu.csv``: 112
runs in about 18 minutes on 2 cores): a one-worker run costs about 8 s (4.8 s process start and model build,
1.2 s timed, the rest warm-up, teardown and bookkeeping), a two-worker (gloo DDP) run about 11.5 s, and counting
one model's FLOPs about 1.5 s. They are estimates for a quiet 2-core host, not promises.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import Any

from ..exceptions import LayoutError
from .layouts import LAYOUTS_SWEEP
from .sweep import DEFAULT_SWEEP, RunConfig, default_sweep_configs, sweep_configs
from .zoo import ZOO

__all__ = ["ZOO_SWEEP", "CALIBRATION_SWEEP", "ONLINE_SWEEP", "SWEEPS", "SweepPlan", "zoo_sweep_configs", "calibration_configs",
           "online_sweep_configs", "layouts_sweep_configs", "named_sweep_configs", "plan"]

#: Seconds per run on a quiet 2-core host by worker count (see the module docstring), and per FLOP count.
RUN_COST_S = {1: 8.0, 2: 11.5}
EXTRA_WORKER_COST_S = 3.5
FLOP_COUNT_S = 1.5

_RUN_OPTIONS = dict(DEFAULT_SWEEP["run_options"])

#: The broader zoo's re-measurement of the bundled CPU history: every CPU zoo model at per-device batch 8 and 32
#: on one worker; one size of each architecture also at 16 and 64; one model of each of twelve families on two gloo DDP
#: workers at 8 and 32; and two more repeats (repeat index outermost) of eight models from eight families at
#: 8 and 32. :func:`plan` prints its size and expected time (about half an hour on 2 cores).
ZOO_SWEEP: dict[str, Any] = {
    "models": list(ZOO),
    "batch_sizes": (8, 32),
    "extra_batch_models": ("mlp-m", "cnn-s", "bert-s", "gpt-s", "lstm-s", "vgg-s", "densenet-s", "mobilenet-s",
                           "convnext-s", "resnext-s", "tcn-s", "textcnn-s", "enc-explicit-s", "dec-explicit-s",
                           "llama-s", "seq2seq-s", "gru-s", "rnn-s", "mixer-s", "dlrm-s", "widedeep-s", "ae-mlp-s",
                           "ae-conv-s", "unet-s", "vit-s", "gnn-s"),
    "extra_batch_sizes": (16, 64),
    "ddp_models": ("mlp-m", "cnn-s", "bert-s", "gpt-s", "mobilenet-s", "resnext-s", "tcn-s", "dec-explicit-s",
                   "seq2seq-s", "mixer-s", "dlrm-s", "vit-s"),
    "ddp_batch_sizes": (8, 32),
    "ddp_gpu_counts": (2,),
    "repeat_models": ("cnn-s", "gpt-s", "mobilenet-s", "lstm-s", "mixer-s", "dlrm-s", "vit-s", "tcn-s"),
    "repeat_batch_sizes": (8, 32),
    "repeats": 3,
    "run_options": _RUN_OPTIONS,
}

#: The few-minute host calibration: one model per op mix (dense matmul, dense / depthwise / grouped / 1-D /
#: transposed convolution, SDPA and explicit attention, fused and unrolled recurrence, token-mixing MLP,
#: embedding bags, scatter-add) at per-device batch 8 and 32 on one worker, plus two gloo DDP runs (about four
#: minutes on 2 cores). Combine the result with the bundled history: ``history=["calib.csv", "cpu"]``.
CALIBRATION_SWEEP: dict[str, Any] = {
    "models": ("mlp-m", "cnn-s", "mobilenet-s", "resnext-s", "tcn-s", "bert-s", "dec-explicit-s", "lstm-s",
               "gru-s", "mixer-s", "dlrm-s", "ae-conv-s", "gnn-s"),
    "batch_sizes": (8, 32),
    "ddp_models": ("cnn-s", "bert-s"),
    "ddp_batch_sizes": (32,),
    "ddp_gpu_counts": (2,),
    "run_options": _RUN_OPTIONS,
}

#: Long runs for the online remaining-time benchmark (``benchmarks/online_remaining.py``): ten zoo models from
#: ten families at per-device batch 32 on one worker, each timed for a fixed 400 steps (the zoo sweep stops
#: timing after about a second, too few steps to see what 5% of a real run tells). Three minutes on 2 cores
#: (measured; ``--plan``, which prices every run alike, says 1.6).
ONLINE_SWEEP: dict[str, Any] = {
    "models": ("cnn-s", "bert-s", "gpt-s", "lstm-s", "mobilenet-s", "tcn-s", "mixer-s", "dlrm-s", "vit-s", "gnn-s"),
    "batch_sizes": (32,),
    "run_options": {**_RUN_OPTIONS, "steps": 400, "max_steps": 400, "max_seconds": 120.0},
}

#: Environment knob for tests: a comma-separated subset of :data:`CALIBRATION_SWEEP`'s models to calibrate with
#: (one batch size, no DDP runs). Not for users: a calibration from fewer models transfers worse.
CALIBRATION_MODELS_ENV = "PERFMODEL_CALIBRATION_MODELS"


def zoo_sweep_configs(device: str = "cpu", **overrides) -> list[RunConfig]:
    """The configurations of :data:`ZOO_SWEEP` (repeat 0 of everything first, then the extra repeats);
    ``overrides`` replace its run options.

    Parameters
    ----------
    device : str, default="cpu"
        The device type of every run.
    **overrides
        Run options (:class:`RunConfig` fields) that replace the sweep's own.

    Returns
    -------
    list of RunConfig
        The one-worker runs, the extra batch sizes, the DDP runs, then repeats 1.. of the repeated subset.
    """
    d, opts = ZOO_SWEEP, {**ZOO_SWEEP["run_options"], **overrides}
    configs = sweep_configs(d["models"], d["batch_sizes"], (1,), device=device, **opts)
    configs += sweep_configs(d["extra_batch_models"], d["extra_batch_sizes"], (1,), device=device, **opts)
    configs += sweep_configs(d["ddp_models"], d["ddp_batch_sizes"], d["ddp_gpu_counts"], device=device, **opts)
    repeats = sweep_configs(d["repeat_models"], d["repeat_batch_sizes"], (1,), repeats=d["repeats"], device=device,
                            **opts)
    return configs + [c for c in repeats if c.repeat > 0]


def calibration_configs(device: str = "cpu", *, models=None, batch_sizes=None, ddp: bool | None = None,
                        **overrides) -> list[RunConfig]:
    """The configurations of :data:`CALIBRATION_SWEEP`.

    ``models`` / ``batch_sizes`` shrink it (for tests; default: the fixed list, or the models named in the
    ``PERFMODEL_CALIBRATION_MODELS`` environment variable, which also drops the DDP runs and keeps one batch
    size); ``ddp=False`` drops the two-worker runs.

    Parameters
    ----------
    device : str, default="cpu"
        The device type of every run.
    models : sequence of str, optional
        CPU zoo names to calibrate with instead of the fixed list.
    batch_sizes : sequence of int, optional
        Per-device batch sizes instead of the sweep's.
    ddp : bool, optional
        Whether to add the two-worker runs (of the DDP models that are among ``models``); default yes, unless the
        environment variable chose the models.
    **overrides
        Run options (:class:`RunConfig` fields) that replace the sweep's own.

    Returns
    -------
    list of RunConfig
        The one-worker runs, then the DDP runs.

    Raises
    ------
    ValueError
        A model is not a CPU zoo name.
    """
    d = CALIBRATION_SWEEP
    env = os.environ.get(CALIBRATION_MODELS_ENV, "").strip()
    if models is None and env:
        models = [m.strip() for m in env.split(",") if m.strip()]
        batch_sizes = batch_sizes or d["batch_sizes"][:1]
        ddp = False if ddp is None else ddp
    models = list(d["models"] if models is None else models)
    unknown = [m for m in models if m not in ZOO]
    if unknown:
        raise ValueError(f"Calibration models must be CPU zoo names; unknown: {', '.join(unknown)}.")
    opts = {**d["run_options"], **overrides}
    configs = sweep_configs(models, batch_sizes or d["batch_sizes"], (1,), device=device, **opts)
    if ddp is None or ddp:
        ddp_models = [m for m in d["ddp_models"] if m in models]
        configs += sweep_configs(ddp_models, d["ddp_batch_sizes"], d["ddp_gpu_counts"], device=device, **opts)
    return configs


def online_sweep_configs(device: str = "cpu", **overrides) -> list[RunConfig]:
    """The configurations of :data:`ONLINE_SWEEP`; ``overrides`` replace its run options.

    Parameters
    ----------
    device : str, default="cpu"
        The device type of every run.
    **overrides
        Run options (:class:`RunConfig` fields) that replace the sweep's own.

    Returns
    -------
    list of RunConfig
        One run per model at per-device batch 32 on one worker.
    """
    d = ONLINE_SWEEP
    return sweep_configs(d["models"], d["batch_sizes"], (1,), device=device, **{**d["run_options"], **overrides})


def layouts_sweep_configs(device: str = "cpu", **overrides) -> list:
    """The configurations of :data:`perfmodel.measure.layouts.LAYOUTS_SWEEP`, repeat index outermost.

    Parameters
    ----------
    device : str, default="cpu"
        The device type of every run.
    **overrides
        Run options (:class:`~perfmodel.measure.sweep.RunConfig` fields) that replace the sweep's own
        (``grad_accum`` only at 1: the sweep derives it from the global batch and the micro-batch).

    Returns
    -------
    list of RunConfig
        Ordered by repeat, model, micro-batch size, layout.

    Raises
    ------
    LayoutError
        ``grad_accum`` other than 1 among ``overrides``.
    """
    d = LAYOUTS_SWEEP
    if overrides.pop("grad_accum", 1) != 1:
        raise LayoutError("The layouts sweep sets its own micro-batches per step (grad_accum); drop the override.")
    opts = {**d["run_options"], **overrides}

    def grid(models, micro_batches, repeat):
        out = []
        for m in models:
            for mb in micro_batches:
                for n, tp, pp, sp in d["layouts"]:
                    dp = n // (tp * pp)
                    accum = d["global_batch"] // (dp * mb)
                    out.append(RunConfig(model=m, batch_size=mb, grad_accum=accum, gpu_count=n, tp=tp, pp=pp,
                                         sequence_parallel=sp, device=device, repeat=repeat, **opts))
        return out

    return [c for r in range(d["repeats"]) for c in grid(d["models"], d["micro_batches"], r)]


#: Sweep name (``perfmodel measure --sweep NAME``) -> configuration builder.
SWEEPS = {"default": default_sweep_configs, "zoo": zoo_sweep_configs, "calibrate": calibration_configs,
          "online": online_sweep_configs, "layouts": layouts_sweep_configs}


def named_sweep_configs(name: str, device: str = "cpu", **overrides) -> list[RunConfig]:
    """The configurations of a named sweep (:data:`SWEEPS`: ``default``, ``zoo``, ``calibrate``, ``online``,
    ``layouts`` (:data:`perfmodel.measure.layouts.LAYOUTS_SWEEP`)).

    Parameters
    ----------
    name : str
        A key of :data:`SWEEPS`.
    device : str, default="cpu"
        The device type of every run.
    **overrides
        Run options (:class:`RunConfig` fields) that replace the sweep's own.

    Returns
    -------
    list of RunConfig
        What that sweep's builder returns.

    Raises
    ------
    ValueError
        ``name`` is not a known sweep.
    """
    if name not in SWEEPS:
        raise ValueError(f"Unknown sweep {name!r}. Known: {', '.join(SWEEPS)}.")
    return SWEEPS[name](device=device, **overrides)


@dataclass(frozen=True)
class SweepPlan:
    """What a sweep will run: configurations, distinct models, runs per worker count, expected seconds.

    Attributes
    ----------
    runs : int
        Configurations to run.
    models : int
        Distinct models among them.
    by_workers : dict
        Worker (device) count -> runs with that count.
    repeats : int
        The highest repeat index plus one (0 for no runs).
    expected_s : float
        Expected wall seconds on a quiet 2-core host (the module docstring's constants).
    subset : bool, default=True
        Whether only some configurations are repeated (False: every one has every repeat index).
    """

    runs: int
    models: int
    by_workers: dict
    repeats: int
    expected_s: float
    subset: bool = True

    def __str__(self) -> str:
        workers = ", ".join(f"{n} on {k} worker{'s' if k > 1 else ''}" for k, n in sorted(self.by_workers.items()))
        minutes = self.expected_s / 60
        return (f"{self.runs} runs of {self.models} models ({workers}; {self.repeats} repeat"
                f"{'s' if self.repeats > 1 else ''} of {'a subset' if self.subset else 'each'}), about {minutes:.0f} min on a quiet 2-core host"
                if self.repeats > 1 else
                f"{self.runs} runs of {self.models} models ({workers}), about "
                f"{minutes:.1f} min on a quiet 2-core host")


def plan(configs, output=None) -> SweepPlan:
    """Run count and expected wall time of ``configs`` (constants in the module docstring); with ``output``,
    of those not yet in that history (a CPU sweep resumes by skipping them).

    Parameters
    ----------
    configs : iterable of RunConfig
        The sweep's configurations.
    output : path, optional
        The sweep's output history. When every configuration is a CPU one, those already recorded there are left
        out (as the sweep would skip them).

    Returns
    -------
    SweepPlan
        Run counts and the expected seconds: per run by worker count (``RUN_COST_S``, plus
        ``EXTRA_WORKER_COST_S`` per worker beyond two) and ``FLOP_COUNT_S`` per distinct zoo model.
    """
    configs = list(configs)
    if output is not None and configs and all(c.device == "cpu" for c in configs):
        from ..store import history_target
        from .sweep import done_keys

        done = done_keys(history_target(output), retry_failed=False)
        configs = [c for c in configs if c.key("cpu") not in done]
    by_workers: dict[int, int] = {}
    for c in configs:
        by_workers[c.gpu_count] = by_workers.get(c.gpu_count, 0) + 1
    seconds = sum(n * RUN_COST_S.get(k, RUN_COST_S[2] + EXTRA_WORKER_COST_S * (k - 2)) for k, n in by_workers.items())
    models = {c.model for c in configs}
    seconds += FLOP_COUNT_S * sum(1 for m in models if m in ZOO)
    repeats = max((c.repeat for c in configs), default=-1) + 1
    distinct = {c.key("*")[:5] + c.key("*")[6:] for c in configs}  # the key without its repeat index
    return SweepPlan(len(configs), len(models), by_workers, repeats, seconds,
                     subset=len(configs) != repeats * len(distinct))
