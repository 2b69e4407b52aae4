"""The checked accelerator spec table and the lookup that resolves the names users and NVML report.

Figures are **dense** (no structured-sparsity doubling) peak TFLOPS per dtype, memory size in GB, memory bandwidth
in GB/s and the device-to-device interconnect bandwidth in GB/s as the vendor quotes it (bidirectional aggregate
for NVLink / Infinity Fabric, both directions of a x16 link for PCIe). ``None`` means the device has no such
mode (e.g. no TF32 on V100, no BF16 on T4). Sources are the vendors' datasheets, cited per row.

An unknown name raises :class:`~perfmodel.exceptions.UnknownHardwareError` listing the closest known names.
There is no silent fallback to a default GPU.

Examples
--------
>>> from perfmodel.hardware import get_spec
>>> get_spec("NVIDIA A100-SXM4-80GB").name
'A100-SXM4-80GB'
>>> get_spec("A100").peak_tflops("bf16")
312.0
"""

from __future__ import annotations

import difflib
import re
from dataclasses import asdict, dataclass

import pandas as pd

from .exceptions import UnknownHardwareError

__all__ = ["HardwareSpec", "get_spec", "resolve_gpu_type", "spec_table", "known_gpu_types", "PRECISIONS"]

#: Precisions perfmodel knows; ``fp16`` and ``bf16`` share the tensor-core peak on every device listed that has both.
PRECISIONS = ("fp32", "tf32", "fp16", "bf16")


@dataclass(frozen=True)
class HardwareSpec:
    """One accelerator's datasheet figures (dense peaks)."""

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

    def peak_tflops(self, precision: str) -> float | None:
        """Dense peak TFLOPS for ``precision`` (``fp32``, ``tf32``, ``fp16``, ``bf16``); None where unsupported.

        ``tf32`` falls back to the fp32 peak on devices without TF32 tensor cores, because PyTorch then runs
        the matmul in plain fp32.
        """
        if precision not in PRECISIONS:
            raise ValueError(f"precision must be one of {PRECISIONS}. Got {precision!r} instead.")
        value = getattr(self, f"{precision}_tflops")
        if value is None and precision == "tf32":
            return self.fp32_tflops
        return value

    def to_dict(self) -> dict:
        return asdict(self)


def _s(name, vendor, fp32, tf32, fp16, bf16, mem, bw, link, link_kind, source):
    return HardwareSpec(name, vendor, fp32, tf32, fp16, bf16, mem, bw, link, link_kind, source)


