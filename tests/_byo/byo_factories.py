"""Bring-your-own model factories for tests (imported by worker processes by file path or module name)."""

import torch
from torch import nn


class TwoInput(nn.Module):
    def __init__(self):
        super().__init__()
        self.a = nn.Linear(16, 32)
        self.b = nn.Linear(8, 32)
        self.out = nn.Linear(32, 4)

    def forward(self, x, z):
        return self.out(torch.relu(self.a(x) + self.b(z)))


def mlp():
    """(module, make_batch): default loss output.float().mean()."""
    module = nn.Sequential(nn.Linear(16, 32), nn.ReLU(), nn.Linear(32, 4))
    return module, lambda b: torch.randn(b, 16)


def two_inputs_with_loss():
    """(module, make_batch, loss_fn) with a tuple of inputs."""

    def make_batch(b):
        return torch.randn(b, 16), torch.randn(b, 8)

    def loss_fn(output, inputs):
        x, z = inputs
        assert x.shape[1] == 16 and z.shape[1] == 8
        return torch.nn.functional.mse_loss(output, torch.zeros_like(output))

    return TwoInput(), make_batch, loss_fn


def raises():
    raise RuntimeError("factory exploded\nsecond line")


def wrong_shape():
    return nn.Linear(4, 4)


def bad_batch():
    return nn.Linear(4, 4), lambda b: [1, 2, 3]


CALLS = {"forward": 0, "autocast": [], "dtype": []}


class Probe(nn.Module):
    """Counts forward calls and records whether CPU autocast was on and the output dtype."""

    def __init__(self):
        super().__init__()
        self.lin = nn.Linear(16, 16)

    def forward(self, x):
        CALLS["forward"] += 1
        CALLS["autocast"].append(torch.is_autocast_enabled("cpu"))
        out = self.lin(x)
        CALLS["dtype"].append(out.dtype)
        return out


def probe():
    return Probe(), lambda b: torch.randn(b, 16)


class NoFlops(nn.Module):
    """Only ops FlopCounterMode does not count (elementwise), with a parameter so there is a gradient."""

    def __init__(self):
        super().__init__()
        self.scale = nn.Parameter(torch.ones(16))

    def forward(self, x):
        return torch.tanh(x * self.scale)


def no_flops():
    return NoFlops(), lambda b: torch.randn(b, 16)
