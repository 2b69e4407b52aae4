"""Reading an MLPerf result log: its ``:::MLLOG`` events (:func:`parse_mllog`), the training stretches the
step-time methods time (the package docstring), the precision the log or the system description states, and the
time of each epoch (:func:`epoch_times`)."""

from __future__ import annotations

import json
import math
import re
import statistics
from collections.abc import Iterable, Mapping

from .catalogue import Benchmark

__all__ = ["epoch_times", "parse_mllog"]

MARKER = ":::MLLOG"
PREC_KEY_HINTS = ("fp8", "fp16", "bf16", "precision", "dtype", "amp")
#: The keys summarize_run reads.
USED_KEYS = frozenset({
    "submission_benchmark", "submission_division", "global_batch_size", "max_sequence_length", "train_samples",
    "samples_per_epoch", "gradient_accumulation_steps", "seed", "run_start", "run_stop", "eval_start",
    "eval_stop", "block_start", "block_stop", "tracked_stats", "eval_accuracy",
})
_ASSUMED_FP16 = re.compile(r"v100|t4\b|p100", re.I)  # no bf16 on these devices: mixed precision there is fp16


def parse_mllog(text: str, keys: Iterable[str] | None = None) -> list[dict]:
    """The ``:::MLLOG`` events of a log, in file order, exact duplicates (one line per rank) dropped.

    Each event is the logged JSON object (``key``, ``value``, ``time_ms``, ``event_type``, ``metadata``).
    Lines that are not valid JSON after the marker are skipped (logs from many ranks sometimes interleave).
    With ``keys``, only events with those keys (or a key naming a dtype/precision) are decoded: faster on
    logs of many megabytes.

    Parameters
    ----------
    text : str
        The log's text (a ``result_<n>.txt``).
    keys : iterable of str, optional
        Decode only events with these keys (and precision-like ones); by default every event.

    Returns
    -------
    list of dict
        The events; each has a float ``time_ms`` and a dict ``metadata`` (empty where the log gave none).

    Raises
    ------
    TypeError
        If ``text`` is not a str.
    """
    if not isinstance(text, str):
        raise TypeError(f"parse_mllog expects the log text as a str. Got {type(text).__name__} instead.")
    events, seen = [], set()
    wanted = set(keys) if keys is not None else None
    for line in text.splitlines():
        i = line.find(MARKER)
        if i < 0:
            continue
        raw = line[i + len(MARKER):].strip()
        if raw in seen:  # the same line printed by another rank
            continue
        seen.add(raw)
        if wanted is not None:
            k = raw.find('"key": "')
            if k >= 0:
                key = raw[k + 8: raw.find('"', k + 8)]
                if key not in wanted and not any(h in key.lower() for h in PREC_KEY_HINTS):
                    continue
        try:
            event = json.loads(raw)
        except RecursionError:  # nested too deeply to be an MLLOG event
            event = None
        except ValueError:
            j = raw.rfind("}")  # trailing text glued on by an interleaved rank
            try:
                event = json.loads(raw[: j + 1]) if j > 0 else None
            except (ValueError, RecursionError):
                event = None
        if not isinstance(event, dict) or not isinstance(event.get("key"), str):
            continue
        time_ms = number(event.get("time_ms"))
        if time_ms is None:  # an event without a usable time is not one
            continue
        event["time_ms"] = time_ms
        if not isinstance(event.get("metadata"), dict):  # e.g. a string: the event keeps no metadata
            event["metadata"] = {}
        events.append(event)
    return events


def first_value(events, key, default=None):
    """The value of the first event with that key (``default`` where there is none)."""
    for e in events:
        if e["key"] == key:
            return e.get("value")
    return default


def number(value) -> float | None:
    """``value`` as a finite float, else None (a bool is not a number here)."""
    if isinstance(value, bool):
        return None
    try:
        out = float(value)
    except (TypeError, ValueError, OverflowError):
        return None
    return out if math.isfinite(out) else None


def _position(meta: Mapping):
    for k in ("samples_count", "epoch_num"):
        v = number(meta.get(k))
        if v is not None:
            return k, v
    return None, None


def _scale(unit_key: str, bench: Benchmark | None, cfg: dict) -> float | None:
    """Samples per unit of a logged position (``samples_count`` is always in samples)."""
    if unit_key == "samples_count":
        return 1.0
    unit = bench.position_unit if bench else None
    if unit == "samples":
        return 1.0
    if unit == "tokens":
        seq = cfg.get("max_sequence_length") or (bench.seq_len if bench else None)
        return 1.0 / seq if seq else None
    if unit == "epochs":
        return (bench.samples_per_epoch if bench and bench.samples_per_epoch else None) or cfg.get(
            "samples_per_epoch") or cfg.get("train_samples")
    return None


