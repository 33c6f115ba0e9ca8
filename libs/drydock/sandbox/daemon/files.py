"""Upload and download many files at once, with one result per file (never one error for all)."""

from __future__ import annotations

import errno
import os
import stat
from collections.abc import Sequence
from dataclasses import dataclass

from drydock.sandbox.daemon.confinement import Confinement, PathRefused
from drydock.sandbox.daemon.protocol import FILE_NOT_FOUND, INVALID_PATH, IS_DIRECTORY, PERMISSION_DENIED

# O_NONBLOCK: opening a FIFO would otherwise wait for its other end, forever, in one of the
# daemon's few executor threads. What is opened is checked to be a regular file before use
# (and truncated only then).
_WRITE_FLAGS = os.O_WRONLY | os.O_CREAT | os.O_NONBLOCK | os.O_NOFOLLOW | os.O_CLOEXEC
_READ_FLAGS = os.O_RDONLY | os.O_NONBLOCK | os.O_NOFOLLOW | os.O_CLOEXEC
_KINDS = {
    stat.S_IFIFO: "a FIFO",
    stat.S_IFSOCK: "a socket",
    stat.S_IFCHR: "a character device",
    stat.S_IFBLK: "a block device",
}


@dataclass(frozen=True)
class Downloaded:
    path: str
    content: bytes | None
    error: str | None


def _not_regular(mode: int) -> str:
    return f"not a regular file: {_KINDS.get(stat.S_IFMT(mode), 'an unknown kind')}"


def _os_error(error: OSError) -> str:
    if error.errno == errno.ENXIO:
        # A FIFO without a reader or a socket, opened for writing.
        return "not a regular file: a FIFO or a socket"
    if isinstance(error, FileNotFoundError):
        return FILE_NOT_FOUND
    if isinstance(error, PermissionError):
        return PERMISSION_DENIED
    if isinstance(error, IsADirectoryError):
        return IS_DIRECTORY
    if isinstance(error, NotADirectoryError | FileExistsError):
        # A parent of the path is a file: no such path can exist.
        return INVALID_PATH
    return f"{type(error).__name__}: {error.strerror or error}"


def _write(confinement: Confinement, raw: str, content: bytes) -> str | None:
    try:
        target = confinement.resolve(raw)
    except PathRefused:
        return INVALID_PATH
    try:
        if target.is_dir():
            return IS_DIRECTORY
        target.parent.mkdir(parents=True, exist_ok=True)
        fd = os.open(target, _WRITE_FLAGS, 0o644)
        with os.fdopen(fd, "wb") as handle:
            info = os.fstat(fd)
            if not stat.S_ISREG(info.st_mode):
                return _not_regular(info.st_mode)
            os.ftruncate(fd, 0)
            handle.write(content)
    except OSError as error:
        return _os_error(error)
    return None


def upload(confinement: Confinement, files: Sequence[tuple[str, bytes]]) -> list[str | None]:
    """Write each file (creating parent directories); the error of each, ``None`` on success."""
    return [_write(confinement, path, content) for path, content in files]


def _read(confinement: Confinement, raw: str, max_file_bytes: int) -> Downloaded:
    try:
        target = confinement.resolve(raw)
    except PathRefused:
        return Downloaded(raw, None, INVALID_PATH)
    try:
        fd = os.open(target, _READ_FLAGS)
        with os.fdopen(fd, "rb") as handle:
            info = os.fstat(handle.fileno())
            if stat.S_ISDIR(info.st_mode):
                return Downloaded(raw, None, IS_DIRECTORY)
            if not stat.S_ISREG(info.st_mode):
                return Downloaded(raw, None, _not_regular(info.st_mode))
            if info.st_size > max_file_bytes:
                return Downloaded(raw, None, f"file too large: {info.st_size} bytes, the limit is {max_file_bytes}")
            content = handle.read(max_file_bytes + 1)
    except OSError as error:
        return Downloaded(raw, None, _os_error(error))
    if len(content) > max_file_bytes:
        return Downloaded(raw, None, f"file too large: over {max_file_bytes} bytes")
    return Downloaded(raw, content, None)


def download(confinement: Confinement, paths: Sequence[str], *, max_file_bytes: int) -> list[Downloaded]:
    """Read each file; a directory, a missing or unreadable file is reported per file."""
    return [_read(confinement, path, max_file_bytes) for path in paths]
