"""Build the fitted defaults that ship with perfmodel: src/perfmodel/data/fitted/<key>.perfmodel.

For each bundled history in :data:`perfmodel.fitting.SHIPPED_HISTORIES` (``cpu`` and ``gpu`` with ``auto``, ``llm``
with the layout model; and the (history, method, kind) of :data:`perfmodel.fitting.SHIPPED_EXTRA`) and each kind of query (:data:`perfmodel.kinds.KIND_NAMES`) that can arise on it, the model
is fitted exactly as
:func:`perfmodel.fitting.fit_cached` would fit it (:func:`perfmodel.fitting.fit_history`) and saved in the safe
format under its shipped key (:func:`perfmodel.fitting.shipped_key`: history digest, perfmodel version, method,
kind, device table and :data:`perfmodel.fitting.FIT_FORMAT`). ``index.json`` beside them lists what was built and
which kinds were skipped, and why.

One command, idempotent: a model whose file is already current is kept (not refitted); files that are no longer
current (other data, version or FIT_FORMAT) are removed. Run it after bumping FIT_FORMAT for a change that alters
what fits give (tests/test_fitted_defaults.py refits one model per history and fails until you do)::

    python scripts/build_fitted_defaults.py            # keep current files, fit the missing ones
    python scripts/build_fitted_defaults.py --force    # refit everything
    python scripts/build_fitted_defaults.py --check    # exit 1 if anything is missing or stale; writes nothing
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path

# the keys hold the device table and the data folder in effect: build against the package's own, not a user's
for _var in ("PERFMODEL_DATA", "PERFMODEL_DEVICES"):
    os.environ.pop(_var, None)
os.environ.setdefault("PERFMODEL_PROGRESS", "0")

ROOT = Path(__file__).resolve().parents[1]
OUT = ROOT / "src" / "perfmodel" / "data" / "fitted"
INDEX = "index.json"


def kinds_that_arise(runs) -> dict:
    """{kind: None if a query of that kind can be put to this history, else the reason it cannot}."""
    from perfmodel.kinds import KIND_NAMES, canonical_devices

    devices = canonical_devices(runs["gpu_type"])
    models = runs["model"].astype(str).to_numpy()
    n_dev, n_mod = len(set(devices)), len(set(models))
    pairs = len(set(zip(models, devices)))
    out = dict.fromkeys(KIND_NAMES)
    if n_dev < 2:
        out["new_device"] = (f"one device type ({devices[0]}): a query on another device is routed to the gpu "
                             "history, and a fit on one device type cannot carry step times to another device or "
                             "precision")
    if pairs == n_dev * n_mod:
        out["new_pair"] = "every model of the history ran on every device type of it: no query is a new pair"
    return out


def build(names, force: bool, check: bool) -> int:
    import perfmodel
    from perfmodel.fitting import (
        FIT_FORMAT,
        SHIPPED_EXTRA,
        SHIPPED_HISTORIES,
        fit_history,
        shipped_dir,
        shipped_key,
    )
    from perfmodel.hardware import table_digest
    from perfmodel.history import read_history
    from perfmodel.persistence import load_model, save_model

    if shipped_dir().resolve() != OUT.resolve():
        print(f"warning: perfmodel is imported from {perfmodel.__file__}, whose shipped folder is {shipped_dir()}; "
              f"writing to {OUT} (install the checkout editable: pip install -e .)", file=sys.stderr)
    names = names or list(SHIPPED_HISTORIES)
    old_index, unsaveable = {}, {}
    if (OUT / INDEX).is_file():
        old = json.loads((OUT / INDEX).read_text())
        old_index = {(e["history"], e["kind"], e["method"]): e for e in old.get("models", [])}
        unsaveable = {(e["history"], e["kind"], e.get("method")): e for e in old.get("skipped", [])
                      if e.get("unsaveable")}
    models, skipped, expected, todo = [], [], set(), []
    t_start = time.perf_counter()
    plan = [(name, SHIPPED_HISTORIES[name], None) for name in SHIPPED_HISTORIES]
    plan += [(name, method, kind) for name, method, kind in SHIPPED_EXTRA]  # one kind each
    for name, method, only_kind in plan:
        loaded = read_history(name)
        for kind, reason in kinds_that_arise(loaded.runs).items():
            if only_kind is not None and kind != only_kind:
                continue
            if reason is not None:
                skipped.append({"history": name, "kind": kind, "method": method, "reason": reason})
                continue
            key = shipped_key(loaded.digest, method, kind)
            path = OUT / f"{key}.perfmodel"
            if not force and unsaveable.get((name, kind, method), {}).get("key") == key:
                skipped.append(unsaveable[(name, kind, method)])  # fitted with this very code: still unsaveable
                continue
            entry = {"history": name, "kind": kind, "method": method, "key": key, "file": path.name,
                     "digest": loaded.digest, "runs": len(loaded.runs)}
            current = path.is_file() and not force and _loads(load_model, path)
            if current and (name, kind, method) in old_index and old_index[(name, kind, method)].get("key") == key:
                entry = {**old_index[(name, kind, method)], **entry}
            if not current and name in names:
                todo.append((name, kind, loaded, path, entry))
            elif not current:
                print(f"{name:4s} {kind:10s} stale or missing, not rebuilt (not in --only)", flush=True)
                continue
            expected.add(path.name)
            models.append(entry)
    stale = sorted(p for p in OUT.glob("*.perfmodel") if p.name not in expected)
    if check:
        for name, kind, *_ in todo:
            print(f"missing or stale: {name} {kind}")
        for p in stale:
            print(f"stale file: {p.name}")
        return 1 if todo or stale else 0
    OUT.mkdir(parents=True, exist_ok=True)
    fitted = 0
    for name, kind, loaded, path, entry in todo:
        key = entry["key"]
        t = time.perf_counter()
        model = fit_history(loaded, entry["method"], kind=kind)
        fit_s = time.perf_counter() - t
        try:
            save_model(model, path)
        except TypeError as exc:  # a method the safe format cannot hold yet: not shipped, fitted on first use
            chose = "auto chose " if entry["method"] == "auto" else ""
            reason = (f"{chose}{model.method}, which the safe model format cannot hold yet "
                      f"({' '.join(str(exc).split())}; perfmodel.persistence): fitted on first use instead")
            skipped.append({"history": name, "kind": kind, "method": entry["method"], "reason": reason,
                            "unsaveable": True, "key": key})
            models.remove(entry)
            expected.discard(path.name)
            print(f"{name:4s} {kind:10s} {model.method:9s} fitted in {fit_s:6.1f} s, NOT SHIPPED: {reason}",
                  flush=True)
            continue
        fitted += 1
        t = time.perf_counter()
        load_model(path)
        load_ms = (time.perf_counter() - t) * 1e3
        entry.update(chosen=model.method, fit_s=round(fit_s, 1), bytes=path.stat().st_size)
        print(f"{name:4s} {kind:10s} {model.method:9s} fitted in {fit_s:6.1f} s, {path.stat().st_size / 1e3:7.0f} kB, "
              f"loads in {load_ms:5.1f} ms -> {path.relative_to(ROOT)}", flush=True)
    for p in stale:
        p.unlink()
        print(f"removed stale {p.relative_to(ROOT)}", flush=True)
    rebuilt = {(t[0], t[1], t[4]["method"]) for t in todo}
    for m in models:
        if (m["history"], m["kind"], m["method"]) not in rebuilt:
            print(f"{m['history']:4s} {m['kind']:10s} current, kept", flush=True)
    for s in skipped:
        print(f"{s['history']:4s} {s['kind']:10s} skipped: {s['reason']}", flush=True)
    index = {"perfmodel": perfmodel.__version__, "format": FIT_FORMAT,
             "devices": table_digest(),
             "models": sorted(models, key=lambda e: (e["history"], e["kind"], e["method"])),
             "skipped": sorted(skipped, key=lambda e: (e["history"], e["kind"], e.get("method", "")))}
    text = json.dumps(index, indent=1, sort_keys=True) + "\n"
    if not (OUT / INDEX).is_file() or (OUT / INDEX).read_text() != text:
        (OUT / INDEX).write_text(text)
    print(f"{fitted} fitted, {len(models) - fitted} kept, {len(stale)} removed, {len(skipped)} skipped "
          f"in {time.perf_counter() - t_start:.0f} s", flush=True)
    return 0


def _loads(load_model, path) -> bool:
    try:
        load_model(path)
        return True
    except (ValueError, TypeError, OSError, KeyError):
        return False


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--force", action="store_true", help="refit every model, even current ones")
    ap.add_argument("--check", action="store_true", help="only say what is missing or stale (exit 1 if any)")
    ap.add_argument("--only", action="append", choices=["cpu", "gpu"],
                    help="rebuild only this history's models (repeatable); others are kept if current")
    args = ap.parse_args(argv)
    return build(args.only, args.force, args.check)


if __name__ == "__main__":
    sys.exit(main())
