"""The built-in spec table: ``perfmodel/data/device_specs.csv``, read once when the package is imported.

One row per device, in table order (the order of :func:`perfmodel.hardware.known_gpu_types`): the fields of
:class:`~perfmodel.hardware.HardwareSpec` (an empty cell is None), ``aliases`` (other names of the device,
separated by ``;``) and ``source`` (where the figures come from, with any uncertainty stated). A number cell
without a decimal point is an int (``16``), one with a point a float (``125.0``), exactly as the figures were
written when the table was Python literals, so that :func:`perfmodel.hardware.table_digest`, which hashes the
rows, is unchanged by the move to a file. Every row is validated as it is read, like a registered device.

Aliases are names users type and names NVML / rocm-smi / hl-smi / MLPerf report, normalised by
:func:`~perfmodel.hardware._lookup.normalise` (lower case, punctuation as ``-``). Ambiguous family names map to the
variant most often rented (documented in the README): "A100" -> A100-SXM4-80GB, "H100" -> H100-SXM5-80GB,
"V100" -> V100-SXM2-32GB, "GH200" -> GH200-96GB (NVML "GH200 480GB"). rocm-smi / torch on ROCm report one device
per GCD, named "AMD Instinct MI250X/MI250" on both the MI250X and the MI250; it resolves to one GCD of the far more
deployed MI250X (Frontier, LUMI) (``mi250x/mi250`` on the MI250X-GCD row). Name "MI250-GCD" for MI250. Every
device's own name in lower case resolves to it too (added here when the row does not list it).

A CPU has no vendor datasheet peak that applies to every host; the ``cpu`` row leaves its peaks empty and
perfmodel fits CPU runs on their own (the measured runs record the CPU model and thread count).
"""

from __future__ import annotations

import csv
import io
import re
from importlib import resources

from ..exceptions import DeviceSpecError
from ._spec import NUMBER_FIELDS, HardwareSpec

#: File name of the built-in table in ``perfmodel/data``.
TABLE_FILE = "device_specs.csv"
#: The columns of the file, in order.
FILE_COLUMNS = ("name", "vendor", "architecture", "release_year", "fp32_tflops", "tf32_tflops", "fp16_tflops",
                "bf16_tflops", "fp8_tflops", "memory_gb", "memory_bandwidth_gbps", "interconnect_gbps",
                "interconnect", "network_gbps", "nvlink_domain", "aliases", "source")
_INTEGER = re.compile(r"^-?\d+$")


def _number(cell: str) -> int | float:
    """A figure as written: ``16`` is an int, ``125.0`` a float (the table digest tells them apart)."""
    return int(cell) if _INTEGER.match(cell) else float(cell)


def _row_spec(row: dict[str, str]) -> HardwareSpec:
    """One line of the file as a validated :class:`HardwareSpec`; empty cells are None."""
    figures = {key: _number(row[key]) if row[key] else None for key in NUMBER_FIELDS}
    return HardwareSpec(name=row["name"], vendor=row["vendor"], interconnect=row["interconnect"],
                        source=row["source"], architecture=row["architecture"] or None,
                        release_year=int(row["release_year"]) if row["release_year"] else None,
                        nvlink_domain=int(row["nvlink_domain"]) if row["nvlink_domain"] else None, **figures)


def read_table(text: str) -> tuple[tuple[HardwareSpec, ...], dict[str, str]]:
    """The rows of a table file's text, and its aliases (alias key -> canonical name, in file order).

    Parameters
    ----------
    text : str
        The contents of a file in the format of ``device_specs.csv``.

    Returns
    -------
    tuple of (tuple of HardwareSpec, dict of str to str)
        The rows in file order, and every alias listed, then each name in lower case that no row lists.

    Raises
    ------
    DeviceSpecError
        If the header is not :data:`FILE_COLUMNS` or a line has more or fewer cells than the header.
    TypeError
        A cell that validates to the wrong type (see :class:`HardwareSpec`).
    """
    reader = csv.DictReader(io.StringIO(text))
    if tuple(reader.fieldnames or ()) != FILE_COLUMNS:
        raise DeviceSpecError(f"{TABLE_FILE}: the header must be {', '.join(FILE_COLUMNS)}. "
                              f"Got {reader.fieldnames!r}.")
    specs, aliases = [], {}
    for row in reader:
        if None in row or None in row.values():
            raise DeviceSpecError(f"{TABLE_FILE}: line {reader.line_num} does not have one cell per column.")
        spec = _row_spec(row)
        specs.append(spec)
        for alias in (a for a in row["aliases"].split(";") if a):
            aliases[alias] = spec.name
    for spec in specs:
        aliases.setdefault(spec.name.lower(), spec.name)
    return tuple(specs), aliases


BUILTIN, BUILTIN_ALIASES = read_table(
    resources.files("perfmodel").joinpath("data").joinpath(TABLE_FILE).read_text(encoding="utf-8"))
BUILTIN_BY_NAME = {s.name: s for s in BUILTIN}