# fmt: off
_SPECS: tuple[HardwareSpec, ...] = (
    # name                 vendor    fp32   tf32    fp16    bf16    memGB  GB/s   link  kind
    _s("V100-SXM2-32GB",   "nvidia", 15.7,  None,   125.0,  None,   32,    900,   300,  "nvlink2",
       "NVIDIA Tesla V100 datasheet (2020): 15.7 FP32, 125 tensor FP16, 900 GB/s, NVLink 300 GB/s"),
    _s("V100-PCIE-32GB",   "nvidia", 14.0,  None,   112.0,  None,   32,    900,   32,   "pcie3",
       "NVIDIA Tesla V100 datasheet (2020): 14 FP32, 112 tensor FP16, PCIe Gen3 32 GB/s"),
    _s("T4",               "nvidia", 8.1,   None,   65.0,   None,   16,    320,   32,   "pcie3",
       "NVIDIA T4 datasheet: 8.1 FP32, 65 mixed FP16, 320 GB/s, PCIe Gen3 x16"),
    _s("A100-SXM4-40GB",   "nvidia", 19.5,  156.0,  312.0,  312.0,  40,    1555,  600,  "nvlink3",
       "NVIDIA A100 datasheet (2021): 19.5 FP32, 156 TF32, 312 BF16/FP16 dense, 1,555 GB/s, NVLink 600 GB/s"),
    _s("A100-SXM4-80GB",   "nvidia", 19.5,  156.0,  312.0,  312.0,  80,    2039,  600,  "nvlink3",
       "NVIDIA A100 datasheet (2021): A100 80GB SXM 2,039 GB/s, NVLink 600 GB/s"),
    _s("A100-PCIE-40GB",   "nvidia", 19.5,  156.0,  312.0,  312.0,  40,    1555,  64,   "pcie4",
       "NVIDIA A100 datasheet (2021): A100 40GB PCIe 1,555 GB/s, PCIe Gen4 64 GB/s"),
    _s("A100-PCIE-80GB",   "nvidia", 19.5,  156.0,  312.0,  312.0,  80,    1935,  64,   "pcie4",
       "NVIDIA A100 datasheet (2021): A100 80GB PCIe 1,935 GB/s, PCIe Gen4 64 GB/s"),
    _s("A10",              "nvidia", 31.2,  62.5,   125.0,  125.0,  24,    600,   64,   "pcie4",
       "NVIDIA A10 datasheet: 31.2 FP32, 62.5 TF32, 125 BF16/FP16 dense, 600 GB/s, PCIe Gen4 64 GB/s"),
    _s("A40",              "nvidia", 37.4,  74.8,   149.7,  149.7,  48,    696,   112.5, "nvlink-bridge",
       "NVIDIA A40 datasheet: 37.4 FP32, 74.8 TF32, 149.7 BF16/FP16 dense, 696 GB/s, NVLink bridge 112.5 GB/s"),
    _s("L4",               "nvidia", 30.3,  60.0,   121.0,  121.0,  24,    300,   64,   "pcie4",
       "NVIDIA L4 datasheet: 30.3 FP32, 120 TF32 / 242 FP16 with sparsity (halved here), 300 GB/s, PCIe Gen4"),
    _s("L40S",             "nvidia", 91.6,  183.0,  362.05, 362.05, 48,    864,   64,   "pcie4",
       "NVIDIA L40S datasheet: 91.6 FP32, 366 TF32 / 733 BF16 with sparsity (halved here), 864 GB/s, PCIe Gen4"),
    _s("RTX-3090",         "nvidia", 35.6,  35.6,   71.0,   71.0,   24,    936,   64,   "pcie4",
       "NVIDIA Ampere GA102 whitepaper, GeForce RTX 3090: 35.6 FP32, 71 FP16/BF16 tensor with FP32 accumulate"),
    _s("RTX-4090",         "nvidia", 82.6,  82.6,   165.2,  165.2,  24,    1008,  64,   "pcie4",
       "NVIDIA Ada Lovelace whitepaper, GeForce RTX 4090: 82.6 FP32, 165.2 FP16/BF16 tensor with FP32 accumulate"),
    _s("RTX-A6000",        "nvidia", 38.7,  77.4,   154.8,  154.8,  48,    768,   112.5, "nvlink-bridge",
       "NVIDIA RTX A6000 datasheet: 38.7 FP32, 309.7 tensor TFLOPS with sparsity (154.8 dense), 768 GB/s"),
    _s("RTX-6000-Ada",     "nvidia", 91.1,  182.1,  364.2,  364.2,  48,    960,   64,   "pcie4",
       "NVIDIA RTX 6000 Ada datasheet: 91.1 FP32, 1,457 FP8 tensor with sparsity (364.2 FP16 dense), 960 GB/s"),
    _s("H100-SXM5-80GB",   "nvidia", 67.0,  494.7,  989.4,  989.4,  80,    3350,  900,  "nvlink4",
       "NVIDIA H100 datasheet: SXM 67 FP32, 989 TF32 / 1,979 BF16 with sparsity (halved here), 3.35 TB/s, NVLink 900 GB/s"),
    _s("H100-PCIE-80GB",   "nvidia", 51.0,  378.0,  756.0,  756.0,  80,    2000,  128,  "pcie5",
       "NVIDIA H100 datasheet: PCIe 51 FP32, 756 TF32 / 1,513 BF16 with sparsity (halved here), 2 TB/s, PCIe Gen5 128 GB/s"),
    _s("H200-SXM-141GB",   "nvidia", 67.0,  494.7,  989.4,  989.4,  141,   4800,  900,  "nvlink4",
       "NVIDIA H200 datasheet: SXM 67 FP32, 989 TF32 / 1,979 BF16 with sparsity (halved here), 141 GB, 4.8 TB/s"),
    _s("H200-NVL-141GB",   "nvidia", 60.0,  417.5,  835.5,  835.5,  141,   4800,  900,  "nvlink-bridge",
       "NVIDIA H200 NVL datasheet: 60 FP32, 835 TF32 / 1,671 BF16 with sparsity (halved here), 141 GB, 4.8 TB/s, "
       "NVLink bridge 900 GB/s"),
    _s("B200",             "nvidia", 75.0,  1125.0, 2250.0, 2250.0, 180,   8000,  1800, "nvlink5",
       "NVIDIA HGX B200 datasheet (per GPU, 1/8 of 8-GPU figures): 18 PF TF32 / 36 PF FP16 sparse, 600 TF FP32, "
       "1.44 TB, 64 TB/s, NVLink 1.8 TB/s"),
    _s("GB200",            "nvidia", 80.0,  1250.0, 2500.0, 2500.0, 186,   8000,  1800, "nvlink5",
       "NVIDIA GB200 NVL72 datasheet (per GPU, 1/72 of rack figures): 180 PF TF32 / 360 PF FP16 sparse, "
       "5,760 TF FP32, 13.4 TB HBM3e at 576 TB/s, NVLink 1.8 TB/s"),
    _s("MI250X",           "amd",    95.7,  None,   383.0,  383.0,  128,   3277,  800,  "infinity-fabric",
       "AMD Instinct MI250X datasheet: 95.7 FP32 matrix, 383 FP16/BF16, 128 GB HBM2e 3.2 TB/s, 8 IF links 800 GB/s"),
    _s("MI300X",           "amd",    163.4, 653.7,  1307.4, 1307.4, 192,   5300,  896,  "infinity-fabric",
       "AMD Instinct MI300X datasheet: 163.4 FP32 matrix, 653.7 TF32, 1,307.4 FP16/BF16 dense, 5.3 TB/s, IF 896 GB/s"),
    _s("MI325X",           "amd",    163.4, 653.7,  1307.4, 1307.4, 256,   6000,  896,  "infinity-fabric",
       "AMD Instinct MI325X datasheet: 163.4 FP32 matrix, 653.7 TF32, 1,307.4 FP16/BF16 dense, 256 GB, 6 TB/s"),
    # A CPU has no vendor datasheet peak that applies to every host; perfmodel leaves its peaks empty and
    # fits CPU runs on their own (the measured runs record the CPU model and thread count).
    _s("cpu",              "any",    None,  None,   None,   None,   None,  None,  None, "shared-memory",
       "host CPU: peaks depend on the host; not used for cross-hardware scaling"),
)
# fmt: on

