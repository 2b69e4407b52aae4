"""A one-page, self-contained HTML report of a run history: data overview, fit summaries, grouped
cross-validation beside the noise floor, and the plots (inline PNGs; no network)."""

from __future__ import annotations

import base64
import html
import io
import os
import time
from collections.abc import Callable
from datetime import datetime, timezone
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from .evaluate import Evaluation

__all__ = ["make_report"]

_CSS = """body{font-family:system-ui,sans-serif;max-width:1100px;margin:2em auto;color:#222}
table{border-collapse:collapse;font-size:13px;margin:1em 0}td,th{border:1px solid #ccc;padding:3px 7px;text-align:right}
th{background:#f3f3f3}img{max-width:100%;border:1px solid #eee;margin:.5em 0}h2{border-bottom:1px solid #ddd}"""


def _png(fig) -> str:
    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=90, bbox_inches="tight")
    import matplotlib.pyplot as plt

    plt.close(fig)
    return f'<img alt="plot" src="data:image/png;base64,{base64.b64encode(buf.getvalue()).decode()}">'


#: The methods the report fits and cross-validates; the plots show the first (the library's default, ``auto``).
REPORT_METHODS = ("auto", "physics", "loglinear")


#: Default time budget of a report, in seconds: the cross-validation stops before a split that would end after it.
REPORT_SECONDS = 270.0


def _evaluate_child(conn, data, methods, split, n_jobs) -> None:
    from .evaluate import evaluate
    from .exceptions import SchemaError

    try:
        conn.send(("ok", evaluate(data, methods=methods, splits=(split,), n_jobs=n_jobs)))
    except SchemaError as exc:
        conn.send(("skip", str(exc)) if "nothing to cross-validate" in str(exc) else ("error", exc))
    except Exception as exc:  # noqa: BLE001 - sent to the parent, which raises it
        conn.send(("error", exc))


def _evaluate_within(data, methods, split: str, n_jobs: int, seconds: float | None) -> tuple[str, object]:
    """One split's cross-validation, stopped when ``seconds`` run out: ``("ok", Evaluation)``, ``("skip", why)``
    (a split this history has one group of), ``("late", None)`` or ``("error", exception)``. With a budget it runs
    in a forked process that is killed at the deadline (where fork exists; elsewhere in this one, unbounded)."""
    import multiprocessing as mp

    from .evaluate import evaluate
    from .exceptions import SchemaError

    if seconds is None or "fork" not in mp.get_all_start_methods():
        try:
            return "ok", evaluate(data, methods=methods, splits=(split,), n_jobs=n_jobs)
        except SchemaError as exc:
            if "nothing to cross-validate" in str(exc):
                return "skip", str(exc)
            raise
    ctx = mp.get_context("fork")
    parent, child = ctx.Pipe(duplex=False)
    proc = ctx.Process(target=_evaluate_child, args=(child, data, methods, split, n_jobs), daemon=True)
    proc.start()
    child.close()
    try:
        if parent.poll(max(seconds, 0.0)):
            return parent.recv()
        return "late", None
    except EOFError:  # the child died without an answer
        return "error", RuntimeError(f"the cross-validation of {split} ended without a result "
                                     f"(exit code {proc.exitcode})")
    finally:
        if proc.is_alive():
            proc.kill()
        proc.join()
        parent.close()


