"""The MLPerf Training benchmarks perfmodel imports: what each trains, its size and FLOPs per sample (cited), and
how its step time is read from a log (:data:`BENCHMARKS`); the language models' shapes (:data:`LLM_SHAPES`)."""

from __future__ import annotations

from dataclasses import dataclass

from ...transformer import TransformerShape, transformer_flops

__all__ = ["BENCHMARKS", "Benchmark", "BERT_LARGE", "GPT3_175B", "LLAMA2_70B", "LLAMA31_405B", "LLM_SHAPES",
           "SKIPPED_BENCHMARKS"]


@dataclass(frozen=True)
class Benchmark:
    """What one MLPerf benchmark trains, and how big it is.

    ``position_unit`` says what ``epoch_num`` counts in the benchmark's logs: ``samples``, ``tokens`` (divided
    by ``max_sequence_length`` to get sequences) or ``epochs`` (multiplied by ``samples_per_epoch`` or
    ``train_samples``). ``params``/``flops_per_sample`` are ``None`` where no figure could be sourced.

    Attributes
    ----------
    model : str
        The ``model`` name the records get (e.g. ``resnet50-v1.5``).
    family : str
        The records' ``family`` (``cnn``, ``transformer``...).
    params : float or None
        Parameter count; None where none could be sourced (the run is then marked ``excluded_reason``).
    flops_per_sample : float or None
        Training FLOPs (forward + backward) per sample; None where none could be sourced (likewise excluded).
    position_unit : {"samples", "tokens", "epochs"}
        What ``epoch_num`` counts in the benchmark's logs.
    sample : str
        What one sample is, in words ("one 224x224 ImageNet image").
    source : str
        Where ``params`` and ``flops_per_sample`` come from (the citation).
    timing : tuple of str, default=()
        The step-time methods to try, in order (module docstring); empty means the default order.
    seq_len : int, optional
        Tokens per sample, where the logs count tokens and may not say ``max_sequence_length``.
    samples_per_epoch : int, optional
        The dataset size, where the logs' ``train_samples`` is not it.
    throughput_unit : str, default="samples"
        What a logged ``tracked_stats`` throughput counts per second (``tokens``: divided by the sequence
        length).
    run_average : bool, default=False
        Allow the whole-run average (``train_samples`` logged at the end) as a last resort.
    """

    model: str
    family: str
    params: float | None
    flops_per_sample: float | None
    position_unit: str
    sample: str
    source: str
    timing: tuple = ()
    seq_len: int | None = None  # tokens per sample, where the logs count tokens and may not say it
    samples_per_epoch: int | None = None  # the dataset size, where logs' train_samples is not it
    throughput_unit: str = "samples"  # what a logged tracked_stats throughput counts per second
    run_average: bool = False  # allow the whole-run average (train_samples logged at the end)

    def __post_init__(self):
        if not self.timing:
            object.__setattr__(self, "timing", DEFAULT_TIMING)


#: Order in which the step-time methods are tried (the package docstring).
DEFAULT_TIMING = ("tracked_stats_step_time", "blocks_samples_count", "tracked_stats", "eval_intervals", "blocks")
#: For benchmarks whose reference code logs ``throughput`` over wall time *including* evaluation (BERT: the
#: samples since the previous log over the seconds since it, evaluation included; DLRM and GNN: one average
#: over the whole run), the timestamps between evaluations are preferred.
_EVAL_FIRST = ("eval_intervals", "blocks_samples_count", "tracked_stats_step_time", "tracked_stats", "blocks")
#: BERT: a block is the whole run with epoch_count=1 (no sample count), older logs have no eval_start, and the
#: oldest give no sample position at all: then the whole-run average (train_samples is logged at the end).
_BERT_TIMING = ("eval_intervals", "eval_points", "tracked_stats", "run_average")
#: GPT-3: logged throughput is in tokens/s and some logs give train_step_timing; timestamps count tokens.
_GPT3_TIMING = ("tracked_stats_step_time", "eval_intervals", "blocks", "eval_points", "tracked_stats")
STAMP_CHECK_ORDER = ("blocks_samples_count", "eval_intervals", "eval_points", "blocks")


def _transformer_flops(shape: TransformerShape, seq_len: int, *, frozen: bool = False) -> float:
    """Training FLOPs of one sequence (:func:`perfmodel.transformer.transformer_flops`: ``6·N·seq + 12·L·d·seq²``;
    with ``frozen`` weights (LoRA) the weight-gradient matmuls are skipped, ``4·N·seq`` of dense work)."""
    return transformer_flops(shape, seq_len, frozen_weights=frozen).model


