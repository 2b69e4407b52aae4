"""Plots of fits, residuals, scaling, batch-size curves and cross-validation (matplotlib; ``perfmodel[plot]``).

Every function draws on ``ax`` (or a new figure) and returns its Axes or Figure, so it composes in notebooks
and reports. matplotlib is imported only when a plot is made. The fitted predictor is always the `fitted` argument
(`model` means the network elsewhere in perfmodel).
"""

from __future__ import annotations

import numpy as np
import pandas as pd

__all__ = ["plot_predicted_vs_measured", "plot_residuals", "plot_scaling", "plot_batch_curves", "plot_cv_summary"]

_RESIDUAL_FEATURES = ("params", "flops_per_sample", "batch_size", "gpu_count")


def _plt():
    import matplotlib.pyplot as plt

    return plt


def _groups(runs: pd.DataFrame) -> pd.Series:
    col = "family" if "family" in runs.columns and runs["family"].notna().any() else "model"
    return runs[col].astype(str).fillna("?")


def plot_predicted_vs_measured(fitted, runs, *, confidence: float = 0.9, ax=None):
    """Measured vs predicted step time (log-log) with prediction-interval bars, the identity line, and points
    coloured by model family (by model when the runs have no family).

    Parameters
    ----------
    fitted : TrainingTimeModel
        A fitted model.
    runs : path or pandas.DataFrame
        The runs to plot (read with :func:`perfmodel.io.load_runs`).
    confidence : float, default=0.9
        Level of the interval bars.
    ax : matplotlib.axes.Axes, optional
        Where to draw; default a new figure.

    Returns
    -------
    matplotlib.axes.Axes
        The Axes drawn on.
    """
    from .io import load_runs

    plt = _plt()
    runs = load_runs(runs)
    pi = fitted.predict_interval(runs, confidence)
    y = runs["step_time_s"].to_numpy(dtype=float)
    if ax is None:
        _, ax = plt.subplots(figsize=(5.5, 5))
    groups = _groups(runs)
    for g in sorted(groups.unique()):
        m = (groups == g).to_numpy()
        p = pi["step_time_s"].to_numpy()[m]
        err = np.vstack([p - pi["step_lower"].to_numpy()[m], pi["step_upper"].to_numpy()[m] - p])
        ax.errorbar(y[m], p, yerr=err, fmt="o", ms=4, alpha=0.75, elinewidth=0.8, capsize=0, label=g)
    lo, hi = min(y.min(), pi["step_lower"].min()), max(y.max(), pi["step_upper"].max())
    ax.plot([lo, hi], [lo, hi], "k--", lw=1, label="identity")
    ax.set(xscale="log", yscale="log", xlabel="measured step time (s)", ylabel="predicted step time (s)",
           title=f"{fitted.method}: predicted vs measured ({confidence:.0%} PI)")
    ax.legend(fontsize=7, loc="upper left")
    return ax


def plot_residuals(fitted, runs, *, features=_RESIDUAL_FEATURES):
    """Log residual (log measured − log predicted) against each feature; finds where a model is wrong.

    Parameters
    ----------
    fitted : TrainingTimeModel
        A fitted model.
    runs : path or pandas.DataFrame
        The runs to plot (read with :func:`perfmodel.io.load_runs`).
    features : sequence of str, default=("params", "flops_per_sample", "batch_size", "gpu_count")
        Run columns to plot against, one panel each (log x axis); those the runs lack or leave empty are
        skipped.

    Returns
    -------
    matplotlib.figure.Figure
        The figure, one panel per feature.
    """
    from .io import load_runs

    plt = _plt()
    runs = load_runs(runs)
    resid = np.log(runs["step_time_s"].to_numpy(dtype=float)) - np.log(np.maximum(fitted.predict(runs), 1e-300))
    feats = [f for f in features if f in runs.columns and runs[f].notna().any()]
    fig, axes = plt.subplots(1, len(feats), figsize=(3.2 * len(feats), 3), sharey=True, squeeze=False)
    groups = _groups(runs)
    for ax, f in zip(axes[0], feats):
        x = pd.to_numeric(runs[f], errors="coerce").to_numpy(dtype=float)
        for g in sorted(groups.unique()):
            m = (groups == g).to_numpy()
            ax.scatter(x[m], resid[m], s=12, alpha=0.7, label=g)
        ax.axhline(0, color="k", lw=1)
        ax.set(xscale="log", xlabel=f)
    axes[0][0].set_ylabel("log residual")
    axes[0][-1].legend(fontsize=7)
    fig.suptitle(f"{fitted.method}: residuals")
    fig.tight_layout()
    return fig


