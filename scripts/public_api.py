"""The public API as a text listing: each public module, its public names, and each function's or class's
signature (``tests/data/public_api.txt``; ``tests/test_api.py`` checks the package against it).

A public module is one whose dotted path has no part starting with ``_``; its public names are its ``__all__``, or,
without one, the names not starting with ``_`` that it defines. Modules that need an optional dependency missing
here are listed as such.

Usage::

    python scripts/public_api.py            # print the listing
    python scripts/public_api.py --write    # rewrite tests/data/public_api.txt (state the change in CHANGELOG.md)
"""

from __future__ import annotations

import argparse
import importlib
import inspect
import pathlib
import pkgutil
import sys

ROOT = pathlib.Path(__file__).resolve().parents[1]
LISTING = ROOT / "tests" / "data" / "public_api.txt"


def public_modules() -> list[str]:
    """The dotted names of ``perfmodel`` and of every submodule whose dotted name has no ``_`` part (also what
    tests/test_docstrings.py checks the docstrings of)."""
    import perfmodel

    names = ["perfmodel"]
    for info in pkgutil.walk_packages(perfmodel.__path__, "perfmodel."):
        if not any(part.startswith("_") for part in info.name.split(".")[1:]):
            names.append(info.name)
    return sorted(names)


def _kind(obj) -> str:
    if inspect.ismodule(obj):
        return "module"
    if inspect.isclass(obj):
        return "class"
    if callable(obj):
        return "function"
    return "value"


def _signature(obj) -> str:
    try:
        return str(inspect.signature(obj))
    except (TypeError, ValueError):
        return ""


def listing() -> str:
    lines = []
    for name in public_modules():
        try:
            module = importlib.import_module(name)
        except ImportError as exc:  # an optional dependency (torch, lightning, ...) is missing here
            lines.append(f"{name}: not importable without {exc.name or 'an optional dependency'}")
            continue
        exported = getattr(module, "__all__", None)
        if exported is None:
            exported = [n for n, v in vars(module).items() if not n.startswith("_")
                        and getattr(v, "__module__", name) == name and not inspect.ismodule(v)]
        lines.append(f"{name}")
        for attr in sorted(exported):
            obj = getattr(module, attr)
            kind = _kind(obj)
            sig = _signature(obj) if kind in ("class", "function") else ""
            lines.append(f"    {attr}: {kind}{' ' + sig if sig else ''}")
    return "\n".join(lines) + "\n"


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--write", action="store_true", help=f"rewrite {LISTING.relative_to(ROOT)}")
    args = ap.parse_args(argv)
    text = listing()
    if args.write:
        LISTING.write_text(text)
        print(f"wrote {LISTING.relative_to(ROOT)} ({text.count(chr(10))} lines)")
    else:
        sys.stdout.write(text)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
