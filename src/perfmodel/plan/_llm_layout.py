"""The devices and the parallel layout of an LLM job as :func:`perfmodel.plan.plan_llm_job` is given them:
:class:`JobDevices` (device type, count and node size) and :class:`LayoutArgs` (the layout's degrees and
settings), turned into the :class:`~perfmodel.layout.ParallelLayout` the prediction takes."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from ..exceptions import LayoutError
from ..hardware import get_spec, resolve_gpu_type
from ..layout import DEFAULT_GPUS_PER_NODE, ParallelLayout, job_layout
from ..transformer import RECOMPUTE_MODES
from ._llm_shape import WHERE, whole_count


@dataclass(frozen=True)
class JobDevices:
    """The job's devices: ``devices`` of ``gpu_type`` (resolved name), ``gpus_per_node`` to a node (NVLink
    domain), and ``nodes`` when the job was given by its nodes."""

    gpu_type: str
    devices: int
    gpus_per_node: int
    nodes: int | None = None


def job_devices(gpu_type: str, *, gpu_count: Any, nodes: Any, gpus_per_node: Any) -> JobDevices:
    """The devices given as ``gpu_count``, or ``nodes`` and ``gpus_per_node`` (or ``gpus_per_node`` with
    ``gpu_count``); a node is the device's NVLink domain (72 on NVL72 racks), else 8 devices, when not given."""
    gpn: int | None
    if nodes is not None or gpus_per_node is not None:
        if nodes is None and gpus_per_node is not None and gpu_count is not None:
            gpn = whole_count(gpus_per_node, "gpus_per_node")
            devices = whole_count(gpu_count, "gpu_count")
        elif nodes is None or gpus_per_node is None:
            raise ValueError(f"{WHERE} takes 'nodes' and 'gpus_per_node' together (or 'gpus_per_node' with "
                             f"'gpu_count'). Got nodes={nodes!r}, gpus_per_node={gpus_per_node!r}.")
        else:
            nodes, gpn = whole_count(nodes, "nodes"), whole_count(gpus_per_node, "gpus_per_node")
            devices = nodes * gpn
            if gpu_count is not None and whole_count(gpu_count, "gpu_count") != devices:
                raise ValueError(f"The 'gpu_count' parameter of {WHERE} ({gpu_count!r}) is not nodes x "
                                 f"gpus_per_node = {nodes} x {gpn} = {devices}.")
    elif gpu_count is not None:
        devices, gpn = whole_count(gpu_count, "gpu_count"), None
    else:
        raise ValueError(f"{WHERE} needs the devices: 'gpu_count', or 'nodes' and 'gpus_per_node'.")
    g = resolve_gpu_type(gpu_type)
    if gpn is None:  # the device's NVLink domain (72 on NVL72 racks), else an 8-device node
        gpn = get_spec(g).nvlink_domain or DEFAULT_GPUS_PER_NODE
    return JobDevices(gpu_type=g, devices=devices, gpus_per_node=gpn, nodes=nodes)


def checked_zero_stage(zero_stage: Any) -> int:
    """``zero_stage`` as given, refused unless 0, 1, 2 or 3."""
    if isinstance(zero_stage, bool) or zero_stage not in (0, 1, 2, 3):
        raise ValueError(f"The 'zero_stage' parameter of {WHERE} must be 0, 1, 2 or 3. Got {zero_stage!r} instead.")
    return zero_stage


def checked_recompute(recompute: Any, activation_checkpointing: bool) -> str:
    """The recomputation: as given, or ``"full"`` with ``activation_checkpointing`` and else ``"none"``."""
    if recompute is None:
        return "full" if activation_checkpointing else "none"
    if recompute not in RECOMPUTE_MODES:
        raise ValueError(f"The 'recompute' parameter of {WHERE} must be one of {', '.join(RECOMPUTE_MODES)}. Got "
                         f"{recompute!r}.")
    if activation_checkpointing and recompute != "full":
        raise ValueError(f"{WHERE}: activation_checkpointing=True is recompute='full'; got recompute={recompute!r}.")
    return recompute


@dataclass(frozen=True)
class LayoutArgs:
    """The layout's arguments of :func:`perfmodel.plan.plan_llm_job`, as given (the degrees unchecked;
    ``zero_stage`` and ``recompute`` checked by :func:`checked_zero_stage` and :func:`checked_recompute`)."""

    tensor_parallel: Any = 1
    pipeline_parallel: Any = 1
    context_parallel: Any = 1
    expert_parallel: Any = 1
    virtual_stages: Any = 1
    micro_batch: Any = None
    sequence_parallel: Any = None
    zero_stage: int = 1
    recompute: str = "none"

    def layout(self, devices: int, names: dict) -> ParallelLayout:
        """The layout on ``devices`` devices, the frameworks' defaults filling what is not given
        (:func:`perfmodel.layout.job_layout`); ``names``: how messages name the degrees.

        Raises
        ------
        LayoutError
            Virtual stages without pipeline parallelism, or devices that do not divide into ``tp·pp·cp``.
        """
        tp, pp, cp = (whole_count(v, k, names[short]) for short, k, v in (
            ("tp", "tensor_parallel", self.tensor_parallel), ("pp", "pipeline_parallel", self.pipeline_parallel),
            ("cp", "context_parallel", self.context_parallel)))
        ep = whole_count(self.expert_parallel, "expert_parallel", names["ep"])
        vp = whole_count(self.virtual_stages, "virtual_stages", names["vp"])
        mb = 1 if self.micro_batch is None else whole_count(self.micro_batch, "micro_batch", names["micro_batch"])
        if vp > 1 and pp == 1:
            raise LayoutError(f"Invalid parallel layout: {names['vp']} {vp} (virtual stages) needs {names['pp']} "
                              "> 1.")
        if devices % (tp * pp * cp):
            raise LayoutError(f"Invalid parallel layout: {devices} devices do not divide into {names['tp']} x "
                              f"{names['pp']} x {names['cp']} = {tp} x {pp} x {cp} = {tp * pp * cp}: the "
                              "data-parallel degree devices / (tp·pp·cp) must be whole.")
        given: dict[str, Any] = {"tp": tp, "pp": pp, "cp": cp, "ep": ep, "vp": vp, "micro_batch": mb,
                                 "zero_stage": int(self.zero_stage), "recompute": self.recompute}
        if self.sequence_parallel is not None:
            given["sequence_parallel"] = bool(self.sequence_parallel)
        layout, _ = job_layout(given, devices=devices, where=WHERE)  # the defaults predict_training_time takes
        return layout