def plot_scaling(runs, *, mode: str = "weak", ax=None):
    """Speedup vs device count per model (measured runs), with the ideal line; the legend gives the parallel
    efficiency at the largest count.

    Parameters
    ----------
    runs : path or pandas.DataFrame
        A run history (:func:`perfmodel.analysis.scaling` reads it; the median over batch sizes is drawn).
    mode : {"weak", "strong"}, default="weak"
        As in :func:`perfmodel.analysis.scaling`.
    ax : matplotlib.axes.Axes, optional
        Where to draw; default a new figure.

    Returns
    -------
    matplotlib.axes.Axes
        The Axes drawn on (with a note when no device counts can be compared).
    """
    from .analysis import scaling

    plt = _plt()
    table = scaling(runs, mode=mode)
    if ax is None:
        _, ax = plt.subplots(figsize=(5.5, 4))
    if len(table) == 0:
        ax.text(0.5, 0.5, "no device-count pairs to compare", ha="center", transform=ax.transAxes)
        return ax
    agg = table.groupby(["model", "gpu_count"], as_index=False)[["speedup", "efficiency"]].median()
    for name, g in agg.groupby("model"):
        n = np.r_[1, g["gpu_count"].to_numpy()]
        s = np.r_[1.0, g["speedup"].to_numpy()]
        ax.plot(n, s, "o-", label=f"{name} (eff. {g['efficiency'].iloc[-1]:.2f})")
    top = int(agg["gpu_count"].max())
    ax.plot([1, top], [1, top], "k--", lw=1, label="ideal")
    ax.set(xlabel="devices (workers)", ylabel="speedup", title=f"{mode} scaling (median over batch sizes)")
    ax.legend(fontsize=7)
    return ax


def plot_batch_curves(fitted, runs, *, models=None, gpu_count: int = 1, confidence: float = 0.9, ax=None):
    """Step time vs per-device batch size per model: measured points and the fitted curve with its band.

    Parameters
    ----------
    fitted : TrainingTimeModel
        A fitted model.
    runs : path or pandas.DataFrame
        The runs to plot (read with :func:`perfmodel.io.load_runs`).
    models : sequence of str, optional
        The models to draw; default the first six names in sorted order. A name without runs at ``gpu_count``
        is skipped.
    gpu_count : int, default=1
        Only runs on this many devices are drawn.
    confidence : float, default=0.9
        Level of the band.
    ax : matplotlib.axes.Axes, optional
        Where to draw; default a new figure.

    Returns
    -------
    matplotlib.axes.Axes
        The Axes drawn on.
    """
    from .io import load_runs

    plt = _plt()
    runs = load_runs(runs)
    runs = runs[runs["gpu_count"] == gpu_count]
    names = list(models) if models is not None else sorted(runs["model"].astype(str).unique())[:6]
    if ax is None:
        _, ax = plt.subplots(figsize=(6, 4.5))
    for i, name in enumerate(names):
        sub = runs[runs["model"].astype(str) == name]
        if sub.empty:
            continue
        color = f"C{i % 10}"
        ax.scatter(sub["batch_size"], sub["step_time_s"], color=color, s=16, label=name)
        grid = np.unique(np.geomspace(sub["batch_size"].min(), sub["batch_size"].max(), 20).round().astype(int))
        row = sub.iloc[0]
        q = pd.DataFrame({c: row[c] for c in sub.columns if c not in ("batch_size",)}, index=range(len(grid)))
        q["batch_size"] = grid
        pi = fitted.predict_interval(q, confidence)
        ax.plot(grid, pi["step_time_s"], color=color, lw=1.2)
        ax.fill_between(grid, pi["step_lower"], pi["step_upper"], color=color, alpha=0.15)
    ax.set(xscale="log", yscale="log", xlabel="per-device batch size", ylabel="step time (s)",
           title=f"{fitted.method}: step time vs batch ({gpu_count} device(s), {confidence:.0%} band)")
    ax.legend(fontsize=7)
    return ax


def plot_cv_summary(evaluation, *, ax=None):
    """Median APE per split and method, with the noise floor as a line.

    Parameters
    ----------
    evaluation : Evaluation
        From :func:`perfmodel.evaluate.evaluate`.
    ax : matplotlib.axes.Axes, optional
        Where to draw; default a new figure.

    Returns
    -------
    matplotlib.axes.Axes
        The Axes drawn on.
    """
    plt = _plt()
    table = evaluation.table
    if ax is None:
        _, ax = plt.subplots(figsize=(7, 4))
    splits = list(dict.fromkeys(table["split"]))
    methods = list(dict.fromkeys(table["method"]))
    width = 0.8 / max(len(methods), 1)
    for i, m in enumerate(methods):
        vals = [table[(table["split"] == s) & (table["method"] == m)]["median_ape"].squeeze() for s in splits]
        vals = [float(v) if np.ndim(v) == 0 and pd.notna(v) else np.nan for v in vals]
        ax.bar(np.arange(len(splits)) + i * width, vals, width, label=m)
    floor = evaluation.noise.median_ape
    if np.isfinite(floor):
        ax.axhline(floor, color="k", ls="--", lw=1, label=f"noise floor {floor:.1f}%")
    ax.set_xticks(np.arange(len(splits)) + 0.4 - width / 2)
    ax.set_xticklabels([s.replace("leave-one-", "").replace("-out", "") for s in splits])
    ax.set(ylabel="median APE (%)", yscale="log", title="grouped cross-validation")
    ax.legend(fontsize=7, ncol=2)
    return ax
