"""Named design columns: how the physics, ops, roofline and baseline regressors find their quantities in ``X``.

Each of those forms reads named quantities (``t_compute_s``, ``log_peak``, ``model_code``, ...): the columns of
``RunFeaturizer(kind=...)`` (:mod:`perfmodel.features`). Their ``columns`` parameter says where each quantity is:

* ``columns=None`` (the default): every quantity, each in the column of its own name. A DataFrame is read by
  column name (``feature_names_in_``; extra columns are not read, a missing one is an error); a plain array must
  carry exactly the featurizer's columns, in its order.
* ``columns={quantity: column name}``: the quantities named, from those columns; a plain array's columns are
  named ``"x0"``, ``"x1"``, ... (scikit-learn's names for unnamed features). A quantity left out is the same in
  every row (its value in the class's ``_ABSENT``): a time or flag 0, a size or count 1, a log 0, a code 0 (one
  model, one device, ...), so its term is zero or shared by every row.

At ``fit`` the columns are resolved once (``columns_``, and the position of each quantity for ``predict``); the
design the form computes on is then the quantities in the featurizer's order, which for the featurizer's own
columns is ``X`` itself (no copy).
"""

from __future__ import annotations

from typing import Literal

import numpy as np
from sklearn.utils.validation import check_is_fitted, validate_data

__all__ = ["NamedColumnsMixin"]


def _quoted(names) -> str:
    return ", ".join(repr(str(n)) for n in names)


