"""A GPU measurement campaign within a hard wall-clock budget: microbenchmark, zoo + Hugging Face models, fp32/tf32/
bf16, two or three batch sizes, 1..n GPUs, NVML telemetry, repeats for noise; results appended as they finish.

Run from the repository root (perfmodel need not be installed)::

    PYTHONPATH=src python3 benchmarks/gpu_campaign.py --budget-min 8            # writes data/runs_<device>.csv
    PYTHONPATH=src python3 benchmarks/gpu_campaign.py --out-dir /tmp/x --budget-min 7
    PYTHONPATH=src python3 benchmarks/gpu_campaign.py --dry-run                 # the plan; works without a GPU

Outputs (in ``--out-dir``, default ``data/``), ``<device>`` being the canonical GPU name in lower case:

* ``microbench_<device>.json`` — matmul TFLOP/s at fp32, tf32 and bf16 (8192x8192 random operands) and
  device-to-device copy bandwidth, timed with CUDA events after a warm-up, medians; written first.
* ``runs_<device>.csv`` (+ ``.steps.jsonl`` per-step times) — one record per finished configuration, appended
  atomically the moment it finishes (a kill loses at most the configuration in flight). OOMs and errors are
  records too (``status``), and the campaign goes on.
* ``runs_<device>.protocol.json`` — how the campaign ran: budget, plan in order, per-configuration budget, what
  finished, what was cut, environment, the microbenchmark.
* ``runs_<device>.campaign.log`` — the worker's log.

Design. The supervisor (this process, no CUDA context) starts one long-lived worker process that runs the
configurations in order, in-process (per-configuration processes would cost 3-5 s of torch/CUDA start-up each,
a third of a configuration's share of an 8-minute budget). An out-of-memory error is caught and recorded in the
worker, which frees the memory and goes on; a CUDA error that poisons the context, a crash or a hang past the
configuration's hard time-out ends the worker: the supervisor records that configuration (``error``/``timeout``)
and starts a fresh worker from the next one. Data-parallel configurations (n > 1 GPUs, only where the machine has
them) run after it, each under ``torchrun`` (perfmodel's ``measure_run``). The supervisor kills everything at the
deadline, so ``--budget-min`` bounds the whole script, start-ups included.

Order. Configurations are ordered so that a budget cut leaves a balanced set: every model at its middle batch size
in bf16, then fp32, then tf32, then the first repeats, then the other batch sizes in bf16, fp32, and so on
(models rotated within each tier). Configurations that cannot get a minimum share of the budget are left out of
the plan up front (``--dry-run`` lists them); the remaining ones split the time left, recomputed before each.
"""

from __future__ import annotations

import time


def _process_start_time() -> float:
    """When this process started (Linux: /proc), else now: the budget counts from the process's start."""
    try:
        import os as _os

        with open(f"/proc/{_os.getpid()}/stat", encoding="ascii") as fh:
            ticks = float(fh.read().rsplit(")", 1)[1].split()[19])
        with open("/proc/stat", encoding="ascii") as fh:
            btime = next(float(ln.split()[1]) for ln in fh if ln.startswith("btime"))
        started = btime + ticks / _os.sysconf("SC_CLK_TCK")
        return started if 0 <= time.time() - started < 60 else time.time()
    except Exception:  # not Linux, or /proc unreadable
        return time.time()


T_START = _process_start_time()  # the budget counts from the process's start (before the heavy imports)

import argparse  # noqa: E402
import json  # noqa: E402
import os  # noqa: E402
import re  # noqa: E402
import signal  # noqa: E402
import subprocess  # noqa: E402
import sys  # noqa: E402
from dataclasses import asdict  # noqa: E402
from pathlib import Path  # noqa: E402

REPO = Path(__file__).resolve().parents[1]
if str(REPO / "src") not in sys.path:
    sys.path.insert(0, str(REPO / "src"))

CAMPAIGN_VERSION = 1

