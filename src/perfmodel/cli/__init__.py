"""The ``perfmodel`` command line.

Exit status: 0 answered; 2 bad input (one line ``perfmodel: error: ...``, no traceback); 1 a well-formed question
that nothing could answer (a device, precision or model the history has no runs on, too few runs for the
interval asked, no price; ``recommend`` with no configuration left). Ctrl-C exits with 130. ``predict``, ``fit``, ``summary`` and ``import`` never import torch; ``measure`` does.

This module parses the arguments, runs the command and turns its errors into the exit status. Each command
lives beside its parser (``add_<command>_parser``) in a module of its own: ``_predict`` (fit, predict, summary,
evaluate), ``_measure``, ``_recommend``, ``_plan_llm``, ``_report``, ``_import``, ``_history`` (history, cache,
hardware, features); ``_flags`` holds what they share.
"""

from __future__ import annotations

import argparse
import logging
import os
import sys
import warnings
from pathlib import Path

from .._version import __version__
from ._flags import OneLineParser
from ._history import (
    add_cache_parser,
    add_features_parser,
    add_hardware_parser,
    add_history_parser,
    cmd_cache,
    cmd_features,
    cmd_hardware,
    cmd_history,
)
from ._import import add_import_parser, cmd_import
from ._measure import add_measure_parser, cmd_measure
from ._plan_llm import add_plan_llm_parser, cmd_plan_llm
from ._predict import (
    add_evaluate_parser,
    add_fit_parser,
    add_predict_parser,
    add_summary_parser,
    cmd_evaluate,
    cmd_fit,
    cmd_predict,
    cmd_summary,
)
from ._recommend import add_recommend_parser, cmd_recommend
from ._report import add_report_parser, cmd_report

__all__ = ["main"]

#: Each command's parser, in the order ``perfmodel --help`` lists them.
_SUBPARSERS = (add_fit_parser, add_predict_parser, add_summary_parser, add_measure_parser, add_evaluate_parser,
               add_recommend_parser, add_plan_llm_parser, add_report_parser, add_cache_parser, add_hardware_parser,
               add_features_parser, add_import_parser, add_history_parser)


def _parser() -> argparse.ArgumentParser:
    p = OneLineParser(prog="perfmodel", description="Predict the wall-clock time of training jobs.")
    p.add_argument("--version", action="version", version=f"perfmodel {__version__}")
    p.add_argument("-v", "--verbose", action="store_true", help="log diagnostics to stderr")
    p.add_argument("--progress", action=argparse.BooleanOptionalAction, default=None,
                   help="progress bars on stderr for fits longer than ~2 s (default: when stderr is a "
                        "terminal; PERFMODEL_PROGRESS=0 turns them off)")
    sub = p.add_subparsers(dest="command", required=True)
    for add_parser in _SUBPARSERS:
        add_parser(sub)
    return p


_COMMANDS = {"fit": cmd_fit, "predict": cmd_predict, "summary": cmd_summary, "measure": cmd_measure,
             "hardware": cmd_hardware, "evaluate": cmd_evaluate,
             "recommend": cmd_recommend, "plan-llm": cmd_plan_llm, "report": cmd_report, "import": cmd_import,
             "features": cmd_features, "cache": cmd_cache, "history": cmd_history}


def _one_line_warnings(message, category, filename, lineno, file=None, line=None):
    print(f"perfmodel: warning: {message}", file=sys.stderr)


def _check_output_folder(args) -> None:
    """``-o`` into a folder that does not exist is refused (perfmodel never creates folders it was not asked to)."""
    output = getattr(args, "output", None)
    if not output or "://" in output or output == "default":  # a store URL, or the default store
        return
    parent = Path(output).expanduser().parent
    if not parent.is_dir():
        what = "is not a folder" if parent.exists() else "does not exist"
        raise FileNotFoundError(f"the folder of -o/--output {output!r} {what}: {str(parent)!r}; create it first.")


def _os_message(exc: OSError) -> str:
    """An OSError as a sentence: ``'x.csv': No such file or directory``, not ``[Errno 2] ...``."""
    text = " ".join(str(exc).split())
    if exc.strerror and (text.startswith("[Errno") or not text):
        target = f"{str(exc.filename)!r}: " if exc.filename is not None else ""
        return f"{target}{exc.strerror}"
    return text or type(exc).__name__


def _quiet_broken_pipe() -> int:
    """The reader of stdout went away (``perfmodel summary ... | head``): stop quietly, as a piped tool does."""
    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())  # so that the interpreter's last flush does not fail again
    except (OSError, ValueError):
        pass
    return 141  # 128 + SIGPIPE


def main(argv=None) -> int:
    """The ``perfmodel`` command: parse the arguments, run the subcommand, turn errors into an exit status.

    An error is printed as one ``perfmodel: error: ...`` line on stderr, not a traceback. ``argparse`` itself
    exits (``SystemExit``, status 2) on bad arguments and after ``--help``.

    Parameters
    ----------
    argv : list of str, optional
        The arguments after the program name; default ``sys.argv[1:]``.

    Returns
    -------
    int
        The exit status: the subcommand's own (0 on success); 1 for a well-formed question the history or price
        table cannot answer; 2 for bad input (a perfmodel error, ValueError, TypeError, OSError or ImportError);
        130 on Ctrl-C; 141 when the reader of stdout went away.
    """
    args = _parser().parse_args(argv)
    logging.basicConfig(level=logging.INFO if args.verbose else logging.WARNING, format="perfmodel: %(message)s")
    warnings.showwarning = _one_line_warnings
    if args.progress is not None:  # read by perfmodel.fitting when a long fit starts
        os.environ["PERFMODEL_PROGRESS"] = "1" if args.progress else "0"
    elif sys.stderr.isatty():
        os.environ.setdefault("PERFMODEL_PROGRESS", "1")
    from ..exceptions import (
        DoesNotFitError,
        PerfModelError,
        PredictionError,
        UnknownPriceError,
        UnsupportedQueryError,
    )

    try:
        _check_output_folder(args)
        status = _COMMANDS[args.command](args)
        sys.stdout.flush()  # a closed pipe shows here, inside the handler below
        return status
    except BrokenPipeError:
        return _quiet_broken_pipe()
    except KeyboardInterrupt:
        print("perfmodel: interrupted (runs finished so far are saved)", file=sys.stderr)
        return 130
    except (UnsupportedQueryError, UnknownPriceError, PredictionError, DoesNotFitError) as exc:
        # a well-formed question the history (or price table) cannot answer, e.g. too few runs for the interval,
        # or a planned job that does not fit in memory
        print(f"perfmodel: error: {' '.join(str(exc).split())}", file=sys.stderr)
        return 1
    except (PerfModelError, ValueError, TypeError, OSError, ImportError) as exc:
        msg = _os_message(exc) if isinstance(exc, OSError) else " ".join(str(exc).split()) or type(exc).__name__
        print(f"perfmodel: error: {msg}", file=sys.stderr)
        return 2
