"""Which oneDNN kernel runs each pass of a depthwise / grouped / dense convolution on this CPU.

Evidence for the op-level features (#15, README "Op-level features"): some convolutions take oneDNN's im2col +
GEMM fallback (``x64:gemm:jit``) in some passes, whose column matrices the op counter does not see. For each
shape, a child process runs forward + backward once with ``ONEDNN_VERBOSE=1`` and the implementation name of each
pass (forward_training, backward_data, backward_weights) is read from its log. (No timings: on a shared 2-core
host they are too noisy to separate the passes; the kernel names are the evidence.)

Usage: python benchmarks/onednn_conv_paths.py    (needs torch)
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys

#: (label, channels, spatial size, kernel, groups, dilation)
SHAPES = [
    ("dense 3x3", 32, 16, 3, 1, 1),
    ("depthwise 3x3", 32, 16, 3, 32, 1),
    ("depthwise 3x3 dilated 2", 32, 16, 3, 32, 2),
    ("depthwise 5x5", 32, 16, 5, 32, 1),
    ("depthwise 7x7", 32, 16, 7, 32, 1),
    ("grouped 3x3, 2 ch/group", 32, 16, 3, 16, 1),
    ("grouped 3x3, 4 ch/group", 32, 16, 3, 8, 1),
    ("grouped 3x3, 8 ch/group", 32, 16, 3, 4, 1),
    ("grouped 3x3, 16 ch/group", 32, 16, 3, 2, 1),
]


def _conv(torch, C, k, groups, dilation):
    return torch.nn.Conv2d(C, C, k, padding=dilation * (k // 2), dilation=dilation, groups=groups, bias=False)


def _child(i: int) -> None:  # one forward + backward under ONEDNN_VERBOSE
    import torch

    torch.set_num_threads(1)
    _, C, H, k, g, d = SHAPES[i]
    x = torch.randn(8, C, H, H, requires_grad=True)
    _conv(torch, C, k, g, d)(x).sum().backward()


def _paths(i: int) -> dict:
    r = subprocess.run([sys.executable, __file__, "--child", str(i)], capture_output=True, text=True,
                       env=dict(os.environ, ONEDNN_VERBOSE="1"))
    out = {}
    for line in r.stdout.splitlines():
        p = line.split(",")
        if len(p) > 7 and p[2] == "primitive" and p[3] == "exec" and p[5] == "convolution":
            out[p[7]] = p[6]
    return out


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--child", type=int, default=None, help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    if args.child is not None:
        _child(args.child)
        return 0
    import torch

    print(f"torch {torch.__version__}, one thread, batch 8, 32 channels, 16x16")
    print(f"{'shape':28s} {'forward':16s} {'backward_data':16s} {'backward_weights':16s}")
    for i, (label, *_rest) in enumerate(SHAPES):
        p = _paths(i)
        print(f"{label:28s} {p.get('forward_training', '-'):16s} {p.get('backward_data', '-'):16s} "
              f"{p.get('backward_weights', '-'):16s}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