def _intervals(events, start_key, stop_key):
    out, open_ = [], None
    for e in events:
        if e["key"] == start_key:
            open_ = e
        elif e["key"] == stop_key and open_ is not None:
            out.append((open_, e))
            open_ = None
    return out


def eval_segments(events, bench, cfg):
    """(seconds, samples) of the training stretches between consecutive evaluations."""
    evals = _intervals(events, "eval_start", "eval_stop")
    segs = []
    for (s0, e0), (s1, _) in zip(evals, evals[1:]):
        k0, p0 = _position(s0["metadata"])
        k1, p1 = _position(s1["metadata"])
        if k0 is None or k0 != k1:
            continue
        scale = _scale(k0, bench, cfg)
        seconds = (s1["time_ms"] - e0["time_ms"]) / 1000.0
        if scale is None or seconds <= 0 or p1 <= p0:
            continue
        segs.append((seconds, (p1 - p0) * scale))
    return segs


def eval_point_segments(events, bench, cfg):
    """(seconds, samples) between consecutive ``eval_accuracy`` events, for logs without ``eval_start``:
    evaluation time is included."""
    points = []
    for e in events:
        if e["key"] == "eval_accuracy":
            k, pos = _position(e["metadata"])
            if k is not None:
                points.append((e["time_ms"], k, pos))
    segs = []
    for (t0, k0, p0), (t1, k1, p1) in zip(points, points[1:]):
        scale = _scale(k0, bench, cfg) if k0 == k1 else None
        if scale and t1 > t0 and p1 > p0:
            segs.append(((t1 - t0) / 1000.0, (p1 - p0) * scale))
    return segs


def block_segments(events, bench, cfg, *, samples_count_only: bool = False):
    evals = [(a["time_ms"], b["time_ms"]) for a, b in _intervals(events, "eval_start", "eval_stop")]
    segs = []
    prev_stop: float | None = None
    for start, stop in _intervals(events, "block_start", "block_stop"):
        m0, m1 = start["metadata"], stop["metadata"]
        count0, count1 = number(m0.get("samples_count")), number(m1.get("samples_count"))
        epochs = number(m0.get("epoch_count"))
        samples: float | None
        if count0 is not None and count1 is not None:
            # Samples since the previous block's end: some logs put a step count in block_start's field.
            begin = prev_stop if prev_stop is not None else count0
            samples = count1 - begin
            prev_stop = count1
        elif samples_count_only:
            samples = None
        elif epochs is not None:
            scale = _scale("epoch_num", bench, cfg)
            samples = epochs * scale if scale else None
        else:
            samples = None
        t0, t1 = start["time_ms"], stop["time_ms"]
        busy = sum(max(0, min(t1, b) - max(t0, a)) for a, b in evals)
        seconds = (t1 - t0 - busy) / 1000.0
        if samples and samples > 0 and seconds > 0:
            segs.append((seconds, samples))
    return segs[1:] if len(segs) > 1 else segs


def tracked_stats(events: Iterable[Mapping]) -> tuple[list[float], list[float]]:
    """Throughputs (samples/s) and step times (s) logged in ``tracked_stats``, median per logged step."""
    by_pos: dict[tuple[str, ...], list[float]] = {}
    step_times: dict[tuple[str, ...], list[float]] = {}
    for e in events:
        if e["key"] != "tracked_stats" or not isinstance(e.get("value"), dict):
            continue
        v = e["value"]
        meta = e["metadata"]
        pos = (str(meta.get("step")), str(meta.get("step_num")), str(meta.get("epoch_num")),
               str(meta.get("samples_count")))
        thr = number(v.get("throughput", v.get("imgs_sec")))
        if thr is not None and thr > 0:
            by_pos.setdefault(pos, []).append(thr)
        st = number(v.get("train_step_time", v.get("train_step_timing")))
        if st is not None and st > 0:
            step_times.setdefault(pos, []).append(st)
    throughputs = [statistics.median(v) for v in by_pos.values()]
    step_seconds = [statistics.median(v) for v in step_times.values()]
    return throughputs, step_seconds


