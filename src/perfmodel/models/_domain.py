"""Where a fit's runs lie: the range of each query quantity and the distance of a query to the nearest run."""

from __future__ import annotations

import numpy as np
import pandas as pd

from .._rows import distinct_rows

__all__ = ["DOMAIN_COLUMNS", "CONSTANT_DIMENSION_SCALE", "fit_domain", "domain_distance"]

#: The quantities the distance is measured in (logs, in units of the training runs' standard deviation).
DOMAIN_COLUMNS = ("params", "batch_size", "gpu_count", "flops_per_sample")
#: Log-scale unit of the distance along a quantity the training runs never varied: there a change of 0.1 in log
#: units (about 10%) counts as one unit of distance, since the runs say nothing about its effect.
CONSTANT_DIMENSION_SCALE = 0.1


def _quantities(frame: pd.DataFrame) -> pd.DataFrame:
    return pd.DataFrame({c: pd.to_numeric(frame[c], errors="coerce") if c in frame.columns else np.nan
                         for c in DOMAIN_COLUMNS}, index=frame.index).astype(float)


def fit_domain(runs: pd.DataFrame) -> dict:
    """Where the runs lie: the range of each query quantity and the points a query's distance is measured to.

    Parameters
    ----------
    runs : DataFrame
        The fitted runs (validated); columns of :data:`DOMAIN_COLUMNS` they lack count as missing.

    Returns
    -------
    dict
        ``{"range": DataFrame of min/max per quantity, "scale": the unit of each quantity's log (its standard
        deviation over the runs, or CONSTANT_DIMENSION_SCALE where they never vary it), "points": the distinct
        log points}``.
    """
    dom = _quantities(runs)
    rng = pd.DataFrame({"min": dom.min(), "max": dom.max()})
    pts = np.log(dom.fillna(dom.median()).to_numpy(dtype=float))
    pts = np.where(np.isfinite(pts), pts, 0.0)
    scale = pts.std(axis=0)
    return {"range": rng, "scale": np.where(scale > 0, scale, CONSTANT_DIMENSION_SCALE),
            "points": pd.DataFrame(pts).drop_duplicates().to_numpy()}


def domain_distance(rng: pd.DataFrame, scale: np.ndarray, points: np.ndarray, X: pd.DataFrame,
                    tree=None) -> tuple[np.ndarray, object]:
    """Distance of each query to the nearest run: root-mean-square over :data:`DOMAIN_COLUMNS` of the log
    differences in units of ``scale``. A quantity the history never had (e.g. FLOPs), or the query lacks, counts
    as equal.

    Parameters
    ----------
    rng : DataFrame
        Min and max of each quantity over the runs (``fit_domain(...)["range"]``).
    scale : ndarray of shape (4,)
        The unit of each quantity's log (``fit_domain(...)["scale"]``).
    points : ndarray of shape (n_points, 4)
        The runs' distinct log points (``fit_domain(...)["points"]``).
    X : DataFrame
        The queries.
    tree : scipy.spatial.cKDTree, optional
        The KD-tree over ``points / scale`` from an earlier call (built when None).

    Returns
    -------
    distance : ndarray of shape (n_queries,)
        Each query's distance to the nearest run (0: a configuration the runs have).
    tree : scipy.spatial.cKDTree
        The KD-tree, to pass to the next call.
    """
    med = rng[["min", "max"]].mean(axis=1)
    q = _quantities(X).fillna(med)
    qp = np.log(np.maximum(q.to_numpy(dtype=float), 1e-300))
    never = rng["min"].reindex(list(DOMAIN_COLUMNS)).isna().to_numpy()
    qp = np.where(np.isfinite(qp) & ~never, qp, 0.0)
    first, inverse = distinct_rows(qp.T)  # one distance per distinct row: queries repeat configurations
    if tree is None:
        from scipy.spatial import cKDTree  # ~3x faster queries than sklearn's KDTree

        tree = cKDTree(points / scale)
    dist, _ = tree.query(qp[first] / scale, k=1)
    return (np.asarray(dist, dtype=float).reshape(-1) / np.sqrt(qp.shape[1]))[inverse], tree
