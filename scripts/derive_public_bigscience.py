"""Build data/public_bigscience.csv from the BLOOM-176B layout search in BigScience's training chronicles.

Source: https://github.com/bigscience-workshop/bigscience (Apache-2.0, (c) 2021 Stas Bekman), file
``train/tr11-176B-ml/chronicles-prequel.md``: the benchmarks run on Jean Zay (48 nodes of 8 A100 80GB) in
February 2022 to choose BLOOM's shape and 3D layout (Megatron-DeepSpeed: tensor, pipeline and data parallelism with
DeepSpeed ZeRO-1). Markdown tables give, per run, the nodes, model size, DP, TP, PP, micro-batch (MBS), global batch
(GBS), memory, seconds per iteration and TFLOPs, for many layouts of the same model -- the kind of data that ranks
the layouts of one job. Each table row with a time becomes one run-history row; rows marked OOM are kept with
``status=oom``.

The script reads the file from a git snapshot (no network): ``--git-dir`` a bare or non-bare clone (e.g. the one
the ``fetch`` tool brings) at ``--commit`` (default: the pinned ``COMMIT``), or ``--file`` a copy of it (then
``--commit`` names the commit it came from).

Usage (CLONE: e.g. the clone the ``fetch`` tool brings)::

    PYTHONPATH=src python scripts/derive_public_bigscience.py --git-dir CLONE --out data/public_bigscience.csv

Derivations (stated once here, repeated in data/README.md):

* ``step_time_s = Sec/it`` (the table's seconds per iteration: one optimizer step of GBS sequences; "snapshot of a
  single iteration (always 2nd)", says the file). In the two "Best TFLOPs" tables, which have no Sec/it column,
  the ``elapsed time per iteration (s)`` of the log line printed above each of them (matched by order and checked
  by its TFLOPs, which must equal the table's).
* ``gpu_count = Nodes x 8`` (8 A100 80GB per node; the tables' "GPUs" where given); DP x TP x PP = GPUs is checked
  on every row. ``batch_size = GBS / GPUs``; ``micro_batch_size = MBS``; ``dp``, ``tp``, ``pp`` as stated;
  ``cp = 1``, ``ep = 1``; ``vp = 1`` (DeepSpeed's pipeline engine has no interleaved schedule).
* ``zero_stage``: the table's ZS column where it has one, else 1 (ZeRO-1: "it's because of ZeRO-1", section
  "Best TFLOPs"; the ZS table's baseline).
* ``sequence_parallel = 0``: Megatron's sequence parallelism (Korthikanti et al., "Reducing Activation
  Recomputation in Large Transformer Models", arXiv:2205.05198) was published in May 2022, after these February
  2022 trials; BLOOM's launch script passes no such flag and the repository never mentions it. Without it each
  tensor-parallel rank holds the layer inputs and the norms' activations of the whole sequence.
* ``flash_attention = 0``: attention computed its score matrix in memory, with Megatron's fused scale-mask-softmax
  kernel (the file: "NHEADS=108 breaks constraints for invoking optimized fused softmax kernel");
  FlashAttention (Dao et al., arXiv:2205.14135) was published in May 2022, after these February 2022 trials.
* ``recompute = full``: assumed, not stated in the file (``recompute_source``): BLOOM's launch script
  ``train/tr11-176B-ml/tr11-176B-ml.slurm`` passes ``--checkpoint-activations``, and the logged TFLOPs (counted
  with the recomputation factor 4, ``math/README.md``) agree with 8 x params x seq per sample (``tflops_check_ratio``).
* ``seq_len = 2048`` (``SEQ_LEN=2048`` in the file's configurations; the TFLOPs check agrees).
* ``precision``: fp16 / bf16 under the "Best TFLOPs" headings that say so; ``bf16`` from the section "Rebalancing
  layers" on ("from now on the testing is happening with BF16 optimizer ..."); ``fp16`` before it, inferred from
  that sentence ("... compared to fp16 which grad accumulates in fp16"): ``precision_source`` says which.
* ``params = Size x 1e9`` (the table's size, rounded to 1B by the publisher's formula); the shape (``n_layers``,
  ``d_model``, ``n_heads``) where the file states it for the table (``NHIDDEN=… / NLAYERS=…`` lines above it,
  an NHIDDEN or NHEADS column, ``all NHEADS=64``), else empty. ``flops_per_sample = 6 x params x seq``
  (``flops_method=analytic``; the attention score FLOPs, about seq / (6 x NHIDDEN) = 2.4% more, are not counted).
* ``peak_mem_bytes = Mem(GB) x 2**30`` (``mem_source=reported``): "max memory used by the first (last) nodes",
  read from nvidia-smi (which reports MiB; GB read as GiB), so it includes the CUDA context and cached blocks.
* ``tflops_check_ratio = 8 x params x seq x GBS / (Sec/it x GPUs) / TFLOPs``: the file's own TFLOPs estimate
  (``math/README.md``) over its logged TFLOPs; about 1.00 before the section "TFLOPs calculation improved", about
  0.97 after (the fix made the logged figure ~3% higher, as the file says).
"""

