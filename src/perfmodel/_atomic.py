"""Atomic file replacement: the one way perfmodel writes a file that someone else may read.

:func:`atomic_write` writes to a temporary file with a unique name in the target's own directory
(``.<name>.<pid>-<random>.tmp``), flushes and ``fsync``\\ s it, renames it over the target with ``os.replace`` (atomic
on POSIX and Windows within one file system) and ``fsync``\\ s the directory, so that the rename itself survives a
power cut. A reader therefore sees either the old file or the new one, never a mixture; two writers to one path
never share a temporary file, and the last rename wins.

A process killed between creating its temporary file and renaming it leaves that file behind. Each write first
removes such leftovers of the same target: files whose writer process (the pid in the name) is gone, or that are
older than a day; temporary files of live writers are left alone.

A target that is a symbolic link (or lies under one) is resolved first (:func:`real_target`): the file the link
points to is replaced, in its own directory, and the link is left as it is. Replacing the link itself would
fork a shared history into a private copy that nobody else sees. Locks (:func:`lock_path`) are taken on the real
file too, so a writer through a link and a writer through the real path serialise.
"""

from __future__ import annotations

import contextlib
import os
import re
import secrets
import time
from collections.abc import Callable, Iterator
from pathlib import Path

__all__ = ["atomic_write", "atomic_write_bytes", "clean_stale_temps", "check_writable", "real_target", "lock_path"]

_STALE_AGE_S = 24 * 3600.0


def _temp_pattern(name: str) -> re.Pattern:
    # ours: .<name>.<pid>-<hex>.tmp ; older perfmodel versions: .<name>.tmp and .<name>.<mkstemp>.tmp
    return re.compile(r"^\." + re.escape(name) + r"\.(?:(?P<pid>\d+)-[0-9a-f]+\.tmp|tmp|[A-Za-z0-9_]{8}\.tmp)$")


def signal_reaches(kill: Callable[[int, int], None], ident: int) -> bool:
    """Whether signal 0 sent with ``kill`` (``os.kill`` / ``os.killpg``) to ``ident`` finds a live process."""
    try:
        kill(ident, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # someone else's live process
        return True
    except OSError:
        return False
    return True


def pid_alive(pid: int) -> bool:
    return pid > 0 and signal_reaches(os.kill, pid)


def clean_stale_temps(path: str | os.PathLike) -> list[Path]:
    """Remove temporary files left by interrupted atomic writes of ``path``; return what was removed.

    A file is removed when the process that created it is no longer running, or when it is over a day old.
    Temporary files of writes still in progress are kept.
    """
    path = Path(path)
    pattern = _temp_pattern(path.name)
    removed: list[Path] = []
    try:
        entries = list(os.scandir(path.parent))
    except OSError:
        return removed
    now = time.time()
    for entry in entries:
        m = pattern.match(entry.name)
        if m is None:
            continue
        try:
            age = now - entry.stat(follow_symlinks=False).st_mtime
        except OSError:
            continue
        pid = m.group("pid")
        stale = age > _STALE_AGE_S or (pid is not None and not pid_alive(int(pid))) or (pid is None and age > 60)
        if stale:
            with contextlib.suppress(OSError):
                os.unlink(entry.path)
                removed.append(Path(entry.path))
    return removed


def real_target(path: str | os.PathLike) -> Path:
    """The file a write to ``path`` must replace: ``path`` with every symbolic link resolved.

    A dangling link resolves to the file it names (which the write then creates).
    """
    return Path(os.path.realpath(os.fspath(path)))


def lock_path(path: str | os.PathLike) -> str:
    """The lock file guarding writes to ``path``: ``<real file>.lock``, beside the file links resolve to."""
    return str(real_target(path)) + ".lock"


def _fsync_dir(directory: Path) -> None:
    if os.name != "posix":
        return
    try:
        fd = os.open(directory, os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)


def _new_temp(path: Path):
    for _ in range(100):
        tmp = path.with_name(f".{path.name}.{os.getpid()}-{secrets.token_hex(6)}.tmp")
        try:
            fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_BINARY", 0), 0o600)
        except FileExistsError:
            continue
        return fd, tmp
    raise FileExistsError(f"could not create a temporary file next to {str(path)!r}")


def _target_mode(path: Path) -> int:
    try:
        return path.stat().st_mode & 0o777
    except OSError:
        umask = os.umask(0)
        os.umask(umask)
        return 0o666 & ~umask


@contextlib.contextmanager
def atomic_write(path: str | os.PathLike, *, clean: bool = True) -> Iterator:
    """Context manager yielding a binary file handle whose content replaces ``path`` atomically on success.

    If the block raises, the target is untouched and the temporary file is removed. The new file keeps the
    permission bits of the file it replaces (or the umask default for a new file). The parent directory is
    created if needed. A symbolic link is followed: the file it points to is replaced and the link kept.

    Examples
    --------
    >>> import tempfile, pathlib
    >>> target = pathlib.Path(tempfile.mkdtemp()) / "x.txt"
    >>> with atomic_write(target) as fh:
    ...     _ = fh.write(b"hello")
    >>> target.read_bytes()
    b'hello'
    """
    path = real_target(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    if clean:
        clean_stale_temps(path)
    fd, tmp = _new_temp(path)
    try:
        with os.fdopen(fd, "wb") as fh:
            yield fh
            fh.flush()
            os.fsync(fh.fileno())
        os.chmod(tmp, _target_mode(path))
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise
    _fsync_dir(path.parent)


def atomic_write_bytes(path: str | os.PathLike, data: bytes | Callable[[object], None]) -> Path:
    """Replace ``path`` atomically with ``data`` (bytes, or a function that writes to the binary handle)."""
    with atomic_write(path) as fh:
        if callable(data):
            data(fh)
        else:
            fh.write(data)
    return Path(path)


def check_writable(path: str | os.PathLike) -> None:
    """Raise ``PermissionError``/``OSError`` now if ``path`` could not be written atomically later.

    Creates the parent directory if needed and creates and removes a temporary file beside ``path`` (the same
    operations an atomic write performs), so that a long job learns of an unwritable output before its first
    result rather than after.
    """
    path = real_target(path)
    if path.is_dir():
        raise IsADirectoryError(f"Output {str(path)!r} is a directory, not a file.")
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = _new_temp(path)
    except OSError as exc:
        raise type(exc)(exc.errno, f"Output {str(path)!r} cannot be written: {exc.strerror or exc}") from None
    os.close(fd)
    os.unlink(tmp)
    if path.exists() and not os.access(path, os.R_OK):
        raise PermissionError(f"Output {str(path)!r} exists but cannot be read (it is appended to).")
