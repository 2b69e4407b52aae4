"""Benchmark: ``estimate_memory`` against the peak memory the measurement code records, on CPU runs.

Usage: python benchmarks/memory.py [--repeats 2] [--out benchmarks/results/memory] [--only 0,5]    (needs torch)

Each configuration (MLPs, SDPA decoders and explicit-attention decoders of the zoo, resized with knobs, over
batch sizes) is measured ``--repeats`` times with ``perfmodel.measure.measure_run`` (a fresh worker process per
run, AdamW, fp32, 1 + 1 warm-up + 4 timed steps) and its ``peak_mem_bytes`` (``mem_source`` ``rss_delta``: the
tensors resident when the steps begin plus the peak growth of anonymous resident memory) is set beside:

* ``estimate``: ``perfmodel.plan.estimate_memory(params, precision="fp32", optimizer="adamw", overhead_bytes=0,
  micro_batch=batch)``, with the transformer's ``seq_len``, ``n_layers``, ``d_model``, ``n_heads`` and ``vocab``
  for the decoders (``flash_attention=True`` for the zoo's SDPA decoders, whose CPU kernel,
  ``_scaled_dot_product_flash_attention_for_cpu``, stores no score matrix; False for the explicit-attention ones).
  The framework overhead is 0 here: the 2 GB default stands for a CUDA context, which a CPU run has not.
  ``estimate_memory`` has no activation formula for an MLP: there the estimate is the model state alone;
* ``op_act``: the op counter's ``op_act_bytes`` (bytes saved for backward per sample) x batch, for comparison;
* ``tensor_peak``: the most bytes held by live tensors at any point of one steady-state step, tracked in a fresh
  process by a ``TorchDispatchMode`` that registers every aten op's output storages and drops them when they are
  freed (parameters, buffers, optimizer state and the batch included; scratch memory a kernel allocates inside
  itself is not seen). It separates what the estimate gets wrong (estimate vs tensor peak) from what the C
  allocator adds (tensor peak vs the resident-memory peak).

The summary gives the measured/estimate ratios, Spearman's rank correlation of measured with estimated peaks,
the log-log slope of measured on estimate and on parameters (MLPs at one batch), and the repeat noise (the
largest (max - min) / median over the repeats of one configuration). The load average is printed: the peak
memory does not depend on the load, but other processes' memory does not enter it either (it is this process's).
"""

from __future__ import annotations

import argparse
import json
import math
import os
import platform
import statistics
import subprocess
import sys
import time

#: (label, zoo model, knobs, batch, transformer shape for estimate_memory or None, flash attention)
CONFIGS = [
    ("mlp w512", "mlp-m", {"width": 512, "depth": 3}, 32, None, False),
    ("mlp w1024", "mlp-m", {"width": 1024, "depth": 3}, 32, None, False),
    ("mlp w2048", "mlp-m", {"width": 2048, "depth": 3}, 32, None, False),
    ("mlp w4096", "mlp-m", {"width": 4096, "depth": 3}, 32, None, False),
    ("mlp w2048 b1024", "mlp-m", {"width": 2048, "depth": 3}, 1024, None, False),
    ("gpt d128 L2 s32", "gpt-s", {"d_model": 128, "layers": 2, "seq": 32}, 16, True, True),
    ("gpt d256 L4 s64", "gpt-s", {"d_model": 256, "layers": 4, "seq": 64}, 16, True, True),
    ("gpt d256 L4 s128", "gpt-s", {"d_model": 256, "layers": 4, "seq": 128}, 32, True, True),
    ("gpt d512 L4 s128", "gpt-s", {"d_model": 512, "layers": 4, "seq": 128}, 8, True, True),
    ("explicit d128 L2 s64", "dec-explicit-s", {"d_model": 128, "layers": 2, "seq": 64}, 16, True, False),
    ("explicit d192 L2 s128", "dec-explicit-m", {"d_model": 192, "layers": 2, "seq": 128}, 16, True, False),
]
VOCAB = 1000  # the zoo decoders' default vocabulary


