"""A zoo of real torch models in plain torch (no torchvision), one builder per family with size knobs.

Each entry builds a module, a synthetic batch maker and a loss, so that one training step is
``loss_fn(model(x), y).backward(); opt.step()``. Parameter counts span from about 2e4 to 4e6 across the zoo
(more with larger knobs), covering the families people train: MLP, ResNet-style CNN, BERT-style encoder,
GPT-style decoder and LSTM.

Examples
--------
>>> from perfmodel.measure.zoo import build, ZOO
>>> bundle = build("mlp-xs")
>>> bundle.family, sum(p.numel() for p in bundle.module.parameters()) > 0
('mlp', True)
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Callable

import torch
import torch.nn.functional as F
from torch import nn

from .flops import count_params  # noqa: F401  (re-exported: zoo.count_params)

__all__ = ["ZOO", "LARGE_ZOO", "ModelBundle", "build", "list_models", "known_models", "count_params",
           "count_flops_per_sample", "analytic_flops_per_sample"]


# ----------------------------------------------------------------------------------------------- families
def _maybe_checkpoint(enabled: bool, fn, *args):
    """Run ``fn(*args)``, under activation checkpointing (recompute in backward) when ``enabled`` and training."""
    if enabled and torch.is_grad_enabled():
        from torch.utils.checkpoint import checkpoint

        return checkpoint(fn, *args, use_reentrant=False)
    return fn(*args)


class _Checkpointable:
    """Mixin: ``gradient_checkpointing_enable()`` (the Hugging Face name) turns on per-block checkpointing."""

    checkpointing = False

    def gradient_checkpointing_enable(self) -> None:
        self.checkpointing = True

class MLP(nn.Module):
    def __init__(self, in_features: int = 256, width: int = 256, depth: int = 2, classes: int = 10):
        super().__init__()
        layers, d = [], in_features
        for _ in range(depth):
            layers += [nn.Linear(d, width), nn.ReLU()]
            d = width
        layers.append(nn.Linear(d, classes))
        self.net = nn.Sequential(*layers)

    def forward(self, x):
        return self.net(x)


class BasicBlock(nn.Module):
    def __init__(self, cin: int, cout: int, stride: int):
        super().__init__()
        self.conv1 = nn.Conv2d(cin, cout, 3, stride, 1, bias=False)
        self.bn1 = nn.BatchNorm2d(cout)
        self.conv2 = nn.Conv2d(cout, cout, 3, 1, 1, bias=False)
        self.bn2 = nn.BatchNorm2d(cout)
        self.short = (
            nn.Sequential(nn.Conv2d(cin, cout, 1, stride, bias=False), nn.BatchNorm2d(cout))
            if stride != 1 or cin != cout
            else nn.Identity()
        )

    def forward(self, x):
        out = F.relu(self.bn1(self.conv1(x)))
        out = self.bn2(self.conv2(out))
        return F.relu(out + self.short(x))


class ResNet(_Checkpointable, nn.Module):
    """ResNet-style CNN for 3x32x32 images: a stem, three stages of basic blocks, global pooling."""

    def __init__(self, width: int = 16, blocks: int = 1, classes: int = 10):
        super().__init__()
        self.stem = nn.Sequential(nn.Conv2d(3, width, 3, 1, 1, bias=False), nn.BatchNorm2d(width), nn.ReLU())
        stages, cin = [], width
        for i, mult in enumerate((1, 2, 4)):
            cout = width * mult
            for b in range(blocks):
                stages.append(BasicBlock(cin, cout, 2 if (b == 0 and i > 0) else 1))
                cin = cout
        self.stages = nn.Sequential(*stages)
        self.head = nn.Linear(cin, classes)

    def forward(self, x):
        x = self.stem(x)
        for block in self.stages:
            x = _maybe_checkpoint(self.checkpointing, block, x)
        return self.head(torch.flatten(F.adaptive_avg_pool2d(x, 1), 1))


class Bottleneck(nn.Module):
    """ResNet-50's block: 1x1 reduce, 3x3, 1x1 expand (x4), with a projection shortcut where shapes change."""

    def __init__(self, cin: int, mid: int, stride: int):
        super().__init__()
        cout = 4 * mid
        self.conv1 = nn.Conv2d(cin, mid, 1, bias=False)
        self.bn1 = nn.BatchNorm2d(mid)
        self.conv2 = nn.Conv2d(mid, mid, 3, stride, 1, bias=False)
        self.bn2 = nn.BatchNorm2d(mid)
        self.conv3 = nn.Conv2d(mid, cout, 1, bias=False)
        self.bn3 = nn.BatchNorm2d(cout)
        self.short = (
            nn.Sequential(nn.Conv2d(cin, cout, 1, stride, bias=False), nn.BatchNorm2d(cout))
            if stride != 1 or cin != cout
            else nn.Identity()
        )

    def forward(self, x):
        out = F.relu(self.bn1(self.conv1(x)))
        out = F.relu(self.bn2(self.conv2(out)))
        out = self.bn3(self.conv3(out))
        return F.relu(out + self.short(x))


