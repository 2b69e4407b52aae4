"""Resolving a name to a row: :func:`resolve_gpu_type`, :func:`get_spec`, :func:`known_gpu_types`, the
refusal of NVIDIA MIG slices, and the whole effective table as a DataFrame (:func:`spec_table`).
"""

from __future__ import annotations

import difflib
import re
from typing import TYPE_CHECKING

from ..exceptions import UnknownHardwareError
from ._builtin import BUILTIN, BUILTIN_ALIASES, BUILTIN_BY_NAME
from ._lookup import CACHE, USER_ALIASES, USER_SPECS, lookup, normalise
from ._registry import DEVICES_ENV, ensure_env_loaded
from ._spec import TABLE_COLUMNS, HardwareSpec

if TYPE_CHECKING:
    import pandas as pd

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
    parent_name = lookup(parent) if parent else None
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
    ensure_env_loaded()
    found = CACHE.get(name)
    if found is not None:
        return found
    found = lookup(name)
    if found is not None:
        CACHE[name] = found
        return found
    _refuse_mig(name)
    key = normalise(name)
    names = {s: s for s in known_gpu_types()}
    candidates = {**{k: v for k, v in BUILTIN_ALIASES.items()}, **USER_ALIASES,
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
    spec = USER_SPECS.get(canonical)
    return spec if spec is not None else BUILTIN_BY_NAME[canonical]


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
    ensure_env_loaded()
    return [s.name for s in BUILTIN] + [n for n in USER_SPECS if n not in BUILTIN_BY_NAME]




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
    import pandas as pd  # imported here, not with perfmodel.hardware: name lookups do not need it

    rows = [get_spec(n).to_dict() for n in known_gpu_types()]
    table = pd.DataFrame(rows).set_index("name")
    table["release_year"] = table["release_year"].astype("Int64")
    table["nvlink_domain"] = table["nvlink_domain"].astype("Int64")
    return table[list(TABLE_COLUMNS)]

