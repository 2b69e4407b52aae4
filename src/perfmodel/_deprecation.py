"""Renamed public names that still answer, with a :class:`DeprecationWarning`, until the release that removes them.

A module lists its renames and takes its ``__getattr__`` from :func:`renamed` (PEP 562: called only for names the
module lacks, so nothing is paid on the names it has)::

    __getattr__ = renamed(__name__, {"old": ("new", "why it was renamed")})
"""

from __future__ import annotations

import sys
import warnings

__all__ = ["REMOVED_IN", "renamed"]

#: The release that removes the old names.
REMOVED_IN = "0.4"


def renamed(module: str, renames: dict):
    """A module ``__getattr__`` answering each old name with its new one's object, warning once per access.

    Parameters
    ----------
    module : str
        The module's ``__name__``.
    renames : dict of str to (str, str)
        Old name -> (new name in the same module, why it was renamed: the name it clashed with).

    Returns
    -------
    callable
        The module's ``__getattr__``; any other missing name raises :class:`AttributeError` as usual.
    """

    def __getattr__(name: str):
        if name in renames:
            new, why = renames[name]
            warnings.warn(f"{module}.{name} is renamed {module}.{new} ({why}); the old name will be removed in "
                          f"perfmodel {REMOVED_IN}.", DeprecationWarning, stacklevel=2)
            return getattr(sys.modules[module], new)
        raise AttributeError(f"module {module!r} has no attribute {name!r}")

    return __getattr__
