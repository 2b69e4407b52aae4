"""A throwaway PostgreSQL server for the store's tests and benchmarks (never for real histories).

:func:`start` returns the URL of a server and a function that stops it, trying in turn:

1. ``$PERFMODEL_TEST_POSTGRES``: the URL of a server someone runs (nothing is started or stopped);
2. the ``pgserver`` package (in the ``test`` extra: PostgreSQL's binaries in a wheel; it runs as root too);
3. a system PostgreSQL (``initdb`` and ``pg_ctl`` on ``PATH`` or under ``/usr/lib/postgresql/*/bin``), when not
   running as root (the server refuses root).

The data directory is a new temporary folder with a short name (a Unix socket path must stay under 108 bytes),
removed by the stop function. :class:`Unavailable` says why none could start.
"""

from __future__ import annotations

import glob
import os
import shutil
import subprocess
import tempfile
from collections.abc import Callable


class Unavailable(RuntimeError):
    """No PostgreSQL server could be started here (the message says what was tried)."""


def _psycopg_ok() -> str:
    try:
        import psycopg  # noqa: F401
    except ImportError:
        return 'psycopg is not installed (pip install "perfmodel[postgres]")'
    return ""


def _system_bin(name: str) -> str | None:
    found = shutil.which(name)
    if found:
        return found
    for path in sorted(glob.glob(f"/usr/lib/postgresql/*/bin/{name}"), reverse=True):
        return path
    return None


def start() -> tuple[str, Callable[[], None]]:
    """Start (or find) a PostgreSQL server; return ``(url, stop)``.

    Raises
    ------
    Unavailable
        When no server could be had, naming why for each way tried.
    """
    why = _psycopg_ok()
    if why:
        raise Unavailable(why)
    env = os.environ.get("PERFMODEL_TEST_POSTGRES", "").strip()
    if env:
        return env, lambda: None
    reasons = []
    folder = tempfile.mkdtemp(prefix="pmpg")
    try:
        import pgserver

        server = pgserver.get_server(folder, cleanup_mode="stop")

        def stop_pgserver() -> None:
            try:
                server.cleanup()
            finally:
                shutil.rmtree(folder, ignore_errors=True)

        return server.get_uri(), stop_pgserver
    except ImportError:
        reasons.append("the pgserver package is not installed")
    except Exception as exc:  # noqa: BLE001 - any failure to start means: try the next way
        reasons.append(f"pgserver failed: {type(exc).__name__}: {str(exc)[:200]}")
    initdb, pg_ctl = _system_bin("initdb"), _system_bin("pg_ctl")
    if initdb is None or pg_ctl is None:
        reasons.append("no system PostgreSQL (initdb, pg_ctl)")
    elif hasattr(os, "geteuid") and os.geteuid() == 0:
        reasons.append("a system PostgreSQL refuses to run as root")
    else:
        data = os.path.join(folder, "data")
        try:
            subprocess.run([initdb, "-D", data, "-A", "trust", "-U", "postgres"], check=True,
                           capture_output=True, timeout=120)
            subprocess.run([pg_ctl, "-D", data, "-o", f"-k {folder} -c listen_addresses=''", "-l",
                            os.path.join(folder, "log"), "-w", "start"], check=True, capture_output=True, timeout=120)

            def stop_system() -> None:
                try:
                    subprocess.run([pg_ctl, "-D", data, "-m", "fast", "-w", "stop"], capture_output=True, timeout=120)
                finally:
                    shutil.rmtree(folder, ignore_errors=True)

            return f"postgresql://postgres@/postgres?host={folder}", stop_system
        except (subprocess.SubprocessError, OSError) as exc:
            reasons.append(f"the system PostgreSQL did not start: {str(exc)[:200]}")
    shutil.rmtree(folder, ignore_errors=True)
    raise Unavailable("; ".join(reasons))


def fresh_database(url: str, name: str) -> str:
    """A new, empty database ``name`` on the server at ``url`` (dropped first if it exists); its URL."""
    import psycopg

    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute(f'DROP DATABASE IF EXISTS "{name}"')
        conn.execute(f'CREATE DATABASE "{name}"')
    base, sep, query = url.partition("?")
    head, _, _ = base.rpartition("/")
    return f"{head}/{name}{sep}{query}"
