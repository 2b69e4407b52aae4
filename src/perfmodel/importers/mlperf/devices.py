"""Device names in MLPerf submissions: the accelerator a system description names, resolved by
:func:`perfmodel.hardware.resolve_gpu_type` (:func:`resolve_device`: only MLPerf's bracketed power notes are
dropped first), its fastest dense peak, and whether a launch config's file name names a device model (the
configs of a benchmark are named for their systems, ``config_DGXH100_64x8x....sh``)."""

from __future__ import annotations

import re

from ...exceptions import UnknownHardwareError
from ...hardware import get_spec, resolve_gpu_type

#: Family words that are not a device model on their own: the model is the family and the next part
#: (``RTX-4090`` -> ``RTX4090``, ``TPU-v5p`` -> ``TPUV5P``, ``RX-7900-XTX`` -> ``RX7900``).
_FAMILY_WORDS = frozenset({"RTX", "TPU", "RX"})
#: Vendor system prefixes glued to the model in config names (``DGXH100``): NVIDIA's DGX / HGX boards carry the
#: SXM parts.
_SXM_SYSTEM = re.compile(r"^(?:DGX|HGX)([A-Z0-9]+)$")
#: ``<system>x<count><model>`` in config names (``XE9680x8H100``), or the model after a lower-case / digit
#: prefix (``2xA5000``, Lambda's ``1ccB200``): the model part starts at an upper-case letter, so ``GB200``
#: never yields ``B200``.
_COUNTED = re.compile(r"^(?:[A-Za-z0-9]*?[0-9a-z])?x\d+([A-Z][A-Za-z0-9]*)$|^[0-9a-z]+([A-Z][A-Za-z0-9]*)$")
#: Device types (``perfmodel.hardware`` names) of PCIe cards: ``H100-PCIE-80GB``; ``H200-NVL-141GB`` (the NVL
#: parts are PCIe cards too).
PCIE_DEVICE = re.compile(r"PCIE|(?:^|-)NVL(?:-|$)", re.I)
#: Device models whose NVLink domain is a rack, not the node a system description counts (GB200 NVL72: 4 devices
#: per compute tray, 72 per NVLink domain).
_RACK_NVLINK = re.compile(r"^GB\d")


def gpus_per_node(gpu_type: str | None, accelerators_per_node: int | None) -> int | None:
    """Devices per NVLink domain (the schema's ``gpus_per_node``) from a system description's
    ``accelerators_per_node``: that count, except on rack-scale NVLink parts (``GB200``, ``GB300``), whose domain
    the description does not give in a field (None there, and where the device is unknown)."""
    if not gpu_type or not accelerators_per_node or accelerators_per_node < 1:
        return None
    return None if _RACK_NVLINK.match(device_model(gpu_type)) else accelerators_per_node


def device_model(gpu_type: str | None) -> str:
    """The model part of a device type as configs name it: its first ``-``-separated part, upper case
    (``H100`` for ``H100-SXM5-80GB``, ``B200``, ``GB200``, ``L40S``, ``MI325X``), or the first two joined where
    the first is a family word (``RTX4090``, ``TPUV5P``; :data:`_FAMILY_WORDS`)."""
    if not isinstance(gpu_type, str) or not gpu_type.strip():
        return ""
    parts = [p for p in re.split(r"[-_ ]+", gpu_type.strip().upper()) if p]
    if len(parts) > 1 and parts[0] in _FAMILY_WORDS:
        return parts[0] + parts[1]
    return parts[0]


def config_names_device(name: str, model: str, pcie: bool) -> bool:
    """Whether a config's file name names the device ``model`` (from :func:`device_model`): one of its
    alphanumeric parts is the model, exactly (``B200`` is not ``GB200``, ``L4`` not ``L40S``), also after a
    DGX/HGX prefix (``DGXH100``), a count (``XE9680x8H100``, ``2xA5000``) or a lower-case prefix
    (``1ccB200``). The PCIe and SXM parts of a model are told apart only where the name says which: a
    DGX/HGX prefix or an ``SXM`` part is an SXM system, not a PCIe card's (``pcie``), and a ``PCIE`` part is
    not an SXM part's."""
    if not model:
        return False
    stem = re.sub(r"(?i)\.sh$", "", name)
    tokens = [t for t in re.split(r"[^A-Za-z0-9]+", stem) if t]
    upper = {t.upper() for t in tokens}
    named_pcie = any("PCIE" in t for t in upper)
    sxm = any(t.startswith("SXM") for t in upper)
    hit = False
    for t in tokens:
        u = t.upper()
        m = _SXM_SYSTEM.match(u)
        c = _COUNTED.match(t)
        if u == model:
            hit = True
        elif m and m.group(1) == model:
            hit, sxm = True, True
        elif c and (c.group(1) or c.group(2)).upper() == model:
            hit = True
    if not hit:
        return False
    return not (pcie and sxm) and not (named_pcie and not pcie)


def peak_flops(gpu_type: str | None) -> float | None:
    """An upper bound on a device's FLOP/s: its dense peak at the fastest precision it has (fp8 where the table
    lists it, else bf16 or fp16; a log's precision label can be wrong, the device's fastest peak cannot be
    beaten)."""
    if gpu_type is None:
        return None
    spec = get_spec(gpu_type)
    peaks = [spec.peak_tflops(p) for p in ("fp8", "bf16", "fp16")]
    best = max((p for p in peaks if p), default=None)
    return 1e12 * best if best else None


def resolve_device(name: str | None) -> str | None:
    """The perfmodel device type of a system description's ``accelerator_model_name``, or None.

    :func:`perfmodel.hardware.resolve_gpu_type` on the name as it is, else on the name without a bracketed note
    (MLPerf's power limits: ``NVIDIA A100-SXM4-80GB (400W)``); None where neither resolves. (MLPerf's
    ``A100-SXM-40GB`` for the SXM4 40 GB part is a hardware alias.)

    Parameters
    ----------
    name : str or None
        The name.

    Returns
    -------
    str or None
        The canonical device type.
    """
    if not name:
        return None
    bare = re.sub(r"\s*\([^)]*\)", "", name)
    for candidate in dict.fromkeys((name, bare)):
        try:
            return resolve_gpu_type(candidate)
        except UnknownHardwareError:
            continue
    return None
