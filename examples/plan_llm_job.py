"""Plan a GPU LLM training job from its shape: time with an interval, memory fit, cost, and the cheapest layout
that meets a deadline. Its output is docs/guide/llm.md's (regenerate with ``python examples/plan_llm_job.py``).

Everything is predicted from perfmodel's bundled public GPU history (MLPerf Training results): calibrate with a
few runs of your own (``history=["my_runs.csv", "gpu"]``) before you trust the hours.
"""

import warnings

from perfmodel.exceptions import DataQualityWarning, UnknownPriceError
from perfmodel.plan import plan_llm_job

warnings.simplefilter("ignore", DataQualityWarning)  # said once here: bundled public history, not your stack

LLAMA2_7B = dict(n_layers=32, d_model=4096, vocab=32000, n_heads=32)
JOB = dict(**LLAMA2_7B, seq_len=4096, tokens=100e9, global_batch=1024, precision="bf16")

print("== 1. Llama-2-7B shape, 100B tokens, global batch 1024 x 4096 on 8 nodes x 8 H100, plain data parallel")
naive = plan_llm_job(**JOB, gpu_type="H100", nodes=8, gpus_per_node=8)
print(naive)

print("\n== 2. the same with ZeRO-3, activation checkpointing, flash attention, micro-batch 2")
sharded = plan_llm_job(**JOB, gpu_type="H100", nodes=8, gpus_per_node=8, zero_stage=3, micro_batch=2,
                       activation_checkpointing=True, flash_attention=True)
print(sharded)
print("cost:", sharded.cost())

print("\n== 3. cheapest layout that fits and finishes within 5 days (interval upper bound)")
deadline_h = 5 * 24
print(f"{'layout':<27} {'hours':>7} {'upper':>7} {'memory':>38} {'cost':>12}  provider")
best, no_price = None, {}
for gpu_type in ("H100", "A100-SXM4-80GB", "MI300X"):
    for nodes in (4, 8, 16):
        job = plan_llm_job(**JOB, gpu_type=gpu_type, nodes=nodes, gpus_per_node=8, zero_stage=3, micro_batch=2,
                           activation_checkpointing=True, flash_attention=True)
        try:
            cost = job.cost()
            price, who = f"${cost.dollars:>11,.0f}", cost.provider
        except UnknownPriceError as exc:
            cost, price, who = None, f"{'no price':>12}", "(see below)"
            no_price[job.gpu_type] = exc.reason  # the price table's note on the device, dated
        print(f"{nodes:>2} nodes x 8 {job.gpu_type:<14} {job.seconds / 3600:7.1f} {job.upper / 3600:7.1f} "
              f"{job.memory.short():>38} {price}  {who}")
        ok = job.fits and job.upper <= deadline_h * 3600 and cost is not None
        if ok and (best is None or cost.dollars < best[1].dollars):
            best = (job, cost)
for gpu_type, why in no_price.items():
    print(f"no price for {gpu_type}: {why}")
if best:
    job, cost = best
    print(f"\ncheapest within {deadline_h} h: {job.nodes} nodes x 8 {job.gpu_type}, "
          f"{job.seconds / 3600:.1f} h (upper {job.upper / 3600:.1f} h), {cost}")
else:
    print(f"\nno layout fits and finishes within {deadline_h} h")

print("\n== 4. the model from its Hugging Face config (Llama-2-7b-hf's config.json, as a dict; a path works too)")
LLAMA2_7B_CONFIG = {"model_type": "llama", "num_hidden_layers": 32, "hidden_size": 4096, "intermediate_size": 11008,
                    "num_attention_heads": 32, "num_key_value_heads": 32, "vocab_size": 32000,
                    "tie_word_embeddings": False, "rms_norm_eps": 1e-05, "hidden_act": "silu"}
hf = plan_llm_job(hf_config=LLAMA2_7B_CONFIG, seq_len=4096, tokens=100e9, global_batch=1024, precision="bf16",
                  gpu_type="H100", nodes=8, gpus_per_node=8, zero_stage=3, micro_batch=2,
                  activation_checkpointing=True, flash_attention=True)
print(f"params: {hf.params:,.0f} ({hf.params_formula})")
print(f"time: {hf.seconds / 3600:.1f} h (upper {hf.upper / 3600:.1f} h)")

print("\n== 5. the same job on a slower network than the DGX H100's 400 Gb/s per GPU: one 100 Gb/s NIC per GPU")
slow = plan_llm_job(**JOB, gpu_type="H100", nodes=8, gpus_per_node=8, zero_stage=3, micro_batch=2,
                    activation_checkpointing=True, flash_attention=True, inter_node_gbps=12.5)
c = slow.communication
print(f"time: {slow.seconds / 3600:.1f} h (upper {slow.upper / 3600:.1f} h), {sharded.seconds / 3600:.1f} h at the "
      f"reference network; data-parallel all-reduce {c['dp_allreduce_s_per_step']:.3g} s per step, "
      f"{c['dp_added_s_per_step']:.3g} s of it added")