class NamedColumnsMixin:
    """Input validation and named-column lookup shared by the physics, ops, roofline and baseline regressors.

    A subclass sets the class attributes below and calls :meth:`_validate_fit` in ``fit`` and
    :meth:`_validate_predict` in ``predict``; both return the design in the order of ``_QUANTITIES``.
    """

    #: The quantities of the form, in the column order of ``RunFeaturizer(kind=_FEATURE_SET)``.
    _QUANTITIES: tuple[str, ...] = ()
    #: The featurizer's feature set (named in messages).
    _FEATURE_SET = ""
    #: Value of a quantity in every row when ``columns`` gives it no column.
    _ABSENT: dict[str, float] = {}
    #: Quantities ``columns`` must give a column.
    _REQUIRED: tuple[str, ...] = ()
    #: Of these quantities, ``columns`` must give at least one a column (empty: no such rule).
    _REQUIRED_ONE_OF: tuple[str, ...] = ()
    #: Integer codes (0, 1, ... a level; -1 unknown).
    _CODES: tuple[str, ...] = ()
    #: Quantities that must be >= 0 in the runs a fit is given (times, FLOPs, bytes, counts).
    _NONNEGATIVE: tuple[str, ...] = ()
    #: Whether ``fit`` refuses runs with a NaN or infinite quantity (the baselines leave such runs out instead).
    _FINITE_FIT = True
    #: The estimator's ``columns`` parameter (each subclass's ``__init__`` sets it; module docstring).
    columns: dict | None

    # ------------------------------------------------------------------------------------------ columns
    def _where(self) -> str:
        return type(self).__name__

    def _resolve(self, n_features: int) -> None:
        """Set ``columns_`` and ``_column_index`` from the ``columns`` parameter and the names of ``X``."""
        where, quantities = self._where(), self._QUANTITIES
        names = getattr(self, "feature_names_in_", None)
        names = None if names is None else [str(n) for n in names]
        if self.columns is None:
            if names is None:
                if n_features != len(quantities):
                    raise ValueError(
                        f"{where} expects the {len(quantities)} columns {quantities} of "
                        f"RunFeaturizer(kind={self._FEATURE_SET!r}), in that order, or a DataFrame with those "
                        f"column names, or columns={{quantity: column}}; got an array of {n_features} feature(s).")
                self.columns_ = {q: q for q in quantities}
                self._column_index = None
                return
            missing = [q for q in quantities if q not in names]
            if missing:
                raise ValueError(
                    f"{where} expects the {len(quantities)} columns {quantities} of "
                    f"RunFeaturizer(kind={self._FEATURE_SET!r}) (or columns={{quantity: column}}); X has "
                    f"{n_features} feature(s) and lacks {_quoted(missing)}.")
            mapping = {q: q for q in quantities}
        else:
            mapping = self._check_mapping()
            names = names if names is not None else [f"x{i}" for i in range(n_features)]
            absent = [(q, c) for q, c in mapping.items() if c is not None and c not in names]
            if absent:
                q, c = absent[0]
                shown = _quoted(names[:12]) + (", ..." if len(names) > 12 else "")
                raise ValueError(f"{where} reads column {c!r} for {q!r}, which X does not have: X has "
                                 f"{n_features} feature(s), named {shown}.")
        position = {n: i for i, n in enumerate(names)}
        index = tuple(position[mapping[q]] if mapping[q] is not None else -1 for q in quantities)
        self.columns_ = mapping
        self._column_index = None if index == tuple(range(len(quantities))) else index

    def _check_mapping(self) -> dict:
        """The ``columns`` parameter as ``{quantity: column or None}`` over every quantity, checked."""
        where, quantities, cols = self._where(), self._QUANTITIES, self.columns
        if not isinstance(cols, dict):
            raise TypeError(f"The 'columns' parameter of {where} must be a dict {{quantity: column name}} or None. "
                            f"Got {cols!r} of type {type(cols).__name__} instead.")
        unknown = [q for q in cols if q not in quantities]
        if unknown:
            raise ValueError(f"The 'columns' parameter of {where} names {_quoted(unknown)}, which {where} does not "
                             f"read; its quantities are {_quoted(quantities)}.")
        bad = [q for q, c in cols.items() if not isinstance(c, str)]
        if bad:
            raise TypeError(f"The 'columns' parameter of {where} must map each quantity to a column name (str). "
                            f"Got {cols[bad[0]]!r} for {bad[0]!r}.")
        used = list(cols.values())
        twice = sorted({c for c in used if used.count(c) > 1})
        if twice:
            raise ValueError(f"The 'columns' parameter of {where} reads column(s) {_quoted(twice)} for more than one "
                             "quantity.")
        need = [q for q in self._REQUIRED if q not in cols]
        if need:
            raise ValueError(f"The 'columns' parameter of {where} must give {_quoted(need)} a column: the form "
                             "has no meaning without it.")
        if self._REQUIRED_ONE_OF and not any(q in cols for q in self._REQUIRED_ONE_OF):
            raise ValueError(f"The 'columns' parameter of {where} must give at least one of "
                             f"{_quoted(self._REQUIRED_ONE_OF)} a column.")
        return {q: cols.get(q) for q in quantities}

    def _design(self, X: np.ndarray) -> np.ndarray:
        """The quantities of ``X`` (validated) in the order of ``_QUANTITIES``: ``X`` itself when it is in it."""
        index = getattr(self, "_column_index", None)  # absent in a model file written before named columns
        if index is None:
            return X
        # the memory layout of X: the same BLAS paths, so the same numbers as X in the featurizer's order
        order: Literal["C", "F"] = "F" if X.flags.f_contiguous and not X.flags.c_contiguous else "C"
        Z = np.empty((len(X), len(self._QUANTITIES)), order=order)
        for j, (q, i) in enumerate(zip(self._QUANTITIES, index)):
            Z[:, j] = X[:, i] if i >= 0 else self._ABSENT[q]
        return Z

    def _column_label(self, q: str) -> str:
        c = self.columns_.get(q)
        return repr(q) if c in (None, q) else f"{c!r} ({q})"

    # --------------------------------------------------------------------------------------- validation
    def _validate_fit(self, X, y, min_runs: int = 3) -> tuple[np.ndarray, np.ndarray]:
        """``X, y`` checked (numeric 2-D X, 1-D y of at least ``min_runs`` positive step times, the quantities
        found, fit rules on their values); sets ``n_features_in_``, ``feature_names_in_``, ``columns_``. Returns the
        design (quantities in order) and y."""
        where = self._where()
        X, y = validate_data(self, X, y, dtype=np.float64, y_numeric=True, ensure_all_finite=False)
        y = np.asarray(y, dtype=np.float64)
        if len(y) < min_runs:
            raise ValueError(f"{where} needs at least {min_runs} runs to fit; got {len(y)} sample(s).")
        if np.any(y <= 0):
            raise ValueError(f"{where} needs positive step times (y > 0); got {float(np.min(y))!r}.")
        self._resolve(X.shape[1])
        Z = self._design(X)
        at = {q: j for j, q in enumerate(self._QUANTITIES)}
        read = [q for q in self._QUANTITIES if self.columns_.get(q) is not None]
        if self._FINITE_FIT:
            bad = [q for q in read if not np.all(np.isfinite(Z[:, at[q]]))]
            if bad:
                raise ValueError(f"{where} got NaN or infinite values in {', '.join(map(self._column_label, bad))} "
                                 "(a device without a peak at the run's precision or without a memory bandwidth?).")
        for q in self._CODES:
            if q in read:
                code = Z[:, at[q]]
                ok = ~np.isfinite(code) | ((code >= -1) & (code == np.round(code)))
                if not ok.all():
                    raise ValueError(f"{where}: {self._column_label(q)} holds codes (whole numbers, -1 for "
                                     f"unknown); got {float(code[~ok][0])!r}.")
        for q in self._NONNEGATIVE:
            if q in read:
                col = Z[:, at[q]]
                if np.any(col < 0):
                    raise ValueError(f"Negative values in data passed to {where}: {self._column_label(q)} has "
                                     f"{float(np.min(col))!r}; times, work, bytes and counts must be >= 0.")
        return Z, y

    def _validate_predict(self, X, attribute: str) -> np.ndarray:
        """``X`` checked against the fit (``attribute``: a fitted attribute); the design in order. NaN or infinite
        quantities pass through: their rows get a non-finite time, which the predict layer names."""
        check_is_fitted(self, attribute)
        X = validate_data(self, X, reset=False, dtype=np.float64, ensure_all_finite=False)
        return self._design(X)

    def __sklearn_tags__(self):
        tags = super().__sklearn_tags__()  # type: ignore[misc]  # the estimator class mixed with it has them
        tags.target_tags.positive_only = True  # step times
        tags.regressor_tags.poor_score = True  # a physical form, not a fit to arbitrary data
        tags.input_tags.allow_nan = not self._FINITE_FIT
        tags.input_tags.positive_only = bool(self._NONNEGATIVE)
        return tags
