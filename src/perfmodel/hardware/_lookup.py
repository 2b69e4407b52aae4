"""Name lookup: normalisation, the built-in and registered aliases, cloud instance types, packaging tokens.

Also the registry's state (the registered rows, their aliases, the lookup cache), which :mod:`._registry`
changes and :mod:`._resolve` reads: every module of :mod:`perfmodel.hardware` shares these three dicts, and
they are only ever changed in place.
"""

from __future__ import annotations

import re

from ._builtin import BUILTIN_ALIASES
from ._spec import HardwareSpec

# Cloud instance types -> accelerator (matched on the normalised name; the accelerator count is not implied).
_INSTANCE_PATTERNS: tuple[tuple[re.Pattern[str], str], ...] = tuple((re.compile(p), n) for p, n in (
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
    # Azure VM sizes ("Standard_" is dropped by normalise) and series names
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


def candidates(name: str) -> list[str]:
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


def normalise(name: str) -> str:
    """The normalised name with every vendor/brand prefix dropped (the last of :func:`candidates`)."""
    return candidates(name)[-1]


# Trailing tokens that describe memory, packaging or marketing, not the chip: dropped one at a time when a
# reported name is not known as a whole ("MI300X 192GB HBM3" -> "mi300x", "Gaudi 2 AI Accelerator" -> "gaudi-2").
# Tokens that name another variant (NVL, PCIe) are never dropped, so a variant never resolves to its sibling.
_PACKAGING = re.compile(r"^(\d+gb|\d+g|hbm\d*e?|dlc|sxm\d*|oam|gpu|ai|accelerator|module|generation)$")

# --- registry state: built-in rows plus an overlay of registered ones -----------------------------------------
USER_SPECS: dict[str, HardwareSpec] = {}
USER_ALIASES: dict[str, str] = {}
CACHE: dict[str, str] = {}


def alias_target(key: str) -> str | None:
    """The device a normalised name is an alias of (registered aliases first); None if it is none."""
    if key in USER_ALIASES:
        return USER_ALIASES[key]
    return BUILTIN_ALIASES.get(key)


def _lookup_key(key: str) -> str | None:
    found = alias_target(key)
    if found is not None:
        return found
    for pattern, target in _INSTANCE_PATTERNS:
        if pattern.match(key):
            return target
    inner = re.search(r"[(\[]([^)\]]+)[)\]]", key)  # "blackwell-gpu-(b200-sxm-180gb)", "aldebaran-[instinct-mi210]"
    if inner:
        for cand in candidates(inner.group(1).strip("-")):
            found = _lookup_key(cand)
            if found:
                return found
    parts = key.split("-")
    while len(parts) > 1 and _PACKAGING.match(parts[-1]):
        parts = parts[:-1]
        found = alias_target("-".join(parts))
        if found is not None:
            return found
    return None


def lookup(name: str) -> str | None:
    """The canonical name ``name`` resolves to (aliases, instance types, packaging dropped); None if unknown."""
    for key in candidates(name):
        found = _lookup_key(key)
        if found is not None:
            return found
    return None

