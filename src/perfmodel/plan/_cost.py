"""Dollars for a job: the price table and :func:`estimate_cost` (the time interval carried through).

The bundled price table (``data/prices.csv``) holds indicative on-demand list prices per device-hour with the
provider, region, date (``as_of``), source text and source ``url`` of each row; spot prices there are typical
discounts, not quotes. Every device of the spec table without a price has a row with an empty price and a
``note`` saying why (e.g. a consumer card no hyperscaler offers, or no price that could be verified on a
provider's own price page), dated by ``as_of``; no price there is invented or second-hand. Asking for its price
raises :class:`~perfmodel.exceptions.UnknownPriceError` with that reason (:func:`no_price_reason`), and
:func:`perfmodel.plan.recommend` keeps such configurations with an empty cost and the reason in ``price_note``.
Prices change often: pass your own table (``prices=`` a DataFrame or a CSV/YAML path with the same columns) for
real decisions.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
import pandas as pd

from .._format import to_plain
from .._validation import check_nonnegative_float, check_positive_float, check_positive_int
from ..exceptions import UnknownPriceError
from ..hardware import resolve_gpu_type

__all__ = ["load_prices", "price_per_hour", "price_quote", "no_price_reason", "estimate_cost", "CostEstimate"]

_PRICE_COLUMNS = ("gpu_type", "provider", "on_demand_usd_per_hour", "spot_usd_per_hour")
#: Optional columns, empty when a table lacks them.
_INFO_COLUMNS = ("region", "as_of", "source", "url", "note")


def load_prices(prices=None) -> pd.DataFrame:
    """The price table: None (bundled), a CSV or YAML path (a list of rows) or a DataFrame with columns ``gpu_type, provider,
    on_demand_usd_per_hour`` and optionally ``spot_usd_per_hour``. Device names are resolved; negative or
    non-numeric prices raise ValueError.

    Parameters
    ----------
    prices : DataFrame or path, optional
        The table: a DataFrame (copied), a ``.csv`` file, or a ``.yaml``/``.yml`` file holding a list of rows (or
        ``{prices: [...]}``; needs PyYAML); default the bundled ``data/prices.csv``.

    Returns
    -------
    DataFrame
        The checked table: prices as floats (an empty on-demand price only in a row with a ``note``), device
        names resolved, and the optional columns ``spot_usd_per_hour``, ``region``, ``as_of``, ``source``,
        ``url`` and ``note`` present (empty where the table lacks them).

    Raises
    ------
    FileNotFoundError
        The path does not exist or is not a file.
    ValueError
        A required column is missing, a price is negative or not a number, an on-demand price is empty without a
        note, or a YAML table is not a list of rows.
    """
    if prices is None:
        from ..datasets import bundled_runs_path

        prices = bundled_runs_path("prices.csv")
    if not isinstance(prices, pd.DataFrame):
        from pathlib import Path

        if not Path(prices).is_file():
            what = "is not a file" if Path(prices).exists() else "does not exist"
            raise FileNotFoundError(f"Price table {str(prices)!r} {what}.")
    if isinstance(prices, pd.DataFrame):
        df = prices.copy()
    elif str(prices).lower().endswith((".yaml", ".yml")):
        try:
            import yaml
        except ImportError:  # pragma: no cover - PyYAML is optional
            raise ImportError("Reading a YAML price table needs PyYAML (pip install pyyaml); or use CSV.") from None
        with open(prices, encoding="utf-8") as fh:
            data = yaml.safe_load(fh)
        rows = data.get("prices", data) if isinstance(data, dict) else data
        if not isinstance(rows, list):
            raise ValueError(f"The YAML price table {str(prices)!r} must be a list of rows (or {{prices: [...]}}).")
        df = pd.DataFrame(rows)
    else:
        df = pd.read_csv(prices)
    missing = [c for c in _PRICE_COLUMNS[:3] if c not in df.columns]
    if missing:
        raise ValueError(f"The price table is missing column(s) {missing}; needs {', '.join(_PRICE_COLUMNS)}.")
    if "spot_usd_per_hour" not in df.columns:
        df["spot_usd_per_hour"] = np.nan
    for col in _INFO_COLUMNS:
        if col not in df.columns:
            df[col] = None
    noted = df["note"].notna() & (df["note"].astype(str).str.strip() != "")
    for col in ("on_demand_usd_per_hour", "spot_usd_per_hour"):
        vals = pd.to_numeric(df[col], errors="coerce")
        bad = (vals.isna() & df[col].notna()) | (vals < 0)
        if col == "on_demand_usd_per_hour":
            bad |= vals.isna() & ~noted  # an empty price needs a note saying why
        if bad.any():
            raise ValueError(f"The price table's {col!r} must be a non-negative number; rows "
                             f"{', '.join(str(i + 1) for i in np.flatnonzero(bad.to_numpy())[:5])} (counting from 1) are not "
                             f"(e.g. {df[col][bad].iloc[0]!r}).")
        df[col] = vals.astype(float)
    df["gpu_type"] = [resolve_gpu_type(str(g)) for g in df["gpu_type"]]
    df["provider"] = df["provider"].astype(str)
    df.attrs["perfmodel_prices"] = True  # checked: price_quote need not read it again
    return df


def price_per_hour(gpu_type: str, *, provider: str | None = None, spot: bool = False, prices=None) -> float:
    """Dollars per device-hour (per worker-hour for ``cpu``); the cheapest provider unless ``provider`` is given.

    Parameters
    ----------
    gpu_type : str
        Any name of :mod:`perfmodel.hardware`.
    provider : str, optional
        Price from this provider; default the cheapest in the table.
    spot : bool, default=False
        The spot price rather than the on-demand one.
    prices : DataFrame or path, optional
        The price table (:func:`load_prices`); default the bundled one.

    Returns
    -------
    float
        US dollars per device-hour (the ``usd_per_hour`` of :func:`price_quote`).

    Raises
    ------
    UnknownPriceError
        A ValueError naming the device (and the ones that have prices) when the table has no price for it.
    """
    return price_quote(gpu_type, provider=provider, spot=spot, prices=prices)["usd_per_hour"]


def price_quote(gpu_type: str, *, provider: str | None = None, spot: bool = False, prices=None) -> dict:
    """The price row used for ``gpu_type``: ``{gpu_type, provider, usd_per_hour, spot, region, as_of, url}``,
    the cheapest provider unless ``provider`` is given.

    Raises :class:`~perfmodel.exceptions.UnknownPriceError` (a ValueError) naming the device, the devices that
    have prices, and the table's note on why this device has none, when it has none; the exception's ``reason``
    attribute holds that reason alone (:func:`no_price_reason`).

    Parameters
    ----------
    gpu_type : str
        Any name of :mod:`perfmodel.hardware`.
    provider : str, optional
        Price from this provider; default the cheapest in the table.
    spot : bool, default=False
        The spot price rather than the on-demand one.
    prices : DataFrame or path, optional
        The price table (:func:`load_prices`); default the bundled one.

    Returns
    -------
    dict
        ``gpu_type`` (resolved), ``provider``, ``usd_per_hour`` (float), ``spot`` (bool), and ``region``,
        ``as_of``, ``url`` (str, or None where the row has none).
    """
    table = _checked(prices)
    g = resolve_gpu_type(gpu_type)
    rows = table[table["gpu_type"] == g]
    if provider is not None:
        rows = rows[rows["provider"] == provider]
    col = "spot_usd_per_hour" if spot else "on_demand_usd_per_hour"
    priced = rows[rows[col].notna()]
    if priced.empty:
        have = sorted(set(table.loc[table[col].notna(), "gpu_type"]))
        where = f" from provider {provider!r}" if provider else ""
        why = no_price_reason(g, provider=provider, spot=spot, prices=table)
        err = UnknownPriceError(f"No {'spot' if spot else 'on-demand'} price for {g!r}{where} in the price table: "
                                f"{why}. It has prices for: {', '.join(have)}.")
        # the reason alone, for callers that list it
        err.reason = why
        raise err
    row = priced.loc[priced[col].idxmin()]
    info = lambda k: None if pd.isna(row[k]) else str(row[k])  # noqa: E731
    return {"gpu_type": g, "provider": str(row["provider"]), "usd_per_hour": float(row[col]), "spot": bool(spot),
            "region": info("region"), "as_of": info("as_of"), "url": info("url")}


def _checked(prices) -> pd.DataFrame:
    """The price table, read and checked once (a table :func:`load_prices` returned is used as it is)."""
    return prices if isinstance(prices, pd.DataFrame) and prices.attrs.get("perfmodel_prices") else load_prices(prices)


def no_price_reason(gpu_type: str, *, provider=None, spot: bool = False, prices=None) -> str | None:
    """Why the price table has no price for ``gpu_type`` (from ``provider``, or any of a list of providers), or
    None when it has one.

    The reason is the table's ``note`` for the device with its ``as_of`` date when the table has such a row (every
    device of the built-in spec table without a price has one), else what the table does hold for the device;
    it always ends by saying how to give a price of your own.

    Parameters
    ----------
    gpu_type : str
        Any name of :mod:`perfmodel.hardware`.
    provider : str or list of str, optional
        The provider(s) asked for; default any.
    spot : bool, default=False
        The spot price rather than the on-demand one.
    prices : DataFrame or path, optional
        The price table (:func:`load_prices`); default the bundled one.

    Returns
    -------
    str or None

    Examples
    --------
    >>> no_price_reason("H100") is None
    True
    >>> no_price_reason("RTX 4090")[:59]
    'a consumer (GeForce) card: not offered on AWS, Google Cloud'
    """
    table = _checked(prices)
    g = resolve_gpu_type(gpu_type)
    asked = [provider] if isinstance(provider, str) else (list(provider) if provider else [])
    col = "spot_usd_per_hour" if spot else "on_demand_usd_per_hour"
    kind = "spot" if spot else "on-demand"
    rows = table[table["gpu_type"] == g]
    priced = rows[rows[col].notna()]
    if asked:
        if priced["provider"].isin(asked).any():
            return None
    elif not priced.empty:
        return None
    own = "pass prices= with your own rate"
    if not priced.empty:  # priced, but not by the providers asked
        return (f"no {kind} price from {', '.join(map(repr, asked))} in the price table (it prices {g} at "
                f"{', '.join(sorted(set(priced['provider'])))}); {own}")
    if not rows.empty and rows[col.replace('spot', 'on_demand')].notna().any():  # on-demand only
        return f"the price table has an on-demand price for {g} but no spot price; {own}"
    noted = rows[rows["note"].notna() & (rows["note"].astype(str).str.strip() != "")]
    if not noted.empty:
        note, as_of = str(noted["note"].iloc[0]).strip().rstrip("."), noted["as_of"].iloc[0]
        dated = f" (price table, as of {as_of})" if isinstance(as_of, str) and as_of.strip() else ""
        return note + ("" if "prices=" in note else f"; {own}") + dated
    return f"{g} has no row in the price table; {own}"


@dataclass
class CostEstimate:
    """Dollars for one job, with the interval carried from the time prediction.

    Attributes
    ----------
    dollars : float
        The expected cost: devices x hours x price.
    lower, upper : float
        The cost at the lower and upper end of the time interval.
    hours : float
        Expected wall-clock hours, the spot overhead included.
    usd_per_device_hour : float
        The price used, per device-hour.
    devices : int
        Devices billed.
    spot : bool
        Whether the spot price (and the interruption overhead) was used.
    overhead_fraction : float, default=0.0
        The spot overhead: the fraction of time added by checkpoints and interruptions (0 on demand).
    provider, region, as_of, url : str, optional
        Where the price came from: provider, region, date of the price, source URL.
    """

    dollars: float
    lower: float
    upper: float
    hours: float
    usd_per_device_hour: float
    devices: int
    spot: bool
    overhead_fraction: float = 0.0
    provider: str | None = None
    region: str | None = None
    as_of: str | None = None
    url: str | None = None

    def to_dict(self) -> dict:
        """Plain JSON types only (``json.dumps(..., allow_nan=False)`` accepts it).

        Returns
        -------
        dict
            The fields by name.
        """
        return to_plain(self)

    def __str__(self) -> str:
        kind = "spot" if self.spot else "on-demand"
        who = ""
        if self.provider:
            info = ", ".join(x for x in (self.region, f"{self.as_of} list price" if self.as_of else None) if x)
            who = f" at {self.provider}" + (f" ({info})" if info else "")
        return (f"${self.dollars:,.2f} ({kind}{who}; interval ${self.lower:,.2f} – ${self.upper:,.2f}; "
                f"{self.devices} x ${self.usd_per_device_hour:.3g}/h)")


def _spot_factor(*, checkpoint_interval_s: float, checkpoint_cost_s: float, restart_s: float,
                 interruptions_per_hour: float) -> float:
    """Expected wall-clock multiplier of a spot job: checkpoint writes, plus for each interruption the restart
    and on average half a checkpoint interval of lost work; interruptions arrive at a constant rate over the
    (longer) effective time, so ``T_eff = T·(1 + c/I) / (1 − λ·(R + I/2))``."""
    loss_per_interrupt_h = (restart_s + checkpoint_interval_s / 2) / 3600
    denom = 1 - interruptions_per_hour * loss_per_interrupt_h
    if denom <= 0:
        raise ValueError("With this interruption rate the job loses more time to restarts than it runs: lower "
                         "interruptions_per_hour or checkpoint_interval_s.")
    return (1 + checkpoint_cost_s / checkpoint_interval_s) / denom


def estimate_cost(prediction=None, *, seconds=None, lower=None, upper=None, gpu_type=None, gpu_count=None,
                  provider=None, prices=None, spot=False, checkpoint_interval_s=1800.0, checkpoint_cost_s=30.0,
                  restart_s=300.0, interruptions_per_hour=0.05) -> CostEstimate:
    """Dollars for a job: devices × hours × price, with the time interval carried through.

    Parameters
    ----------
    prediction : TrainingTimePrediction, optional
        From :func:`perfmodel.predict_training_time` (gives seconds, interval, device type and count); or pass
        ``seconds`` (and optionally ``lower``/``upper``), ``gpu_type`` and ``gpu_count``.
    seconds : float, optional
        Predicted seconds of the job, without ``prediction`` (which replaces it when given).
    lower, upper : float, optional
        The time interval, ``0 <= lower <= seconds <= upper``; default ``seconds`` (no interval).
    gpu_type : str, optional
        The device type to price; default the prediction's.
    gpu_count : int, optional
        Devices billed; default the prediction's, else 1.
    provider : str, optional
        Price from this provider; default the cheapest in the table. The result names the provider, region,
        date and source URL of the price used.
    prices : DataFrame or path, optional
        Your own price table (see :func:`load_prices`).
    spot : bool, default=False
        Spot pricing, with the interruption overhead below added to the time.
    checkpoint_interval_s : float, default=1800
        Seconds between checkpoints (spot only).
    checkpoint_cost_s : float, default=30
        Seconds to write one checkpoint.
    restart_s : float, default=300
        Seconds to get a new instance and resume after an interruption.
    interruptions_per_hour : float, default=0.05
        Spot interruption rate (AWS reports most instance types under 5% interruptions per month; 0.05/h is a
        deliberately cautious default).

    Returns
    -------
    CostEstimate
        The cost and its interval. With ``spot`` the time is multiplied by
        ``(1 + checkpoint_cost_s / checkpoint_interval_s) / (1 - interruptions_per_hour * (restart_s +
        checkpoint_interval_s / 2) / 3600)``.

    Raises
    ------
    ValueError
        A missing ``gpu_type`` or ``seconds``, an inconsistent interval, an interruption rate that loses more time
        than the job runs, or no price for the device (:class:`~perfmodel.exceptions.UnknownPriceError`).
    TypeError
        ``spot`` is not a bool.
    """
    if prediction is not None:
        seconds, lower, upper = prediction.seconds, prediction.lower, prediction.upper
        gpu_type = gpu_type or prediction.query.get("gpu_type")
        gpu_count = gpu_count or prediction.query.get("gpu_count")
    seconds = check_positive_float(seconds, "seconds", "estimate_cost")
    lower = seconds if lower is None else check_nonnegative_float(lower, "lower", "estimate_cost")
    upper = seconds if upper is None else check_positive_float(upper, "upper", "estimate_cost")
    if not (0 <= lower <= seconds <= upper) or not np.isfinite(upper):
        raise ValueError(f"estimate_cost needs 0 <= lower <= seconds <= upper (finite). Got lower={lower!r}, "
                         f"seconds={seconds!r}, upper={upper!r}.")
    if gpu_type is None:
        raise ValueError("estimate_cost needs gpu_type (or a prediction that carries it).")
    # not int() first: that truncated 1.5 to 1 and raised OverflowError on inf
    gpu_count = check_positive_int(1 if gpu_count is None else gpu_count, "gpu_count", "estimate_cost")
    for name, val in (("checkpoint_interval_s", checkpoint_interval_s), ("checkpoint_cost_s", checkpoint_cost_s),
                      ("restart_s", restart_s)):
        check_positive_float(val, name, "estimate_cost")
    interruptions_per_hour = check_nonnegative_float(interruptions_per_hour, "interruptions_per_hour",
                                                     "estimate_cost")  # NaN and inf are refused, not carried
    if not isinstance(spot, (bool, np.bool_)):
        raise TypeError(f"The 'spot' parameter of estimate_cost must be a bool. Got {spot!r}.")
    spot = bool(spot)  # a NumPy bool too
    quote = price_quote(gpu_type, provider=provider, spot=spot, prices=prices)
    rate = quote["usd_per_hour"]
    factor = _spot_factor(checkpoint_interval_s=checkpoint_interval_s, checkpoint_cost_s=checkpoint_cost_s,
                          restart_s=restart_s, interruptions_per_hour=interruptions_per_hour) if spot else 1.0
    per_s = rate * gpu_count / 3600 * factor
    if not all(math.isfinite(v) for v in (seconds * per_s, upper * per_s, seconds * factor)):
        raise ValueError(f"estimate_cost: the cost of {upper:.3g} s on {gpu_count} x {gpu_type} is beyond the "
                         "numeric range; check seconds and gpu_count.")
    return CostEstimate(dollars=seconds * per_s, lower=lower * per_s, upper=upper * per_s,
                        hours=seconds * factor / 3600, usd_per_device_hour=rate, devices=gpu_count, spot=spot,
                        overhead_fraction=factor - 1, provider=quote["provider"], region=quote["region"],
                        as_of=quote["as_of"], url=quote["url"])