from __future__ import annotations

import argparse
import re
import subprocess
import sys
from pathlib import Path

import pandas as pd

SOURCE_REPO = "https://github.com/bigscience-workshop/bigscience"
SOURCE_PATH = "train/tr11-176B-ml/chronicles-prequel.md"
COMMIT = "9e64edec2ad1fb9263bf39ba616a84ff64b4d947"
GPUS_PER_NODE = 8
SEQ = 2048
#: tables left out whole, by the heading or text line they follow, with the reason
SKIP_TABLES = {
    "Here are some existing models around the same size with NLAYERS / NHIDDEN and their ratio:":
        "published models' shapes, not measurements",
    "200B, measuring 2nd iter:": "no seconds per iteration and no layout (TFLOPs only)",
    "NHIDDEN=14336 / NLAYERS=6 / GBS=512": "the text above says GBS=512 and NLAYERS=6, the table GBS 2048 and "
                                           "layers 6 or 10: the batch is uncertain",
}
COLUMNS = ["run_id", "status", "model", "family", "params", "flops_per_sample", "flops_method", "batch_size",
           "gpu_count", "gpu_type", "precision", "seq_len", "step_time_s", "samples_per_s", "nodes", "source",
           "protocol", "global_batch_size", "micro_batch_size", "tp", "pp", "vp", "cp", "ep", "dp", "zero_stage",
           "sequence_parallel", "recompute", "flash_attention", "gpus_per_node", "n_layers", "d_model", "n_heads", "peak_mem_bytes", "mem_source",
           "memory_gb_reported", "tflops_reported", "tflops_check_ratio", "size_reported", "date_reported",
           "section", "precision_source", "recompute_source", "note", "source_repo", "source_path",
           "source_commit"]
PROTOCOL = ("Megatron-DeepSpeed (BigScience fork) on Jean Zay, DeepSpeed pipeline + ZeRO-1; one iteration (the 2nd) "
            "timed, as logged ('elapsed time per iteration')")
RECOMPUTE_SOURCE = ("assumed: not stated in the file; BLOOM's tr11-176B-ml.slurm passes --checkpoint-activations and "
                    "the logged TFLOPs (recomputation factor 4) agree with 8 x params x seq (tflops_check_ratio)")
NOTE = {"GBS Variations": "A100 PCIe/NUMA settings improved that day (1-5% faster, the file says)",
        "Rebalancing layers": "BF16 optimizer accumulating gradients in fp32, --pp-partition-method "
                              "'type:transformer|embedding' (the file)"}


ZS_NOTE = ("the file: ZeRO stage 0 and 1 could not run on the same branch ('need to retest the above on the same "
           "branch')")


def _git(git_dir: Path, *args: str) -> str:
    return subprocess.run(["git", "--git-dir", str(git_dir), *args], capture_output=True, text=True,
                          check=True).stdout


