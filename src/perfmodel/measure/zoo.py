"""A zoo of real torch models in plain torch (no torchvision), one builder per family with size knobs.

Each entry builds a module, a synthetic batch maker and a loss, so that one training step is
``loss_fn(model(x), y).backward(); opt.step()``. :data:`ZOO` holds 53 CPU-sized models: 26 architectures in 16
families (a family is the architectures that share an op mix: :func:`families`), two or three sizes each, sized
for one training step at batch 32 on 2 CPU cores of roughly 1 ms to 300 ms — MLP; ResNet-, VGG- and DenseNet-style,
depthwise (MobileNetV2, ConvNeXt), grouped (ResNeXt) and 1-D (WaveNet-style TCN, text CNN) convolution;
encoders and decoders with SDPA (BERT, GPT, Llama-style) and with explicit matmul+softmax attention; an
encoder-decoder Transformer; LSTM, GRU and vanilla RNN; MLP-Mixer; DLRM and wide-and-deep recommenders; MLP and
convolutional autoencoders; a U-Net; a ViT; a GCN. The architectures beyond the first five live in
:mod:`perfmodel.measure._zoo_nets`. :data:`LARGE_ZOO` holds GPU-sized models.

Examples
--------
>>> from perfmodel.measure.zoo import build, ZOO
>>> bundle = build("mlp-xs")
>>> bundle.family, sum(p.numel() for p in bundle.module.parameters()) > 0
('mlp', True)
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, field

import torch
import torch.nn.functional as F
from torch import nn

from . import _zoo_nets as _nets
from .flops import count_params  # noqa: F401  (re-exported: zoo.count_params)

__all__ = ["ZOO", "LARGE_ZOO", "CLASSIC_MODELS", "ModelBundle", "build", "list_models", "known_models",
           "count_params", "count_flops_per_sample", "analytic_flops_per_sample", "describe", "families"]


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

    mask: torch.Tensor  # a registered buffer

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
    """What one training step needs: the module, a synthetic batch maker and the loss.

    Attributes
    ----------
    name : str
        The zoo name.
    family : str
        The model family (``"mlp"``, ``"cnn"``, ``"decoder"``, ...).
    module : torch.nn.Module
        The model, with random weights.
    make_batch : callable
        ``(batch_size, device) -> (inputs, target)``: one synthetic batch.
    loss_fn : callable
        ``(output, target) -> scalar tensor``.
    sample_shape : tuple of int
        The shape of one input sample (no batch dimension).
    analytic_flops : float, optional
        Forward+backward FLOPs per sample from a closed form, where FlopCounterMode cannot count (recurrent
        kernels).
    knobs : dict
        The size parameters it was built with (its defaults with the caller's overrides).
    """

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


#: Gate matmuls per recurrent cell: LSTM 4 (input, forget, cell, output), GRU 3 (reset, update, new), RNN 1.
RECURRENT_GATES = {"lstm": 4, "gru": 3, "rnn": 1}


def analytic_flops_per_sample(embed: int, hidden: int, layers: int, seq: int, classes: int = 10, *,
                              cell: str = "lstm") -> float:
    """Forward+backward FLOPs of one recurrent sample (FlopCounterMode does not count aten LSTM/GRU/RNN kernels).

    Forward: per layer and time step, the gates' matmuls cost ``2 * gates * hidden * (input + hidden)`` (``gates``
    from :data:`RECURRENT_GATES`: 4 for ``cell="lstm"``, 3 for ``"gru"``, 1 for ``"rnn"``), plus the classifier;
    backward costs twice the forward (gradients of inputs and weights), so the total is 3x the forward. The gates'
    elementwise work is left out, as FlopCounterMode leaves it out of every other model.

    Parameters
    ----------
    embed : int
        The embedding width (the first layer's input).
    hidden : int
        The hidden state's width.
    layers : int
        Stacked recurrent layers (those above the first take ``hidden`` inputs).
    seq : int
        Time steps per sample.
    classes : int, default=10
        Outputs of the classifier on the last hidden state.
    cell : {"lstm", "gru", "rnn"}, default="lstm"
        The recurrent cell.

    Returns
    -------
    float
        Forward+backward FLOPs of one sample (3x the forward).

    Raises
    ------
    ValueError
        ``cell`` is not a key of :data:`RECURRENT_GATES`.
    """
    if cell not in RECURRENT_GATES:
        raise ValueError(f"cell must be one of {', '.join(RECURRENT_GATES)}. Got {cell!r}.")
    gates = RECURRENT_GATES[cell]
    fwd = 0.0
    d_in = embed
    for _ in range(layers):
        fwd += seq * 2 * gates * hidden * (d_in + hidden)
        d_in = hidden
    fwd += 2 * hidden * classes
    return 3.0 * fwd


def _build_lstm(hidden, layers, seq=32, vocab=1000, embed=128):
    def make(b, dev):
        return torch.randint(0, vocab, (b, seq), device=dev), torch.randint(0, 10, (b,), device=dev)

    flops = analytic_flops_per_sample(embed, hidden, layers, seq)
    return "rnn", LSTMClassifier(vocab, embed, hidden, layers, seq), make, _cls_loss, (seq,), flops


def _images(classes: int = 10, image: int = 32):
    def make(b, dev):
        return torch.randn(b, 3, image, image, device=dev), torch.randint(0, classes, (b,), device=dev)

    return make


def _tokens(vocab: int, seq: int, classes: int = 10):
    def make(b, dev):
        return torch.randint(0, vocab, (b, seq), device=dev), torch.randint(0, classes, (b,), device=dev)

    return make


def _next_tokens(vocab: int, seq: int):
    def make(b, dev):
        x = torch.randint(0, vocab, (b, seq), device=dev)
        return x, torch.roll(x, -1, dims=1)

    return make


def _build_image_cnn(arch: str, family: str):
    def builder(**knobs):
        return family, _IMAGE_NETS[arch](**knobs), _images(), _cls_loss, (3, 32, 32), None

    builder.__name__ = f"_build_{arch}"
    return builder


def _build_tcn(channels, layers, seq=512):
    def make(b, dev):
        return torch.randn(b, 1, seq, device=dev), torch.randint(0, 10, (b,), device=dev)

    return "conv1d", _nets.TCN(channels, layers, seq), make, _cls_loss, (1, seq), None


def _build_textcnn(embed, filters, seq=64, vocab=5000):
    return "conv1d", _nets.TextCNN(vocab, embed, filters, seq), _tokens(vocab, seq, 2), _cls_loss, (seq,), None


def _build_explicit(d_model, layers, causal, seq=64, vocab=1000):
    module = _nets.ExplicitTransformer(vocab, d_model, layers, max(2, d_model // 64), seq, causal)
    make = _next_tokens(vocab, seq) if causal else _tokens(vocab, seq, 2)
    return "attention-explicit", module, make, (_lm_loss if causal else _cls_loss), (seq,), None


def _build_llama(d_model, layers, seq=64, vocab=1000):
    module = _nets.LlamaDecoder(vocab, d_model, layers, max(2, d_model // 64), seq)
    return "decoder", module, _next_tokens(vocab, seq), _lm_loss, (seq,), None


def _build_seq2seq(d_model, layers, seq=32, vocab=1000):
    def make(b, dev):
        src = torch.randint(0, vocab, (b, seq), device=dev)
        tgt = torch.randint(0, vocab, (b, seq + 1), device=dev)
        return torch.cat([src, tgt[:, :-1]], 1), tgt[:, 1:]

    module = _nets.Seq2Seq(vocab, d_model, layers, max(2, d_model // 64), seq)
    return "seq2seq", module, make, _lm_loss, (2 * seq,), None


def _build_recurrent(cell, hidden, layers, seq=32, vocab=1000, embed=128):
    flops = analytic_flops_per_sample(embed, hidden, layers, seq, cell=cell)
    module = _nets.RecurrentClassifier(cell, vocab, embed, hidden, layers, seq)
    return "rnn", module, _tokens(vocab, seq), _cls_loss, (seq,), flops


def _build_vit(d_model, layers, patch=4):
    return "vit", _nets.ViT(d_model, layers, max(2, d_model // 64), patch), _images(), _cls_loss, (3, 32, 32), None


def _build_mixer(dim, layers, patch=4):
    return "mixer", _nets.MLPMixer(dim, layers, patch), _images(), _cls_loss, (3, 32, 32), None


def _bce_loss(out, y):
    return F.binary_cross_entropy_with_logits(out, y)


def _sparse_batch(dense: int, ids: int, rows: int):
    def make(b, dev):
        x = torch.cat([torch.randn(b, dense, device=dev),
                       torch.randint(0, rows, (b, ids), device=dev).float()], 1)
        return x, torch.randint(0, 2, (b,), device=dev).float()

    return make


def _build_dlrm(tables, rows, dim, bag=4, dense=13):
    module = _nets.DLRM(tables, rows, dim, bag, dense)
    return "recsys", module, _sparse_batch(dense, tables * bag, rows), _bce_loss, (dense + tables * bag,), None


def _build_widedeep(fields, rows, dim, hidden, dense=13):
    module = _nets.WideDeep(fields, rows, dim, hidden, dense)
    return "recsys", module, _sparse_batch(dense, fields, rows), _bce_loss, (dense + fields,), None


def _recon_loss(out, y):
    return F.mse_loss(out, y)


def _build_ae_mlp(width, depth, code=32):
    def make(b, dev):
        x = torch.rand(b, 784, device=dev)
        return x, x

    return "autoencoder", _nets.MLPAutoencoder(width, depth, code), make, _recon_loss, (784,), None


def _build_ae_conv(width, levels=3):
    def make(b, dev):
        x = torch.rand(b, 3, 32, 32, device=dev)
        return x, x

    return "autoencoder", _nets.ConvAutoencoder(width, levels), make, _recon_loss, (3, 32, 32), None


def _build_unet(width, levels=3, classes=4):
    def make(b, dev):
        return torch.randn(b, 3, 32, 32, device=dev), torch.randint(0, classes, (b, 32, 32), device=dev)

    return "unet", _nets.UNet(width, levels, classes), make, _cls_loss, (3, 32, 32), None


def _build_gnn(hidden, layers, nodes=64, features=32):
    def make(b, dev):
        return torch.randn(b, nodes, features, device=dev), torch.randint(0, 10, (b,), device=dev)

    return "gnn", _nets.GCN(hidden, layers, nodes, 4, features), make, _cls_loss, (nodes, features), None


_IMAGE_NETS = {"vgg": _nets.VGG, "densenet": _nets.DenseNet, "mobilenet": _nets.MobileNet,
               "convnext": _nets.ConvNeXt, "resnext": _nets.ResNeXt}
_build_vgg = _build_image_cnn("vgg", "cnn")
_build_densenet = _build_image_cnn("densenet", "cnn")
_build_mobilenet = _build_image_cnn("mobilenet", "cnn-depthwise")
_build_convnext = _build_image_cnn("convnext", "cnn-depthwise")
_build_resnext = _build_image_cnn("resnext", "cnn-grouped")


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
    # the broader zoo (issue 15): two or three sizes of each architecture; the names above keep their sizes
    "vgg-s": (_build_vgg, {"width": 8, "depth": 1}),
    "vgg-m": (_build_vgg, {"width": 16, "depth": 2}),
    "densenet-s": (_build_densenet, {"growth": 6, "layers": 3}),
    "densenet-m": (_build_densenet, {"growth": 8, "layers": 4}),
    "mobilenet-s": (_build_mobilenet, {"width": 8, "blocks": 1}),
    "mobilenet-m": (_build_mobilenet, {"width": 16, "blocks": 1}),
    "convnext-s": (_build_convnext, {"width": 16, "blocks": 1}),
    "convnext-m": (_build_convnext, {"width": 32, "blocks": 2}),
    "resnext-s": (_build_resnext, {"width": 8, "groups": 4, "blocks": 1}),
    "resnext-m": (_build_resnext, {"width": 16, "groups": 8, "blocks": 1}),
    "tcn-s": (_build_tcn, {"channels": 16, "layers": 6, "seq": 256}),
    "tcn-m": (_build_tcn, {"channels": 32, "layers": 8, "seq": 256}),
    "textcnn-s": (_build_textcnn, {"embed": 64, "filters": 64, "seq": 64}),
    "textcnn-m": (_build_textcnn, {"embed": 128, "filters": 256, "seq": 128}),
    "enc-explicit-s": (_build_explicit, {"d_model": 128, "layers": 2, "causal": False, "seq": 64}),
    "enc-explicit-m": (_build_explicit, {"d_model": 192, "layers": 2, "causal": False, "seq": 64}),
    "dec-explicit-s": (_build_explicit, {"d_model": 128, "layers": 1, "causal": True, "seq": 64}),
    "dec-explicit-m": (_build_explicit, {"d_model": 192, "layers": 2, "causal": True, "seq": 64}),
    "llama-s": (_build_llama, {"d_model": 128, "layers": 1, "seq": 64}),
    "llama-m": (_build_llama, {"d_model": 192, "layers": 2, "seq": 64}),
    "seq2seq-s": (_build_seq2seq, {"d_model": 128, "layers": 1, "seq": 32}),
    "seq2seq-m": (_build_seq2seq, {"d_model": 192, "layers": 2, "seq": 32}),
    "gru-s": (_build_recurrent, {"cell": "gru", "hidden": 128, "layers": 1, "seq": 32}),
    "gru-m": (_build_recurrent, {"cell": "gru", "hidden": 256, "layers": 2, "seq": 32}),
    "rnn-s": (_build_recurrent, {"cell": "rnn", "hidden": 128, "layers": 1, "seq": 32}),
    "rnn-m": (_build_recurrent, {"cell": "rnn", "hidden": 256, "layers": 2, "seq": 64}),
    "mixer-s": (_build_mixer, {"dim": 64, "layers": 2}),
    "mixer-m": (_build_mixer, {"dim": 128, "layers": 4}),
    "dlrm-s": (_build_dlrm, {"tables": 8, "rows": 5000, "dim": 16}),
    "dlrm-m": (_build_dlrm, {"tables": 16, "rows": 20000, "dim": 32}),
    "widedeep-s": (_build_widedeep, {"fields": 8, "rows": 5000, "dim": 16, "hidden": 128}),
    "widedeep-m": (_build_widedeep, {"fields": 16, "rows": 20000, "dim": 32, "hidden": 512}),
    "ae-mlp-s": (_build_ae_mlp, {"width": 256, "depth": 2}),
    "ae-mlp-m": (_build_ae_mlp, {"width": 1024, "depth": 3}),
    "ae-conv-s": (_build_ae_conv, {"width": 16}),
    "ae-conv-m": (_build_ae_conv, {"width": 32}),
    "unet-s": (_build_unet, {"width": 8}),
    "unet-m": (_build_unet, {"width": 16}),
    "vit-s": (_build_vit, {"d_model": 128, "layers": 2}),
    "vit-m": (_build_vit, {"d_model": 192, "layers": 2}),
    "gnn-s": (_build_gnn, {"hidden": 64, "layers": 2}),
    "gnn-m": (_build_gnn, {"hidden": 256, "layers": 3}),
}

#: The zoo's first eleven names (five families), the models of the bundled CPU history measured before the
#: broader zoo; ``perfmodel measure --models`` without names still sweeps only these.
CLASSIC_MODELS: tuple[str, ...] = ("mlp-xs", "mlp-m", "cnn-xs", "cnn-s", "cnn-m", "bert-s", "bert-m", "gpt-s",
                                   "gpt-m", "lstm-s", "lstm-m")

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

_SEQ_BUILDERS = (_build_encoder, _build_decoder, _build_lstm, _build_tcn, _build_textcnn, _build_explicit,
                 _build_llama, _build_seq2seq, _build_recurrent)


def default_seq_len(name: str, knobs: dict | None = None) -> int | None:
    """The sequence length a zoo model runs at (its ``seq`` knob), or None for image/vector models."""
    builder, default = _registry()[name]
    if builder not in _SEQ_BUILDERS:
        return None
    return int({**default, **(knobs or {})}.get("seq", 32))


def _registry() -> dict:
    return {**ZOO, **LARGE_ZOO}


def known_models() -> list[str]:
    """Every zoo name: the CPU-sized :data:`ZOO` and the GPU-sized :data:`LARGE_ZOO`.

    Returns
    -------
    list of str
        The names of :data:`ZOO`, then those of :data:`LARGE_ZOO`.
    """
    return list(_registry())


def list_models() -> list[str]:
    """Names in the CPU-sized zoo.

    Returns
    -------
    list of str
        The names of :data:`ZOO` (not :data:`LARGE_ZOO`; :func:`known_models` gives both).
    """
    return list(ZOO)


def build(name: str, **knobs) -> ModelBundle:
    """Build a zoo model (:data:`ZOO` or :data:`LARGE_ZOO`) by name; ``knobs`` override its size parameters.

    Parameters
    ----------
    name : str
        A zoo name (:func:`known_models`).
    **knobs
        Size parameters of the model's builder (``width``, ``layers``, ``seq``, ...) that replace its defaults.

    Returns
    -------
    ModelBundle
        The model with random weights, its batch maker and loss.

    Raises
    ------
    ValueError
        ``name`` is not a zoo name.
    """
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
    count where the counter sees under half of it (LSTM kernels). The module is moved to ``device``; its
    gradients are cleared afterwards and its training mode restored.

    Parameters
    ----------
    bundle : ModelBundle
        The model to count.
    device : torch.device or str, default="cpu"
        Where to count (``"meta"`` counts without memory or compute).

    Returns
    -------
    flops : float
        Forward+backward FLOPs of one sample; NaN when neither the counter nor an analytic count gives one.
    method : {"flop_counter", "analytic", "none"}
        Where the figure came from.
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


def families() -> dict[str, list[str]]:
    """Family -> the CPU-sized zoo models (:data:`ZOO`) in it, without building a model for real.

    Each model is built on the ``meta`` device (no memory, no compute) to read its family.

    Returns
    -------
    dict of str to list of str
        Family -> model names, in :data:`ZOO` order.
    """
    out: dict[str, list[str]] = {}
    for name in ZOO:
        out.setdefault(_family_of(name), []).append(name)
    return out


def _family_of(name: str) -> str:
    with torch.device("meta"):
        return build(name).family


def describe(name: str, device: torch.device | str | None = None) -> dict:
    """Family, trainable parameters and forward+backward FLOPs per sample of a zoo model, counted on ``device``.

    By default a CPU-sized model (:data:`ZOO`) is counted on the CPU, as a measured run's record counts it, and a
    GPU-sized one (:data:`LARGE_ZOO`) on the ``meta`` device (no memory, no compute; attention and recurrent
    kernels may then be counted through their decompositions, a few per cent apart from a CPU count).

    Parameters
    ----------
    name : str
        A zoo name (:func:`known_models`).
    device : torch.device or str, optional
        Where to build and count; default as above.

    Returns
    -------
    dict
        ``model``, ``family``, ``params`` (trainable), ``flops_per_sample``, ``flops_method`` (see
        :func:`count_flops_per_sample`), ``knobs``, ``size`` (``"cpu"`` or ``"gpu"``) and ``counted_on`` (the
        device type).
    """
    device = torch.device(device if device is not None else ("cpu" if name in ZOO else "meta"))
    with device:
        bundle = build(name)
    bundle.module.to(device)
    flops, method = count_flops_per_sample(bundle, device)
    return {"model": name, "family": bundle.family, "params": count_params(bundle.module),
            "flops_per_sample": flops, "flops_method": method, "knobs": dict(bundle.knobs),
            "size": "gpu" if name in LARGE_ZOO else "cpu", "counted_on": device.type}