def _tensor_peak_child(i: int) -> None:
    """Print the live-tensor peak of one steady-state AdamW step of configuration ``i`` (a fresh process)."""
    import torch
    from torch.multiprocessing.reductions import StorageWeakRef
    from torch.utils._python_dispatch import TorchDispatchMode
    from torch.utils._pytree import tree_flatten

    from perfmodel.measure.workload import resolve_workload

    class LiveBytes(TorchDispatchMode):
        def __init__(self, existing):
            super().__init__()
            self.refs = {}
            for t in existing:
                self._add(t)
            self.peak = self.now()

        def _add(self, t):
            if isinstance(t, torch.Tensor):
                st = t.untyped_storage()
                self.refs[st.data_ptr()] = (StorageWeakRef(st), st.nbytes())

        def now(self):
            for k in [k for k, (ref, _) in self.refs.items() if ref.expired()]:
                del self.refs[k]
            return sum(n for _, n in self.refs.values())

        def __torch_dispatch__(self, func, types, args=(), kwargs=None):
            out = func(*args, **(kwargs or {}))
            for t in tree_flatten(out)[0]:
                self._add(t)
            self.peak = max(self.peak, self.now())
            return out

    _, model, knobs, batch, _, _ = CONFIGS[i]
    torch.manual_seed(0)
    wl = resolve_workload(model, knobs=knobs)
    opt = torch.optim.AdamW(wl.module.parameters(), lr=1e-4)
    inputs, target = wl.make_inputs(batch, torch.device("cpu"))

    def step():
        wl.loss(wl.module(*inputs), inputs, target).backward()
        opt.step()
        opt.zero_grad(set_to_none=True)

    step()  # creates the optimizer state
    state = [v for s in opt.state.values() for v in s.values() if torch.is_tensor(v)]
    existing = [*wl.module.parameters(), *wl.module.buffers(), *inputs, target, *state]
    with LiveBytes(existing) as live:
        step()
    print(json.dumps({"tensor_peak_bytes": live.peak}))


def _tensor_peak(i: int) -> float | None:
    r = subprocess.run([sys.executable, __file__, "--tensor-peak-child", str(i)], capture_output=True, text=True)
    for line in r.stdout.splitlines()[::-1]:
        if line.startswith("{"):
            return float(json.loads(line)["tensor_peak_bytes"])
    print(f"  tensor-peak child failed: {r.stderr.strip().splitlines()[-1:]}", file=sys.stderr)
    return None