#: The shapes of the language-model benchmarks, from their papers and model cards (cited in BENCHMARKS).
GPT3_175B = TransformerShape(n_layers=96, d_model=12288, n_heads=96, vocab=50257, positions=2048)
LLAMA2_70B = TransformerShape(n_layers=80, d_model=8192, n_heads=64, n_kv_heads=8, ffn_hidden=28672, vocab=32000,
                              gated_mlp=True, tied_embeddings=False)
LLAMA31_405B = TransformerShape(n_layers=126, d_model=16384, n_heads=128, n_kv_heads=8, ffn_hidden=53248,
                                vocab=128256, gated_mlp=True, tied_embeddings=False)
#: BERT-large's encoder layers (the embedding and the masked-LM head's small GEMM left out, as before).
BERT_LARGE = TransformerShape(n_layers=24, d_model=1024, n_heads=16)
#: The language-model benchmarks' shapes, by benchmark name: what their rows' shape columns (``n_layers``,
#: ``d_model``, ...) are filled from.
LLM_SHAPES: dict[str, TransformerShape] = {"gpt3": GPT3_175B, "llama2_70b_lora": LLAMA2_70B,
                                           "llama31_405b": LLAMA31_405B}


#: BERT: the mean sequence length the work is counted at (tokens, padding excluded: about half of 512, at most;
#: see its entry below).
_BERT_TOKENS = 256

_KAPLAN = ("perfmodel.transformer.transformer_flops: 6 N_matmul seq + 12 n_layer d seq^2 (Megatron-LM / PaLM "
           "convention, no causal-mask saving)")

