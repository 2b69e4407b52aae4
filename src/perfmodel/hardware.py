"""The checked accelerator spec table and the lookup that resolves the names users, drivers and clouds report.

Figures are **dense** (no structured-sparsity doubling) peak TFLOPS per dtype, memory size in GB, memory bandwidth
in GB/s and the device-to-device interconnect bandwidth in GB/s as the vendor quotes it (bidirectional aggregate
for NVLink / Infinity Fabric / ICI / Gaudi RoCE, both directions of a x16 link for PCIe). ``None`` means the
device has no such mode or the vendor publishes no figure for it (e.g. no TF32 on V100, no BF16 on T4, no FP32
matrix peak for TPUs). Every row cites its source; figures that are uncertain say so in the source text.

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

import csv
import difflib
import hashlib
import json
import math
import numbers
import os
import re
from collections import Counter
from dataclasses import asdict, dataclass, fields
from pathlib import Path
from typing import Any, Iterable

import pandas as pd

from .exceptions import DeviceSpecError, UnknownHardwareError

__all__ = [
    "HardwareSpec", "get_spec", "resolve_gpu_type", "spec_table", "known_gpu_types", "PRECISIONS", "ELEMENT_BYTES",
    "check_precision",
    "register_device", "unregister_device", "load_devices", "DEVICES_ENV", "table_digest",
]

#: Precisions perfmodel knows. ``fp16`` and ``bf16`` share the tensor-core peak on most devices (not on MI100,
#: nor on Turing/Volta, which have no bf16); ``fp8`` is the dense FP8 tensor peak (None before Hopper/Ada/CDNA3).
PRECISIONS = ("fp32", "tf32", "fp16", "bf16", "fp8")
#: Bytes per activation element that a run's memory-bound kernels move at each precision: 4 in fp32 (TF32 is an
#: fp32 storage format), 2 in fp16/bf16 mixed precision, and 2 under fp8 training too (fp8 is the GEMMs' input
#: format; activations, norms and the other memory-bound kernels stay in 16 bits). Bandwidth-bound time scales
#: with it: a device's bandwidth moves half as many fp32 elements per second as 16-bit ones.
ELEMENT_BYTES = {"fp32": 4, "tf32": 4, "fp16": 2, "bf16": 2, "fp8": 2}


def check_precision(precision, where: str) -> str:
    """A precision parameter, checked: one of :data:`PRECISIONS` (any case).

    Parameters
    ----------
    precision : str
        The value given.
    where : str
        The function that took it, for the message.

    Returns
    -------
    str
        The precision in lower case.

    Raises
    ------
    ValueError
        Anything else, naming the parameter, the choices and the value.

    Examples
    --------
    >>> check_precision("BF16", "predict")
    'bf16'
    """
    if not isinstance(precision, str) or precision.lower() not in PRECISIONS:
        raise ValueError(f"The 'precision' parameter of {where} must be one of {', '.join(PRECISIONS)}. "
                         f"Got {precision!r} instead.")
    return precision.lower()
#: Environment variable naming device files (YAML or CSV) that are registered on first lookup.
DEVICES_ENV = "PERFMODEL_DEVICES"

_PEAK_FIELDS = ("fp32_tflops", "tf32_tflops", "fp16_tflops", "bf16_tflops", "fp8_tflops")
_NUMBER_FIELDS = _PEAK_FIELDS + ("memory_gb", "memory_bandwidth_gbps", "interconnect_gbps", "network_gbps")
_TABLE_COLUMNS = ("vendor", "architecture", "release_year", "fp32_tflops", "tf32_tflops", "fp16_tflops",
                  "bf16_tflops", "fp8_tflops", "memory_gb", "memory_bandwidth_gbps", "interconnect_gbps",
                  "interconnect", "network_gbps", "nvlink_domain", "source")


@dataclass(frozen=True)
class HardwareSpec:
    """One accelerator's datasheet figures (dense peaks, TFLOPS; memory GB; bandwidths GB/s).

    Frozen; every instance (built-in row, :func:`register_device`, :func:`load_devices`) is validated on
    construction.

    Attributes
    ----------
    name : str
        Canonical name in the spec table (``"A100-SXM4-80GB"``); non-empty.
    vendor : str
        Vendor (``"nvidia"``, ``"amd"``, ``"google"``, ...); non-empty.
    fp32_tflops : float or None
        Dense FP32 peak, TFLOPS. None: no figure (e.g. no FP32 matrix peak for TPUs).
    tf32_tflops : float or None
        Dense TF32 tensor peak, TFLOPS. None: no TF32 mode (:meth:`peak_tflops` then uses ``fp32_tflops``).
    fp16_tflops : float or None
        Dense FP16 tensor peak, TFLOPS. None: no such mode or no published figure.
    bf16_tflops : float or None
        Dense BF16 tensor peak, TFLOPS. None: no BF16 (e.g. Volta, Turing) or no published figure.
    memory_gb : float or None
        Device memory, GB. None: unknown.
    memory_bandwidth_gbps : float or None
        Memory bandwidth, GB/s. None: unknown.
    interconnect_gbps : float or None
        Device-to-device bandwidth within a node, GB/s, bidirectional aggregate as vendors quote it. None:
        unknown.
    interconnect : str
        Kind of that link (``"nvlink4"``, ``"pcie5"``, ``"unknown"``, ...); non-empty.
    source : str
        Where the figures come from (datasheet, whitepaper, ...), with any uncertainty stated; non-empty.
    fp8_tflops : float or None, default=None
        Dense FP8 tensor peak, TFLOPS. None: no FP8 tensor cores (before Hopper/Ada/CDNA3) or no figure.
    architecture : str or None, default=None
        Architecture (``"ampere"``, ``"hopper"``, ``"cdna3"``, ...); models that pool devices by architecture
        share information between rows with the same one. None: unknown, pooled with no other device.
    release_year : int or None, default=None
        Year of release, between 1990 and 2100. None: unknown.
    network_gbps : float or None, default=None
        Scale-out (inter-node) network per device of the vendor's reference system, GB/s in one direction.
        None where no named source states it.
    nvlink_domain : int or None, default=None
        Devices that share one scale-up (NVLink) domain in the vendor's reference system: 72 on a GB200/GB300
        NVL72 rack. None where no named source states it (an 8-device node is then assumed by the layout model).

    Raises
    ------
    TypeError
        A field of the wrong type (a string field that is not a str, a figure that is not a real number or
        is a bool, a ``release_year`` that is not an int).
    DeviceSpecError
        An empty string field, a figure that is not positive and finite, or a ``release_year`` outside
        1990-2100.

    Notes
    -----
    All number fields are optional in the sense that they may be None, but only the last four have defaults.
    See the module docstring for what the figures mean (dense peaks, no sparsity doubling).
    """

    name: str
    vendor: str
    fp32_tflops: float | None
    tf32_tflops: float | None
    fp16_tflops: float | None
    bf16_tflops: float | None
    memory_gb: float | None
    memory_bandwidth_gbps: float | None
    interconnect_gbps: float | None
    interconnect: str
    source: str
    fp8_tflops: float | None = None
    architecture: str | None = None
    release_year: int | None = None
    network_gbps: float | None = None
    nvlink_domain: int | None = None

    def __post_init__(self):
        _validate(self)

    def peak_tflops(self, precision: str) -> float | None:
        """Dense peak TFLOPS for ``precision`` (one of :data:`PRECISIONS`); None where unsupported.

        Parameters
        ----------
        precision : str
            One of :data:`PRECISIONS`: ``"fp32"``, ``"tf32"``, ``"fp16"``, ``"bf16"``, ``"fp8"``.

        Returns
        -------
        float or None
            The ``<precision>_tflops`` field; for ``"tf32"``, ``fp32_tflops`` when ``tf32_tflops`` is None.
            None when the device has no figure for that precision.

        Raises
        ------
        ValueError
            If ``precision`` is not one of :data:`PRECISIONS`.

        Notes
        -----
        ``tf32`` falls back to the fp32 peak on devices without TF32 tensor cores, because PyTorch then runs
        the matmul in plain fp32. ``fp8`` never falls back: None means the device has no FP8 tensor cores.
        """
        if precision not in PRECISIONS:
            raise ValueError(f"precision must be one of {PRECISIONS}. Got {precision!r} instead.")
        value = getattr(self, f"{precision}_tflops")
        if value is None and precision == "tf32":
            return self.fp32_tflops
        return value

    def to_dict(self) -> dict:
        """The row as a dict, in the table's column order (name first, source last).

        Returns
        -------
        dict
            ``name``, then ``vendor``, ``architecture``, ``release_year``, the five peaks, ``memory_gb``,
            ``memory_bandwidth_gbps``, ``interconnect_gbps``, ``interconnect``, ``network_gbps`` and ``source``:
            every field, None values included.
        """
        d = asdict(self)
        return {"name": d["name"], **{k: d[k] for k in _TABLE_COLUMNS}}


FIELDS = tuple(f.name for f in fields(HardwareSpec))


def _validate(spec: HardwareSpec) -> None:
    """The one check every row passes, built-in or registered: types, positive finite figures, a source."""
    where = f"device {spec.name!r}" if isinstance(spec.name, str) else "a device row"
    for name in ("name", "vendor", "source", "interconnect", "architecture"):
        value = getattr(spec, name)
        if value is None and name == "architecture":
            continue  # unknown: a model then pools the device with no other
        if not isinstance(value, str):
            raise TypeError(f"The {name!r} field of {where} must be a str. Got {value!r} of type "
                            f"{type(value).__name__} instead.")
        if not value.strip():
            raise DeviceSpecError(f"The {name!r} field of {where} must be a non-empty string. Got {value!r}.")
    for name in _NUMBER_FIELDS:
        value = getattr(spec, name)
        if value is None:
            continue
        if isinstance(value, bool) or not isinstance(value, numbers.Real):
            raise TypeError(f"The {name!r} field of {where} must be a positive number or None. Got {value!r} of "
                            f"type {type(value).__name__} instead.")
        if not math.isfinite(value) or value <= 0:
            raise DeviceSpecError(f"The {name!r} field of {where} must be a positive finite number or None. "
                                  f"Got {value!r} instead.")
    domain = spec.nvlink_domain
    if domain is not None and (isinstance(domain, bool) or not isinstance(domain, numbers.Integral) or domain < 1):
        raise DeviceSpecError(f"The 'nvlink_domain' field of {where} must be a positive int or None. Got {domain!r}.")
    year = spec.release_year
    if year is not None:
        if isinstance(year, bool) or not isinstance(year, numbers.Integral):
            raise TypeError(f"The 'release_year' field of {where} must be an int or None. Got {year!r} of type "
                            f"{type(year).__name__} instead.")
        if not 1990 <= year <= 2100:
            raise DeviceSpecError(f"The 'release_year' field of {where} must be a year between 1990 and 2100. "
                                  f"Got {year!r} instead.")


def _s(name, vendor, arch, year, fp32, tf32, fp16, bf16, fp8, mem, bw, link, link_kind, source, net=None,
       domain=None):
    return HardwareSpec(name, vendor, fp32, tf32, fp16, bf16, mem, bw, link, link_kind, source,
                        fp8_tflops=fp8, architecture=arch, release_year=year, network_gbps=net,
                        nvlink_domain=domain)


# fmt: off
_BUILTIN: tuple[HardwareSpec, ...] = (
    # name                 vendor    arch         year  fp32   tf32    fp16    bf16    fp8     memGB  GB/s   link  kind
    # (net=: the reference system's scale-out network per device, GB/s one way, only where the source states it)
    # --- NVIDIA Pascal / Volta / Turing ---
    _s("P100-PCIE-16GB",   "nvidia", "pascal",    2016, 9.3,   None,   18.7,   None,   None,   16,    732,   32,   "pcie3",
       "NVIDIA Tesla P100 datasheet (2016): PCIe 16GB 9.3 FP32, 18.7 FP16, 732 GB/s, PCIe Gen3 32 GB/s"),
    _s("P100-SXM2-16GB",   "nvidia", "pascal",    2016, 10.6,  None,   21.2,   None,   None,   16,    732,   160,  "nvlink1",
       "NVIDIA Tesla P100 datasheet (2016): SXM2 10.6 FP32, 21.2 FP16, 732 GB/s, NVLink 160 GB/s"),
    _s("V100-SXM2-16GB",   "nvidia", "volta",     2017, 15.7,  None,   125.0,  None,   None,   16,    900,   300,  "nvlink2",
       "NVIDIA Tesla V100 datasheet (2020): SXM2 15.7 FP32, 125 tensor FP16, 16 GB, 900 GB/s, NVLink 300 GB/s; "
       "scale-out network: NVIDIA DGX-1 with Tesla V100 datasheet: 4x 100 Gb/s EDR InfiniBand for 8 GPUs (6.25 "
       "GB/s per GPU)", net=6.25),
    _s("V100-SXM2-32GB",   "nvidia", "volta",     2018, 15.7,  None,   125.0,  None,   None,   32,    900,   300,  "nvlink2",
       "NVIDIA Tesla V100 datasheet (2020): 15.7 FP32, 125 tensor FP16, 900 GB/s, NVLink 300 GB/s; scale-out "
       "network: NVIDIA DGX-1 with Tesla V100 datasheet: 4x 100 Gb/s EDR InfiniBand for 8 GPUs (6.25 GB/s per "
       "GPU)", net=6.25),
    _s("V100-PCIE-16GB",   "nvidia", "volta",     2017, 14.0,  None,   112.0,  None,   None,   16,    900,   32,   "pcie3",
       "NVIDIA Tesla V100 datasheet (2020): PCIe 14 FP32, 112 tensor FP16, 16 GB, 900 GB/s, PCIe Gen3 32 GB/s"),
    _s("V100-PCIE-32GB",   "nvidia", "volta",     2018, 14.0,  None,   112.0,  None,   None,   32,    900,   32,   "pcie3",
       "NVIDIA Tesla V100 datasheet (2020): 14 FP32, 112 tensor FP16, PCIe Gen3 32 GB/s"),
    _s("V100S-PCIE-32GB",  "nvidia", "volta",     2019, 16.4,  None,   130.0,  None,   None,   32,    1134,  32,   "pcie3",
       "NVIDIA Tesla V100S datasheet (2019): 16.4 FP32, 130 tensor FP16, 32 GB, 1,134 GB/s, PCIe Gen3 32 GB/s"),
    _s("T4",               "nvidia", "turing",    2018, 8.1,   None,   65.0,   None,   None,   16,    320,   32,   "pcie3",
       "NVIDIA T4 datasheet: 8.1 FP32, 65 mixed FP16, 320 GB/s, PCIe Gen3 x16"),
    _s("RTX-2080-Ti",      "nvidia", "turing",    2018, 13.4,  None,   53.8,   None,   None,   11,    616,   100,  "nvlink-bridge",
       "NVIDIA Turing architecture whitepaper, GeForce RTX 2080 Ti (reference clocks): 13.4 FP32, 53.8 FP16 tensor "
       "with FP32 accumulate (107.6 with FP16 accumulate), 616 GB/s; NVLink bridge 100 GB/s"),
    _s("TITAN-RTX",        "nvidia", "turing",    2018, 16.3,  None,   130.0,  None,   None,   24,    672,   100,  "nvlink-bridge",
       "NVIDIA TITAN RTX product page: 16.3 FP32, 130 tensor TFLOPS, 24 GB GDDR6 672 GB/s, NVLink bridge 100 GB/s"),
    _s("Quadro-RTX-6000",  "nvidia", "turing",    2018, 16.3,  None,   130.5,  None,   None,   24,    672,   100,  "nvlink-bridge",
       "NVIDIA Quadro RTX 6000 datasheet: 16.3 FP32, 130.5 tensor TFLOPS, 24 GB 672 GB/s, NVLink 100 GB/s"),
    _s("Quadro-RTX-8000",  "nvidia", "turing",    2018, 16.3,  None,   130.5,  None,   None,   48,    672,   100,  "nvlink-bridge",
       "NVIDIA Quadro RTX 8000 datasheet: 16.3 FP32, 130.5 tensor TFLOPS, 48 GB 672 GB/s, NVLink 100 GB/s"),
    # --- NVIDIA Ampere ---
    _s("A100-SXM4-40GB",   "nvidia", "ampere",    2020, 19.5,  156.0,  312.0,  312.0,  None,   40,    1555,  600,  "nvlink3",
       "NVIDIA A100 datasheet (2021): 19.5 FP32, 156 TF32, 312 BF16/FP16 dense, 1,555 GB/s, NVLink 600 GB/s; "
       "scale-out network: NVIDIA DGX A100 datasheet: 8x single-port ConnectX-6 200 Gb/s HDR InfiniBand for 8 "
       "GPUs (25 GB/s per GPU)", net=25.0),
    _s("A100-SXM4-80GB",   "nvidia", "ampere",    2020, 19.5,  156.0,  312.0,  312.0,  None,   80,    2039,  600,  "nvlink3",
       "NVIDIA A100 datasheet (2021): A100 80GB SXM 2,039 GB/s, NVLink 600 GB/s; scale-out network: NVIDIA DGX "
       "A100 datasheet: 8x single-port ConnectX-6 200 Gb/s HDR InfiniBand for 8 GPUs (25 GB/s per GPU)", net=25.0),
    _s("A100-PCIE-40GB",   "nvidia", "ampere",    2020, 19.5,  156.0,  312.0,  312.0,  None,   40,    1555,  64,   "pcie4",
       "NVIDIA A100 datasheet (2021): A100 40GB PCIe 1,555 GB/s, PCIe Gen4 64 GB/s"),
    _s("A100-PCIE-80GB",   "nvidia", "ampere",    2021, 19.5,  156.0,  312.0,  312.0,  None,   80,    1935,  64,   "pcie4",
       "NVIDIA A100 datasheet (2021): A100 80GB PCIe 1,935 GB/s, PCIe Gen4 64 GB/s"),
    _s("A30",              "nvidia", "ampere",    2021, 10.3,  82.0,   165.0,  165.0,  None,   24,    933,   200,  "nvlink-bridge",
       "NVIDIA A30 datasheet: 10.3 FP32, 82 TF32 / 165 BF16/FP16 dense (165 / 330 with sparsity), 24 GB HBM2 "
       "933 GB/s, third-gen NVLink bridge 200 GB/s"),
    _s("A10",              "nvidia", "ampere",    2021, 31.2,  62.5,   125.0,  125.0,  None,   24,    600,   64,   "pcie4",
       "NVIDIA A10 datasheet: 31.2 FP32, 62.5 TF32, 125 BF16/FP16 dense, 600 GB/s, PCIe Gen4 64 GB/s"),
    _s("A10G",             "nvidia", "ampere",    2021, 35.0,  35.0,   70.0,   70.0,   None,   24,    600,   64,   "pcie4",
       "AWS G5 variant of A10; NVIDIA publishes no A10G datasheet. UNCERTAIN: 35 FP32, 35 TF32, 70 FP16/BF16 tensor "
       "as tabulated by Baseten, 'NVIDIA A10 vs A10G for ML model inference' (third-party; other listings give "
       "31.52 FP32); 24 GB GDDR6 600 GB/s as A10"),
    _s("A40",              "nvidia", "ampere",    2020, 37.4,  74.8,   149.7,  149.7,  None,   48,    696,   112.5, "nvlink-bridge",
       "NVIDIA A40 datasheet: 37.4 FP32, 74.8 TF32, 149.7 BF16/FP16 dense, 696 GB/s, NVLink bridge 112.5 GB/s"),
    _s("RTX-3070",         "nvidia", "ampere",    2020, 20.3,  20.3,   40.6,   40.6,   None,   8,     448,   64,   "pcie4",
       "NVIDIA Ampere GA102 whitepaper (appendix, GA104 GeForce RTX 3070): 20.3 FP32, 20.3 TF32, 40.6 FP16/BF16 "
       "tensor with FP32 accumulate (dense), 448 GB/s"),
    _s("RTX-3080",         "nvidia", "ampere",    2020, 29.8,  29.8,   59.5,   59.5,   None,   10,    760,   64,   "pcie4",
       "NVIDIA Ampere GA102 whitepaper, GeForce RTX 3080: 29.8 FP32, 29.8 TF32, 59.5 FP16/BF16 tensor with FP32 "
       "accumulate (dense), 10 GB 760 GB/s"),
    _s("RTX-3090",         "nvidia", "ampere",    2020, 35.6,  35.6,   71.0,   71.0,   None,   24,    936,   64,   "pcie4",
       "NVIDIA Ampere GA102 whitepaper, GeForce RTX 3090: 35.6 FP32, 71 FP16/BF16 tensor with FP32 accumulate"),
    _s("RTX-A4000",        "nvidia", "ampere",    2021, 19.2,  38.35,  76.7,   76.7,   None,   16,    448,   64,   "pcie4",
       "NVIDIA RTX A4000 datasheet: 19.2 FP32, 153.4 tensor TFLOPS with sparsity (76.7 dense FP16/BF16), 16 GB "
       "448 GB/s; TF32 not on the datasheet, taken as half the FP16 tensor rate (GA10x ratio)"),
    _s("RTX-A4500",        "nvidia", "ampere",    2021, 23.7,  47.3,   94.6,   94.6,   None,   20,    640,   112.5, "nvlink-bridge",
       "NVIDIA RTX A4500 datasheet: 23.7 FP32, 189.2 tensor TFLOPS with sparsity (94.6 dense), 20 GB 640 GB/s, "
       "NVLink 112.5 GB/s; TF32 taken as half the FP16 tensor rate (GA10x ratio)"),
    _s("RTX-A5000",        "nvidia", "ampere",    2021, 27.8,  55.55,  111.1,  111.1,  None,   24,    768,   112.5, "nvlink-bridge",
       "NVIDIA RTX A5000 datasheet: 27.8 FP32, 222.2 tensor TFLOPS with sparsity (111.1 dense), 24 GB 768 GB/s, "
       "NVLink 112.5 GB/s; TF32 taken as half the FP16 tensor rate (GA10x ratio)"),
    _s("RTX-A5500",        "nvidia", "ampere",    2022, 34.1,  68.2,   136.4,  136.4,  None,   24,    768,   112.5, "nvlink-bridge",
       "NVIDIA RTX A5500 datasheet: 34.1 FP32, 272.8 tensor TFLOPS with sparsity (136.4 dense), 24 GB 768 GB/s, "
       "NVLink 112.5 GB/s; TF32 taken as half the FP16 tensor rate (GA10x ratio)"),
    _s("RTX-A6000",        "nvidia", "ampere",    2020, 38.7,  77.4,   154.8,  154.8,  None,   48,    768,   112.5, "nvlink-bridge",
       "NVIDIA RTX A6000 datasheet: 38.7 FP32, 309.7 tensor TFLOPS with sparsity (154.8 dense), 768 GB/s"),
    # --- NVIDIA Ada ---
    _s("L4",               "nvidia", "ada",       2023, 30.3,  60.0,   121.0,  121.0,  242.5,  24,    300,   64,   "pcie4",
       "NVIDIA L4 datasheet: 30.3 FP32, 120 TF32 / 242 FP16 / 485 FP8 with sparsity (halved here), 300 GB/s, "
       "PCIe Gen4"),
    _s("L40",              "nvidia", "ada",       2022, 90.5,  90.5,   181.05, 181.05, 362.0,  48,    864,   64,   "pcie4",
       "NVIDIA L40 datasheet: 90.5 FP32, 90.5 TF32 / 181.05 BF16/FP16 / 362 FP8 dense (181 / 362 / 724 with "
       "sparsity), 48 GB 864 GB/s, PCIe Gen4 64 GB/s"),
    _s("L40S",             "nvidia", "ada",       2023, 91.6,  183.0,  362.05, 362.05, 733.0,  48,    864,   64,   "pcie4",
       "NVIDIA L40S datasheet: 91.6 FP32, 366 TF32 / 733 BF16 / 1,466 FP8 with sparsity (halved here), 864 GB/s, "
       "PCIe Gen4"),
    _s("RTX-4090",         "nvidia", "ada",       2022, 82.6,  82.6,   165.2,  165.2,  330.3,  24,    1008,  64,   "pcie4",
       "NVIDIA Ada Lovelace whitepaper, GeForce RTX 4090: 82.6 FP32, 165.2 FP16/BF16 and 330.3 FP8 tensor with FP32 "
       "accumulate (dense)"),
    _s("RTX-6000-Ada",     "nvidia", "ada",       2022, 91.1,  182.1,  364.2,  364.2,  728.5,  48,    960,   64,   "pcie4",
       "NVIDIA RTX 6000 Ada datasheet: 91.1 FP32, 1,457 FP8 tensor with sparsity (728.5 FP8 / 364.2 FP16 dense), "
       "960 GB/s"),
    # --- NVIDIA Hopper ---
    _s("H100-SXM5-80GB",   "nvidia", "hopper",    2022, 67.0,  494.7,  989.4,  989.4,  1978.9, 80,    3350,  900,  "nvlink4",
       "NVIDIA H100 datasheet: SXM 67 FP32, 989 TF32 / 1,979 BF16 / 3,958 FP8 with sparsity (halved here), "
       "3.35 TB/s, NVLink 900 GB/s; scale-out network: NVIDIA DGX H100 datasheet: 8x single-port ConnectX-7 400 "
       "Gb/s InfiniBand/Ethernet for 8 GPUs (50 GB/s per GPU)", net=50.0),
    _s("H100-PCIE-80GB",   "nvidia", "hopper",    2022, 51.0,  378.0,  756.0,  756.0,  1513.0, 80,    2000,  128,  "pcie5",
       "NVIDIA H100 datasheet: PCIe 51 FP32, 756 TF32 / 1,513 BF16 / 3,026 FP8 with sparsity (halved here), 2 TB/s, "
       "PCIe Gen5 128 GB/s"),
    _s("H100-NVL-94GB",    "nvidia", "hopper",    2023, 60.0,  417.5,  835.5,  835.5,  1670.5, 94,    3900,  600,  "nvlink-bridge",
       "NVIDIA H100 datasheet: H100 NVL 60 FP32, 835 TF32 / 1,671 BF16 / 3,341 FP8 with sparsity (halved here), "
       "94 GB 3.9 TB/s, NVLink bridge 600 GB/s"),
    _s("H200-SXM-141GB",   "nvidia", "hopper",    2024, 67.0,  494.7,  989.4,  989.4,  1978.9, 141,   4800,  900,  "nvlink4",
       "NVIDIA H200 datasheet: SXM 67 FP32, 989 TF32 / 1,979 BF16 / 3,958 FP8 with sparsity (halved here), 141 GB, "
       "4.8 TB/s; scale-out network: NVIDIA DGX H200 datasheet: 8x single-port ConnectX-7 400 Gb/s "
       "InfiniBand/Ethernet for 8 GPUs (50 GB/s per GPU)", net=50.0),
    _s("H200-NVL-141GB",   "nvidia", "hopper",    2024, 60.0,  417.5,  835.5,  835.5,  1670.5, 141,   4800,  900,  "nvlink-bridge",
       "NVIDIA H200 NVL datasheet: 60 FP32, 835 TF32 / 1,671 BF16 / 3,341 FP8 with sparsity (halved here), 141 GB, "
       "4.8 TB/s, NVLink bridge 900 GB/s"),
    _s("GH200-96GB",       "nvidia", "hopper",    2023, 67.0,  494.7,  989.4,  989.4,  1978.9, 96,    4000,  900,  "nvlink-c2c",
       "NVIDIA GH200 Grace Hopper Superchip datasheet (GPU figures): 67 FP32, 989 TF32 / 1,979 BF16 / 3,958 FP8 "
       "with sparsity (halved here), 96 GB HBM3 4 TB/s, NVLink-C2C 900 GB/s (NVML: 'GH200 480GB' = 480 GB LPDDR5X)"),
    _s("GH200-144GB",      "nvidia", "hopper",    2024, 67.0,  494.7,  989.4,  989.4,  1978.9, 144,   4900,  900,  "nvlink-c2c",
       "NVIDIA GH200 Grace Hopper Superchip datasheet (GPU figures): as GH200 with 144 GB HBM3e 4.9 TB/s, "
       "NVLink-C2C 900 GB/s"),
    # --- NVIDIA Blackwell ---
    _s("B200",             "nvidia", "blackwell", 2024, 75.0,  1125.0, 2250.0, 2250.0, 4500.0, 180,   8000,  1800, "nvlink5",
       "NVIDIA HGX B200 datasheet (per GPU, 1/8 of 8-GPU figures): 18 PF TF32 / 36 PF FP16 / 72 PF FP8 sparse, "
       "600 TF FP32, 1.44 TB, 64 TB/s, NVLink 1.8 TB/s; scale-out network: NVIDIA DGX B200 datasheet: 8x "
       "single-port ConnectX-7 400 Gb/s InfiniBand/Ethernet for 8 GPUs (50 GB/s per GPU)", net=50.0),
    _s("GB200",            "nvidia", "blackwell", 2024, 80.0,  1250.0, 2500.0, 2500.0, 5000.0, 186,   8000,  1800, "nvlink5",
       "NVIDIA GB200 NVL72 datasheet (per GPU, 1/72 of rack figures): 180 PF TF32 / 360 PF FP16 / 720 PF FP8 "
       "sparse, 5,760 TF FP32, 13.4 TB HBM3e at 576 TB/s, NVLink 1.8 TB/s; one NVLink domain of 72 GPUs; scale-out "
       "network: NVIDIA DGX GB200 user guide, four ConnectX-7 400 Gb/s InfiniBand adapters per compute tray of four "
       "GPUs (50 GB/s per GPU)", net=50.0, domain=72),
    _s("B300",             "nvidia", "blackwell", 2025, 75.0,  1125.0, 2250.0, 2250.0, 4500.0, 288,   8000,  1800, "nvlink5",
       "NVIDIA HGX B300 datasheet (Blackwell Ultra; per GPU, 1/8 of 8-GPU figures): 18 PF TF32 / 36 PF FP16 / 72 PF "
       "FP8 sparse, 600 TF FP32, 2.3 TB HBM3e (288 GB per GPU) at up to 8 TB/s per GPU, NVLink 1.8 TB/s; scale-out "
       "network: 8x ConnectX-8 800 Gb/s SuperNICs for 8 GPUs (100 GB/s per GPU)", net=100.0),
    _s("GB300",            "nvidia", "blackwell", 2025, 80.0,  1250.0, 2500.0, 2500.0, 5000.0, 288,   8000,  1800, "nvlink5",
       "NVIDIA GB300 NVL72 (Blackwell Ultra; per GPU, 1/72 of rack figures): 180 PF TF32 / 360 PF FP16 / 720 PF "
       "FP8 sparse, 20 TB HBM3e (288 GB per GPU, 12-high stacks) at 576 TB/s, NVLink 130 TB/s (1.8 TB/s per GPU); "
       "FP32 taken as about 80 TF per GPU, as GB200 (uncertain); scale-out network: 72 ConnectX-8 800 Gb/s "
       "SuperNICs for 72 GPUs (100 GB/s per GPU); one NVLink domain of 72 GPUs", net=100.0, domain=72),
    # --- AMD (fp32 is the FP32 *matrix* peak) ---
    _s("MI100",            "amd",    "cdna1",     2020, 46.1,  None,   184.6,  92.3,   None,   32,    1228.8, 276, "infinity-fabric",
       "AMD Instinct MI100 datasheet: 46.1 FP32 matrix (23.1 vector), 184.6 FP16, 92.3 BF16, 32 GB HBM2 1.2288 TB/s, "
       "3 Infinity Fabric links 276 GB/s"),
    _s("MI210",            "amd",    "cdna2",     2022, 45.3,  None,   181.0,  181.0,  None,   64,    1638.4, 300, "infinity-fabric",
       "AMD Instinct MI210 datasheet: 45.3 FP32 matrix (22.6 vector), 181 FP16/BF16, 64 GB HBM2e 1.6384 TB/s, "
       "3 Infinity Fabric links 300 GB/s"),
    _s("MI250",            "amd",    "cdna2",     2021, 90.5,  None,   362.1,  362.1,  None,   128,   3276.8, 600, "infinity-fabric",
       "AMD Instinct MI250 datasheet (whole package, 2 GCDs): 90.5 FP32 matrix, 362.1 FP16/BF16, 128 GB HBM2e "
       "3.2768 TB/s, 6 Infinity Fabric links at 100 GB/s (600 GB/s)"),
    _s("MI250-GCD",        "amd",    "cdna2",     2021, 45.25, None,   181.05, 181.05, None,   64,    1638.4, 300, "infinity-fabric",
       "one GCD (what ROCm shows as a device) of the AMD Instinct MI250: half the datasheet package figures "
       "(90.5 FP32 matrix, 362.1 FP16/BF16, 128 GB, 3.2768 TB/s); interconnect = half of the 600 GB/s (derived)"),
    _s("MI250X",           "amd",    "cdna2",     2021, 95.7,  None,   383.0,  383.0,  None,   128,   3277,  800,  "infinity-fabric",
       "AMD Instinct MI250X datasheet: 95.7 FP32 matrix, 383 FP16/BF16, 128 GB HBM2e 3.2 TB/s, 8 IF links 800 "
       "GB/s; scale-out network: OLCF Frontier user guide: each node's 4 MI250X have 4 HPE Slingshot 200 Gb/s "
       "NICs, one per package (25 GB/s per device)", net=25.0),
    _s("MI250X-GCD",       "amd",    "cdna2",     2021, 47.85, None,   191.5,  191.5,  None,   64,    1638.4, 400, "infinity-fabric",
       "one GCD (what ROCm shows as a device) of the AMD Instinct MI250X: half the datasheet package figures "
       "(95.7 FP32 matrix, 383 FP16/BF16, 128 GB, 3.2768 TB/s); interconnect = half of the 800 GB/s (derived); "
       "scale-out network: OLCF Frontier user guide: 4 HPE Slingshot 200 Gb/s (25 GB/s) NICs per node of 4 "
       "MI250X = 8 GCDs (12.5 GB/s per GCD, derived)", net=12.5),
    _s("MI300X",           "amd",    "cdna3",     2023, 163.4, 653.7,  1307.4, 1307.4, 2614.9, 192,   5300,  896,  "infinity-fabric",
       "AMD Instinct MI300X datasheet: 163.4 FP32 matrix, 653.7 TF32, 1,307.4 FP16/BF16, 2,614.9 FP8 dense, "
       "5.3 TB/s, IF 896 GB/s"),
    _s("MI325X",           "amd",    "cdna3",     2024, 163.4, 653.7,  1307.4, 1307.4, 2614.9, 256,   6000,  896,  "infinity-fabric",
       "AMD Instinct MI325X datasheet: 163.4 FP32 matrix, 653.7 TF32, 1,307.4 FP16/BF16, 2,614.9 FP8 dense, 256 GB, "
       "6 TB/s"),
    _s("RX-7900-XTX",      "amd",    "rdna3",     2022, 61.4,  None,   122.8,  122.8,  None,   24,    960,   64,   "pcie4",
       "AMD Radeon RX 7900 XTX product page: 61.4 FP32, 122.8 FP16, 24 GB GDDR6 960 GB/s, PCIe Gen4; BF16 not on "
       "the product page, taken equal to FP16 (RDNA3 WMMA runs BF16 at the FP16 rate)"),
    # --- Intel Gaudi (no published FP32/FP16 matrix peaks) ---
    _s("Gaudi2",           "intel",  "gaudi2",    2022, None,  None,   None,   432.0,  865.0,  96,    2460,  600,  "roce-ethernet",
       "Intel Gaudi 3 white paper / Hot Chips 2024 product table: Gaudi 2 432 BF16 TFLOPS, 96 GB HBM2e 2.46 TB/s, "
       "24x100GbE 4.8 Tb/s bidirectional (600 GB/s); FP8 865 from Intel's Gaudi 3 launch comparison (UNCERTAIN: "
       "some reports quote 835); scale-out network: Habana Gaudi 2 white paper, HLS-Gaudi2 server: 3 of each "
       "Gaudi 2's 24x 100 GbE ports go to scale-out (300 Gb/s = 37.5 GB/s per device)", net=37.5),
    _s("Gaudi3",           "intel",  "gaudi3",    2024, None,  None,   None,   1835.0, 1835.0, 128,   3670,  1200, "roce-ethernet",
       "Intel Gaudi 3 AI accelerator white paper: 1,835 BF16 / 1,835 FP8 matrix TFLOPS, 128 GB HBM2e 3.67 TB/s, "
       "24x200GbE 1,200 GB/s bidirectional (OAM HL-325L); scale-out network: Intel Gaudi 3 AI accelerator white "
       "paper, HLS-Gaudi3 baseboard: 3 of each Gaudi 3's 24x 200 GbE ports go to scale-out (600 Gb/s = 75 GB/s "
       "per device)", net=75.0),
    # --- Google TPU, per chip (no FP32/FP16 MXU peaks published) ---
    _s("TPU-v4",           "google", "tpu-v4",    2021, None,  None,   None,   275.0,  None,   32,    1200,  None, "ici",
       "Cloud TPU v4 docs (System architecture): 275 bf16 TFLOPS per chip, 32 GiB HBM2 1,200 GBps; per-chip ICI "
       "bandwidth not stated there"),
    _s("TPU-v5e",          "google", "tpu-v5e",   2023, None,  None,   None,   197.0,  None,   16,    819,   400,  "ici",
       "Cloud TPU v5e docs: 197 bf16 TFLOPS per chip (int8 only below bf16), 16 GB HBM2 819 GBps, bidirectional ICI "
       "400 GBps per chip"),
    _s("TPU-v5p",          "google", "tpu-v5p",   2023, None,  None,   None,   459.0,  None,   95,    2765,  1200, "ici",
       "Cloud TPU v5p docs (System architecture): 459 bf16 TFLOPS per chip (no FP8 figure; int8 is not a "
       "perfmodel precision), 95 GiB HBM2e 2,765 GBps, bidirectional ICI 1,200 GBps per chip"),
    _s("TPU-v6e",          "google", "tpu-v6e",   2024, None,  None,   None,   918.0,  None,   32,    1638,  800,  "ici",
       "Cloud TPU v6e (Trillium) docs: 918 bf16 TFLOPS per chip (int8 1,836 TOPs; no FP8 figure), 32 GB HBM "
       "1,638 GBps, bidirectional ICI 800 GBps per chip"),
    # A CPU has no vendor datasheet peak that applies to every host; perfmodel leaves its peaks empty and
    # fits CPU runs on their own (the measured runs record the CPU model and thread count).
    _s("cpu",              "any",    "cpu",       None, None,  None,   None,   None,   None,   None,  None,  None, "shared-memory",
       "host CPU: peaks depend on the host; not used for cross-hardware scaling"),
)
# fmt: on

_BUILTIN_BY_NAME = {s.name: s for s in _BUILTIN}

# Names users type and names NVML / rocm-smi / hl-smi / MLPerf report, normalised by _normalise(). Ambiguous family
# names map to the variant most often rented (documented in the README): "A100" -> A100-SXM4-80GB,
# "H100" -> H100-SXM5-80GB, "V100" -> V100-SXM2-32GB, "GH200" -> GH200-96GB (NVML "GH200 480GB").
_BUILTIN_ALIASES: dict[str, str] = {
    "p100": "P100-PCIE-16GB", "p100-pcie": "P100-PCIE-16GB", "p100-pcie-16gb": "P100-PCIE-16GB",
    "p100-sxm2": "P100-SXM2-16GB", "p100-sxm2-16gb": "P100-SXM2-16GB", "p100-sxm": "P100-SXM2-16GB",
    "v100": "V100-SXM2-32GB", "v100-sxm2": "V100-SXM2-32GB", "v100-sxm2-32gb": "V100-SXM2-32GB",
    "v100-32gb": "V100-SXM2-32GB", "v100-sxm2-16gb": "V100-SXM2-16GB", "v100-16gb": "V100-SXM2-16GB",
    "v100-pcie": "V100-PCIE-32GB", "v100-pcie-32gb": "V100-PCIE-32GB", "v100-pcie-16gb": "V100-PCIE-16GB",
    "v100s": "V100S-PCIE-32GB", "v100s-pcie": "V100S-PCIE-32GB", "v100s-pcie-32gb": "V100S-PCIE-32GB",
    "t4": "T4",
    "rtx-2080-ti": "RTX-2080-Ti", "2080-ti": "RTX-2080-Ti", "rtx-2080ti": "RTX-2080-Ti", "2080ti": "RTX-2080-Ti",
    "titan-rtx": "TITAN-RTX", "quadro-rtx-6000": "Quadro-RTX-6000", "quadro-rtx-8000": "Quadro-RTX-8000",
    "rtx-8000": "Quadro-RTX-8000",
    "a100": "A100-SXM4-80GB", "a100-sxm4-80gb": "A100-SXM4-80GB", "a100-sxm-80gb": "A100-SXM4-80GB",
    "a100-80gb": "A100-SXM4-80GB", "a100-sxm4-40gb": "A100-SXM4-40GB", "a100-40gb": "A100-SXM4-40GB",
    "a100-sxm-40gb": "A100-SXM4-40GB", "a100-sxm": "A100-SXM4-80GB", "a100-sxm4": "A100-SXM4-80GB",
    "a100-pcie-40gb": "A100-PCIE-40GB", "a100-pcie": "A100-PCIE-40GB", "a100-80gb-pcie": "A100-PCIE-80GB",
    "a100-pcie-80gb": "A100-PCIE-80GB", "a100-40gb-pcie": "A100-PCIE-40GB",
    "a30": "A30", "a10": "A10", "a10g": "A10G", "a40": "A40",
    "rtx-3070": "RTX-3070", "3070": "RTX-3070", "rtx-3080": "RTX-3080", "3080": "RTX-3080",
    "rtx-3090": "RTX-3090", "3090": "RTX-3090", "rtx-4090": "RTX-4090", "4090": "RTX-4090",
    "rtx-a4000": "RTX-A4000", "a4000": "RTX-A4000", "rtx-a4500": "RTX-A4500", "a4500": "RTX-A4500",
    "rtx-a5000": "RTX-A5000", "a5000": "RTX-A5000", "rtx-a5500": "RTX-A5500", "a5500": "RTX-A5500",
    "rtx-a6000": "RTX-A6000", "a6000": "RTX-A6000",
    "l4": "L4", "l40": "L40", "l40s": "L40S",
    "rtx-6000-ada": "RTX-6000-Ada", "rtx-6000-ada-generation": "RTX-6000-Ada", "6000-ada": "RTX-6000-Ada",
    "h100": "H100-SXM5-80GB", "h100-sxm": "H100-SXM5-80GB", "h100-sxm5": "H100-SXM5-80GB",
    "h100-sxm5-80gb": "H100-SXM5-80GB", "h100-80gb-hbm3": "H100-SXM5-80GB", "h100-sxm-80gb": "H100-SXM5-80GB",
    "h100-mega-80gb": "H100-SXM5-80GB", "h100-mega": "H100-SXM5-80GB", "h100-80gb": "H100-SXM5-80GB",
    "h100-pcie": "H100-PCIE-80GB", "h100-pcie-80gb": "H100-PCIE-80GB", "h100-80gb-pcie": "H100-PCIE-80GB",
    "h100-nvl": "H100-NVL-94GB", "h100-nvl-94gb": "H100-NVL-94GB", "h100-94gb": "H100-NVL-94GB",
    "h200": "H200-SXM-141GB", "h200-sxm": "H200-SXM-141GB", "h200-sxm-141gb": "H200-SXM-141GB",
    "h200-141gb-hbm3e": "H200-SXM-141GB", "h200-sxm5": "H200-SXM-141GB", "h200-sxm5-141gb": "H200-SXM-141GB",
    "h200-141gb": "H200-SXM-141GB",
    "h200-nvl": "H200-NVL-141GB", "h200-nvl-141gb": "H200-NVL-141GB",
    "gh200": "GH200-96GB", "gh200-480gb": "GH200-96GB", "gh200-96gb": "GH200-96GB", "gh200-96gb-hbm3": "GH200-96GB",
    "gh200-144g": "GH200-144GB", "gh200-144gb": "GH200-144GB", "gh200-624gb": "GH200-144GB",
    "b200": "B200", "b200-sxm": "B200", "b200-sxm-180gb": "B200", "b200-180gb": "B200", "hgx-b200": "B200",
    "gb200": "GB200", "gb200-nvl72": "GB200",
    "b300": "B300", "b300-sxm": "B300", "b300-sxm-288gb": "B300", "b300-288gb": "B300", "hgx-b300": "B300",
    "gb300": "GB300", "gb300-nvl72": "GB300",
    "mi100": "MI100", "mi210": "MI210", "mi250": "MI250", "mi250x": "MI250X",
    # rocm-smi / torch on ROCm report one device per GCD, named "AMD Instinct MI250X/MI250" on both the MI250X and
    # the MI250; it resolves to one GCD of the far more deployed MI250X (Frontier, LUMI). Name "MI250-GCD" for MI250.
    "mi250x/mi250": "MI250X-GCD", "mi250x-gcd": "MI250X-GCD", "mi250-gcd": "MI250-GCD",
    "mi300x": "MI300X", "mi325x": "MI325X",
    "rx-7900-xtx": "RX-7900-XTX", "7900-xtx": "RX-7900-XTX", "radeon-rx-7900-xtx": "RX-7900-XTX",
    "gaudi2": "Gaudi2", "gaudi-2": "Gaudi2", "hl-225": "Gaudi2", "hl-225h": "Gaudi2", "hl-225b": "Gaudi2",
    "hl225": "Gaudi2", "hl225h": "Gaudi2", "hls-gaudi2": "Gaudi2",
    "gaudi3": "Gaudi3", "gaudi-3": "Gaudi3", "hl-325": "Gaudi3", "hl-325l": "Gaudi3", "hl325l": "Gaudi3",
    "hls-gaudi3": "Gaudi3",
    "tpu-v4": "TPU-v4", "tpuv4": "TPU-v4", "v4": "TPU-v4", "tpu-v4-podslice": "TPU-v4",
    "tpu-v5e": "TPU-v5e", "tpuv5e": "TPU-v5e", "v5e": "TPU-v5e", "v5litepod": "TPU-v5e", "tpu-v5-lite": "TPU-v5e",
    "tpu-v5-lite-podslice": "TPU-v5e", "tpu-v5-lite-device": "TPU-v5e", "v5lite": "TPU-v5e",
    "tpu-v5p": "TPU-v5p", "tpuv5p": "TPU-v5p", "v5p": "TPU-v5p", "tpu-v5p-slice": "TPU-v5p",
    "tpu-v6e": "TPU-v6e", "tpuv6e": "TPU-v6e", "v6e": "TPU-v6e", "trillium": "TPU-v6e", "tpu-trillium": "TPU-v6e",
    "tpu-v6e-slice": "TPU-v6e",
    "cpu": "cpu",
}
for _spec in _BUILTIN:
    _BUILTIN_ALIASES.setdefault(_spec.name.lower(), _spec.name)

# Cloud instance types -> accelerator (matched on the normalised name; the accelerator count is not implied).
_INSTANCE_PATTERNS: tuple[tuple[re.Pattern, str], ...] = tuple((re.compile(p), n) for p, n in (
    # AWS EC2 (family.size)
    (r"^p3\.\w+$", "V100-SXM2-16GB"), (r"^p3dn\.\w+$", "V100-SXM2-32GB"),
    (r"^p4d\.\w+$", "A100-SXM4-40GB"), (r"^p4de\.\w+$", "A100-SXM4-80GB"),
    (r"^p5\.\w+$", "H100-SXM5-80GB"), (r"^p5en?\.\w+$", "H200-SXM-141GB"),
    (r"^p6-b200\.\w+$", "B200"),
    (r"^g4dn\.\w+$", "T4"), (r"^g5\.\w+$", "A10G"), (r"^g6\.\w+$", "L4"), (r"^gr6\.\w+$", "L4"),
    (r"^g6e\.\w+$", "L40S"),
    # Google Cloud machine types, GKE accelerator labels and TPU accelerator types (v5litepod-16, v5p-128, ...)
    (r"^a2-(highgpu|megagpu)-\d+g$", "A100-SXM4-40GB"), (r"^a2-ultragpu-\d+g$", "A100-SXM4-80GB"),
    (r"^a3-(highgpu|megagpu|edgegpu)-\d+g$", "H100-SXM5-80GB"), (r"^a3-ultragpu-\d+g$", "H200-SXM-141GB"),
    (r"^a4-highgpu-\d+g$", "B200"), (r"^a4x-highgpu-\d+g$", "GB200"), (r"^g2-standard-\d+$", "L4"),
    (r"^(tpu-)?v4(-\d+)?$", "TPU-v4"), (r"^(tpu-)?(v5e|v5litepod|v5-litepod)(-\d+)?$", "TPU-v5e"),
    (r"^(tpu-)?v5p(-\d+)?$", "TPU-v5p"), (r"^(tpu-)?v6e(-\d+)?$", "TPU-v6e"),
    # Azure VM sizes ("Standard_" is dropped by _normalise) and series names
    (r"^nd\d+asr-v4$", "A100-SXM4-40GB"), (r"^nd-a100-v4$", "A100-SXM4-40GB"),
    (r"^nd\d+amsr-a100-v4$", "A100-SXM4-80GB"), (r"^ndm-a100-v4$", "A100-SXM4-80GB"),
    (r"^nc\d+ads-a100-v4$", "A100-PCIE-80GB"), (r"^nc-a100-v4$", "A100-PCIE-80GB"),
    (r"^nd\d+is?r-h100-v5$", "H100-SXM5-80GB"), (r"^nd-h100-v5$", "H100-SXM5-80GB"),
    (r"^nd\d+is?r-h200-v5$", "H200-SXM-141GB"), (r"^nd-h200-v5$", "H200-SXM-141GB"),
    (r"^nc\d+ads-h100-v5$", "H100-NVL-94GB"), (r"^nc-h100-v5$", "H100-NVL-94GB"),
    (r"^nd\d+is?r-mi300x-v5$", "MI300X"), (r"^nd-mi300x-v5$", "MI300X"),
    (r"^nc\d+as-t4-v3$", "T4"), (r"^ncast4-v3$", "T4"),
    (r"^nd\d+rs-v2$", "V100-SXM2-32GB"), (r"^nc\d+s-v3$", "V100-PCIE-16GB"),
))

_PREFIXES = ("standard-", "nvidia-", "tesla-", "geforce-", "amd-", "instinct-", "radeon-", "quadro-", "intel-",
             "habana-", "google-", "cloud-")
_TRADEMARKS = re.compile(r"\((r|tm)\)|[®™]")


def _candidates(name: str) -> list[str]:
    """The normalised name, then the same with vendor/brand prefixes dropped one at a time."""
    key = _TRADEMARKS.sub("", name.strip().lower())
    key = re.sub(r"[\s_,]+", "-", key).strip("-")
    out = [key]
    changed = True
    while changed:
        changed = False
        for prefix in _PREFIXES:
            if key.startswith(prefix):
                key, changed = key[len(prefix):], True
                out.append(key)
    return out


def _normalise(name: str) -> str:
    return _candidates(name)[-1]


# Trailing tokens that describe memory, packaging or marketing, not the chip: dropped one at a time when a
# reported name is not known as a whole ("MI300X 192GB HBM3" -> "mi300x", "Gaudi 2 AI Accelerator" -> "gaudi-2").
# Tokens that name another variant (NVL, PCIe) are never dropped, so a variant never resolves to its sibling.
_PACKAGING = re.compile(r"^(\d+gb|\d+g|hbm\d*e?|dlc|sxm\d*|oam|gpu|ai|accelerator|module|generation)$")

# --- registry state: built-in rows plus an overlay of registered ones -----------------------------------------
_USER_SPECS: dict[str, HardwareSpec] = {}
_USER_ALIASES: dict[str, str] = {}
_CACHE: dict[str, str] = {}
_ENV_STATE = {"loaded": False}
_DIGEST: dict[str, str] = {}


def _alias_target(key: str) -> str | None:
    if key in _USER_ALIASES:
        return _USER_ALIASES[key]
    return _BUILTIN_ALIASES.get(key)


def _lookup_key(key: str) -> str | None:
    found = _alias_target(key)
    if found is not None:
        return found
    for pattern, target in _INSTANCE_PATTERNS:
        if pattern.match(key):
            return target
    inner = re.search(r"[(\[]([^)\]]+)[)\]]", key)  # "blackwell-gpu-(b200-sxm-180gb)", "aldebaran-[instinct-mi210]"
    if inner:
        for cand in _candidates(inner.group(1).strip("-")):
            found = _lookup_key(cand)
            if found:
                return found
    parts = key.split("-")
    while len(parts) > 1 and _PACKAGING.match(parts[-1]):
        parts = parts[:-1]
        found = _alias_target("-".join(parts))
        if found is not None:
            return found
    return None


def _lookup(name: str) -> str | None:
    for key in _candidates(name):
        found = _lookup_key(key)
        if found is not None:
            return found
    return None


def _ensure_env_loaded() -> None:
    """Register the devices named by ``PERFMODEL_DEVICES`` once; a broken file raises on every lookup."""
    if _ENV_STATE["loaded"]:
        if _ENV_STATE.get("error") is not None:
            raise _ENV_STATE["error"]
        return
    _ENV_STATE["loaded"] = True
    raw = os.environ.get(DEVICES_ENV, "")
    for path in (p for p in raw.split(os.pathsep) if p.strip()):
        try:
            load_devices(path)
        except Exception as exc:  # every failure is kept and raised again on each lookup, never ignored
            message = f"{DEVICES_ENV}: {' '.join(str(exc).split()) or type(exc).__name__}"
            try:
                error = type(exc)(message)
            except Exception:  # an exception type whose constructor takes other arguments
                error = DeviceSpecError(message)
            if not isinstance(error, (OSError, ValueError, TypeError, ImportError)):
                error = DeviceSpecError(message)
            _ENV_STATE["error"] = error
            raise error from exc


_REGISTER_HINT = (
    "To use a device that is not in the table, register it: perfmodel.hardware.register_device(name=..., "
    "vendor=..., bf16_tflops=..., memory_bandwidth_gbps=..., source=...), or list it in a YAML/CSV file named by "
    f"the {DEVICES_ENV} environment variable (see the README, 'Hardware spec table'); "
    "`perfmodel hardware` prints the known devices."
)


#: NVML's name of a MIG instance: "<parent name> MIG <g>g.<memory>gb" (e.g. "NVIDIA A100-SXM4-40GB MIG 3g.20gb",
#: "NVIDIA H100 80GB HBM3 MIG 1g.10gb+me").
_MIG = re.compile(r"\bMIG[\s_-]*(\d+)g\.(\d+)gb(\+me)?\b", re.IGNORECASE)


def _refuse_mig(name: str) -> None:
    """A MIG slice is not its parent device: refuse it with a message that says what it is and what to do."""
    mig = _MIG.search(name)
    if mig is None:
        return
    parent = name[: mig.start()].strip(" -_")
    parent_name = _lookup(parent) if parent else None
    of = f" of {parent_name}" if parent_name else ""
    raise UnknownHardwareError(
        f"gpu_type {name!r} is an NVIDIA MIG slice ({mig.group(1)}g compute, {mig.group(2)} GB){of}; MIG slices are "
        "not supported yet: a slice's speed is not a fixed share of the whole device (its share of the SMs, of the "
        "memory bandwidth and of the L2 differ by profile). Register the slice as a device of its own "
        "(perfmodel.hardware.register_device(name=..., vendor='nvidia', ..., source=...) with its peaks; a "
        "registered name resolves before this check), or predict for the whole device."
    )


def resolve_gpu_type(name: str) -> str:
    """Return the canonical spec-table name for ``name`` (a user's, NVML's, rocm-smi's or a cloud's name).

    Parameters
    ----------
    name : str
        A canonical name, family name (``"A100"``), alias, reported device name (NVML, ``torch.cuda``,
        rocm-smi, hl-smi), MLPerf system description or cloud instance type; matched case- and
        punctuation-insensitively, with vendor/brand prefixes and trailing packaging tokens (``"80GB"``,
        ``"HBM3"``, ``"SXM"``, ...) dropped when the whole name is not known.

    Returns
    -------
    str
        The canonical name of a row of the table (built-in or registered).

    Raises
    ------
    TypeError
        If ``name`` is not a string.
    UnknownHardwareError
        If the name is not known, or names an NVIDIA MIG slice that is not registered as a device of its own;
        the message lists the closest known names and how to register a device.

    Notes
    -----
    Registered names and aliases are looked up before the built-in ones. The first call reads the files
    named by ``PERFMODEL_DEVICES``; if one of them is broken its error is raised again on every call.
    Successful lookups are cached per exact input string; registering or unregistering a device clears the
    cache.
    """
    if not isinstance(name, str):
        raise TypeError(f"gpu_type must be a str such as 'A100' or 'cpu'. Got {name!r} of type {type(name).__name__}.")
    _ensure_env_loaded()
    found = _CACHE.get(name)
    if found is not None:
        return found
    found = _lookup(name)
    if found is not None:
        _CACHE[name] = found
        return found
    _refuse_mig(name)
    key = _normalise(name)
    names = {s: s for s in known_gpu_types()}
    candidates = {**{k: v for k, v in _BUILTIN_ALIASES.items()}, **_USER_ALIASES,
                  **{n.lower(): n for n in names}}
    containing = sorted((c for c in candidates if len(key) >= 2 and key in c), key=len)
    close = containing[:4] + difflib.get_close_matches(key, list(candidates), n=6, cutoff=0.4)
    close_names = list(dict.fromkeys(candidates[c] for c in close))[:4]
    hint = f" Closest known names: {', '.join(close_names)}." if close_names else ""
    raise UnknownHardwareError(f"Unknown gpu_type {name!r}.{hint} {_REGISTER_HINT}")


def get_spec(name: str) -> HardwareSpec:
    """Return the :class:`HardwareSpec` for ``name`` (any alias, instance type or reported name).

    Parameters
    ----------
    name : str
        Any name :func:`resolve_gpu_type` resolves.

    Returns
    -------
    HardwareSpec
        The registered row for the canonical name if there is one (it overrides a built-in row of the same
        name), else the built-in row.

    Raises
    ------
    TypeError
        If ``name`` is not a string.
    UnknownHardwareError
        If the name is not known (see :func:`resolve_gpu_type`).
    """
    canonical = resolve_gpu_type(name)
    spec = _USER_SPECS.get(canonical)
    return spec if spec is not None else _BUILTIN_BY_NAME[canonical]


def known_gpu_types() -> list[str]:
    """The canonical names of every device in the table (built-in, then registered).

    Returns
    -------
    list of str
        The built-in names in table order, then the registered names that are not built-in, in the order they
        were registered. A registered device that replaces a built-in row keeps that row's place.

    Notes
    -----
    Reads the files named by ``PERFMODEL_DEVICES`` first if no earlier lookup has read them.
    """
    _ensure_env_loaded()
    return [s.name for s in _BUILTIN] + [n for n in _USER_SPECS if n not in _BUILTIN_BY_NAME]


def table_digest() -> str:
    """SHA-256 of the effective spec table: every row (built-in, registered, from ``PERFMODEL_DEVICES``) and every
    alias.

    Returns
    -------
    str
        A 64-character hexadecimal SHA-256 digest. It changes when any built-in row or alias, any registered
        row or any registered alias changes.

    Notes
    -----
    Part of every disk-cache key (:func:`perfmodel.cache.cache_key`), so that a fit made with one device table
    is never served after a device's figures changed. The built-in part is hashed once per process; the
    registered rows and aliases are hashed again on every call.
    """
    _ensure_env_loaded()
    if "builtin" not in _DIGEST:
        _DIGEST["builtin"] = hashlib.sha256(json.dumps(
            [[asdict(s) for s in _BUILTIN], sorted(_BUILTIN_ALIASES.items())], sort_keys=True).encode()).hexdigest()
    # The registered overlay is hashed on every call (it is small, and tests and users may edit it directly).
    h = hashlib.sha256(_DIGEST["builtin"].encode())
    for name in sorted(_USER_SPECS):
        h.update(json.dumps(asdict(_USER_SPECS[name]), sort_keys=True, default=repr).encode())
    h.update(json.dumps(sorted(_USER_ALIASES.items())).encode())
    return h.hexdigest()


def spec_table() -> pd.DataFrame:
    """The whole table as a DataFrame, one row per device (registered devices included).

    Returns
    -------
    pandas.DataFrame
        Indexed by canonical name, in the order of :func:`known_gpu_types`; columns ``vendor``,
        ``architecture``, ``release_year`` (nullable ``Int64``), ``fp32_tflops``, ``tf32_tflops``,
        ``fp16_tflops``, ``bf16_tflops``, ``fp8_tflops``, ``memory_gb``, ``memory_bandwidth_gbps``,
        ``interconnect_gbps``, ``interconnect``, ``network_gbps``, ``nvlink_domain`` (nullable ``Int64``),
        ``source``. Each row is what
        :func:`get_spec` returns, so a registered row shows in place of a built-in row it replaced.
    """
    rows = [get_spec(n).to_dict() for n in known_gpu_types()]
    table = pd.DataFrame(rows).set_index("name")
    table["release_year"] = table["release_year"].astype("Int64")
    table["nvlink_domain"] = table["nvlink_domain"].astype("Int64")
    return table[list(_TABLE_COLUMNS)]


# --- registration ----------------------------------------------------------------------------------------------

def _keys_of(name: str, aliases: Iterable[str]) -> list[str]:
    keys = [name.lower()]
    for alias in aliases:
        keys.extend(_candidates(alias)[:1])
    keys.append(_candidates(name)[0])
    return list(dict.fromkeys(keys))


def _check_aliases(aliases: Any, where: str) -> tuple[str, ...]:
    if aliases is None:
        return ()
    if isinstance(aliases, str):
        aliases = [aliases]
    if not isinstance(aliases, (list, tuple, set, frozenset)):
        raise TypeError(f"The 'aliases' parameter of {where} must be a sequence of str. Got {aliases!r} of type "
                        f"{type(aliases).__name__} instead.")
    out = []
    for a in aliases:
        if not isinstance(a, str):
            raise TypeError(f"Every alias given to {where} must be a str. Got {a!r} of type {type(a).__name__}.")
        if not a.strip():
            raise DeviceSpecError(f"Aliases given to {where} must be non-empty strings. Got {a!r}.")
        out.append(a.strip())
    return tuple(out)


def _clashes(spec: HardwareSpec, keys: list[str]) -> list[str]:
    clashes = []
    for key in keys:
        target = _alias_target(key)
        if target is not None and target != spec.name:
            clashes.append(f"{key!r} already names {target}")
        elif target is None and _lookup(key) not in (None, spec.name):
            clashes.append(f"{key!r} already resolves to {_lookup(key)}")
    if spec.name in _BUILTIN_BY_NAME or spec.name in _USER_SPECS:
        clashes.append(f"{spec.name!r} is already a device")
    return clashes


def _install(spec: HardwareSpec, aliases: tuple[str, ...], replace: bool, *, checked: bool = False) -> None:
    keys = _keys_of(spec.name, aliases)
    clashes = [] if checked else _clashes(spec, keys)
    if clashes and not replace:
        raise DeviceSpecError(f"Cannot register device {spec.name!r}: {'; '.join(clashes)}. "
                              "Pass replace=True to override.")
    if spec.name in _USER_SPECS:
        _drop_aliases(spec.name)
    _USER_SPECS[spec.name] = spec
    for key in keys:
        _USER_ALIASES[key] = spec.name
    _CACHE.clear()


def _drop_aliases(name: str) -> None:
    for key in [k for k, v in _USER_ALIASES.items() if v == name]:
        del _USER_ALIASES[key]


def register_device(*, name: str, vendor: str, source: str, fp32_tflops: float | None = None,
                    tf32_tflops: float | None = None, fp16_tflops: float | None = None,
                    bf16_tflops: float | None = None, fp8_tflops: float | None = None,
                    memory_gb: float | None = None, memory_bandwidth_gbps: float | None = None,
                    interconnect_gbps: float | None = None, interconnect: str = "unknown",
                    architecture: str | None = None, release_year: int | None = None,
                    network_gbps: float | None = None, nvlink_domain: int | None = None,
                    aliases: Iterable[str] = (), replace: bool = False) -> HardwareSpec:
    """Add a device to the spec table for this process, validated exactly like the built-in rows.

    Parameters
    ----------
    name, vendor, source : str
        Canonical name, vendor and where the figures come from (all non-empty).
    fp32_tflops, tf32_tflops, fp16_tflops, bf16_tflops, fp8_tflops : float or None, default=None
        Dense peak TFLOPS per precision (halve "with sparsity" figures); None where unsupported or unknown.
    memory_gb, memory_bandwidth_gbps, interconnect_gbps : float or None, default=None
        Memory size (GB), memory bandwidth (GB/s), device-to-device bandwidth (GB/s, bidirectional).
    interconnect : str, default="unknown"
        Interconnect kind (``"nvlink4"``, ``"pcie5"``, ...).
    architecture : str or None, default=None
        Architecture as the built-in rows name it (``"hopper"``, ``"cdna3"``, ...): models that pool devices by
        architecture share information with those rows. None: unknown, pooled with no other device.
    release_year : int or None, default=None
    network_gbps : float or None, default=None
        Scale-out (inter-node) network per device in the system it is deployed in, GB/s in one direction (e.g.
        25 for one 200 Gb/s HDR InfiniBand NIC per GPU). None: unknown.
    nvlink_domain : int or None, default=None
        Devices sharing one NVLink (scale-up) domain, e.g. 72 for an NVL72 rack. None: unknown (8 assumed).
    aliases : sequence of str, default=()
        Other names that resolve to this device (matched case- and punctuation-insensitively).
    replace : bool, default=False
        Allow the name or an alias to take over a known device or alias (including built-in ones).

    Returns
    -------
    HardwareSpec

    Raises
    ------
    TypeError
        A field of the wrong type.
    DeviceSpecError
        A non-positive or non-finite figure, an empty string, or a name/alias clash without ``replace=True``.
    """
    where = "register_device"
    if not isinstance(replace, bool):
        raise TypeError(f"The 'replace' parameter of {where} must be a bool. Got {replace!r}.")
    _ensure_env_loaded()
    alias_tuple = _check_aliases(aliases, where)
    spec = HardwareSpec(name=name, vendor=vendor, fp32_tflops=fp32_tflops, tf32_tflops=tf32_tflops,
                        fp16_tflops=fp16_tflops, bf16_tflops=bf16_tflops, memory_gb=memory_gb,
                        memory_bandwidth_gbps=memory_bandwidth_gbps, interconnect_gbps=interconnect_gbps,
                        interconnect=interconnect, source=source, fp8_tflops=fp8_tflops,
                        architecture=architecture, release_year=release_year, network_gbps=network_gbps,
                        nvlink_domain=nvlink_domain)
    _install(spec, alias_tuple, replace)
    return spec


def unregister_device(name: str) -> None:
    """Remove a device added by :func:`register_device` (a built-in row it replaced comes back).

    Parameters
    ----------
    name : str
        The registered device's canonical name, or one of its registered aliases (matched case- and
        punctuation-insensitively).

    Raises
    ------
    TypeError
        If ``name`` is not a string.
    UnknownHardwareError
        If ``name`` is not a registered device (built-in devices cannot be removed).

    Notes
    -----
    Also removes every alias registered for the device and clears the lookup cache. Devices loaded with
    :func:`load_devices` or from ``PERFMODEL_DEVICES`` are registered devices and can be removed the same way.
    """
    if not isinstance(name, str):
        raise TypeError(f"The 'name' parameter of unregister_device must be a str. Got {name!r}.")
    canonical = name if name in _USER_SPECS else _USER_ALIASES.get(_candidates(name)[0])
    if canonical is None or canonical not in _USER_SPECS:
        raise UnknownHardwareError(f"{name!r} is not a registered device (registered: "
                                   f"{', '.join(_USER_SPECS) or 'none'}); built-in devices cannot be removed.")
    del _USER_SPECS[canonical]
    _drop_aliases(canonical)
    _CACHE.clear()


# --- device files ------------------------------------------------------------------------------------------------

_FILE_FIELDS = set(FIELDS) | {"aliases", "replace"}


def _coerce_row(row: dict, where: str) -> dict:
    unknown = sorted(set(row) - _FILE_FIELDS)
    if unknown:
        raise DeviceSpecError(f"{where}: unknown field(s) {', '.join(map(repr, unknown))}; allowed fields are "
                              f"{', '.join(sorted(_FILE_FIELDS))}.")
    out = {}
    for key, value in row.items():
        if isinstance(value, str):
            value = value.strip()
            if value == "" or value.lower() in ("none", "null", "na", "nan"):
                value = None
        if value is None:
            continue
        if key in _NUMBER_FIELDS and isinstance(value, str):
            try:
                value = float(value)
            except ValueError:
                raise DeviceSpecError(f"{where}: field {key!r} must be a number. Got {value!r}.") from None
        elif key in ("release_year", "nvlink_domain") and isinstance(value, str):
            try:
                value = int(value)
            except ValueError:
                raise DeviceSpecError(f"{where}: field {key!r} must be an integer. Got {value!r}.") from None
        elif key == "aliases" and isinstance(value, str):
            value = [a for a in re.split(r"[;|]", value) if a.strip()]
        elif key == "replace" and isinstance(value, str):
            if value.lower() not in ("true", "false", "1", "0", "yes", "no"):
                raise DeviceSpecError(f"{where}: field 'replace' must be true or false. Got {value!r}.")
            value = value.lower() in ("true", "1", "yes")
        out[key] = value
    for required in ("name", "vendor", "source"):
        if required not in out:
            raise DeviceSpecError(f"{where}: the required field {required!r} is missing or empty.")
    return out


def _read_rows(path: Path) -> list[dict]:
    try:
        return _read_rows_unchecked(path)
    except UnicodeDecodeError as exc:
        raise DeviceSpecError(f"{path}: not a UTF-8 text file (byte {exc.start}: {exc.reason}); save the device "
                              "file as UTF-8.") from None


def _read_rows_unchecked(path: Path) -> list[dict]:
    suffix = path.suffix.lower()
    if suffix in (".yaml", ".yml"):
        try:
            import yaml
        except ImportError as exc:  # pragma: no cover - pyyaml is in the test extra
            raise ImportError(f"Reading {path} needs PyYAML: pip install pyyaml (or use a CSV file).") from exc
        with open(path, encoding="utf-8") as fh:
            try:
                data = yaml.safe_load(fh)
            except yaml.YAMLError as exc:
                raise DeviceSpecError(f"{path}: not valid YAML ({exc}).") from None
        if isinstance(data, dict) and set(data) == {"devices"}:
            data = data["devices"]
        if not isinstance(data, list) or not all(isinstance(r, dict) for r in data):
            raise DeviceSpecError(f"{path}: a device file must hold a list of mappings, or a mapping "
                                  "{devices: [...]}, one mapping per device.")
        return data
    if suffix == ".csv":
        with open(path, newline="", encoding="utf-8") as fh:
            reader = csv.DictReader(fh)
            rows = list(reader)
            if reader.fieldnames is None:
                raise DeviceSpecError(f"{path}: empty CSV; the header names the fields.")
        for i, row in enumerate(rows):
            if None in row:
                raise DeviceSpecError(f"{path}: line {i + 2} has more cells than the header.")
        return rows
    raise DeviceSpecError(f"{path}: device files must end in .yaml, .yml or .csv.")


def load_devices(path: str | os.PathLike, *, replace: bool = False) -> list[str]:
    """Register every device listed in a YAML or CSV file; returns their names.

    Parameters
    ----------
    path : str or os.PathLike
        A ``.yaml``/``.yml`` file (a list of mappings, or ``{devices: [...]}``) or a ``.csv`` file (a header of
        field names, one device per line, aliases separated by ``;`` or ``|``), UTF-8. Fields are those of
        :func:`register_device`; ``name``, ``vendor`` and ``source`` are required, optional ones may be left out
        or empty (``""``, ``none``, ``null``, ``na``, ``nan``).
    replace : bool, default=False
        Default for rows that do not set ``replace`` themselves: allow a row's name or aliases to take over a
        known device or alias.

    Returns
    -------
    list of str
        The canonical names of the devices registered, in file order.

    Raises
    ------
    FileNotFoundError
        If ``path`` is not a file.
    TypeError
        A field of the wrong type (the message names the file and the device's position).
    DeviceSpecError
        A wrong suffix, a file that is not UTF-8 or not valid YAML, a YAML file that is not a list of mappings,
        an empty CSV or a line with more cells than the header, an unknown or missing required field, a value
        that does not parse or validate, a device listed twice, two rows claiming the same name or alias, or a
        clash with a known device or alias on a row without ``replace``.
    ImportError
        If the file is YAML and PyYAML is not installed.

    Notes
    -----
    The whole file is checked before any device is registered: on any error nothing in it is registered, and a
    failure part-way through registration restores the table as it was.
    """
    path = Path(path)
    if not path.is_file():
        raise FileNotFoundError(f"Device file {str(path)!r} does not exist.")
    rows = _read_rows(path)
    staged = []
    for i, raw in enumerate(rows):
        where = f"{path} (device {i + 1})"
        row = _coerce_row(dict(raw), where)
        row_replace = row.pop("replace", replace)
        aliases = _check_aliases(row.pop("aliases", ()), where)
        try:
            spec = HardwareSpec(**{k: row.get(k, None) for k in ("name", "vendor", *_NUMBER_FIELDS)},
                                interconnect=row.get("interconnect", "unknown"), source=row["source"],
                                architecture=row.get("architecture"),
                                release_year=row.get("release_year"), nvlink_domain=row.get("nvlink_domain"))
        except (TypeError, DeviceSpecError) as exc:
            raise type(exc)(f"{where}: {exc}") from None
        staged.append((spec, aliases, bool(row_replace)))
    names = [s.name for s, _, _ in staged]
    dupes = sorted(n for n, count in Counter(names).items() if count > 1)
    if dupes:
        raise DeviceSpecError(f"{path}: device(s) listed twice: {', '.join(dupes)}.")
    owner: dict[str, str] = {}  # alias key -> the row of this file that claims it
    for spec, aliases, rep in staged:
        keys = _keys_of(spec.name, aliases)
        for key in keys:
            other = owner.setdefault(key, spec.name)
            if other != spec.name:
                raise DeviceSpecError(f"{path}: devices {other!r} and {spec.name!r} both claim the name or alias "
                                      f"{key!r}; nothing in this file was registered.")
        clashes = _clashes(spec, keys)
        if clashes and not rep:
            raise DeviceSpecError(f"{path}: cannot register device {spec.name!r}: {'; '.join(clashes)}. "
                                  "Set replace: true on that row to override.")
    snapshot = dict(_USER_SPECS), dict(_USER_ALIASES)
    try:
        for spec, aliases, rep in staged:
            _install(spec, aliases, rep, checked=True)  # clashes were checked above, against the table and the file
    except BaseException:  # all or nothing: a failure part-way leaves the table as it was
        _USER_SPECS.clear()
        _USER_SPECS.update(snapshot[0])
        _USER_ALIASES.clear()
        _USER_ALIASES.update(snapshot[1])
        _CACHE.clear()
        raise
    return names
