"""Bridges to the tools run history already lives in (each needs its optional extra, imported only here).

- :mod:`perfmodel.integrations.hf` — ``PerfModelCallback`` for ``transformers.Trainer`` (extra ``hf``).
- :mod:`perfmodel.integrations.lightning` — ``PerfModelCallback`` for ``lightning.Trainer`` (extra ``lightning``).
- :mod:`perfmodel.integrations.mlflow` — ``log_prediction`` to the current MLflow run (extra ``mlflow``).

Importing this package imports none of them (nor torch); import the submodule you use.
"""

from __future__ import annotations

__all__: list[str] = []