# ----------------------------------------------------------------------------------------------- the plan
#: GPU-sized models and their batch sizes (small, middle, large) per device.
GPU_MODELS = {
    "gpt-124m": (8, 16, 32),
    "bert-110m": (16, 32, 64),
    "resnet50": (64, 128, 256),
    "hf:gpt2": (8, 16, 32),
    "hf:bert": (16, 32, 64),
    "gpt-350m": (4, 8, 16),
    "mlp-l": (512, 2048, 8192),
    "lstm-l": (64, 128, 256),
}
GPU_SEQ_LEN = {"hf:gpt2": 1024, "hf:bert": 512}  # zoo models carry their own length
GPU_PRECISIONS = ("bf16", "fp32", "tf32")
GPU_REPEATED = (("gpt-124m", 1, "bf16"), ("resnet50", 1, "bf16"), ("bert-110m", 1, "fp32"), ("mlp-l", 1, "tf32"))

#: --device cpu: the same path with tiny models, so that it can be tested without a GPU.
CPU_MODELS = {"mlp-xs": (2, 4, 8), "cnn-xs": (2, 4, 8), "gpt-s": (2, 4, 8), "lstm-s": (2, 4, 8)}
CPU_HF = "hf:gpt2?n_layer=1&n_embd=32&n_head=2&vocab_size=256&n_positions=64"
CPU_SEQ_LEN = {CPU_HF: 16}
CPU_PRECISIONS = ("bf16", "fp32")
CPU_REPEATED = (("mlp-xs", 1, "fp32"), ("gpt-s", 1, "bf16"))

RUN_OPTIONS = {"gpu": dict(warmup_steps=3, min_steps=5, max_steps=200, ci_target=0.01),
               "cpu": dict(warmup_steps=1, min_steps=3, max_steps=20, ci_target=0.05)}
MIN_CONFIG_S = {"gpu": 8.0, "cpu": 2.5}  # a configuration's minimum share (build, FLOP count, warm-up, timing)
MAX_TIMED_S = {"gpu": 15.0, "cpu": 2.0}
WORKER_START_S = {"gpu": 8.0, "cpu": 8.0}  # torch import + CUDA init + microbenchmark start, first estimate
MICROBENCH_S = {"gpu": 5.0, "cpu": 3.0}  # planning estimate; the microbenchmark stops itself at 15 s / 3 s
MICROBENCH_CAP_S = {"gpu": 15.0, "cpu": 3.0}
MARGIN_S = 4.0  # kept free at the end for killing the worker and writing the protocol


def _hf_available() -> bool:
    import importlib.util

    return importlib.util.find_spec("transformers") is not None


def build_plan(mode: str, n_devices: int) -> list[dict]:
    """Every configuration in priority order: dicts with ``tier`` and RunConfig fields."""
    if mode == "gpu":
        models, precisions, repeated, seq = dict(GPU_MODELS), GPU_PRECISIONS, GPU_REPEATED, GPU_SEQ_LEN
    else:
        models, precisions, repeated, seq = dict(CPU_MODELS), CPU_PRECISIONS, CPU_REPEATED, CPU_SEQ_LEN
        models[CPU_HF] = (2, 4, 8)
    if not _hf_available():
        models = {m: b for m, b in models.items() if not m.startswith("hf:")}
    names = list(models)
    device = "cuda" if mode == "gpu" else "cpu"

    def cfg(model, bi, prec, tier, repeat=0, n=1):
        return {"tier": tier, "model": model, "batch_size": models[model][bi], "precision": prec, "gpu_count": n,
                "repeat": repeat, "device": device, "seq_len": seq.get(model), **RUN_OPTIONS[mode]}

    tiers: list[list[dict]] = []
    # middle batch size in every precision, first repeats, the other batch sizes in the first precision, second
    # repeats, the other batch sizes in the other precisions
    order = ([(1, p) for p in precisions] + [("R", 1)] + [(bi, precisions[0]) for bi in (0, 2)] + [("R", 2)]
             + [(bi, p) for p in precisions[1:] for bi in (0, 2)])
    for t, (bi, what) in enumerate(order):
        if bi == "R":
            tiers.append([cfg(m, b, p, t, repeat=what) for m, b, p in repeated if m in models])
            continue
        rot = names[t % len(names):] + names[:t % len(names)]
        tiers.append([cfg(m, bi, what, t) for m in rot])
    plan = [c for tier in tiers for c in tier]
    # Data parallel (only on machines with more than one device): each model's middle batch, bf16 / fp32.
    counts = [n for n in (2, 4, 8, 16) if n <= n_devices]
    if n_devices > 1 and n_devices not in counts:
        counts.append(n_devices)
    multi = [cfg(m, 1, p, len(tiers), n=n) for n in counts for p in precisions[:2] for m in names]
    return plan + multi