def _estimate(params: float, cfg) -> dict:
    from perfmodel.plan import estimate_memory

    _, _, knobs, batch, shape, flash = cfg
    kw = {}
    if shape:
        d = knobs["d_model"]
        kw = dict(seq_len=knobs["seq"], n_layers=knobs["layers"], d_model=d, n_heads=max(2, d // 64), vocab=VOCAB,
                  flash_attention=flash)
    e = estimate_memory(params=params, precision="fp32", optimizer="adamw", micro_batch=batch, overhead_bytes=0,
                        **kw)
    return {"estimate_bytes": e.total_bytes, "state_bytes": e.weights_bytes + e.gradients_bytes + e.optimizer_bytes,
            "activations_bytes": e.activations_bytes}


def _spearman(a, b) -> float:
    def ranks(x):
        order = sorted(range(len(x)), key=lambda k: x[k])
        r = [0.0] * len(x)
        for pos, k in enumerate(order):
            r[k] = float(pos)
        return r

    ra, rb = ranks(a), ranks(b)
    ma, mb = statistics.fmean(ra), statistics.fmean(rb)
    num = sum((x - ma) * (y - mb) for x, y in zip(ra, rb))
    return num / math.sqrt(sum((x - ma) ** 2 for x in ra) * sum((y - mb) ** 2 for y in rb))


def _slope(x, y) -> float | None:
    if len(set(x)) < 2:
        return None
    lx, ly = [math.log(v) for v in x], [math.log(v) for v in y]
    mx, my = statistics.fmean(lx), statistics.fmean(ly)
    return sum((a - mx) * (b - my) for a, b in zip(lx, ly)) / sum((a - mx) ** 2 for a in lx)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeats", type=int, default=2)
    ap.add_argument("--out", default=os.path.join(os.path.dirname(__file__), "results", "memory"))
    ap.add_argument("--only", default=None, help="comma-separated configuration indices (a quick check)")
    ap.add_argument("--tensor-peak-child", type=int, default=None, help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    if args.tensor_peak_child is not None:
        _tensor_peak_child(args.tensor_peak_child)
        return 0
    import torch

    from perfmodel.measure import RunConfig, measure_run

    t0 = time.time()
    load0 = os.getloadavg()[0]
    rows = []
    keep = None if args.only is None else {int(k) for k in args.only.split(",")}
    for i, cfg in enumerate(CONFIGS):
        if keep is not None and i not in keep:
            continue
        label, model, knobs, batch, _, _ = cfg
        peaks, mmap_peaks, rec = [], [], None
        for r in range(args.repeats):
            for env, into in (({}, peaks), ({"MALLOC_MMAP_THRESHOLD_": "65536"}, mmap_peaks)):
                saved = {k: os.environ.get(k) for k in env}
                os.environ.update(env)
                try:
                    rec, _ = measure_run(RunConfig(model, batch, knobs=knobs, steps=4, warmup_steps=1, repeat=r))
                finally:
                    for k, v in saved.items():
                        os.environ.pop(k) if v is None else os.environ.__setitem__(k, v)
                if rec["status"] != "ok" or rec.get("peak_mem_bytes") is None:
                    raise RuntimeError(f"{label}: {rec['status']} {rec.get('error')} "
                                       f"(mem_source {rec.get('mem_source')})")
                into.append(float(rec["peak_mem_bytes"]))
        med = statistics.median(peaks)
        row = {"label": label, "model": model, "knobs": knobs, "batch_size": batch, "params": int(rec["params"]),
               "mem_source": rec["mem_source"], "peak_mem_bytes": peaks, "peak_mem_median_bytes": med,
               "repeat_spread": (max(peaks) - min(peaks)) / med,
               "peak_mem_mmap_bytes": mmap_peaks, "peak_mem_mmap_median_bytes": statistics.median(mmap_peaks),
               "op_act_bytes_batch": None if rec.get("op_act_bytes") is None else float(rec["op_act_bytes"]) * batch,
               "tensor_peak_bytes": _tensor_peak(i), **_estimate(rec["params"], cfg)}
        row["measured_over_estimate"] = med / row["estimate_bytes"]
        rows.append(row)
        print(f"{label}: {med / 1e6:.1f} MB measured, {row['estimate_bytes'] / 1e6:.1f} MB estimated", flush=True)
    ratios = [r["measured_over_estimate"] for r in rows]
    meas, est = [r["peak_mem_median_bytes"] for r in rows], [r["estimate_bytes"] for r in rows]
    mlp = [r for r in rows if r["model"].startswith("mlp") and r["batch_size"] == 32]
    summary = {
        "configurations": len(rows), "repeats": args.repeats,
        "ratio_min": min(ratios), "ratio_max": max(ratios), "ratio_median": statistics.median(ratios),
        "spearman_measured_vs_estimate": _spearman(meas, est),
        "loglog_slope_measured_on_estimate": _slope(est, meas),
        "loglog_slope_mlp_measured_on_params": _slope([r["params"] for r in mlp],
                                                      [r["peak_mem_median_bytes"] for r in mlp]),
        "repeat_spread_max": max(r["repeat_spread"] for r in rows),
        "measured_over_tensor_peak": [min(q), max(q)] if (q := [r["peak_mem_median_bytes"] / r["tensor_peak_bytes"]
                                                              for r in rows if r["tensor_peak_bytes"]]) else None,
        "mmap_measured_over_tensor_peak": [min(q), max(q)] if (q := [
            r["peak_mem_mmap_median_bytes"] / r["tensor_peak_bytes"] for r in rows if r["tensor_peak_bytes"]]) else None,
        "tensor_peak_over_estimate": [min(q), max(q)] if (q := [r["tensor_peak_bytes"] / r["estimate_bytes"]
                                                               for r in rows if r["tensor_peak_bytes"]]) else None,
    }
    host = {"torch": torch.__version__, "python": platform.python_version(), "cpu_cores": os.cpu_count(),
            "threads_per_worker": os.cpu_count(), "load_average_start": load0,
            "load_average_end": os.getloadavg()[0], "seconds": round(time.time() - t0, 1),
            "date": time.strftime("%Y-%m-%d")}
    with open(args.out + ".json", "w", encoding="utf-8") as fh:
        json.dump({"host": host, "summary": summary, "rows": rows}, fh, indent=1, allow_nan=False)
        fh.write("\n")
    mb = lambda v: "-" if v is None else f"{v / 1e6:8.1f}"  # noqa: E731
    lines = [f"# python benchmarks/memory.py --repeats {args.repeats}   ({host['date']}, {os.cpu_count()} cores, "
             f"torch {torch.__version__}, load average {load0:.1f} -> {host['load_average_end']:.1f})",
             "fp32, AdamW, CPU worker processes; MB = 1e6 bytes; measured = peak_mem_bytes (rss_delta), median of "
             "the repeats; estimate = estimate_memory(overhead_bytes=0)",
             f"{'configuration':22}{'params':>8}{'batch':>6}{'measured':>9}{'spread':>7}{'mmap64k':>8}"
             f"{'tensors':>8}{'estimate':>9}{'state':>7}{'acts':>7}{'op_act':>7}{'meas/est':>9}"]
    for r in rows:
        lines.append(f"{r['label']:22}{r['params'] / 1e6:7.2f}M{r['batch_size']:6d}{mb(r['peak_mem_median_bytes']):>9}"
                     f"{100 * r['repeat_spread']:6.1f}%{mb(r['peak_mem_mmap_median_bytes']):>8}"
                     f"{mb(r['tensor_peak_bytes']):>8}{mb(r['estimate_bytes']):>9}{mb(r['state_bytes']):>7}"
                     f"{mb(r['activations_bytes']):>7}{mb(r['op_act_bytes_batch']):>7}"
                     f"{r['measured_over_estimate']:9.2f}")
    s = summary
    f2 = lambda v: "-" if v is None else f"{v:.2f}"  # noqa: E731
    rng = lambda v: "-" if v is None else f"{v[0]:.2f} - {v[1]:.2f}"  # noqa: E731
    lines += ["",
              f"measured / estimate: {s['ratio_min']:.2f} - {s['ratio_max']:.2f} (median {s['ratio_median']:.2f}); "
              f"Spearman rank correlation {s['spearman_measured_vs_estimate']:.3f}; log-log slope of measured on "
              f"estimate {f2(s['loglog_slope_measured_on_estimate'])}, of the MLPs' measured on params "
              f"{f2(s['loglog_slope_mlp_measured_on_params'])}",
              f"tensors / estimate: {rng(s['tensor_peak_over_estimate'])}; measured / tensors: "
              f"{rng(s['measured_over_tensor_peak'])}; with MALLOC_MMAP_THRESHOLD_=65536: "
              f"{rng(s['mmap_measured_over_tensor_peak'])}",
              f"repeat noise: largest (max - min) / median over {args.repeats} repeats {100 * s['repeat_spread_max']:.1f}%"
              f"; {host['seconds']:.0f} s in all",
              "columns: measured = peak_mem_bytes; spread = (max - min) / median over the repeats; mmap64k = the same "
              "run under MALLOC_MMAP_THRESHOLD_=65536 (glibc maps and unmaps every allocation >= 64 KiB); tensors = "
              "live-tensor peak of one steady step; state = weights + gradients + AdamW state (16 B/param in fp32); "
              "acts = the estimate's activations (- for an MLP: no formula); op_act = op_act_bytes x batch"]
    with open(args.out + ".txt", "w", encoding="utf-8") as fh:
        fh.write("\n".join(lines) + "\n")
    print("\n".join(lines))
    return 0


if __name__ == "__main__":
    sys.exit(main())