_BY_NAME = {s.name: s for s in _SPECS}

# Names users type and names NVML / rocm-smi report, normalised by _normalise(). Ambiguous family names map to
# the variant most often rented (documented in the README): "A100" -> A100-SXM4-80GB, "H100" -> H100-SXM5-80GB.
_ALIASES: dict[str, str] = {
    "v100": "V100-SXM2-32GB", "v100-sxm2": "V100-SXM2-32GB", "v100-sxm2-32gb": "V100-SXM2-32GB",
    "v100-sxm2-16gb": "V100-SXM2-32GB", "v100-pcie": "V100-PCIE-32GB", "v100-pcie-32gb": "V100-PCIE-32GB",
    "v100-pcie-16gb": "V100-PCIE-32GB",
    "t4": "T4",
    "a100": "A100-SXM4-80GB", "a100-sxm4-80gb": "A100-SXM4-80GB", "a100-sxm-80gb": "A100-SXM4-80GB",
    "a100-80gb": "A100-SXM4-80GB", "a100-sxm4-40gb": "A100-SXM4-40GB", "a100-40gb": "A100-SXM4-40GB",
    "a100-sxm": "A100-SXM4-80GB", "a100-sxm4": "A100-SXM4-80GB",
    "a100-pcie-40gb": "A100-PCIE-40GB", "a100-pcie": "A100-PCIE-40GB", "a100-80gb-pcie": "A100-PCIE-80GB",
    "a100-pcie-80gb": "A100-PCIE-80GB",
    "a10": "A10", "a10g": "A10", "a40": "A40", "l4": "L4", "l40s": "L40S",
    "rtx-3090": "RTX-3090", "3090": "RTX-3090", "rtx-4090": "RTX-4090", "4090": "RTX-4090",
    "rtx-a6000": "RTX-A6000", "a6000": "RTX-A6000",
    "rtx-6000-ada": "RTX-6000-Ada", "rtx-6000-ada-generation": "RTX-6000-Ada",
    "h100": "H100-SXM5-80GB", "h100-sxm": "H100-SXM5-80GB", "h100-sxm5": "H100-SXM5-80GB",
    "h100-sxm5-80gb": "H100-SXM5-80GB", "h100-80gb-hbm3": "H100-SXM5-80GB", "h100-sxm-80gb": "H100-SXM5-80GB",
    "h100-pcie": "H100-PCIE-80GB", "h100-pcie-80gb": "H100-PCIE-80GB",
    "h200": "H200-SXM-141GB", "h200-sxm": "H200-SXM-141GB", "h200-sxm-141gb": "H200-SXM-141GB",
    "h200-141gb-hbm3e": "H200-SXM-141GB",
    "h200-nvl": "H200-NVL-141GB", "h200-nvl-141gb": "H200-NVL-141GB",
    "b200": "B200", "b200-sxm": "B200", "gb200": "GB200", "mi250x": "MI250X", "mi300x": "MI300X", "mi325x": "MI325X",
    "cpu": "cpu",
}
for _spec in _SPECS:
    _ALIASES.setdefault(_spec.name.lower(), _spec.name)

