"""A device's spec row (:class:`HardwareSpec`), its validation, and the precisions perfmodel knows.

See :mod:`perfmodel.hardware` for what the figures mean (dense peaks, no sparsity doubling; the network figure of
the vendor's reference system).
"""

from __future__ import annotations

import math
import numbers
from dataclasses import asdict, dataclass, fields
from typing import NamedTuple

from ..exceptions import DeviceSpecError


class Precision(NamedTuple):
    """What perfmodel knows about one training precision (a row of :data:`PRECISION_TABLE`)."""

    #: The name (``"bf16"``).
    name: str
    #: Bytes per activation element that a run's memory-bound kernels move (:data:`ELEMENT_BYTES`).
    element_bytes: int
    #: Bytes per parameter of the weights a device holds for compute (fp8 training keeps a 16-bit copy beside the
    #: fp8 one; the mixed precisions' fp32 master weights are optimizer state).
    weight_bytes: float
    #: The :class:`HardwareSpec` field of its dense peak.
    peak_field: str
    #: 16- or 8-bit compute with fp32 master weights (:data:`MIXED_PRECISIONS`).
    mixed: bool


#: Every precision perfmodel knows, one record each: the single source of :data:`PRECISIONS`,
#: :data:`ELEMENT_BYTES`, :data:`MIXED_PRECISIONS` and the spec's peak fields. ``fp16`` and ``bf16`` share the
#: tensor-core peak on most devices (not on MI100, nor on Turing/Volta, which have no bf16); ``fp8`` is the dense
#: FP8 tensor peak (None before Hopper/Ada/CDNA3). Activations move 4 bytes in fp32 (TF32 is an fp32 storage
#: format), 2 in fp16/bf16 mixed precision, and 2 under fp8 training too (fp8 is the GEMMs' input format;
#: activations, norms and the other memory-bound kernels stay in 16 bits): a device's bandwidth moves half as many
#: fp32 elements per second as 16-bit ones.
PRECISION_TABLE = {p.name: p for p in (
    Precision("fp32", 4, 4.0, "fp32_tflops", False),
    Precision("tf32", 4, 4.0, "tf32_tflops", False),
    Precision("fp16", 2, 2.0, "fp16_tflops", True),
    Precision("bf16", 2, 2.0, "bf16_tflops", True),
    Precision("fp8", 2, 3.0, "fp8_tflops", True),
)}
#: Precisions perfmodel knows, in the table's order.
PRECISIONS = tuple(PRECISION_TABLE)
#: Bytes per activation element that a run's memory-bound kernels move at each precision
#: (:attr:`Precision.element_bytes`).
ELEMENT_BYTES = {name: p.element_bytes for name, p in PRECISION_TABLE.items()}
#: Mixed precisions: 16- or 8-bit compute with fp32 master weights (the rest, fp32 and TF32, train in fp32 storage).
MIXED_PRECISIONS = tuple(name for name, p in PRECISION_TABLE.items() if p.mixed)

def check_precision(precision: object, where: str) -> str:
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


_PEAK_FIELDS = tuple(p.peak_field for p in PRECISION_TABLE.values())
#: The number fields of a row (validated as positive finite numbers or None).
NUMBER_FIELDS = _PEAK_FIELDS + ("memory_gb", "memory_bandwidth_gbps", "interconnect_gbps", "network_gbps")
#: The columns of :func:`perfmodel.hardware.spec_table`, in order (the name is its index).
TABLE_COLUMNS = ("vendor", "architecture", "release_year", "fp32_tflops", "tf32_tflops", "fp16_tflops",
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
    See :mod:`perfmodel.hardware` for what the figures mean (dense peaks, no sparsity doubling).
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
        value = getattr(self, PRECISION_TABLE[precision].peak_field)
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
        return {"name": d["name"], **{k: d[k] for k in TABLE_COLUMNS}}


#: The fields of :class:`HardwareSpec`, in order.
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
    for name in NUMBER_FIELDS:
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
