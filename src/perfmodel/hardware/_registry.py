"""Registered devices: :func:`register_device`, :func:`unregister_device`, :func:`load_devices` (YAML or CSV),
the devices named by ``PERFMODEL_DEVICES`` (read on first lookup), and :func:`table_digest` of the effective table.

Registered rows and aliases live in the dicts of :mod:`._lookup` (``USER_SPECS``, ``USER_ALIASES``), an overlay
on the built-in table that is looked up first.
"""

from __future__ import annotations

import csv
import hashlib
import json
import os
import re
from collections import Counter
from collections.abc import Iterable
from dataclasses import asdict
from pathlib import Path
from typing import Any, TypedDict

from ..exceptions import DeviceSpecError, UnknownHardwareError
from ._builtin import BUILTIN, BUILTIN_ALIASES, BUILTIN_BY_NAME
from ._lookup import CACHE, USER_ALIASES, USER_SPECS, alias_target, candidates, lookup
from ._spec import FIELDS, NUMBER_FIELDS, HardwareSpec

#: Environment variable naming device files (YAML or CSV) that are registered on first lookup.
DEVICES_ENV = "PERFMODEL_DEVICES"


class _EnvState(TypedDict, total=False):
    """Whether ``PERFMODEL_DEVICES`` has been read, and the error its files raised (raised again on each lookup)."""

    loaded: bool
    error: Exception


_ENV_STATE: _EnvState = {"loaded": False}
_DIGEST: dict[str, str] = {}


def ensure_env_loaded() -> None:
    """Register the devices named by ``PERFMODEL_DEVICES`` once; a broken file raises on every lookup."""
    if _ENV_STATE["loaded"]:
        failure = _ENV_STATE.get("error")
        if failure is not None:
            raise failure
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
    ensure_env_loaded()
    if "builtin" not in _DIGEST:
        _DIGEST["builtin"] = hashlib.sha256(json.dumps(
            [[asdict(s) for s in BUILTIN], sorted(BUILTIN_ALIASES.items())], sort_keys=True).encode()).hexdigest()
    # The registered overlay is hashed on every call (it is small, and tests and users may edit it directly).
    h = hashlib.sha256(_DIGEST["builtin"].encode())
    for name in sorted(USER_SPECS):
        h.update(json.dumps(asdict(USER_SPECS[name]), sort_keys=True, default=repr).encode())
    h.update(json.dumps(sorted(USER_ALIASES.items())).encode())
    return h.hexdigest()


# --- registration ----------------------------------------------------------------------------------------------

def _keys_of(name: str, aliases: Iterable[str]) -> list[str]:
    keys = [name.lower()]
    for alias in aliases:
        keys.extend(candidates(alias)[:1])
    keys.append(candidates(name)[0])
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
        target = alias_target(key)
        if target is not None and target != spec.name:
            clashes.append(f"{key!r} already names {target}")
        elif target is None and lookup(key) not in (None, spec.name):
            clashes.append(f"{key!r} already resolves to {lookup(key)}")
    if spec.name in BUILTIN_BY_NAME or spec.name in USER_SPECS:
        clashes.append(f"{spec.name!r} is already a device")
    return clashes


def _install(spec: HardwareSpec, aliases: tuple[str, ...], replace: bool, *, checked: bool = False) -> None:
    keys = _keys_of(spec.name, aliases)
    clashes = [] if checked else _clashes(spec, keys)
    if clashes and not replace:
        raise DeviceSpecError(f"Cannot register device {spec.name!r}: {'; '.join(clashes)}. "
                              "Pass replace=True to override.")
    if spec.name in USER_SPECS:
        _drop_aliases(spec.name)
    USER_SPECS[spec.name] = spec
    for key in keys:
        USER_ALIASES[key] = spec.name
    CACHE.clear()


def _drop_aliases(name: str) -> None:
    for key in [k for k, v in USER_ALIASES.items() if v == name]:
        del USER_ALIASES[key]


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
    ensure_env_loaded()
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
    canonical = name if name in USER_SPECS else USER_ALIASES.get(candidates(name)[0])
    if canonical is None or canonical not in USER_SPECS:
        raise UnknownHardwareError(f"{name!r} is not a registered device (registered: "
                                   f"{', '.join(USER_SPECS) or 'none'}); built-in devices cannot be removed.")
    del USER_SPECS[canonical]
    _drop_aliases(canonical)
    CACHE.clear()


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
        if key in NUMBER_FIELDS and isinstance(value, str):
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
            spec = HardwareSpec(name=row["name"], vendor=row["vendor"],
                                **{k: row.get(k, None) for k in NUMBER_FIELDS},
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
    snapshot = dict(USER_SPECS), dict(USER_ALIASES)
    try:
        for spec, aliases, rep in staged:
            _install(spec, aliases, rep, checked=True)  # clashes were checked above, against the table and the file
    except BaseException:  # all or nothing: a failure part-way leaves the table as it was
        USER_SPECS.clear()
        USER_SPECS.update(snapshot[0])
        USER_ALIASES.clear()
        USER_ALIASES.update(snapshot[1])
        CACHE.clear()
        raise
    return names
