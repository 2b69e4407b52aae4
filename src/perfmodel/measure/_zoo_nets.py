"""The broader zoo's architectures, in plain torch (no torchvision): one small class per architecture.

Each takes the batch as one tensor (the sweep's worker calls ``module(x)``); architectures with two inputs
(encoder-decoder, recommenders) pack them into that tensor and split it in ``forward``. Every parameter is used
in every forward pass, so the models run under DDP without ``find_unused_parameters``.
"""

from __future__ import annotations

import math
import warnings
from typing import Any

import torch
import torch.nn.functional as F
from torch import nn


def _conv_bn(cin: int, cout: int, k: int = 3, stride: int = 1, groups: int = 1, dilation: int = 1) -> nn.Sequential:
    pad = dilation * (k // 2)
    return nn.Sequential(nn.Conv2d(cin, cout, k, stride, pad, dilation=dilation, groups=groups, bias=False),
                         nn.BatchNorm2d(cout), nn.ReLU(inplace=False))


# ------------------------------------------------------------------------------------------ dense CNNs
class VGG(nn.Module):
    """VGG-style plain CNN for 3x32x32: ``stages`` of (conv3x3-BN-ReLU) x ``depth`` then max-pool, doubling width."""

    def __init__(self, width: int = 16, depth: int = 2, stages: int = 3, classes: int = 10):
        super().__init__()
        layers: list[nn.Module] = []
        cin = 3
        for i in range(stages):
            cout = width * 2**i
            for _ in range(depth):
                layers.append(_conv_bn(cin, cout))
                cin = cout
            layers.append(nn.MaxPool2d(2))
        self.features = nn.Sequential(*layers)
        self.head = nn.Sequential(nn.Linear(cin, 4 * width), nn.ReLU(), nn.Linear(4 * width, classes))

    def forward(self, x):
        return self.head(torch.flatten(F.adaptive_avg_pool2d(self.features(x), 1), 1))


class _DenseLayer(nn.Module):
    def __init__(self, cin: int, growth: int):
        super().__init__()
        self.bn1, self.conv1 = nn.BatchNorm2d(cin), nn.Conv2d(cin, 4 * growth, 1, bias=False)
        self.bn2, self.conv2 = nn.BatchNorm2d(4 * growth), nn.Conv2d(4 * growth, growth, 3, 1, 1, bias=False)

    def forward(self, x):
        out = self.conv1(F.relu(self.bn1(x)))
        out = self.conv2(F.relu(self.bn2(out)))
        return torch.cat([x, out], 1)


class DenseNet(nn.Module):
    """DenseNet-BC-style CNN for 3x32x32: three dense blocks (concatenation of every layer's output) with
    1x1-conv + average-pool transitions."""

    def __init__(self, growth: int = 8, layers: int = 4, classes: int = 10):
        super().__init__()
        c = 2 * growth
        mods: list[nn.Module] = [nn.Conv2d(3, c, 3, 1, 1, bias=False)]
        for block in range(3):
            for _ in range(layers):
                mods.append(_DenseLayer(c, growth))
                c += growth
            if block < 2:
                mods += [nn.BatchNorm2d(c), nn.ReLU(), nn.Conv2d(c, c // 2, 1, bias=False), nn.AvgPool2d(2)]
                c //= 2
        mods += [nn.BatchNorm2d(c), nn.ReLU()]
        self.features = nn.Sequential(*mods)
        self.head = nn.Linear(c, classes)

    def forward(self, x):
        return self.head(torch.flatten(F.adaptive_avg_pool2d(self.features(x), 1), 1))


# -------------------------------------------------------------------------------- depthwise / grouped
class _InvertedResidual(nn.Module):
    def __init__(self, cin: int, cout: int, stride: int, expand: int):
        super().__init__()
        mid = cin * expand
        self.block = nn.Sequential(
            nn.Conv2d(cin, mid, 1, bias=False), nn.BatchNorm2d(mid), nn.ReLU6(),
            nn.Conv2d(mid, mid, 3, stride, 1, groups=mid, bias=False), nn.BatchNorm2d(mid), nn.ReLU6(),
            nn.Conv2d(mid, cout, 1, bias=False), nn.BatchNorm2d(cout))
        self.residual = stride == 1 and cin == cout

    def forward(self, x):
        out = self.block(x)
        return x + out if self.residual else out


class MobileNet(nn.Module):
    """MobileNetV2-style CNN for 3x32x32: inverted residual blocks (1x1 expand, 3x3 depthwise, 1x1 project)."""

    def __init__(self, width: int = 16, blocks: int = 1, expand: int = 4, classes: int = 10):
        super().__init__()
        mods: list[nn.Module] = [_conv_bn(3, width)]
        cin = width
        for i, mult in enumerate((1, 2, 4, 8)):
            cout = width * mult
            for b in range(blocks):
                mods.append(_InvertedResidual(cin, cout, 2 if (b == 0 and i > 0) else 1, expand))
                cin = cout
        mods += [nn.Conv2d(cin, 4 * cin, 1, bias=False), nn.BatchNorm2d(4 * cin), nn.ReLU6()]
        self.features = nn.Sequential(*mods)
        self.head = nn.Linear(4 * cin, classes)

    def forward(self, x):
        return self.head(torch.flatten(F.adaptive_avg_pool2d(self.features(x), 1), 1))


class _ConvNeXtBlock(nn.Module):
    def __init__(self, dim: int):
        super().__init__()
        self.dw = nn.Conv2d(dim, dim, 7, 1, 3, groups=dim)
        self.norm = nn.LayerNorm(dim)
        self.fc1, self.fc2 = nn.Linear(dim, 4 * dim), nn.Linear(4 * dim, dim)
        self.gamma = nn.Parameter(torch.full((dim,), 1e-2))

    def forward(self, x):
        h = self.dw(x).permute(0, 2, 3, 1)  # channels last for LayerNorm and the pointwise MLP
        h = self.fc2(F.gelu(self.fc1(self.norm(h)))) * self.gamma
        return x + h.permute(0, 3, 1, 2)


class ConvNeXt(nn.Module):
    """ConvNeXt-style CNN for 3x32x32: 2x2 patchify stem, blocks of 7x7 depthwise conv + LayerNorm + 4x MLP,
    strided 2x2 down-sampling between three stages."""

    def __init__(self, width: int = 16, blocks: int = 1, classes: int = 10):
        super().__init__()
        mods: list[nn.Module] = [nn.Conv2d(3, width, 2, 2)]
        c = width
        for i in range(3):
            if i:
                mods.append(nn.Conv2d(c, 2 * c, 2, 2))
                c *= 2
            mods += [_ConvNeXtBlock(c) for _ in range(blocks)]
        self.features = nn.Sequential(*mods)
        self.norm = nn.LayerNorm(c)
        self.head = nn.Linear(c, classes)

    def forward(self, x):
        return self.head(self.norm(self.features(x).mean((2, 3))))


class _ResNeXtBlock(nn.Module):
    def __init__(self, cin: int, mid: int, cout: int, stride: int, groups: int):
        super().__init__()
        self.body = nn.Sequential(_conv_bn(cin, mid, 1), _conv_bn(mid, mid, 3, stride, groups=groups),
                                  nn.Conv2d(mid, cout, 1, bias=False), nn.BatchNorm2d(cout))
        self.short = (nn.Sequential(nn.Conv2d(cin, cout, 1, stride, bias=False), nn.BatchNorm2d(cout))
                      if stride != 1 or cin != cout else nn.Identity())

    def forward(self, x):
        return F.relu(self.body(x) + self.short(x))


class ResNeXt(nn.Module):
    """ResNeXt-style CNN for 3x32x32: bottleneck blocks whose 3x3 convolution is grouped (``groups`` paths)."""

    def __init__(self, width: int = 32, groups: int = 8, blocks: int = 1, classes: int = 10):
        super().__init__()
        mods: list[nn.Module] = [_conv_bn(3, width)]
        cin = width
        for i, mult in enumerate((1, 2, 4)):
            mid, cout = width * mult, 2 * width * mult
            for b in range(blocks):
                mods.append(_ResNeXtBlock(cin, mid, cout, 2 if (b == 0 and i > 0) else 1, groups))
                cin = cout
        self.features = nn.Sequential(*mods)
        self.head = nn.Linear(cin, classes)

    def forward(self, x):
        return self.head(torch.flatten(F.adaptive_avg_pool2d(self.features(x), 1), 1))


# ------------------------------------------------------------------------------------------- 1-D convolution
class TCN(nn.Module):
    """WaveNet-style temporal CNN on a 1-channel signal: gated (tanh x sigmoid) dilated causal 1-D convolutions,
    dilation doubling per layer, residual and skip 1x1 convolutions, pooled classifier."""

    def __init__(self, channels: int = 32, layers: int = 6, seq: int = 512, classes: int = 10):
        super().__init__()
        self.inp = nn.Conv1d(1, channels, 1)
        self.filt = nn.ModuleList(nn.Conv1d(channels, 2 * channels, 2, dilation=2**i) for i in range(layers))
        self.res = nn.ModuleList(nn.Conv1d(channels, channels, 1) for _ in range(layers - 1))  # none after the last
        self.skip = nn.ModuleList(nn.Conv1d(channels, channels, 1) for _ in range(layers))
        self.head = nn.Linear(channels, classes)

    def forward(self, x):
        h = self.inp(x)
        skip: Any = 0  # the sum of the skip outputs, a tensor after the first layer
        for i, (f, s) in enumerate(zip(self.filt, self.skip)):
            d = 2**i
            a, b = f(F.pad(h, (d, 0))).chunk(2, 1)  # causal: pad on the left only
            g = torch.tanh(a) * torch.sigmoid(b)
            skip = skip + s(g)
            if i < len(self.res):
                h = h + self.res[i](g)
        return self.head(F.relu(skip).mean(2))


class TextCNN(nn.Module):
    """Kim-style 1-D text CNN: token embeddings, parallel 1-D convolutions of widths 3/4/5, max over time."""

    def __init__(self, vocab: int = 5000, embed: int = 128, filters: int = 128, seq: int = 64, classes: int = 2):
        super().__init__()
        self.tok = nn.Embedding(vocab, embed)
        self.convs = nn.ModuleList(nn.Conv1d(embed, filters, k, padding=k // 2) for k in (3, 4, 5))
        self.head = nn.Linear(3 * filters, classes)

    def forward(self, idx):
        h = self.tok(idx).transpose(1, 2)
        pooled = [F.relu(c(h)).amax(2) for c in self.convs]
        return self.head(torch.cat(pooled, 1))


# ------------------------------------------------------------------------------------------------ attention
class _ExplicitAttention(nn.Module):
    """Multi-head self-attention written out: QKV projection, ``q @ k^T``, (masked) softmax, ``@ v``."""

    def __init__(self, d_model: int, heads: int, causal: bool):
        super().__init__()
        self.heads, self.causal = heads, causal
        self.qkv = nn.Linear(d_model, 3 * d_model)
        self.proj = nn.Linear(d_model, d_model)

    def forward(self, x):
        b, t, d = x.shape
        q, k, v = self.qkv(x).view(b, t, 3, self.heads, d // self.heads).permute(2, 0, 3, 1, 4)
        scores = (q @ k.transpose(-2, -1)) / math.sqrt(d // self.heads)
        if self.causal:
            mask = torch.ones(t, t, dtype=torch.bool, device=x.device).triu(1)
            scores = scores.masked_fill(mask, float("-inf"))
        h = scores.softmax(-1) @ v
        return self.proj(h.transpose(1, 2).reshape(b, t, d))


class _ExplicitBlock(nn.Module):
    def __init__(self, d_model: int, heads: int, causal: bool):
        super().__init__()
        self.ln1, self.attn = nn.LayerNorm(d_model), _ExplicitAttention(d_model, heads, causal)
        self.ln2 = nn.LayerNorm(d_model)
        self.mlp = nn.Sequential(nn.Linear(d_model, 4 * d_model), nn.GELU(), nn.Linear(4 * d_model, d_model))

    def forward(self, x):
        x = x + self.attn(self.ln1(x))
        return x + self.mlp(self.ln2(x))


class ExplicitTransformer(nn.Module):
    """A pre-norm Transformer whose attention is explicit matmuls + softmax (no SDPA kernel): a BERT-style
    classifier on token 0 (``causal=False``) or a GPT-style next-token LM (``causal=True``)."""

    def __init__(self, vocab: int = 1000, d_model: int = 128, layers: int = 2, heads: int = 4, seq: int = 64,
                 causal: bool = False, classes: int = 2):
        super().__init__()
        self.causal = causal
        self.tok, self.pos = nn.Embedding(vocab, d_model), nn.Embedding(seq, d_model)
        self.blocks = nn.ModuleList(_ExplicitBlock(d_model, heads, causal) for _ in range(layers))
        self.norm = nn.LayerNorm(d_model)
        self.head = nn.Linear(d_model, vocab if causal else classes)

    def forward(self, idx):
        h = self.tok(idx) + self.pos(torch.arange(idx.shape[1], device=idx.device))
        for block in self.blocks:
            h = block(h)
        h = self.norm(h)
        return self.head(h if self.causal else h[:, 0])


class _RMSNorm(nn.Module):
    def __init__(self, dim: int, eps: float = 1e-6):
        super().__init__()
        self.weight, self.eps = nn.Parameter(torch.ones(dim)), eps

    def forward(self, x):
        return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + self.eps) * self.weight


def _rope(x, cos, sin):
    x1, x2 = x.chunk(2, -1)
    return torch.cat([x1 * cos - x2 * sin, x1 * sin + x2 * cos], -1)


class _LlamaBlock(nn.Module):
    def __init__(self, d_model: int, heads: int, hidden: int):
        super().__init__()
        self.heads = heads
        self.n1, self.n2 = _RMSNorm(d_model), _RMSNorm(d_model)
        self.qkv = nn.Linear(d_model, 3 * d_model, bias=False)
        self.o = nn.Linear(d_model, d_model, bias=False)
        self.gate_up = nn.Linear(d_model, 2 * hidden, bias=False)
        self.down = nn.Linear(hidden, d_model, bias=False)

    def forward(self, x, cos, sin):
        b, t, d = x.shape
        q, k, v = self.qkv(self.n1(x)).view(b, t, 3, self.heads, d // self.heads).permute(2, 0, 3, 1, 4)
        h = F.scaled_dot_product_attention(_rope(q, cos, sin), _rope(k, cos, sin), v, is_causal=True)
        x = x + self.o(h.transpose(1, 2).reshape(b, t, d))
        g, u = self.gate_up(self.n2(x)).chunk(2, -1)
        return x + self.down(F.silu(g) * u)


class LlamaDecoder(nn.Module):
    """Llama-style decoder-only LM: RMSNorm, rotary position embeddings, SDPA causal attention, SwiGLU MLP."""

    cos: torch.Tensor  # a registered buffer
    sin: torch.Tensor  # a registered buffer

    def __init__(self, vocab: int = 1000, d_model: int = 128, layers: int = 2, heads: int = 4, seq: int = 64):
        super().__init__()
        self.tok = nn.Embedding(vocab, d_model)
        self.blocks = nn.ModuleList(_LlamaBlock(d_model, heads, int(8 * d_model / 3) // 8 * 8) for _ in range(layers))
        self.norm = _RMSNorm(d_model)
        self.lm_head = nn.Linear(d_model, vocab, bias=False)
        half = d_model // heads // 2
        freqs = torch.outer(torch.arange(seq, dtype=torch.float32), 10000.0 ** (-torch.arange(half) / half))
        self.register_buffer("cos", freqs.cos(), persistent=False)
        self.register_buffer("sin", freqs.sin(), persistent=False)

    def forward(self, idx):
        t = idx.shape[1]
        h = self.tok(idx)
        cos, sin = self.cos[:t], self.sin[:t]
        for block in self.blocks:
            h = block(h, cos, sin)
        return self.lm_head(self.norm(h))


class Seq2Seq(nn.Module):
    """Encoder-decoder Transformer (``nn.Transformer``, SDPA attention, cross-attention): the batch packs source
    and target tokens side by side, ``[src (seq) | tgt (seq)]``; the output is next-token logits of the target."""

    mask: torch.Tensor  # a registered buffer

    def __init__(self, vocab: int = 1000, d_model: int = 128, layers: int = 2, heads: int = 4, seq: int = 32):
        super().__init__()
        self.seq = seq
        self.src_tok, self.tgt_tok = nn.Embedding(vocab, d_model), nn.Embedding(vocab, d_model)
        self.pos = nn.Embedding(seq, d_model)
        with warnings.catch_warnings():  # nn.Transformer's encoder cannot use nested tensors with norm_first
            warnings.simplefilter("ignore", UserWarning)
            self.transformer = nn.Transformer(d_model, heads, layers, layers, 4 * d_model, dropout=0.0,
                                              batch_first=True, norm_first=True)
        self.head = nn.Linear(d_model, vocab)
        self.register_buffer("mask", nn.Transformer.generate_square_subsequent_mask(seq), persistent=False)

    def forward(self, pair):
        src, tgt = pair[:, : self.seq], pair[:, self.seq:]
        pos = self.pos(torch.arange(self.seq, device=pair.device))
        h = self.transformer(self.src_tok(src) + pos, self.tgt_tok(tgt) + pos, tgt_mask=self.mask, tgt_is_causal=True)
        return self.head(h)


class ViT(nn.Module):
    """Vision Transformer for 3x32x32: ``patch`` x ``patch`` patch embedding (a strided conv), a class token,
    learned positions, pre-norm encoder layers (SDPA attention, GELU MLP)."""

    def __init__(self, d_model: int = 128, layers: int = 2, heads: int = 4, patch: int = 4, classes: int = 10):
        super().__init__()
        n = (32 // patch) ** 2
        self.embed = nn.Conv2d(3, d_model, patch, patch)
        self.cls = nn.Parameter(torch.zeros(1, 1, d_model))
        self.pos = nn.Parameter(torch.randn(1, n + 1, d_model) * 0.02)
        layer = nn.TransformerEncoderLayer(d_model, heads, 4 * d_model, dropout=0.0, activation="gelu",
                                           batch_first=True, norm_first=True)
        self.encoder = nn.TransformerEncoder(layer, layers, enable_nested_tensor=False)
        self.norm = nn.LayerNorm(d_model)
        self.head = nn.Linear(d_model, classes)

    def forward(self, x):
        h = self.embed(x).flatten(2).transpose(1, 2)
        h = torch.cat([self.cls.expand(h.shape[0], -1, -1), h], 1) + self.pos
        return self.head(self.norm(self.encoder(h))[:, 0])


# ----------------------------------------------------------------------------------------------- mixers
class _MixerBlock(nn.Module):
    def __init__(self, tokens: int, dim: int, token_hidden: int, channel_hidden: int):
        super().__init__()
        self.n1, self.n2 = nn.LayerNorm(dim), nn.LayerNorm(dim)
        self.token = nn.Sequential(nn.Linear(tokens, token_hidden), nn.GELU(), nn.Linear(token_hidden, tokens))
        self.channel = nn.Sequential(nn.Linear(dim, channel_hidden), nn.GELU(), nn.Linear(channel_hidden, dim))

    def forward(self, x):
        x = x + self.token(self.n1(x).transpose(1, 2)).transpose(1, 2)
        return x + self.channel(self.n2(x))


class MLPMixer(nn.Module):
    """MLP-Mixer for 3x32x32: patch embedding, then blocks of token-mixing and channel-mixing MLPs."""

    def __init__(self, dim: int = 128, layers: int = 2, patch: int = 4, classes: int = 10):
        super().__init__()
        tokens = (32 // patch) ** 2
        self.embed = nn.Conv2d(3, dim, patch, patch)
        self.blocks = nn.Sequential(*(_MixerBlock(tokens, dim, tokens * 2, dim * 4) for _ in range(layers)))
        self.norm = nn.LayerNorm(dim)
        self.head = nn.Linear(dim, classes)

    def forward(self, x):
        h = self.blocks(self.embed(x).flatten(2).transpose(1, 2))
        return self.head(self.norm(h).mean(1))


# -------------------------------------------------------------------------------------------- recommenders
def _mlp(sizes: list[int], last_act: bool = True) -> nn.Sequential:
    mods: list[nn.Module] = []
    for i, (a, b) in enumerate(zip(sizes[:-1], sizes[1:])):
        mods.append(nn.Linear(a, b))
        if last_act or i < len(sizes) - 2:
            mods.append(nn.ReLU())
    return nn.Sequential(*mods)


class DLRM(nn.Module):
    """DLRM-style recommender: dense features through a bottom MLP, ``tables`` sparse features each pooled by an
    ``EmbeddingBag`` (sum of ``bag`` ids), pairwise dot-product interactions (``bmm``), a top MLP, one logit.

    The batch packs ``dense`` float features and ``tables x bag`` ids (stored as exact float values) side by side.
    """

    pairs: torch.Tensor  # a registered buffer

    def __init__(self, tables: int = 8, rows: int = 10000, dim: int = 16, bag: int = 4, dense: int = 13,
                 bottom: int = 64, top: int = 128):
        super().__init__()
        self.tables, self.bag, self.dense = tables, bag, dense
        self.emb = nn.ModuleList(nn.EmbeddingBag(rows, dim, mode="sum") for _ in range(tables))
        self.bottom = _mlp([dense, bottom, dim])
        n = tables + 1
        self.top = _mlp([dim + n * (n - 1) // 2, top, top // 2, 1], last_act=False)
        self.register_buffer("pairs", torch.triu_indices(n, n, 1), persistent=False)

    def forward(self, x):
        dense = self.bottom(x[:, : self.dense])
        ids = x[:, self.dense:].long().view(x.shape[0], self.tables, self.bag)
        feats = [dense] + [e(ids[:, i]) for i, e in enumerate(self.emb)]
        z = torch.stack(feats, 1)
        inter = torch.bmm(z, z.transpose(1, 2))[:, self.pairs[0], self.pairs[1]]
        return self.top(torch.cat([dense, inter], 1)).squeeze(1)


class WideDeep(nn.Module):
    """Wide-and-deep recommender: a wide linear part over the sparse ids (an ``EmbeddingBag`` of width 1 over a
    hashed vocabulary), a deep MLP over concatenated field embeddings, summed into one logit."""

    offsets: torch.Tensor  # a registered buffer

    def __init__(self, fields: int = 8, rows: int = 10000, dim: int = 16, hidden: int = 128, dense: int = 13):
        super().__init__()
        self.fields, self.dense = fields, dense
        self.wide = nn.EmbeddingBag(fields * rows, 1, mode="sum")
        self.emb = nn.ModuleList(nn.Embedding(rows, dim) for _ in range(fields))
        self.register_buffer("offsets", torch.arange(fields) * rows, persistent=False)
        self.deep = _mlp([fields * dim + dense, hidden, hidden, 1], last_act=False)

    def forward(self, x):
        ids = x[:, self.dense:].long()
        deep_in = torch.cat([x[:, : self.dense]] + [e(ids[:, i]) for i, e in enumerate(self.emb)], 1)
        return (self.wide(ids + self.offsets) + self.deep(deep_in)).squeeze(1)


# ---------------------------------------------------------------------------------- autoencoders, U-Net
class MLPAutoencoder(nn.Module):
    """Dense autoencoder on 784-d inputs (28x28 flattened): encoder halving the width to a bottleneck, mirrored
    decoder, sigmoid output (reconstruction loss)."""

    def __init__(self, width: int = 256, depth: int = 2, code: int = 32, in_features: int = 784):
        super().__init__()
        sizes = [in_features] + [max(code, width // 2**i) for i in range(depth)] + [code]
        self.encoder = _mlp(sizes)
        self.decoder = _mlp(sizes[::-1], last_act=False)

    def forward(self, x):
        return torch.sigmoid(self.decoder(self.encoder(x)))


class ConvAutoencoder(nn.Module):
    """Convolutional autoencoder on 3x32x32: strided convolutions down, transposed convolutions up."""

    def __init__(self, width: int = 16, levels: int = 3):
        super().__init__()
        down: list[nn.Module] = []
        up: list[nn.Module] = []
        c = 3
        for i in range(levels):
            cout = width * 2**i
            down += [nn.Conv2d(c, cout, 3, 2, 1), nn.BatchNorm2d(cout), nn.ReLU()]
            c = cout
        for i in reversed(range(levels)):
            cout = 3 if i == 0 else width * 2 ** (i - 1)
            up.append(nn.ConvTranspose2d(c, cout, 4, 2, 1))
            if i:
                up += [nn.BatchNorm2d(cout), nn.ReLU()]
            c = cout
        self.encoder, self.decoder = nn.Sequential(*down), nn.Sequential(*up)

    def forward(self, x):
        return torch.sigmoid(self.decoder(self.encoder(x)))


class UNet(nn.Module):
    """Small U-Net for 3x32x32 segmentation (``classes`` per pixel): double 3x3 convs, max-pool down,
    transposed-conv up, skip concatenation."""

    def __init__(self, width: int = 16, levels: int = 3, classes: int = 4):
        super().__init__()

        def double(cin, cout):
            return nn.Sequential(_conv_bn(cin, cout), _conv_bn(cout, cout))

        self.down = nn.ModuleList()
        c, chans = 3, []
        for i in range(levels):
            self.down.append(double(c, width * 2**i))
            c = width * 2**i
            chans.append(c)
        self.mid = double(c, 2 * c)
        c *= 2
        self.ups, self.dec = nn.ModuleList(), nn.ModuleList()
        for skip in reversed(chans):
            self.ups.append(nn.ConvTranspose2d(c, skip, 2, 2))
            self.dec.append(double(2 * skip, skip))
            c = skip
        self.out = nn.Conv2d(c, classes, 1)

    def forward(self, x):
        skips = []
        for block in self.down:
            x = block(x)
            skips.append(x)
            x = F.max_pool2d(x, 2)
        x = self.mid(x)
        for up, dec, skip in zip(self.ups, self.dec, reversed(skips)):
            x = dec(torch.cat([up(x), skip], 1))
        return self.out(x)


# ------------------------------------------------------------------------------------------------------ GNN
class GCN(nn.Module):
    """Graph convolutional network for graph classification: every sample is a graph of ``nodes`` nodes (a fixed
    random graph with ``degree`` in-edges per node); messages are gathered along edges and summed with
    ``index_add_`` (scatter-add), then mean-pooled per graph."""

    src: torch.Tensor  # a registered buffer
    dst: torch.Tensor  # a registered buffer

    def __init__(self, hidden: int = 64, layers: int = 3, nodes: int = 64, degree: int = 4, features: int = 32,
                 classes: int = 10):
        super().__init__()
        self.nodes = nodes
        g = torch.Generator().manual_seed(0)  # the same graph in every process (DDP replicas agree)
        src = torch.randint(0, nodes, (nodes * degree,), generator=g, device="cpu")
        self.register_buffer("src", src, persistent=False)
        self.register_buffer("dst", torch.arange(nodes, device="cpu").repeat_interleave(degree), persistent=False)
        self.inp = nn.Linear(features, hidden)
        self.lins = nn.ModuleList(nn.Linear(hidden, hidden) for _ in range(layers))
        self.head = nn.Linear(hidden, classes)
        self.scale = 1.0 / (degree + 1)

    def forward(self, x):
        b, n, _ = x.shape
        offset = (torch.arange(b, device=x.device) * n).repeat_interleave(self.src.numel())
        src, dst = self.src.repeat(b) + offset, self.dst.repeat(b) + offset
        h = F.relu(self.inp(x.reshape(b * n, -1)))
        for lin in self.lins:
            m = lin(h)
            agg = torch.zeros_like(m).index_add_(0, dst, m.index_select(0, src))
            h = F.relu((agg + m) * self.scale)
        return self.head(h.view(b, n, -1).mean(1))


# ------------------------------------------------------------------------------------------------ recurrent
class RecurrentClassifier(nn.Module):
    """Token embeddings, a GRU or vanilla (tanh) RNN, a classifier on the last step (the LSTM's sibling)."""

    def __init__(self, cell: str = "gru", vocab: int = 1000, embed: int = 128, hidden: int = 128, layers: int = 1,
                 seq: int = 32, classes: int = 10):
        super().__init__()
        self.tok = nn.Embedding(vocab, embed)
        rnn = {"gru": nn.GRU, "rnn": nn.RNN}[cell]
        self.rnn = rnn(embed, hidden, layers, batch_first=True)
        self.head = nn.Linear(hidden, classes)

    def forward(self, idx):
        out, _ = self.rnn(self.tok(idx))
        return self.head(out[:, -1])
