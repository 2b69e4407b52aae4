"""Plan an LLM pre-training job from its shape and parallel layout: time with an interval, where each step's time
goes, memory fit, the fastest layout that fits, devices compared, and a calibration on runs of your own. Its output
is docs/guide/llm.md's (regenerate with ``python examples/plan_llm_job.py``).

Out of the box everything is predicted from perfmodel's bundled public LLM pre-training history (published runs
of tuned frameworks); the interval is what the layout model missed on published sets it had not seen. A few runs of
your own narrow it: section 5.
"""

import warnings

import perfmodel
from perfmodel.exceptions import DataQualityWarning, DoesNotFitError
from perfmodel.plan import plan_llm_job, recommend

warnings.simplefilter("ignore", DataQualityWarning)  # said once here: bundled public history, not your stack

# Llama 3 8B's config.json (meta-llama/Meta-Llama-3-8B), as a dict; a path to the file works too
LLAMA3_8B = {"model_type": "llama", "num_hidden_layers": 32, "hidden_size": 4096, "intermediate_size": 14336,
             "num_attention_heads": 32, "num_key_value_heads": 8, "vocab_size": 128256, "rms_norm_eps": 1e-05,
             "tie_word_embeddings": False, "hidden_act": "silu"}
JOB = dict(hf_config=LLAMA3_8B, seq_len=8192, tokens=100e9, global_batch=512, precision="bf16")

print("== 1. Llama 3 8B, 100B tokens, global batch 512 x 8192 tokens on 64 H100 (8 nodes): tensor parallel 2")
job = plan_llm_job(**JOB, gpu_type="H100", gpu_count=64, tensor_parallel=2)
print(job)

print("\n== 2. the fastest layout that fits in memory (a search over tp, pp, cp, micro-batch, ZeRO, recomputation)")
best = plan_llm_job(**JOB, gpu_type="H100", gpu_count=64, search=True)
print(best.layouts[["layout", "step_time_s", "vs_fastest", "told_apart", "memory_gb"]].head(8).to_string(
    index=False, float_format=lambda v: f"{v:.3g}"))
print(f"{len(best.layouts)} layouts fit; planned: {best.layout.describe()}, {best.seconds / 3600:.1f} h "
      f"(90% PI {best.lower / 3600:.1f}–{best.upper / 3600:.1f} h)")
tied = best.layouts["told_apart"].map(lambda v: v is False)
print(f"{int(tied.sum())} of them within x{best.layouts['vs_fastest'][tied].max():.2f} of the fastest: not told "
      "apart by the model (told_apart False); measure the leading few on your cluster")

print("\n== 3. a layout whose memory estimate does not fit is refused, naming one that does")
try:
    plan_llm_job(**JOB, gpu_type="H100", gpu_count=64, micro_batch=8, zero_stage=0)
except DoesNotFitError as exc:
    print(exc)

print("\n== 4. device types and counts for the same job, each with its fastest layout that fits")
table = recommend({"hf_config": LLAMA3_8B, "name": "llama3-8b"}, seq_len=8192, batch_size=512,
                  steps=job.steps, gpu_types=["H100", "A100-SXM4-80GB", "B200"], gpu_counts=[32, 64],
                  precision="bf16")
print(table[["gpu_type", "gpu_count", "layout", "seconds", "upper", "cost", "provider"]].assign(
    seconds=lambda t: (t["seconds"] / 3600).round(1), upper=lambda t: (t["upper"] / 3600).round(1),
    cost=lambda t: t["cost"].round(0)).rename(columns={"seconds": "hours", "upper": "hours_hi"}).to_string(
    index=False))

print("\n== 5. calibrated on three runs of your own (here: three published torchtitan Llama 3 8B runs standing in)")
own = perfmodel.load_runs(perfmodel.datasets.bundled_runs_path("public_torchtitan.csv"))
own = own[own["model"].str.startswith("llama3.1-8b")].head(3)
mine = plan_llm_job(**JOB, gpu_type="H100", gpu_count=64, tensor_parallel=2, history=own)
print(f"out of the box: {job.prediction.step_seconds:.2f} s per step (90% PI {job.prediction.step_lower:.2f}–"
      f"{job.prediction.step_upper:.2f}); calibrated on {mine.prediction.n_runs} runs: "
      f"{mine.prediction.step_seconds:.2f} s ({mine.prediction.step_lower:.2f}–{mine.prediction.step_upper:.2f})")
print(f"interval: {mine.prediction.interval_rule}")