def parse(text: str) -> list[dict]:
    """Every markdown table with its section (the last ``##`` heading), sub-section (``###``), the last text line
    before it, the shape stated in the section so far, and the log lines of its sub-section."""
    tables, section, sub, caption = [], None, None, None
    shape: dict = {}
    logs: list = []
    configs: dict = {}
    header = rows = None
    for line in text.splitlines() + [""]:
        if line.startswith("|"):
            cells = [c.strip() for c in line.strip().strip("|").split("|")]
            if header is None:
                header, rows = cells, []
            elif not set("".join(cells)) <= set("-: "):
                rows.append(cells)
            continue
        if header is not None:
            tables.append(dict(section=section, sub=sub, caption=caption, header=header, rows=rows,
                               shape=dict(shape), logs=list(logs), configs=dict(configs)))
            header = None
        s = line.strip()
        if line.startswith("## ") or line.startswith("# "):
            section, sub, shape, logs, configs = s.lstrip("# "), None, {}, [], {}
        elif line.startswith("### "):
            sub, logs, configs = s[4:], [], {}
        if not s:
            continue
        if not line.startswith("#"):
            caption = s
        m = re.fullmatch(r"(\d+B) model: (.*)", s)
        if m:  # "20B model: TP=8, PP=1, NLAYERS=8, NHIDDEN=14400, NHEADS=32, SEQ_LEN=2048, ..."
            configs[m.group(1)] = dict(re.findall(r"(\w+)=(\w+)", m.group(2)))
        m = re.search(r"elapsed time per iteration \(s\): ([\d.]+) .*global batch size: +(\d+) .*TFLOPs: ([\d.]+)",
                      s)
        if m:
            logs.append(tuple(float(x) for x in m.groups()))
        # a shape statement: "NHIDDEN=14336 / NLAYERS=72", "HIDDEN=12288; NLAYERS=106; ...", or one variable a line
        m = re.match(r"N?HIDDEN=(\d+) *[/;] *NLAYERS=(\d+)\b", s)
        if m:
            shape.update(d_model=int(m.group(1)), n_layers=int(m.group(2)))
            shape.pop("n_heads", None)  # a new shape: its heads only if stated for it, or for the whole section
            if "all_heads" in shape:
                shape["n_heads"] = shape["all_heads"]
        for key, pattern in (("n_layers", r"NLAYERS=(\d+)"), ("d_model", r"NHIDDEN=(\d+)"),
                             ("n_heads", r"(?:all )?NHEADS=(\d+)(?: \(above too\))?")):
            m = re.fullmatch(pattern, s)
            if m:
                shape[key] = int(m.group(1))
                if s.startswith("all NHEADS="):
                    shape["all_heads"] = int(m.group(1))
    return tables


def _gb(cell: str) -> float | None:
    m = re.fullmatch(r"(\d+(?:\.\d+)?)GB", cell.replace(" ", ""))
    return float(m.group(1)) if m else None