class ResNetImageNet(_Checkpointable, nn.Module):
    """ResNet-50-style CNN for 3x224x224 images: 7x7 stem, max-pool, four stages of bottleneck blocks."""

    def __init__(self, width: int = 64, blocks: tuple = (3, 4, 6, 3), classes: int = 1000):
        super().__init__()
        self.stem = nn.Sequential(nn.Conv2d(3, width, 7, 2, 3, bias=False), nn.BatchNorm2d(width), nn.ReLU(),
                                  nn.MaxPool2d(3, 2, 1))
        stages, cin = [], width
        for i, n in enumerate(blocks):
            mid = width * 2**i
            for b in range(n):
                stages.append(Bottleneck(cin, mid, 2 if (b == 0 and i > 0) else 1))
                cin = 4 * mid
        self.stages = nn.Sequential(*stages)
        self.head = nn.Linear(cin, classes)

    def forward(self, x):
        x = self.stem(x)
        for block in self.stages:
            x = _maybe_checkpoint(self.checkpointing, block, x)
        return self.head(torch.flatten(F.adaptive_avg_pool2d(x, 1), 1))


class Encoder(_Checkpointable, nn.Module):
    """BERT-style encoder: token + position embeddings, pre-norm Transformer layers, a classifier on token 0."""

    def __init__(self, vocab: int = 1000, d_model: int = 128, layers: int = 2, heads: int = 4, seq: int = 32,
                 classes: int = 2):
        super().__init__()
        self.tok = nn.Embedding(vocab, d_model)
        self.pos = nn.Embedding(seq, d_model)
        layer = nn.TransformerEncoderLayer(d_model, heads, 4 * d_model, dropout=0.0, batch_first=True,
                                           norm_first=True)
        self.encoder = nn.TransformerEncoder(layer, layers, enable_nested_tensor=False)
        self.head = nn.Linear(d_model, classes)

    def forward(self, idx):
        pos = torch.arange(idx.shape[1], device=idx.device)
        h = self.tok(idx) + self.pos(pos)
        if self.checkpointing:
            for layer in self.encoder.layers:
                h = _maybe_checkpoint(True, layer, h)
        else:
            h = self.encoder(h)
        return self.head(h[:, 0])


class Decoder(_Checkpointable, nn.Module):
    """GPT-style decoder-only LM: causal self-attention layers and a next-token head."""

    def __init__(self, vocab: int = 1000, d_model: int = 128, layers: int = 2, heads: int = 4, seq: int = 32,
                 tie: bool = False):
        super().__init__()
        self.tok = nn.Embedding(vocab, d_model)
        self.pos = nn.Embedding(seq, d_model)
        layer = nn.TransformerEncoderLayer(d_model, heads, 4 * d_model, dropout=0.0, batch_first=True,
                                           norm_first=True)
        self.blocks = nn.TransformerEncoder(layer, layers, enable_nested_tensor=False)
        self.norm = nn.LayerNorm(d_model)
        self.lm_head = nn.Linear(d_model, vocab, bias=False)
        if tie:  # GPT-2 shares the token embedding with the output projection
            self.lm_head.weight = self.tok.weight
        self.register_buffer("mask", nn.Transformer.generate_square_subsequent_mask(seq), persistent=False)

    def forward(self, idx):
        t = idx.shape[1]
        pos = torch.arange(t, device=idx.device)
        h = self.tok(idx) + self.pos(pos)
        if self.checkpointing:
            for layer in self.blocks.layers:
                h = _maybe_checkpoint(True, layer, h, self.mask[:t, :t], None, True)
        else:
            h = self.blocks(h, mask=self.mask[:t, :t], is_causal=True)
        return self.lm_head(self.norm(h))


