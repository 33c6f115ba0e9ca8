"""A read-only file tree held in memory, as a ``deepagents`` backend.

Composed with a sandbox's backend under a path prefix (:func:`with_read_only_routes`), it serves
files the agent reads but never receives into its sandbox and cannot change: writes, edits,
deletes and uploads are refused with ``permission_denied``. Only the async methods are
implemented (the synchronous ones of the base class raise :class:`NotImplementedError`).
"""

from __future__ import annotations

import fnmatch
from collections.abc import Mapping

from deepagents.backends import CompositeBackend
from deepagents.backends.protocol import (
    BackendProtocol,
    DeleteResult,
    EditResult,
    FileDownloadResponse,
    FileInfo,
    FileUploadResponse,
    GlobResult,
    GrepMatch,
    GrepResult,
    LsResult,
    ReadResult,
    WriteResult,
)
from deepagents.backends.utils import create_file_data, slice_read_response

READ_ONLY = "permission_denied"


def _refusal(path: str) -> str:
    return f"Error: {path} is read-only; it cannot be written, edited or deleted."


class ReadOnlyFiles(BackendProtocol):
    """``files`` maps absolute paths (``/name/SKILL.md``) to their text."""

    def __init__(self, files: Mapping[str, str]) -> None:
        self._files = {("/" + path.lstrip("/")): text for path, text in files.items()}

    @property
    def paths(self) -> list[str]:
        return sorted(self._files)

    async def als(self, path: str) -> LsResult:
        directory = path if path.endswith("/") else path + "/"
        entries: dict[str, FileInfo] = {}
        for name, text in self._files.items():
            if not name.startswith(directory):
                continue
            rest = name[len(directory) :]
            if "/" in rest:
                sub = directory + rest.split("/", 1)[0] + "/"
                entries[sub] = {"path": sub, "is_dir": True}
            else:
                entries[name] = {"path": name, "is_dir": False, "size": len(text.encode())}
        if not entries and path.rstrip("/") in self._files:
            return LsResult(error=f"{path} is a file, not a directory")
        return LsResult(entries=sorted(entries.values(), key=lambda entry: entry["path"]))

    async def aread(self, file_path: str, offset: int = 0, limit: int = 2000) -> ReadResult:
        text = self._files.get(file_path)
        if text is None:
            return ReadResult(error=f"File '{file_path}' not found")
        return slice_read_response(create_file_data(text), offset, limit)

    async def agrep(
        self, pattern: str, path: str | None = None, glob: str | None = None, *, max_count: int | None = None
    ) -> GrepResult:
        root = (path or "/").rstrip("/") + "/"
        matches: list[GrepMatch] = []
        for name in self.paths:
            if not name.startswith(root) or (glob and not fnmatch.fnmatch(name.rsplit("/", 1)[-1], glob)):
                continue
            for number, line in enumerate(self._files[name].splitlines(), 1):
                if pattern in line:
                    matches.append({"path": name, "line": number, "text": line})
                    if max_count is not None and len(matches) >= max_count:
                        return GrepResult(matches=matches, truncated=True)
        return GrepResult(matches=matches)

    async def aglob(self, pattern: str, path: str | None = None) -> GlobResult:
        root = (path or "/").rstrip("/") + "/"
        found: list[FileInfo] = []
        for name in self.paths:
            if not name.startswith(root):
                continue
            relative = name[len(root) :]
            target = relative if "/" in pattern.lstrip("/") else relative.rsplit("/", 1)[-1]
            if fnmatch.fnmatch(target, pattern.lstrip("/")):
                found.append({"path": name, "is_dir": False, "size": len(self._files[name].encode())})
        return GlobResult(matches=found)

    async def adownload_files(self, paths: list[str]) -> list[FileDownloadResponse]:
        return [
            FileDownloadResponse(path=path, content=self._files[path].encode())
            if path in self._files
            else FileDownloadResponse(path=path, error="file_not_found")
            for path in paths
        ]

    async def awrite(self, file_path: str, content: str) -> WriteResult:
        return WriteResult(error=_refusal(file_path))

    async def aedit(self, file_path: str, old_string: str, new_string: str, replace_all: bool = False) -> EditResult:
        return EditResult(error=_refusal(file_path))

    async def adelete(self, file_path: str) -> DeleteResult:
        return DeleteResult(error=_refusal(file_path))

    async def aupload_files(self, files: list[tuple[str, bytes]]) -> list[FileUploadResponse]:
        return [FileUploadResponse(path=path, error=READ_ONLY) for path, _ in files]


def with_read_only_routes(backend: BackendProtocol, routes: Mapping[str, BackendProtocol]) -> CompositeBackend:
    """``backend`` (the sandbox) with ``routes`` (``/skills/`` → files) served read-only beside it.
    Commands still run in the sandbox, which never holds the routed files."""
    return CompositeBackend(default=backend, routes=dict(routes))