def build(text: str, commit: str) -> tuple[pd.DataFrame, pd.DataFrame]:
    out, dropped, seen = [], [], {}
    for ti, t in enumerate(parse(text)):
        if t["caption"] in SKIP_TABLES:
            dropped.append({"table": ti, "section": t["section"], "row": "(whole table)",
                            "reason": SKIP_TABLES[t["caption"]]})
            continue
        h = t["header"]
        timed = "Sec/it" in h
        if not timed and not (t["section"] == "Best TFLOPs" and "TFLOPs" in h):
            raise ValueError(f"table {ti} under {t['section']!r} ({t['caption']!r}): not a table this builder reads")
        logs = list(t["logs"])
        for _ri, cells in enumerate(t["rows"]):
            if not any(cells):
                continue
            if len(cells) != len(h):
                raise ValueError(f"table {ti}: a row of {len(cells)} cells under {h}")
            c = dict(zip(h, cells))
            label = " | ".join(cells)

            def drop(reason):
                dropped.append({"table": ti, "section": t["section"], "row": label, "reason": reason})

            size = c["Size"]
            gpus = int(c["GPUs"]) if "GPUs" in c else int(c["Nodes"]) * GPUS_PER_NODE
            dp, tp, pp, mbs = (int(c[k]) for k in ("DP", "TP", "PP", "MBS"))
            if dp * tp * pp != gpus:
                drop(f"DP {dp} x TP {tp} x PP {pp} = {dp * tp * pp} is not the {gpus} GPUs of its node count")
                continue
            shape = dict(t["shape"])
            if "NHIDDEN" in c:
                shape = {"d_model": int(c["NHIDDEN"])}  # the column is this row's width; layers not stated
            if "NHEADS" in c:
                shape["n_heads"] = int(c["NHEADS"])
            mem_cell = c["Mem"]
            oom = mem_cell.strip().upper() == "OOM"
            if timed:
                sec = c["Sec/it"].strip()
                gbs = int(c["GBS"])
                tflops = None if sec in ("", "x") else float(c["TFLOPs"])
                sec = None if sec in ("", "x") else float(sec)
            else:  # "Best TFLOPs": the time is in the log line printed above the table, in the same order
                cfg = t["configs"][size]
                sec, gbs, log_tflops = logs.pop(0)
                gbs, tflops = int(gbs), float(c["TFLOPs"])
                if abs(log_tflops - tflops) > 0.005 or int(cfg["GBS"]) != gbs:
                    raise ValueError(f"table {ti}: the log line's TFLOPs {log_tflops} / GBS {gbs} do not match "
                                     f"the row {label}")
                if (int(cfg["TP"]), int(cfg["PP"])) != (tp, pp):
                    raise ValueError(f"table {ti}: the {size} configuration says TP {cfg['TP']} PP {cfg['PP']}")
                shape = {"n_layers": int(cfg["NLAYERS"]), "d_model": int(cfg["NHIDDEN"]),
                         "n_heads": int(cfg["NHEADS"])}
                if int(cfg["SEQ_LEN"]) != SEQ:
                    raise ValueError(f"table {ti}: SEQ_LEN {cfg['SEQ_LEN']}")
            if sec is None and not oom:
                drop("no time and no OOM stated")
                continue
            params = float(size.rstrip("B")) * 1e9
            mem = _gb(mem_cell)
            if t["sub"] in ("fp16", "bf16"):
                precision, psource = t["sub"], f"stated: the sub-section '### {t['sub']}'"
            else:
                after = _section_order(text, t["section"]) >= _section_order(text, "Rebalancing layers")
                precision = "bf16" if after else "fp16"
                psource = ("stated: 'from now on the testing is happening with BF16 optimizer' (section "
                           "Rebalancing layers)" if after else "inferred: the section 'Rebalancing layers' says the "
                           "tests before it ran fp16 ('compared to fp16 which grad accumulates in fp16')")
            zs = int(c["ZS"]) if "ZS" in c else 1
            # the same measurement listed again in a later table (same size, layout, batch, time, TFLOPs and date)
            # is one row, as first listed (a later listing may state more of the shape: it must not contradict it)
            key = (size, gpus, dp, tp, pp, mbs, gbs, c.get("ZS", "1"), sec, tflops, c.get("Notes", "").split(" ")[0])
            if key in seen:
                kept = seen[key]["_shape"]
                if any(kept.get(k, v) != v for k, v in shape.items()):
                    raise ValueError(f"table {ti}: {label} repeats an earlier row with another shape")
                drop("the same measurement as a row of an earlier table (kept there)")
                continue
            check = (None if sec is None else
                     round(8 * params * SEQ * gbs / (sec * gpus) / 1e12 / tflops, 4))
            seen[key] = row = {
                "_shape": shape, "status": "oom" if oom else "ok", "family": "decoder",
                "params": params, "flops_per_sample": 6 * params * SEQ, "flops_method": "analytic",
                "batch_size": gbs / gpus, "gpu_count": gpus, "gpu_type": "A100-SXM4-80GB", "precision": precision,
                "seq_len": SEQ, "step_time_s": sec, "samples_per_s": None if sec is None else gbs / sec,
                "nodes": gpus // GPUS_PER_NODE, "source": "bigscience", "protocol": PROTOCOL,
                "global_batch_size": gbs, "micro_batch_size": mbs, "tp": tp, "pp": pp, "vp": 1, "cp": 1, "ep": 1,
                "dp": dp, "zero_stage": zs, "sequence_parallel": 0, "recompute": "full", "flash_attention": 0, "gpus_per_node": GPUS_PER_NODE,
                "peak_mem_bytes": None if mem is None else mem * 2**30, "mem_source": "" if mem is None else "reported",
                "memory_gb_reported": mem, "tflops_reported": tflops, "tflops_check_ratio": check,
                "size_reported": size, "date_reported": c.get("Notes", "").split(" ")[0],
                "section": t["section"] + (f" / {t['sub']}" if t["sub"] else ""), "precision_source": psource,
                "recompute_source": RECOMPUTE_SOURCE,
                "note": "; ".join(x for x in (c.get("Notes", "").partition(" ")[2], NOTE.get(t["section"], ""),
                                              ZS_NOTE if "ZS" in c else "") if x),
                "source_repo": SOURCE_REPO, "source_path": SOURCE_PATH, "source_commit": commit,
            }
            out.append(row)
        if logs:
            raise ValueError(f"table {ti}: {len(logs)} log lines without a table row")
    for row in out:  # the model's name and id, once every listing has added what it states about the shape
        shape = row.pop("_shape")
        row.update({k: shape.get(k) for k in ("n_layers", "d_model", "n_heads")})
        row["model"] = f"bloom-prequel-{row['size_reported'].lower()}" + "".join(
            f"-{p}{shape[k]}" for k, p in (("d_model", "h"), ("n_layers", "l"), ("n_heads", "a")) if k in shape)
        zs = "" if row["zero_stage"] == 1 else f"-zs{row['zero_stage']}"
        row["run_id"] = (f"bigscience/tr11-prequel/{row['date_reported']}/{row['model']}/gpus{row['gpu_count']}-dp"
                         f"{row['dp']}-tp{row['tp']}-pp{row['pp']}-mbs{row['micro_batch_size']}-gbs"
                         f"{row['global_batch_size']}{zs}/{row['precision']}/"
                         + ("oom" if row["step_time_s"] is None else f"{row['step_time_s']:g}s"))
    df = pd.DataFrame(out, columns=COLUMNS)
    for col in ("gpu_count", "seq_len", "nodes", "global_batch_size", "micro_batch_size", "tp", "pp", "vp", "cp",
                "ep", "dp", "zero_stage", "sequence_parallel", "gpus_per_node", "n_layers", "d_model", "n_heads"):
        df[col] = df[col].astype("Int64")
    dup = df["run_id"].duplicated(keep=False)
    if dup.any():
        raise ValueError(f"duplicate run ids: {df.loc[dup, 'run_id'].tolist()}")
    return df, pd.DataFrame(dropped, columns=["table", "section", "row", "reason"])