class LSTMClassifier(nn.Module):
    def __init__(self, vocab: int = 1000, embed: int = 128, hidden: int = 128, layers: int = 1, seq: int = 32,
                 classes: int = 10):
        super().__init__()
        self.tok = nn.Embedding(vocab, embed)
        self.lstm = nn.LSTM(embed, hidden, layers, batch_first=True)
        self.head = nn.Linear(hidden, classes)

    def forward(self, idx):
        out, _ = self.lstm(self.tok(idx))
        return self.head(out[:, -1])


# ----------------------------------------------------------------------------------------------- registry
@dataclass
class ModelBundle:
    """What one training step needs: the module, a synthetic batch maker and the loss."""

    name: str
    family: str
    module: nn.Module
    make_batch: Callable[[int, torch.device], tuple[torch.Tensor, torch.Tensor]]
    loss_fn: Callable[[torch.Tensor, torch.Tensor], torch.Tensor]
    sample_shape: tuple[int, ...]
    analytic_flops: float | None = None  # forward+backward per sample, where FlopCounterMode cannot count
    knobs: dict = field(default_factory=dict)


def _cls_loss(out, y):
    return F.cross_entropy(out, y)


def _lm_loss(out, y):
    return F.cross_entropy(out.reshape(-1, out.shape[-1]), y.reshape(-1))


def _build_mlp(width, depth, in_features=256):
    def make(b, dev):
        return torch.randn(b, in_features, device=dev), torch.randint(0, 10, (b,), device=dev)

    return "mlp", MLP(in_features, width, depth), make, _cls_loss, (in_features,), None


def _build_cnn(width, blocks):
    def make(b, dev):
        return torch.randn(b, 3, 32, 32, device=dev), torch.randint(0, 10, (b,), device=dev)

    return "cnn", ResNet(width, blocks), make, _cls_loss, (3, 32, 32), None


def _build_resnet50(width=64, image=224):
    def make(b, dev):
        return torch.randn(b, 3, image, image, device=dev), torch.randint(0, 1000, (b,), device=dev)

    return "cnn", ResNetImageNet(width), make, _cls_loss, (3, image, image), None