def make_report(runs, output, *, methods=REPORT_METHODS, quick: bool = False, n_jobs: int = 1,
                max_seconds: float | None = REPORT_SECONDS, progress=None) -> Path:
    """Write the HTML report of a run history.

    The plots show the fit of the first of ``methods`` (by default ``auto``, what ``predict_training_time``
    uses). Needs matplotlib (``perfmodel[plot]``). The fits come from the shipped defaults or the disk cache where
    the same fit was made before. The cross-validation runs split by split within ``max_seconds`` (counted from
    the start): a split still running when the budget is spent is stopped (it runs in a forked process), and the
    report names the splits left out.

    Parameters
    ----------
    runs : path or pandas.DataFrame
        The run history (read with :func:`perfmodel.io.load_runs`).
    output : str or path-like
        The ``.html`` file to write (overwritten).
    methods : sequence of str, default=REPORT_METHODS
        Methods to fit, summarise and cross-validate (with the baselines).
    quick : bool, default=False
        Cross-validate leave-one-batch-size-out only, instead of every split of
        :data:`perfmodel.evaluate.SPLITS`.
    n_jobs : int, default=1
        Parallel jobs of the cross-validation (joblib).
    max_seconds : float or None, default=REPORT_SECONDS
        Time budget of the whole report (None: every split, however long).
    progress : callable, optional
        Called with one line of text at each stage (the CLI prints them on stderr).

    Returns
    -------
    pathlib.Path
        ``output``.
    """
    import matplotlib

    matplotlib.use("Agg", force=True)
    from .fitting import fit_cached
    from .history import read_history
    from .io import load_runs

    clock = _Clock(progress)
    loaded = read_history(runs if isinstance(runs, (str, os.PathLike)) else load_runs(runs))
    data = loaded.runs.drop(columns="history_source")
    source = str(runs) if not hasattr(runs, "columns") else "DataFrame"
    parts = [_data_section(source, data)]
    fitted = {}
    for i, m in enumerate(methods):
        clock.say(f"fitting {m} ({i + 1}/{len(methods)}, {clock.stamp()})")
        fitted[m] = fit_cached(loaded, m, "seen")  # shipped or cached where the same fit was made before
        chosen = f" (chose {fitted[m].method})" if m == "auto" else ""
        parts.append(f"<h2>Fit: {html.escape(m + chosen)}</h2>" + fitted[m].summary().as_html())
    ev, cv_html = _cv_section(data, tuple(methods), quick=quick, n_jobs=n_jobs, max_seconds=max_seconds,
                              clock=clock)
    parts.append(cv_html)
    clock.say(f"plots ({clock.stamp()})")
    parts.append(_plots_section(fitted[methods[0]], data, ev))
    script = ("<script>window.addEventListener('load',()=>{document.body.dataset.imagesLoaded="
              "[...document.images].filter(i=>i.complete&&i.naturalWidth>0).length;});</script>")
    page = (f"<!DOCTYPE html><html><head><meta charset='utf-8'><title>perfmodel report</title><style>{_CSS}</style>"
            f"</head><body>{''.join(parts)}{script}</body></html>")
    output = Path(output)
    output.write_text(page, encoding="utf-8")
    return output


class _Clock:
    """The report's time since it started, and its progress lines."""

    def __init__(self, progress: Callable[[str], object] | None) -> None:
        self.started = time.monotonic()
        self.say: Callable[[str], object] = progress or (lambda text: None)

    def elapsed(self) -> float:
        return time.monotonic() - self.started

    def stamp(self) -> str:
        return f"{self.elapsed():.0f} s"


def _data_section(source: str, data) -> str:
    """The report's heading and its data overview (runs per model, sizes, batch sizes, devices)."""
    from ._version import __version__

    head = (f"<h1>perfmodel report</h1><p>{html.escape(source)} — {len(data)} runs, "
            f"{data['model'].nunique()} models, device types {html.escape(', '.join(sorted(set(data['gpu_type']))))};"
            f" perfmodel {__version__}; {datetime.now(timezone.utc):%Y-%m-%d %H:%M} UTC</p>")
    overview = data.groupby("model").agg(runs=("step_time_s", "size"), params=("params", "median"),
                                         batch_sizes=("batch_size", lambda s: ", ".join(map(str, sorted(set(s))))),
                                         devices=("gpu_count", lambda s: ", ".join(map(str, sorted(set(s))))),
                                         median_step_s=("step_time_s", "median"))
    return head + "<h2>Data</h2>" + overview.to_html(float_format=lambda v: f"{v:.4g}")