def _per_config_s(mode: str, budget_s: float, n_single: int, n_multi: int) -> tuple[float, int, int]:
    """The share of each configuration and how many single-/multi-device configurations fit the budget."""
    usable = budget_s - MARGIN_S - WORKER_START_S[mode] - MICROBENCH_S[mode]
    multi_share = 0.3 if n_multi else 0.0
    fit_single = max(0, int(usable * (1 - multi_share) // MIN_CONFIG_S[mode]))
    fit_multi = max(0, int(usable * multi_share // (MIN_CONFIG_S[mode] + 5.0))) if n_multi else 0
    k_single, k_multi = min(n_single, fit_single), min(n_multi, fit_multi)
    per = usable * (1 - multi_share) / max(1, k_single)
    return per, k_single, k_multi


# ----------------------------------------------------------------------------------------------- helpers
def _slug(text: str) -> str:
    return re.sub(r"[^a-z0-9._-]+", "-", text.lower()).strip("-") or "device"


def _device_facts(mode: str) -> dict:
    """Name, canonical type and count of the devices, without creating a CUDA context in this process."""
    from perfmodel.exceptions import UnknownHardwareError
    from perfmodel.hardware import resolve_gpu_type

    if mode == "cpu":
        return {"gpu_type": "cpu", "name": "cpu", "count": 2, "slug": "cpu-campaign-test", "known": True}
    import torch

    from perfmodel.measure.telemetry import nvml_device_facts

    count = torch.cuda.device_count()
    name = nvml_device_facts(0).get("gpu_name") or torch.cuda.get_device_name(0)
    try:
        gpu_type, known = resolve_gpu_type(name), True
    except UnknownHardwareError:
        gpu_type, known = name, False
    return {"gpu_type": gpu_type, "name": name, "count": count, "slug": _slug(gpu_type), "known": known}


def _fields(entry: dict) -> dict:
    """The RunConfig fields of a plan entry (without the campaign's bookkeeping)."""
    return {k: v for k, v in entry.items() if k not in ("tier", "plan_index", "outcome")}


def _log(msg: str) -> None:
    print(f"[{time.time() - T_START:6.1f}s] {msg}", flush=True)


def _write_json_atomic(path: Path, obj) -> None:
    tmp = path.with_name(path.name + ".tmp")
    with open(tmp, "w", encoding="utf-8") as fh:
        json.dump(obj, fh, indent=1, default=str)
    os.replace(tmp, path)


# ----------------------------------------------------------------------------------------------- microbenchmark
def microbenchmark(device, cap_s: float) -> dict:
    """Matmul FLOP/s at fp32/tf32/bf16 and device-to-device copy bandwidth (medians; CUDA events on a GPU)."""
    import statistics

    import torch

    from perfmodel.measure._worker import _set_tf32

    cuda = device.type == "cuda"
    n = 8192 if cuda else 256
    t_end = time.time() + cap_s
    out = {"matrix_size": n, "method": "CUDA events around each op after 3 warm-up ops; median" if cuda
           else "perf_counter around each op after 3 warm-up ops; median", "results": {}}

    def timed(fn, reps):
        for _ in range(3):
            fn()
        times = []
        for _ in range(reps):
            if cuda:
                a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
                a.record()
                fn()
                b.record()
                b.synchronize()
                times.append(a.elapsed_time(b) / 1e3)
            else:
                t0 = time.perf_counter()
                fn()
                times.append(time.perf_counter() - t0)
            if time.time() > t_end:
                break
        return statistics.median(times), len(times)

    gen = torch.Generator(device=device).manual_seed(0)
    for prec in ("fp32", "tf32", "bf16"):
        if prec == "tf32" and not cuda:
            continue
        if cuda:
            _set_tf32(torch, prec == "tf32")
        dtype = torch.bfloat16 if prec == "bf16" else torch.float32
        a = torch.randn(n, n, device=device, dtype=dtype, generator=gen)
        b = torch.randn(n, n, device=device, dtype=dtype, generator=gen)
        med, reps = timed(lambda: a @ b, 20)  # noqa: F821 (called before the del below)
        out["results"][f"matmul_{prec}_tflops"] = 2 * n**3 / med / 1e12
        out["results"][f"matmul_{prec}_reps"] = reps
        del a, b
    if cuda:
        _set_tf32(torch, False)
    nbytes = (1 << 30) if cuda else (64 << 20)
    x = torch.empty(nbytes // 4, device=device, dtype=torch.float32)
    y = torch.empty_like(x)
    med, reps = timed(lambda: y.copy_(x), 20)  # noqa: F821 (called before any del)
    out["results"]["copy_bytes"] = nbytes
    out["results"]["copy_read_plus_write_gb_per_s"] = 2 * nbytes / med / 1e9
    out["results"]["copy_gb_per_s"] = nbytes / med / 1e9
    out["results"]["copy_reps"] = reps
    del x, y
    out["torch_version"] = torch.__version__
    if cuda:
        props = torch.cuda.get_device_properties(device)
        out.update(device_name=props.name, compute_capability=f"{props.major}.{props.minor}",
                   multiprocessors=props.multi_processor_count, memory_bytes=props.total_memory,
                   cuda_version=torch.version.cuda)
    return out


# ----------------------------------------------------------------------------------------------- worker
#: Errors after which the CUDA context cannot be trusted: the worker is replaced by a fresh one.
_FATAL = ("device-side assert", "illegal memory access", "unspecified launch failure", "misaligned address",
          "uncorrectable ecc", "illegal instruction")


def worker_main(plan_path: str) -> int:
    """Run the plan's single-device configurations from ``start`` in this process (the long-lived worker)."""
    with open(plan_path, encoding="utf-8") as fh:
        job = json.load(fh)
    import gc

    import torch

    from perfmodel.io import append_runs
    from perfmodel.measure._worker import error_line, measure_config
    from perfmodel.measure.sweep import RunConfig, append_steps, base_record
    from perfmodel.measure.telemetry import nvml_device_facts

    mode = job["mode"]
    device = torch.device("cuda", 0) if mode == "gpu" else torch.device("cpu")
    if mode == "gpu":
        torch.cuda.set_device(device)
    else:
        torch.set_num_threads(1)  # the test mode: one thread is least disturbed by a busy host
    out, progress = Path(job["csv"]), Path(job["progress"])

    def note(event: dict) -> None:
        with open(progress, "a", encoding="utf-8") as fh:
            fh.write(json.dumps({**event, "t": time.time()}) + "\n")
            fh.flush()
            os.fsync(fh.fileno())

    if job.get("microbench_path") and not os.path.exists(job["microbench_path"]):
        note({"event": "microbench"})
        try:
            mb = microbenchmark(device, MICROBENCH_CAP_S[mode])
        except Exception as exc:  # the campaign goes on without it; the file says why
            mb = {"error": error_line(exc), "results": {}}
        _write_json_atomic(Path(job["microbench_path"]), mb)
        print("microbenchmark:", json.dumps(mb), flush=True)
        if mode == "gpu":
            torch.cuda.empty_cache()
    note({"event": "ready"})
    configs = job["configs"]
    deadline = float(job["deadline"])
    overhead = MIN_CONFIG_S[mode] * 0.5  # per-configuration time outside the timed window; learned below
    flops_cache: dict = {}
    for i in range(int(job["start"]), len(configs)):
        entry = configs[i]
        now = time.time()
        left = len(configs) - i
        share = (deadline - now) / left
        if deadline - now < max(overhead + 1.0, 0.5 * MIN_CONFIG_S[mode]):
            note({"event": "budget_exhausted", "index": i})
            break
        timed = min(MAX_TIMED_S[mode], max(1.0 if mode == "gpu" else 0.3, share - overhead))
        cfg = RunConfig(**{**_fields(entry), "max_seconds": timed})
        hard = now + max(3 * share, share + 30.0) if mode == "gpu" else now + max(3 * share, share + 15.0)
        note({"event": "start", "index": i, "hard_timeout_at": min(hard, deadline), "max_seconds": timed})
        if os.environ.get("GPU_CAMPAIGN_TEST_KILL_AT") == str(i) and mode == "cpu":  # tests: a worker that dies
            os.kill(os.getpid(), signal.SIGKILL)
        rec = base_record(cfg, job["gpu_type"], job["sweep_id"])
        rec.update(launcher="local", source="sweep")
        fatal = False
        times: list = []
        try:
            payload = {**asdict(cfg), "launched_at": now}
            result = measure_config(payload, device=device, flops_cache=flops_cache)
            times = result.pop("step_times_s", [])
            rec.update({k: v for k, v in result.items() if k not in ("gpu_name_torch", "gpu_mem_peak_torch_bytes")})
            rec["protocol"] = result["protocol"] + "; in-process campaign worker (benchmarks/gpu_campaign.py)"
        except torch.OutOfMemoryError as exc:
            rec.update(status="oom", error=error_line(exc))
        except Exception as exc:  # recorded; the campaign goes on
            msg = error_line(exc)
            rec.update(status="oom" if "out of memory" in msg.lower() else "error", error=msg)
            fatal = mode == "gpu" and any(s in msg.lower() for s in _FATAL)
        rec["timestamp"] = time.strftime("%Y-%m-%dT%H:%M:%S+00:00", time.gmtime())
        if mode == "gpu" and rec["status"] != "ok":
            rec.update({k: v for k, v in nvml_device_facts(0).items() if rec.get(k) is None})
        append_runs(rec, out, validate=job["known_device"])
        append_steps(out, rec["run_id"], times)
        elapsed = time.time() - now
        if rec["status"] == "ok":
            overhead = 0.5 * overhead + 0.5 * max(0.0, elapsed - sum(times))
        tflops = None
        if rec["status"] == "ok" and rec.get("flops_per_sample"):
            tflops = rec["flops_per_sample"] * cfg.batch_size * cfg.grad_accum / rec["step_time_s"] / 1e12
        note({"event": "done", "index": i, "status": rec["status"], "elapsed_s": elapsed,
              "step_time_s": rec.get("step_time_s"), "tflops": tflops, "error": rec.get("error")})
        print(f"[{i + 1}/{len(configs)}] {cfg.record_name} b={cfg.batch_size} {cfg.precision} rep={cfg.repeat}: "
              f"{rec['status']} {rec.get('step_time_s') or rec.get('error')} ({elapsed:.1f}s)", flush=True)
        gc.collect()
        if mode == "gpu":
            torch.cuda.empty_cache()
        if fatal:
            return 3  # the CUDA context may be unusable: let the supervisor start a fresh worker
    return 0


# ----------------------------------------------------------------------------------------------- supervisor
def _read_progress(path: Path) -> list[dict]:
    if not path.exists():
        return []
    events = []
    for line in path.read_text(encoding="utf-8").splitlines():
        try:
            events.append(json.loads(line))
        except json.JSONDecodeError:
            pass
    return events


def _kill_group(proc: subprocess.Popen) -> None:
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass
    proc.wait()


def _record_failure(entry: dict, status: str, message: str, facts: dict, sweep_id: str, csv: Path) -> None:
    from perfmodel.io import append_runs
    from perfmodel.measure.sweep import RunConfig, base_record

    cfg = RunConfig(**_fields(entry))
    rec = base_record(cfg, facts["gpu_type"], sweep_id)
    rec.update(status=status, error=message, launcher="local",
               timestamp=time.strftime("%Y-%m-%dT%H:%M:%S+00:00", time.gmtime()))
    append_runs(rec, csv, validate=facts["known"])


_ANNOUNCED: set = set()


def _supervise(proc, progress: Path, seen: int, todo: list, outcomes: dict, single_deadline: float, facts: dict,
               sweep_id: str, csv: Path, start: int):
    """Watch one worker until it exits, overruns a configuration's hard time-out, or the deadline comes.

    Returns ``(rc, events, inflight, cut, start)``: the exit status (``"timeout"`` when this function killed it
    for an overrun, recording that configuration), the worker's progress events, the configuration in flight
    at the end, the one cut by the deadline (or None), and where a next worker would start.
    """
    while True:
        rc = proc.poll()
        events = _read_progress(progress)[seen:]
        starts = [e for e in events if e["event"] == "start"]
        dones = {e["index"] for e in events if e["event"] == "done"}
        for e in events:
            if e["event"] == "ready" and "microbench" not in _ANNOUNCED:
                _ANNOUNCED.add("microbench")
                mb_file = progress.with_name(progress.name.replace("runs_", "microbench_").replace(
                    ".progress.jsonl", ".json"))
                if mb_file.exists():
                    res = json.loads(mb_file.read_text()).get("results", {})
                    _log("microbenchmark: " + ", ".join(f"{k} {v:.4g}" for k, v in res.items()
                                                        if k.endswith(("tflops", "gb_per_s"))))
            if e["event"] == "done" and e["index"] not in outcomes:
                outcomes[e["index"]] = e["status"]
                c = todo[e["index"]]
                what = e["status"]
                if e.get("step_time_s"):
                    what += f" {e['step_time_s'] * 1e3:.1f} ms/step"
                if e.get("tflops"):
                    what += f", {e['tflops']:.1f} TFLOP/s"
                if e.get("error"):
                    what += f": {str(e['error'])[:80]}"
                _log(f"[{e['index'] + 1}/{len(todo)}] {c['model']} b={c['batch_size']} {c['precision']} "
                     f"rep={c['repeat']}: {what} ({e['elapsed_s']:.1f} s)")
        inflight = next((e for e in reversed(starts) if e["index"] not in dones), None)
        if rc is not None:
            return rc, events, inflight, None, start
        now = time.time()
        if now >= single_deadline:
            _kill_group(proc)
            return rc, events, inflight, inflight, start
        if inflight is not None and now >= inflight["hard_timeout_at"] + 5.0:
            _kill_group(proc)
            idx = inflight["index"]
            _record_failure(todo[idx], "timeout", f"configuration exceeded its hard time-out "
                            f"({inflight['hard_timeout_at'] - inflight['t']:.0f} s) and the worker was killed",
                            facts, sweep_id, csv)
            outcomes[idx] = "timeout"
            return "timeout", events, inflight, None, idx + 1
        time.sleep(0.2)


def run_campaign(args) -> int:
    import uuid

    mode = "cpu" if args.device == "cpu" else "gpu"
    budget_s = args.budget_min * 60.0
    deadline = T_START + budget_s - MARGIN_S
    facts = _device_facts(mode)
    out_dir = Path(args.out_dir or REPO / "data")
    out_dir.mkdir(parents=True, exist_ok=True)
    slug = facts["slug"]
    csv = out_dir / f"runs_{slug}.csv"
    progress = out_dir / f"runs_{slug}.progress.jsonl"
    log_path = out_dir / f"runs_{slug}.campaign.log"
    mb_path = out_dir / f"microbench_{slug}.json"
    proto_path = out_dir / f"runs_{slug}.protocol.json"
    sweep_id = "campaign-" + uuid.uuid4().hex[:8]

    plan = build_plan(mode, facts["count"])
    single = [c for c in plan if c["gpu_count"] == 1]
    multi = [c for c in plan if c["gpu_count"] > 1]
    per, k_single, k_multi = _per_config_s(mode, deadline - time.time() + MARGIN_S, len(single), len(multi))
    single, multi = single[:k_single], multi[:k_multi]
    # resume: configurations already in the file are skipped
    from perfmodel.measure.sweep import RunConfig, done_keys

    done_keys = done_keys(csv, retry_failed=False) if csv.exists() else set()
    todo = []
    for i, c in enumerate(single):
        c["plan_index"] = i
        key = RunConfig(**_fields(c)).key(facts["gpu_type"])
        if key in done_keys:
            c["outcome"] = "already in file"
        else:
            todo.append(c)
    _log(f"device {facts['name']} ({facts['gpu_type']}, {facts['count']} device(s)); budget {args.budget_min:g} min; "
         f"{len(todo)} single-device configurations (~{per:.1f} s each) + {len(multi)} data-parallel; "
         f"writing {csv}")
    protocol = {
        "campaign_version": CAMPAIGN_VERSION, "script": "benchmarks/gpu_campaign.py", "argv": sys.argv[1:],
        "mode": mode, "device": facts, "budget_min": args.budget_min, "started_at": time.strftime(
            "%Y-%m-%dT%H:%M:%S+00:00", time.gmtime(T_START)), "sweep_id": sweep_id,
        "per_config_budget_s_initial": per, "run_options": RUN_OPTIONS[mode],
        "order": "tiers: middle batch x precisions, repeats, other batch sizes x precisions, repeats; models "
                 "rotated within a tier", "planned": single, "planned_data_parallel": multi,
        "left_out_for_budget": len(plan) - len(single) - len(multi),
        "measurement": "each configuration: model built and moved to the device, FLOPs counted once per model "
                       "(FlopCounterMode, batch 1), optimizer AdamW, synthetic data made once on the device, "
                       "warm-up steps then timed optimizer steps with torch.cuda.synchronize around each, until "
                       "the 95% CI half-width of the mean is under ci_target or the configuration's time share is "
                       "spent; NVML sampled every 0.1 s during the timed window; cudnn.benchmark left at default",
    }
    _write_json_atomic(proto_path, protocol)  # the plan is on disk even if the campaign is killed
    env = dict(os.environ)
    env["PYTHONPATH"] = str(REPO / "src") + (os.pathsep + env["PYTHONPATH"] if env.get("PYTHONPATH") else "")
    env.setdefault("HF_HUB_OFFLINE", "1")
    single_deadline = deadline - (budget_s * 0.3 if multi else 0.0)
    outcomes: dict[int, str] = {}
    worker_starts: list[float] = []
    start = 0
    with open(log_path, "a", encoding="utf-8") as log:
        while start < len(todo) and time.time() < single_deadline - 1.0:
            job = {"mode": mode, "csv": str(csv), "progress": str(progress), "configs": todo, "start": start,
                   "deadline": single_deadline, "gpu_type": facts["gpu_type"], "known_device": facts["known"],
                   "sweep_id": sweep_id, "microbench_path": str(mb_path)}
            job_path = out_dir / f".runs_{slug}.job.json"
            _write_json_atomic(job_path, job)
            seen = len(_read_progress(progress))
            t_launch = time.time()
            proc = subprocess.Popen([sys.executable, os.path.abspath(__file__), "--worker", str(job_path)],
                                    stdout=log, stderr=subprocess.STDOUT, env=env, start_new_session=True,
                                    cwd=str(REPO))
            worker_starts.append(t_launch)
            cut = None
            try:
                rc, events, inflight, cut, start = _supervise(proc, progress, seen, todo, outcomes, single_deadline,
                                                              facts, sweep_id, csv, start)
            except BaseException:  # Ctrl-C or a bug here: the worker (in its own session) must not outlive us
                _kill_group(proc)
                raise
            if cut is not None:
                outcomes[cut["index"]] = "cut"
                break
            if rc == "timeout":
                continue
            if rc == 0:
                break
            # crash or a fatal CUDA error: record the configuration in flight (if the worker did not), restart
            if inflight is not None:
                idx = inflight["index"]
                log.flush()
                tail = [ln for ln in log_path.read_text(encoding="utf-8", errors="replace").splitlines() if ln.strip()]
                msg = (tail[-1] if tail else f"worker exited with status {rc}")[:300]
                status = "oom" if rc in (-signal.SIGKILL, 137) or "out of memory" in msg.lower() else "error"
                _record_failure(todo[idx], status, f"worker process died (exit {rc}): {msg}", facts, sweep_id, csv)
                outcomes[idx] = status
                start = idx + 1
            else:
                last_done = max((e["index"] for e in events if e["event"] == "done"), default=start - 1)
                if rc == 3:
                    start = last_done + 1
                else:
                    _log(f"worker exited with status {rc} outside a configuration; stopping (see {log_path})")
                    break
        # data-parallel configurations, one torchrun each (machines with more than one device)
        if multi and time.time() < deadline - MIN_CONFIG_S[mode]:
            from perfmodel.io import append_runs
            from perfmodel.measure.sweep import _flops_for, append_steps, measure_run

            for j, c in enumerate(multi):
                if deadline - time.time() < MIN_CONFIG_S[mode] + 5.0:
                    break
                share = (deadline - time.time()) / (len(multi) - j)
                cfg = RunConfig(**{**_fields(c), "max_seconds": max(1.0, min(MAX_TIMED_S[mode], share / 2))})
                _flops_for(cfg)  # counted (and cached) here, so that the time-out below covers only the run
                remaining = deadline - time.time()
                if remaining < MIN_CONFIG_S[mode]:
                    break
                rec, times = measure_run(cfg, timeout_s=max(1.0, min(remaining - 2.0, 3 * share)),
                                         gpu_type=facts["gpu_type"], sweep_id=sweep_id)
                rec["launcher"] = "torchrun"
                append_runs(rec, csv, validate=facts["known"])
                append_steps(csv, rec["run_id"], times)
                c["outcome"] = rec["status"]
                _log(f"data-parallel {cfg.record_name} n={cfg.gpu_count} {cfg.precision}: {rec['status']}")
    for j, c in enumerate(todo):
        c["outcome"] = outcomes.get(j, "not reached")
    protocol.update(finished_at=time.strftime("%Y-%m-%dT%H:%M:%S+00:00", time.gmtime()),
                    elapsed_s=time.time() - T_START, worker_starts=len(worker_starts),
                    outcomes={s: sum(1 for c in single if c["outcome"] == s) for s in {c["outcome"] for c in single}},
                    microbenchmark=json.loads(mb_path.read_text()) if mb_path.exists() else None,
                    outputs={"runs": csv.name, "steps": csv.name + ".steps.jsonl", "microbench": mb_path.name,
                             "log": log_path.name})
    try:
        import torch

        protocol["environment"] = {"torch": torch.__version__, "cuda": torch.version.cuda,
                                   "python": sys.version.split()[0]}
        if _hf_available():
            import importlib.metadata as md

            protocol["environment"]["transformers"] = md.version("transformers")
    except Exception:  # the protocol is written regardless
        pass
    _write_json_atomic(proto_path, protocol)
    # every writer has ended: drop the lock and job files, so that the folder holds only results (a device
    # machine's $OUT returns a handful of files)
    for p in (out_dir / f".runs_{slug}.job.json", out_dir / f".runs_{slug}.job.json.tmp",
              Path(str(csv) + ".lock"), Path(str(csv) + ".steps.jsonl.lock")):
        if p.exists():
            p.unlink()
    _log(f"done: {protocol['outcomes']} in {protocol['elapsed_s']:.0f} s; protocol {proto_path}")
    return 0


def dry_run(args) -> int:
    mode = "cpu" if args.device == "cpu" else "gpu"
    try:
        import torch

        n = torch.cuda.device_count() if (mode == "gpu" and torch.cuda.is_available()) else 1
    except ImportError:
        n = 1
    budget_s = args.budget_min * 60.0
    plan = build_plan(mode, n)
    single = [c for c in plan if c["gpu_count"] == 1]
    multi = [c for c in plan if c["gpu_count"] > 1]
    per, k_single, k_multi = _per_config_s(mode, budget_s, len(single), len(multi))
    print(f"gpu_campaign dry run: mode {mode}, {n} device(s), budget {args.budget_min:g} min "
          f"(of which ~{WORKER_START_S[mode] + MICROBENCH_S[mode]:.0f} s worker start + microbenchmark, "
          f"{MARGIN_S:.0f} s margin)")
    print(f"{len(plan)} configurations; {k_single} single-device + {k_multi} data-parallel fit, "
          f"~{per:.1f} s per single-device configuration (recomputed before each from the time left)")
    for i, c in enumerate(single + multi):
        fits = (i < k_single) if c["gpu_count"] == 1 else (i - len(single) < k_multi)
        seq = f" seq={c['seq_len']}" if c.get("seq_len") else ""
        print(f"{i + 1:>3} tier {c['tier']:>2} {'planned' if fits else 'left out':<8} {c['model']:<16} "
              f"b={c['batch_size']:<5} {c['precision']:<5} n={c['gpu_count']} rep={c['repeat']}{seq}")
    return 0


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--budget-min", type=float, default=8.0, help="hard wall-clock limit of the whole script")
    p.add_argument("--out-dir", help="write everything here (default: data/ of the repository)")
    p.add_argument("--dry-run", action="store_true", help="list the configurations and the per-configuration budget")
    p.add_argument("--device", choices=["cuda", "cpu"], default="cuda", help=argparse.SUPPRESS)  # cpu: test mode
    p.add_argument("--worker", help=argparse.SUPPRESS)
    args = p.parse_args(argv)
    if args.worker:
        return worker_main(args.worker)
    if not (args.budget_min > 0):
        print(f"gpu_campaign: error: --budget-min must be positive. Got {args.budget_min!r}.", file=sys.stderr)
        return 2
    if args.dry_run:
        return dry_run(args)
    if args.device == "cuda":
        try:
            import torch

            ok = torch.cuda.is_available()
        except ImportError:
            ok = False
        if not ok:
            print("gpu_campaign: error: no CUDA device (torch.cuda.is_available() is False); this campaign "
                  "measures GPUs. Use --dry-run to see the plan.", file=sys.stderr)
            return 2
    return run_campaign(args)


if __name__ == "__main__":
    code = main()
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(code)  # skip interpreter teardown (torch, threads): the budget is wall-clock