#: Benchmark name in the logs -> model, family, size, FLOPs per sample (forward + backward), with the source.
BENCHMARKS: dict[str, Benchmark] = {
    "resnet": Benchmark(
        "resnet50-v1.5", "cnn", 25_557_032, 3 * 2 * 4.09e9, "epochs", "one 224x224 ImageNet image",
        "torchvision ResNet50_Weights docs (ResNet-50 v1.5 as in the MLPerf reference): 25,557,032 params, "
        "4.09 G multiply-accumulates per 224x224 forward (listed as 'GFLOPS'); x2 FLOP/MAC, x3 forward+backward",
    ),
    "bert": Benchmark(
        "bert-large", "transformer", 340e6, _transformer_flops(BERT_LARGE, _BERT_TOKENS), "samples",
        "one sequence of at most 512 tokens (256 on average without padding)",
        "Devlin et al. 2019 (BERT-large: 24 layers, d=1024, 340M params); FLOPs by " + _KAPLAN
        + " with non-embedding N = 12 n_layer d^2 at the mean unpadded length, about 256 tokens (at most: at "
        "length 512, padding is in excess of 50% of the Wikipedia data BERT pre-trains on, Krell et al. 2021, "
        "'Efficient Sequence Packing without Cross-contamination', arXiv:2107.02027; NVIDIA's MLPerf BERT "
        "packs about 2 sequences per 512-token row, its run_pretraining.py --average_packing_rate default 2). "
        "MLPerf submissions skip padding (unpadded or packed kernels); counting the padded 512 would double the "
        "work and put tuned runs above the peak",
        timing=_BERT_TIMING, run_average=True,
    ),
    "gpt3": Benchmark(
        "gpt3-175b", "transformer", 175e9, _transformer_flops(GPT3_175B, 2048), "tokens",
        "one 2048-token sequence",
        "Brown et al. 2020, Table 2.1 (GPT-3 175B: 96 layers, d=12288, 96 heads, n_ctx=2048, learned positions, "
        "vocabulary 50257, tied head); FLOPs by " + _KAPLAN,
        seq_len=2048, throughput_unit="tokens", timing=_GPT3_TIMING,
    ),
    "llama2_70b_lora": Benchmark(
        "llama2-70b-lora", "transformer", 70e9, _transformer_flops(LLAMA2_70B, 8192, frozen=True), "samples",
        "one 8192-token sequence",
        "Touvron et al. 2023, Llama 2 (70B: 80 layers, d=8192, 64 heads, 8 KV heads, SwiGLU 28672, vocabulary "
        "32000, untied head); MLPerf llama2_70b_lora reference: LoRA on "
        "SCROLLS GovReport at 8192 tokens. FLOPs by " + _KAPLAN + " with frozen base weights (4N + attention); "
        "params is the base model size (LoRA adapters are the only trainable weights)",
    ),
    "llama31_405b": Benchmark(
        "llama3.1-405b", "transformer", 405e9, _transformer_flops(LLAMA31_405B, 8192), "samples",
        "one 8192-token sequence",
        "Meta Llama 3.1 model card / Dubey et al. 2024, Table 3 (405B: 126 layers, d=16384, 128 heads, 8 KV "
        "heads, SwiGLU 53248, vocabulary 128256, untied head); MLPerf "
        "llama31_405b pretraining reference at sequence length 8192; FLOPs by " + _KAPLAN,
    ),
    "maskrcnn": Benchmark(
        "maskrcnn-r50-fpn", "cnn", 44_401_393, 3 * 2 * 134.38e9, "epochs", "one COCO image (shorter side 800)",
        "torchvision MaskRCNN_ResNet50_FPN_Weights docs: 44,401,393 params, 134.38 'GFLOPS' per forward "
        "(multiply-accumulates, counted as for ResNet-50 above; shorter side 800 as in the MLPerf reference); x2 "
        "FLOP/MAC, x3 forward+backward; an epoch is the 117,266 COCO train2017 images with annotations (MLPerf "
        "maskrcnn reference); some logs' train_samples is another figure",
        samples_per_epoch=117_266,
    ),
    "stable_diffusion": Benchmark(
        "stable-diffusion-v2", "diffusion", 865e6, None, "samples", "one 512x512 image (64x64 latent)",
        "Stability AI stablediffusion README (SD 2: 865M-parameter UNet, the trained part); FLOPs per image "
        "not sourced",
    ),
    # Benchmarks kept in the table (their step times are derived) but without a sourced size: the rows carry
    # params=NaN and an excluded_reason, so they stay out of fitting rather than carry a guessed figure.
    "ssd": Benchmark("ssd", "cnn", None, None, "epochs", "one image",
                     "not sourced: SSD-ResNet34 (v1.x) and RetinaNet-ResNeXt50 (v2.0+) sizes not found in a citable "
                     "model card for the MLPerf variants"),
    "retinanet": Benchmark("retinanet-resnext50", "cnn", None, None, "epochs", "one 800x800 image",
                           "not sourced: the MLPerf RetinaNet uses a ResNeXt50-32x4d backbone, which torchvision "
                           "does not list"),
    "rnnt": Benchmark("rnn-t", "rnn", None, None, "epochs", "one LibriSpeech utterance",
                      "not sourced: utterance length varies; no citable per-sample FLOPs"),
    "unet3d": Benchmark("unet3d", "cnn", None, None, "epochs", "one 128^3 KiTS19 crop",
                        "not sourced: no citable parameter/FLOP figure for the MLPerf 3D U-Net"),
    "dlrm": Benchmark("dlrm", "recsys", None, None, "epochs", "one Criteo click record",
                      "not sourced: parameters are embedding rows whose count depends on the hashing setup",
                      timing=_EVAL_FIRST),
    "dlrm_dcnv2": Benchmark("dlrm-dcnv2", "recsys", None, None, "epochs", "one Criteo click record",
                            "not sourced: parameters are embedding rows whose count depends on the hashing setup",
                            timing=_EVAL_FIRST),
    "gnn": Benchmark("rgat", "gnn", None, None, "epochs", "one seed node with its sampled neighbourhood",
                     "not sourced: work per seed node depends on the sampled neighbourhood", timing=_EVAL_FIRST),
    "rgat": Benchmark("rgat", "gnn", None, None, "epochs", "one seed node with its sampled neighbourhood",
                      "not sourced: work per seed node depends on the sampled neighbourhood", timing=_EVAL_FIRST),
}

#: Benchmarks that are not imported, and why.
SKIPPED_BENCHMARKS = {
    "minigo": "reinforcement learning: a run interleaves self-play and training, so there is no per-sample "
              "training step to time",
}

#: Timestamp-derived / logged throughput outside this range means one of them is in other units (per device,
#: per token, ...): such rows are kept but marked in ``excluded_reason``. Inside it the difference is warm-up,
#: host work and (for BERT, DLRM, GNN) evaluation time inside the logged figure.
CHECK_LOW, CHECK_HIGH = 0.8, 1.25