def _cross_validate(data, methods: tuple, splits: tuple, *, n_jobs: int, max_seconds: float | None,
                    clock: _Clock) -> tuple[list[Evaluation], list[str]]:
    """Each split's cross-validation within the budget: the evaluations done and the splits left out."""
    from .evaluate import Evaluation

    done: list[Evaluation] = []
    left: list[str] = []
    for i, split in enumerate(splits):
        remaining = None if max_seconds is None else max_seconds - clock.elapsed()
        if remaining is not None and remaining <= 0:
            left += list(splits[i:])
            break
        clock.say(f"cross-validating {split} ({i + 1}/{len(splits)}, {clock.stamp()})")
        status, value = _evaluate_within(data, methods, split, n_jobs, remaining)
        if status == "ok":
            assert isinstance(value, Evaluation)  # what "ok" carries
            done.append(value)
        elif status == "late":
            left.append(split)
        elif status == "error":
            assert isinstance(value, BaseException)  # what "error" carries
            raise value
    return done, left


def _cv_section(data, methods: tuple, *, quick: bool, n_jobs: int, max_seconds: float | None,
                clock: _Clock) -> tuple[Evaluation | None, str]:
    """The grouped cross-validation, split by split within the budget: its evaluation (None when no split was
    done) and its section of the page."""
    import pandas as pd

    from .evaluate import REFUSED_NOTE, SPLITS, evaluate

    asked = ("leave-one-batch-size-out",) if quick else tuple(SPLITS)
    # a split whose column has one value here holds nothing out (evaluate leaves it out too)
    splits = tuple(sp for sp in asked if SPLITS[sp] not in data.columns or data[SPLITS[sp]].nunique() > 1)
    done, left = _cross_validate(data, methods, splits, n_jobs=n_jobs, max_seconds=max_seconds, clock=clock)
    if left:
        clock.say(f"left out {', '.join(left)}: the time budget ({max_seconds:g} s) was spent ({clock.stamp()})")
    budget_note = (f"<p>Not cross-validated within the report's time budget ({max_seconds:g} s): "
                   f"{html.escape(', '.join(left))}. <code>perfmodel evaluate</code> runs every split, or "
                   "<code>perfmodel report --max-minutes 0</code>.</p>" if left else "")
    if done:
        ev = type(done[0])(predictions=pd.concat([e.predictions for e in done], ignore_index=True),
                           table=pd.concat([e.table for e in done], ignore_index=True), noise=done[0].noise,
                           confidence=done[0].confidence)
        return ev, (f"<h2>Grouped cross-validation</h2><p>{html.escape(str(ev.noise))}</p>"
                    + ev.table.to_html(index=False, float_format=lambda v: f"{v:.3g}")
                    + (f"<p>{html.escape(REFUSED_NOTE)}</p>" if (ev.table["n"] == 0).any() else "") + budget_note)
    if left:
        return None, f"<h2>Grouped cross-validation</h2>{budget_note}"
    # no split can be cross-validated: evaluate says why
    evaluate(data, methods=methods, splits=asked, n_jobs=n_jobs)
    return None, ""


def _plots_section(best, data, ev: Evaluation | None) -> str:
    """The plots of the fit ``best`` (and of the cross-validation, when one was done), as inline PNGs."""
    from .plot import (
        plot_batch_curves,
        plot_cv_summary,
        plot_predicted_vs_measured,
        plot_residuals,
        plot_scaling,
    )

    parts = ["<h2>Plots</h2>"]
    if ev is not None:
        parts.append(_png(plot_cv_summary(ev).figure))
    parts.append(_png(plot_predicted_vs_measured(best, data).figure))
    parts.append(_png(plot_residuals(best, data)))
    parts.append(_png(plot_batch_curves(best, data).figure))
    parts.append(_png(plot_scaling(data).figure))
    return "".join(parts)
