"""What every measured run sets up before its steps: the precision flags and the optimizer (shared by the worker,
:mod:`perfmodel.measure._worker`, and the layout runs, :mod:`perfmodel.measure._layout_worker`)."""

from __future__ import annotations

from ..hardware import PRECISIONS

__all__ = ["setup_precision", "make_optimizer", "set_tf32"]


def set_tf32(torch, enabled: bool) -> None:
    """TF32 for matmuls and cuDNN (convolutions, RNNs) on or off.

    Through ``set_float32_matmul_precision`` and ``cudnn.allow_tf32``, which keep torch's legacy and per-backend
    precision settings consistent: setting ``torch.backends.cuda.matmul.fp32_precision`` directly makes a later
    ``torch.get_float32_matmul_precision()`` (which torch.compile's inductor calls) raise in recent torch.
    """
    torch.set_float32_matmul_precision("high" if enabled else "highest")
    torch.backends.cudnn.allow_tf32 = bool(enabled)


def setup_precision(precision: str, device) -> tuple:
    """Set the device flags for ``precision``; return ``(autocast dtype or None, GradScaler or None, what runs)``.

    ``fp32`` turns TF32 off; ``tf32`` turns it on where the GPU has it (compute capability 8.0+; else the run is
    plain fp32 and records so); ``bf16``/``fp16`` autocast (fp16 with a GradScaler). On CPU, fp32 and bf16.
    """
    import torch

    cuda = device.type == "cuda"
    if precision not in PRECISIONS or precision == "fp8":  # the measured training step has no fp8 path
        raise ValueError(f"precision must be fp32, tf32, fp16 or bf16 for a measured run. Got {precision!r}.")
    if precision in ("fp16", "tf32") and not cuda:
        raise ValueError(f"precision {precision!r} needs a CUDA device; on CPU use fp32 or bf16.")
    ran = precision
    if cuda:
        tf32_capable = torch.cuda.get_device_capability(device) >= (8, 0)
        set_tf32(torch, precision == "tf32" and tf32_capable)
        if precision == "tf32" and not tf32_capable:
            ran = "fp32"
        if precision == "bf16" and not torch.cuda.is_bf16_supported(including_emulation=False):
            raise RuntimeError("bf16 is not supported on this GPU (compute capability < 8.0)")
    amp_dtype = {"bf16": torch.bfloat16, "fp16": torch.float16}.get(precision)
    scaler = torch.amp.GradScaler("cuda") if (precision == "fp16" and cuda) else None
    return amp_dtype, scaler, ran


def make_optimizer(torch, name: str, params):
    """The timed step's optimizer: AdamW (lr 1e-4) or SGD (lr 1e-3, momentum 0.9) over ``params``."""
    if name == "adamw":
        return torch.optim.AdamW(params, lr=1e-4)
    if name == "sgd":
        return torch.optim.SGD(params, lr=1e-3, momentum=0.9)
    raise ValueError(f"optimizer must be 'adamw' or 'sgd'. Got {name!r}.")