def _section_order(text: str, section: str) -> int:
    i = text.find(f"\n## {section}\n")
    if i < 0:
        raise ValueError(f"no section {section!r}")
    return i


def write(df: pd.DataFrame, path: Path) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    df.to_csv(path, index=False, lineterminator="\n", float_format="%.10g")


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(prog=Path(__file__).name, description=__doc__.split("\n\n")[0])
    src = ap.add_mutually_exclusive_group(required=True)
    src.add_argument("--git-dir", type=Path, help="clone of bigscience-workshop/bigscience (bare is fine)")
    src.add_argument("--file", type=Path, help=f"a copy of {SOURCE_PATH}")
    ap.add_argument("--commit", default=COMMIT, help="commit to read (with --file: the commit it came from)")
    ap.add_argument("--out", type=Path, default=Path("data/public_bigscience.csv"))
    args = ap.parse_args(argv)
    try:
        if args.git_dir:
            commit = _git(args.git_dir, "rev-parse", args.commit).strip()
            text = _git(args.git_dir, "show", f"{commit}:{SOURCE_PATH}")
        else:
            if not re.fullmatch(r"[0-9a-f]{40}", args.commit):
                ap.error("--file needs --commit <40-hex commit the copy came from>")
            commit, text = args.commit, args.file.read_text(encoding="utf-8")
        df, dropped = build(text, commit)
    except subprocess.CalledProcessError as e:
        first = ((e.stderr or "").strip().splitlines() or ["failed"])[0]
        ap.exit(2, f"{ap.prog}: git {' '.join(e.cmd[3:])}: {first}\n")
    except (OSError, ValueError) as e:
        ap.exit(2, f"{ap.prog}: {e}\n")
    from perfmodel.io import load_runs

    tmp = args.out.with_name(args.out.stem + ".tmp.csv")
    write(df, tmp)
    try:
        runs = load_runs(str(tmp))
    except Exception:
        tmp.unlink()
        raise
    tmp.replace(args.out)
    print(f"wrote {len(df)} rows to {args.out} (load_runs: {len(runs)} ok rows) from {SOURCE_REPO}@{commit}")
    print(df.groupby(["precision", "status"]).size().to_string())
    ok = df[df["status"] == "ok"]
    ratio = ok["tflops_check_ratio"]
    print(f"tflops_check_ratio: min {ratio.min()}, median {ratio.median()}, max {ratio.max()}")
    job = ["model", "seq_len", "global_batch_size", "gpu_count", "gpu_type", "precision"]
    n = ok.groupby(job, dropna=False)[["tp", "pp", "dp", "zero_stage", "micro_batch_size"]].apply(
        lambda d: len(d.drop_duplicates()))
    print(f"{len(n)} jobs (model, seq, global batch, GPUs, device, precision): {(n >= 3).sum()} measured in 3 or "
          f"more layouts, {(n == 2).sum()} in 2; largest {n.max()}")
    print(f"left out: {len(dropped)}")
    for _, d in dropped.iterrows():
        print(f"  table {d['table']} ({d['section']}): {d['row']}: {d['reason']}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