_PREC_KEY = re.compile(r"precision|fp8|fp16|bf16|dtype|\bamp\b", re.I)
#: Log lines that state a precision: ``(precision, pattern, generic)``, tried in order. ``generic`` marks the
#: 16-bit *switches* that do not name a dtype: ``16-bits training: True`` (the NVIDIA BERT code's AMP flag),
#: ``amp=True`` and ``precision=16``: mixed precision is on, but fp8 matmuls (Transformer Engine) may run on top
#: of it, so for these the launch configs are still read (``summarize_run``). Lines naming a dtype
#: (``fp16=True``, ``bf16: 1``, ``precision='bf16'``, ``bfloat16``, the fp8 forms) are authoritative.
_PREC_TEXT = [
    ("fp8", re.compile(r"\bfp8\b[^\n]{0,40}?(?:=|:)\s*(?:true|1|on|hybrid|e4m3)\b|\bfp8_(?:e4m3|hybrid)\b"
                       r"|using fp8\b|\bfp8 (?:enabled|training|recipe)\b", re.I), False),
    ("bf16", re.compile(r"\bbf16\b\s*(?:=|:)\s*(?:true|1)\b|precision\s*(?:=|:)\s*['\"]?bf16|\bbfloat16\b", re.I),
     False),
    ("fp16", re.compile(r"\bfp16\b\s*(?:=|:)\s*(?:true|1)\b|precision\s*(?:=|:)\s*['\"]?fp16\b", re.I), False),
    ("fp16", re.compile(r"precision\s*(?:=|:)\s*['\"]?16\b|\bamp\b\s*(?:=|:)\s*(?:true|1)\b"
                        r"|16-bits training: True", re.I), True),
]


_PREC_HINTS = ("fp8", "fp16", "bf16", "bfloat16", "amp", "16-bits", "precision")


def log_precision(events, text: str, system: Mapping | None, accelerator: str | None):
    """(reported precision, source, evidence, generic): ``generic`` is True where the only statement is a log
    line's generic 16-bit switch (see :data:`_PREC_TEXT`)."""
    for e in events:
        key = str(e["key"])
        if any(h in key.lower() for h in PREC_KEY_HINTS) and _PREC_KEY.search(key):
            val = str(e.get("value")).lower()
            for p in ("fp8", "bf16", "fp16"):
                if p in key.lower() and val in ("true", "1") or p in val:
                    return p, "mllog", f"{key}={e.get('value')}", False
    if system:
        blob = " ".join(str(v) for v in system.values())
        for p, pat in (("fp8", r"\bfp8\b"), ("bf16", r"\bbf16\b|bfloat16"), ("fp16", r"\bfp16\b|float16")):
            m = re.search(pat, blob, re.I)
            if m:
                return p, "system_json", blob[max(0, m.start() - 30): m.end() + 30].strip(), False
    # Only lines that mention a dtype are searched (a log can be megabytes of training output).
    low = text.lower()
    hints = [h for h in _PREC_HINTS if h in low]
    lines = "\n".join(ln for ln in low.splitlines() if any(h in ln for h in hints) and MARKER.lower() not in ln
                      ) if hints else ""
    found = [(p, m.group(0)[:80], generic) for p, pat, generic in _PREC_TEXT
             for m in [pat.search(lines)] if m]
    explicit = [f for f in found if not f[2]]
    if explicit:  # a dtype named anywhere in the log outranks a generic 16-bit switch
        return explicit[0][0], "log_text", explicit[0][1], False
    if found:
        return found[0][0], "log_text", found[0][1], True
    assumed = "fp16" if accelerator and _ASSUMED_FP16.search(accelerator) else "bf16"
    return assumed, "assumed", "", False


def epoch_times(text: str) -> list[tuple[int, float]]:
    """Training seconds of each epoch of a run, ``[(epoch_num, seconds), ...]`` in epoch order.

    From the log's ``epoch_start`` / ``epoch_stop`` events of the same ``epoch_num`` (MLPerf logs evaluations
    outside them); only the leading stretch of consecutive epochs with positive times is returned (a gap or a
    missing event ends it). Empty for a log that does not time its epochs.

    Parameters
    ----------
    text : str
        The log's text.

    Returns
    -------
    list of (int, float)
        ``(epoch_num, seconds)`` pairs.
    """
    starts: dict[int, float] = {}
    stops: dict[int, float] = {}
    for e in parse_mllog(text, keys=("epoch_start", "epoch_stop")):
        num = number((e.get("metadata") or {}).get("epoch_num"))
        if e["key"] not in ("epoch_start", "epoch_stop") or num is None or number(e.get("time_ms")) is None:
            continue  # (parse_mllog also hands over precision-like keys)
        (starts if e["key"] == "epoch_start" else stops).setdefault(int(num), float(e["time_ms"]))
    out: list[tuple[int, float]] = []
    for k in sorted(set(starts) & set(stops)):
        seconds = (stops[k] - starts[k]) / 1000.0
        if seconds <= 0 or (out and k != out[-1][0] + 1):
            break
        out.append((k, seconds))
    return out


def as_int(value) -> int | None:
    """``value`` (a number or its text) as an int where it is a whole number, else None."""
    try:
        v = number(str(value).strip()) if value is not None else None
    except ValueError:  # an int too long to print
        return None
    return int(v) if v is not None and v == int(v) else None

