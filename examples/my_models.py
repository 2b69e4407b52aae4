"""Bring-your-own model factories for ``perfmodel measure --models my_models:small_convnet`` (run from examples/)
or ``--models examples/my_models.py:small_convnet`` (from the repository root). See the README, "Measure your own
model", for the contract."""

import torch
from torch import nn


def small_convnet():
    """A small CNN on 64x64 images: (module, make_batch, loss_fn)."""
    module = nn.Sequential(
        nn.Conv2d(3, 32, 3, padding=1), nn.ReLU(),
        nn.Conv2d(32, 64, 3, stride=2, padding=1), nn.ReLU(),
        nn.AdaptiveAvgPool2d(4), nn.Flatten(), nn.Linear(64 * 16, 10),
    )

    def make_batch(batch_size):  # the positional inputs of one batch, on the CPU
        return torch.randn(batch_size, 3, 64, 64)

    def loss_fn(output, inputs):
        return nn.functional.cross_entropy(output, torch.zeros(len(inputs), dtype=torch.long, device=output.device))

    return module, make_batch, loss_fn


def tiny_transformer():
    """A two-layer Transformer encoder over 64 tokens: (module, make_batch); the default loss is the output mean."""
    module = nn.Sequential(nn.Embedding(1000, 128),
                           nn.TransformerEncoder(nn.TransformerEncoderLayer(128, 4, 512, batch_first=True), 2))
    return module, lambda batch_size: torch.randint(0, 1000, (batch_size, 64))