_PREFIXES = ("nvidia-", "tesla-", "geforce-", "amd-", "instinct-", "quadro-")


def _normalise(name: str) -> str:
    key = re.sub(r"[\s_]+", "-", name.strip().lower())
    changed = True
    while changed:
        changed = False
        for prefix in _PREFIXES:
            if key.startswith(prefix):
                key, changed = key[len(prefix):], True
    return key


# Trailing tokens that describe memory or packaging, not the chip: dropped one at a time when a reported name
# is not known as a whole ("MI300X 192GB HBM3" -> "mi300x"). Tokens that name another variant (NVL, PCIe) are
# never dropped, so a variant never resolves to its sibling.
_PACKAGING = re.compile(r"^(\d+gb|hbm\d*e?|dlc|sxm\d*|oam|gpu)$")


def _lookup(key: str) -> str | None:
    if key in _ALIASES:
        return _ALIASES[key]
    inner = re.search(r"\(([^)]+)\)", key)  # "blackwell-gpu-(b200-sxm-180gb)"
    if inner:
        found = _lookup(inner.group(1).strip("-"))
        if found:
            return found
    parts = key.split("-")
    while len(parts) > 1 and _PACKAGING.match(parts[-1]):
        parts = parts[:-1]
        if "-".join(parts) in _ALIASES:
            return _ALIASES["-".join(parts)]
    return None


def resolve_gpu_type(name: str) -> str:
    """Return the canonical spec-table name for ``name`` (a user's or NVML's device name).

    Raises
    ------
    TypeError
        If ``name`` is not a string.
    UnknownHardwareError
        If the name is not known; the message lists the closest known names.
    """
    if not isinstance(name, str):
        raise TypeError(f"gpu_type must be a str such as 'A100' or 'cpu'. Got {name!r} of type {type(name).__name__}.")
    key = _normalise(name)
    found = _lookup(key)
    if found is not None:
        return found
    candidates = sorted(set(_ALIASES) | {s.name for s in _SPECS})
    close = difflib.get_close_matches(key, candidates, n=4, cutoff=0.4)
    close_names = list(dict.fromkeys(_ALIASES.get(c, c) for c in close))
    hint = f" Closest known names: {', '.join(close_names)}." if close_names else ""
    raise UnknownHardwareError(
        f"Unknown gpu_type {name!r}.{hint} Known: {', '.join(known_gpu_types())}."
    )


def get_spec(name: str) -> HardwareSpec:
    """Return the :class:`HardwareSpec` for ``name`` (any alias)."""
    return _BY_NAME[resolve_gpu_type(name)]


def known_gpu_types() -> list[str]:
    """The canonical names of every device in the table."""
    return [s.name for s in _SPECS]


def spec_table() -> pd.DataFrame:
    """The whole table as a DataFrame, one row per device."""
    return pd.DataFrame([s.to_dict() for s in _SPECS]).set_index("name")
