"""The checked accelerator spec table and the lookup that resolves the names users, drivers and clouds report.

Figures are **dense** (no structured-sparsity doubling) peak TFLOPS per dtype, memory size in GB, memory bandwidth
in GB/s and the device-to-device interconnect bandwidth in GB/s as the vendor quotes it (bidirectional aggregate
for NVLink / Infinity Fabric / ICI / Gaudi RoCE, both directions of a x16 link for PCIe). ``None`` means the
device has no such mode or the vendor publishes no figure for it (e.g. no TF32 on V100, no BF16 on T4, no FP32
matrix peak for TPUs). Every row cites its source; figures that are uncertain say so in the source text. The
built-in rows, their aliases and sources are the bundled file ``perfmodel/data/device_specs.csv``.

``network_gbps`` is a property of the system a device is deployed in, not of the chip: the scale-out (inter-node)
network per device of the vendor's **reference system**, in GB/s **in one direction** (the NICs' line rate / 8,
divided by the devices they serve), e.g. the DGX A100's 8x 200 Gb/s HDR InfiniBand = 25 GB/s per GPU and the DGX
H100's 8x 400 Gb/s NDR = 50 GB/s per GPU. It is filled only where a named public source states the reference
system's network (cited in the row's source text) and is None elsewhere; pass your cluster's own figure where it
differs (``inter_node_gbps=`` of :func:`perfmodel.plan.plan_llm_job`).

Names resolve case- and punctuation-insensitively: canonical names, family names (``"A100"`` → the most-rented
variant), what NVML / ``torch.cuda.get_device_name`` / rocm-smi / hl-smi report, MLPerf system descriptions, and
cloud instance types (``"p4d.24xlarge"``, ``"a3-highgpu-8g"``, ``"Standard_ND96isr_H100_v5"``, ``"v5litepod-16"``).
An instance type resolves to its accelerator only; the number of accelerators is not implied.

Devices that are not in the table are added with :func:`register_device`, :func:`load_devices` (YAML or CSV),
or the ``PERFMODEL_DEVICES`` environment variable (paths separated by ``os.pathsep``, read on first lookup).
An unknown name raises :class:`~perfmodel.exceptions.UnknownHardwareError` listing the closest known names and
how to register a device. There is no silent fallback to a default GPU.

Examples
--------
>>> from perfmodel.hardware import get_spec
>>> get_spec("NVIDIA A100-SXM4-80GB").name
'A100-SXM4-80GB'
>>> get_spec("A100").peak_tflops("bf16")
312.0
>>> get_spec("p5.48xlarge").peak_tflops("fp8")
1978.9
"""

from __future__ import annotations

from ._registry import DEVICES_ENV, load_devices, register_device, table_digest, unregister_device
from ._resolve import get_spec, known_gpu_types, resolve_gpu_type, spec_table
from ._spec import (
    ELEMENT_BYTES,
    MIXED_PRECISIONS,
    PRECISION_TABLE,
    PRECISIONS,
    HardwareSpec,
    Precision,
    check_precision,
)
from ._spec import FIELDS as FIELDS  # public before the split, though not in __all__

__all__ = [
    "HardwareSpec", "get_spec", "resolve_gpu_type", "spec_table", "known_gpu_types", "PRECISIONS", "ELEMENT_BYTES",
    "MIXED_PRECISIONS", "PRECISION_TABLE", "Precision",
    "check_precision",
    "register_device", "unregister_device", "load_devices", "DEVICES_ENV", "table_digest",
]
