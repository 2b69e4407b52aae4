"""``perfmodel report``: write a one-page HTML report of a history's fits and cross-validation (needs
matplotlib: perfmodel[plot])."""

from __future__ import annotations

import sys

from ._flags import count, csv_list


def add_report_parser(sub) -> None:
    rp = sub.add_parser("report", help="write a one-page HTML report (needs matplotlib: perfmodel[plot])")
    rp.add_argument("runs", nargs="?", help="run history (default: the bundled runs)")
    rp.add_argument("-o", "--output", default="report.html")
    rp.add_argument("--methods", type=csv_list(str), default=None,
                    help="methods to fit and cross-validate; the plots show the first (default: "
                         "perfmodel.report.REPORT_METHODS: auto,physics,loglinear)")
    rp.add_argument("--quick", action="store_true", help="cross-validate on leave-one-batch-size-out only")
    rp.add_argument("--max-minutes", type=float, default=4.5,
                    help="time budget: a cross-validation split still running when it is spent is stopped, and "
                         "the report says which were left out (default 4.5; 0: every split)")
    rp.add_argument("--n-jobs", type=count, default=1)


def cmd_report(args) -> int:
    from ..report import REPORT_METHODS, make_report

    runs = args.runs
    if runs is None:
        from ..datasets import bundled_runs_path

        runs = str(bundled_runs_path())
    if args.max_minutes < 0:
        raise ValueError(f"--max-minutes must be 0 (no limit) or positive. Got {args.max_minutes:g}.")
    path = make_report(runs, args.output, methods=tuple(args.methods or REPORT_METHODS), quick=args.quick,
                       n_jobs=args.n_jobs, max_seconds=args.max_minutes * 60 or None,
                       progress=lambda text: print(f"report: {text}", file=sys.stderr, flush=True))
    print(f"wrote {path}")
    return 0