def _build_encoder(d_model, layers, seq=32, vocab=1000):
    def make(b, dev):
        return torch.randint(0, vocab, (b, seq), device=dev), torch.randint(0, 2, (b,), device=dev)

    return "encoder", Encoder(vocab, d_model, layers, max(2, d_model // 64), seq), make, _cls_loss, (seq,), None


def _build_decoder(d_model, layers, seq=32, vocab=1000, tie=False):
    def make(b, dev):
        x = torch.randint(0, vocab, (b, seq), device=dev)
        return x, torch.roll(x, -1, dims=1)

    module = Decoder(vocab, d_model, layers, max(2, d_model // 64), seq, tie)
    return "decoder", module, make, _lm_loss, (seq,), None


def analytic_flops_per_sample(embed: int, hidden: int, layers: int, seq: int, classes: int = 10) -> float:
    """Forward+backward FLOPs of one LSTM sample (FlopCounterMode does not count aten LSTM kernels).

    Forward: per layer and time step, the four gates' matmuls cost ``2 * 4 * hidden * (input + hidden)``;
    backward costs twice the forward (gradients of inputs and weights), so the total is 3x the forward.
    """
    fwd = 0.0
    d_in = embed
    for _ in range(layers):
        fwd += seq * 2 * 4 * hidden * (d_in + hidden)
        d_in = hidden
    fwd += 2 * hidden * classes
    return 3.0 * fwd


def _build_lstm(hidden, layers, seq=32, vocab=1000, embed=128):
    def make(b, dev):
        return torch.randint(0, vocab, (b, seq), device=dev), torch.randint(0, 10, (b,), device=dev)

    flops = analytic_flops_per_sample(embed, hidden, layers, seq)
    return "rnn", LSTMClassifier(vocab, embed, hidden, layers, seq), make, _cls_loss, (seq,), flops


#: name -> (builder, knobs). Sizes chosen so the default sweep runs in about ten minutes on 2 CPU cores.
ZOO: dict[str, tuple[Callable, dict]] = {
    "mlp-xs": (_build_mlp, {"width": 64, "depth": 2}),
    "mlp-m": (_build_mlp, {"width": 1024, "depth": 3}),
    "cnn-xs": (_build_cnn, {"width": 8, "blocks": 1}),
    "cnn-s": (_build_cnn, {"width": 16, "blocks": 1}),
    "cnn-m": (_build_cnn, {"width": 16, "blocks": 2}),
    "bert-s": (_build_encoder, {"d_model": 128, "layers": 2}),
    "bert-m": (_build_encoder, {"d_model": 256, "layers": 3}),
    "gpt-s": (_build_decoder, {"d_model": 128, "layers": 2}),
    "gpt-m": (_build_decoder, {"d_model": 256, "layers": 4}),
    "lstm-s": (_build_lstm, {"hidden": 128, "layers": 1}),
    "lstm-m": (_build_lstm, {"hidden": 256, "layers": 2}),
}

#: GPU-sized models (kept apart from :data:`ZOO`, whose names the bundled CPU history refers to): a GPT-2-small-
#: and a GPT-2-medium-sized decoder (about 124M and 355M parameters, 1024 tokens), a BERT-base-sized encoder
#: (about 110M, 512 tokens), a ResNet-50-style CNN at 224 px (about 25.6M), a wide MLP (about 67M) and a bigger
#: LSTM (about 14M, 128 steps).
LARGE_ZOO: dict[str, tuple[Callable, dict]] = {
    "gpt-124m": (_build_decoder, {"d_model": 768, "layers": 12, "seq": 1024, "vocab": 50257, "tie": True}),
    "gpt-350m": (_build_decoder, {"d_model": 1024, "layers": 24, "seq": 1024, "vocab": 50257, "tie": True}),
    "bert-110m": (_build_encoder, {"d_model": 768, "layers": 12, "seq": 512, "vocab": 30522}),
    "resnet50": (_build_resnet50, {"width": 64, "image": 224}),
    "mlp-l": (_build_mlp, {"width": 4096, "depth": 4, "in_features": 4096}),
    "lstm-l": (_build_lstm, {"hidden": 1024, "layers": 2, "seq": 128, "vocab": 10000, "embed": 512}),
}

_SEQ_BUILDERS = (_build_encoder, _build_decoder, _build_lstm)


def default_seq_len(name: str, knobs: dict | None = None) -> int | None:
    """The sequence length a zoo model runs at (its ``seq`` knob), or None for image/vector models."""
    builder, default = _registry()[name]
    if builder not in _SEQ_BUILDERS:
        return None
    return int({**default, **(knobs or {})}.get("seq", 32))


def _registry() -> dict:
    return {**ZOO, **LARGE_ZOO}


def known_models() -> list[str]:
    """Every zoo name: the CPU-sized :data:`ZOO` and the GPU-sized :data:`LARGE_ZOO`."""
    return list(_registry())


def list_models() -> list[str]:
    """Names in the zoo."""
    return list(ZOO)


def build(name: str, **knobs) -> ModelBundle:
    """Build a zoo model (:data:`ZOO` or :data:`LARGE_ZOO`) by name; ``knobs`` override its size parameters."""
    registry = _registry()
    if name not in registry:
        import difflib

        close = difflib.get_close_matches(name, list(registry), n=3, cutoff=0.3)
        hint = f" Did you mean {', '.join(close)}?" if close else ""
        raise ValueError(f"Unknown zoo model {name!r}.{hint} Known: {', '.join(registry)}.")
    builder, default = registry[name]
    params = {**default, **knobs}
    family, module, make, loss, shape, flops = builder(**params)
    return ModelBundle(name, family, module, make, loss, shape, flops, params)


def count_flops_per_sample(bundle: ModelBundle, device: torch.device | str = "cpu") -> tuple[float, str]:
    """Forward+backward FLOPs for one sample and the method that counted them.

    Uses ``torch.utils.flop_counter.FlopCounterMode`` on a batch of one; falls back to the bundle's analytic
    count where the counter sees no FLOPs (LSTM kernels). Returns ``(nan, "none")`` if neither is available.
    """
    from torch.utils.flop_counter import FlopCounterMode

    device = torch.device(device)
    module = bundle.module.to(device)
    x, y = bundle.make_batch(1, device)
    was_training = module.training
    module.train()
    with FlopCounterMode(display=False) as counter:
        bundle.loss_fn(module(x), y).backward()
    module.zero_grad(set_to_none=True)
    module.train(was_training)
    total = float(counter.get_total_flops())
    if bundle.analytic_flops is not None and total < 0.5 * bundle.analytic_flops:
        return float(bundle.analytic_flops), "analytic"
    if total > 0:
        return total, "flop_counter"
    return math.nan, "none"
