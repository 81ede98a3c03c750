"""Vector tables and persisted snapshots: what opening a namespace needs, kept beside the store.

A snapshot's vectors live in one float32 matrix per kind (``VectorTable``), not one array per record. The
embedded store saves each namespace's snapshot to ``<data dir>/snapshots/<namespace hash>/snapshot.lms``
(records and vectors, written atomically: temporary file, fsync, rename), with the namespace, the generation
it reflects and the token of the commit that made that generation visible in its header, and a checksum
of every section. Opening a namespace loads the file and reads only what was committed after its
generation. The records in Chroma stay the source of truth: a file of another namespace, of a generation
that is not on the namespace's committed chain, or damaged in any way is ignored and rebuilt from them.
"""

from __future__ import annotations

import gc
import json
import os
import struct
import threading
import zlib
from collections.abc import Iterable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from typing import Any, cast

import numpy as np
from pydantic import BaseModel, TypeAdapter

__all__ = [
    "SNAPSHOT_DIR",
    "SnapshotFile",
    "SnapshotFileError",
    "VectorTable",
    "gc_paused",
    "read_snapshot_file",
    "snapshot_path",
    "write_snapshot_file",
]

SNAPSHOT_DIR = "snapshots"
_MAGIC = b"LMSNAP01"
_FORMAT = 1
_LENGTH = struct.Struct("<Q")


_GC_GUARD = threading.Lock()
_gc_pauses = [0, False]  # open pauses, and whether the collector was on when the first one began


@contextmanager
def gc_paused() -> Iterator[None]:
    """Python's cyclic garbage collector off while a namespace's records are built (nestable, thread-safe).

    Reading a namespace makes hundreds of thousands of objects that all live on; the collections their
    allocations trigger scan the growing heap again and again and free nothing (two thirds of a snapshot
    file's read time). The collector is back on, as it was, when the last pause ends."""
    with _GC_GUARD:
        if _gc_pauses[0] == 0:
            _gc_pauses[1] = gc.isenabled()
            gc.disable()
        _gc_pauses[0] += 1
    try:
        yield
    finally:
        with _GC_GUARD:
            _gc_pauses[0] -= 1
            if _gc_pauses[0] == 0 and _gc_pauses[1]:
                gc.enable()


class VectorTable(Mapping[str, np.ndarray]):
    """Record id -> vector, all rows in one read-only float32 matrix (a row is a view, not a copy)."""

    __slots__ = ("ids", "matrix", "_row")

    def __init__(self, ids: Sequence[str], matrix: np.ndarray | None = None) -> None:
        self.ids = list(ids)
        if matrix is None:
            matrix = np.zeros((0, 1), dtype=np.float32)
        matrix = np.ascontiguousarray(matrix, dtype=np.float32)
        if matrix.ndim != 2 or matrix.shape[0] != len(self.ids):
            raise ValueError(f"a vector table needs one row per id: {len(self.ids)} ids, matrix {matrix.shape}")
        matrix.setflags(write=False)
        self.matrix = matrix
        self._row = {rid: i for i, rid in enumerate(self.ids)}
        if len(self._row) != len(self.ids):
            raise ValueError("duplicate ids in a vector table")

    @classmethod
    def of(cls, vectors: Mapping[str, Any]) -> VectorTable:
        """A table of any mapping of id -> vector (a table is returned as it is)."""
        if isinstance(vectors, VectorTable):
            return vectors
        ids = list(vectors)
        if not ids:
            return cls([])
        return cls(ids, np.vstack([np.asarray(vectors[i], dtype=np.float32) for i in ids]))

    def __getitem__(self, rid: str) -> np.ndarray:
        return cast(np.ndarray, self.matrix[self._row[rid]])

    def __contains__(self, rid: object) -> bool:
        return rid in self._row

    def __iter__(self) -> Iterator[str]:
        return iter(self.ids)

    def __len__(self) -> int:
        return len(self.ids)

    def __repr__(self) -> str:
        return f"VectorTable({len(self.ids)} x {self.matrix.shape[1]})"

    def row(self, rid: str) -> int:
        return self._row[rid]

    def rows(self, ids: Iterable[str]) -> np.ndarray:
        """Row numbers of ``ids`` (each must be in the table)."""
        return np.fromiter((self._row[i] for i in ids), dtype=np.int64)

    def rows_of(self, ids: Sequence[str]) -> np.ndarray:
        """The matrix rows of ``ids`` in that order (the matrix itself when it is already in that order)."""
        if ids == self.ids:
            return self.matrix
        return self.matrix[self.rows(ids)] if ids else np.zeros((0, self.matrix.shape[1]), dtype=np.float32)

    def changed(self, removed: Iterable[str], added: VectorTable) -> VectorTable:
        """A new table without ``removed``, with ``added`` (which replaces rows of the same id)."""
        drop = set(removed) | set(added.ids)
        keep = [i for i, rid in enumerate(self.ids) if rid not in drop]
        if not added.ids and len(keep) == len(self.ids):
            return self
        kept_ids = [self.ids[i] for i in keep]
        parts = [self.matrix[keep]] if keep else []
        if added.ids:
            parts.append(added.matrix)
        if not parts:
            return VectorTable([])
        if len(parts) == 2 and parts[0].shape[1] != parts[1].shape[1]:
            raise ValueError(f"vectors of width {parts[1].shape[1]} added to a table of width {parts[0].shape[1]}")
        return VectorTable([*kept_ids, *added.ids], np.vstack(parts))

    def ordered(self, ids: Sequence[str]) -> VectorTable:
        """The rows of ``ids`` that are in the table, in that order."""
        present = [i for i in ids if i in self._row]
        if present == self.ids:
            return self
        return VectorTable(present, self.rows_of(present))


class SnapshotFileError(ValueError):
    """A snapshot file that cannot be used (damaged, of another namespace or another history)."""


@dataclass
class SnapshotFile:
    """What a snapshot file holds: its header and, per kind, the records and the vector table."""

    namespace: str
    generation: int
    link: str
    manifest: dict[str, Any]
    records: dict[str, list[Any]]
    vectors: dict[str, VectorTable]


def snapshot_path(directory: Path, namespace_key: str) -> Path:
    """Where the namespace whose hash is ``namespace_key`` keeps its snapshot, inside ``directory``."""
    return directory / SNAPSHOT_DIR / namespace_key / "snapshot.lms"


def _raw(matrix: np.ndarray) -> np.ndarray:
    """The matrix's bytes, without a copy (a flat uint8 view)."""
    return matrix.reshape(-1).view(np.uint8)


@cache
def _adapter(model: type[BaseModel]) -> TypeAdapter[list[Any]]:
    return TypeAdapter(list[model])  # type: ignore[valid-type]  # the item model is known only at run time


def write_snapshot_file(
    path: Path,
    *,
    namespace: str,
    generation: int,
    link: str,
    manifest: dict[str, Any],
    records: Mapping[str, tuple[type[BaseModel], Sequence[BaseModel]]],
    vectors: Mapping[str, VectorTable],
) -> None:
    """Write the file atomically: a reader sees the old file or the whole new one, never a part."""
    sections: list[tuple[dict[str, Any], bytes | np.ndarray]] = []
    for kind, (model, items) in records.items():
        body: bytes | np.ndarray = _adapter(model).dump_json(list(items))
        sections.append(({"name": kind, "type": "records", "count": len(items)}, body))
    for kind, table in vectors.items():
        ids = json.dumps(table.ids).encode()
        sections.append(({"name": f"{kind}:ids", "type": "ids"}, ids))
        matrix = np.ascontiguousarray(table.matrix, dtype="<f4")
        sections.append(({"name": kind, "type": "matrix", "shape": list(matrix.shape)}, _raw(matrix)))
    offset = 0
    for meta, body in sections:
        meta.update(offset=offset, length=len(body), crc=zlib.crc32(cast(bytes, body)))
        offset += len(body)
    header = json.dumps(
        {
            "format": _FORMAT,
            "namespace": namespace,
            "generation": generation,
            "link": link,
            "manifest": manifest,
            "sections": [meta for meta, _ in sections],
        }
    ).encode()
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f"{path.name}.{os.getpid()}.tmp")
    try:
        with tmp.open("wb") as handle:
            handle.write(_MAGIC + _LENGTH.pack(len(header)) + header + _LENGTH.pack(zlib.crc32(header)))
            for _, body in sections:
                handle.write(cast(bytes, body))
            handle.flush()
            os.fsync(handle.fileno())
        os.replace(tmp, path)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise
    try:  # the rename itself survives a crash once the directory is synced
        fd = os.open(path.parent, os.O_RDONLY | os.O_DIRECTORY)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)
    except OSError:
        pass


def read_snapshot_file(path: Path, namespace: str, models: Mapping[str, type[BaseModel]]) -> SnapshotFile:
    """Read and check a snapshot file; ``SnapshotFileError`` when it cannot be trusted.

    The file is a cache: whatever it holds (a header crafted to pass its checksum included) must never break a
    read of the namespace. Every number of the header is bounded by the file's own size before anything is
    allocated, and any other failure to make sense of it is a ``SnapshotFileError`` too."""
    try:
        with path.open("rb") as handle:
            return _read(handle, path, namespace, models)
    except SnapshotFileError:
        raise
    except RecursionError:
        raise SnapshotFileError(f"{path}: unreadable (nested too deeply)") from None
    except Exception as exc:  # see the docstring: a cache file never breaks a read
        raise SnapshotFileError(
            f"{path}: unreadable ({str(exc).splitlines()[0][:200] if str(exc) else type(exc).__name__})"
        ) from exc


_SECTION_TYPES = ("records", "ids", "matrix")
_MAX_GENERATION = 2**63 - 1  # Chroma keeps generations in int64 metadata


def _whole(value: object, low: int = 0, high: int = 2**63 - 1) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and low <= value <= high


def _checked_header(path: Path, header: object, body_size: int) -> dict[str, Any]:
    """The header, every field of the type and within the bounds the reader relies on."""
    if not isinstance(header, dict):
        raise SnapshotFileError(f"{path}: the header is a JSON {type(header).__name__}, not an object")
    if not _whole(header.get("generation"), 1, _MAX_GENERATION):
        raise SnapshotFileError(f"{path}: generation {str(header.get('generation'))[:40]} is not a generation number")
    if not isinstance(header.get("link"), str) or not isinstance(header.get("manifest"), dict):
        raise SnapshotFileError(f"{path}: the header has no commit link or manifest")
    sections = header.get("sections")
    if not isinstance(sections, list):
        raise SnapshotFileError(f"{path}: the header lists no sections")
    for index, meta in enumerate(sections):
        problem = _section_problem(meta, body_size)
        if problem is not None:
            raise SnapshotFileError(f"{path}: section {index}: {problem}")
    return header


def _section_problem(meta: object, body_size: int) -> str | None:
    if not isinstance(meta, dict) or not isinstance(meta.get("name"), str) or meta.get("type") not in _SECTION_TYPES:
        return "not a section (name, type)"
    offset, length = meta.get("offset"), meta.get("length")
    if not _whole(offset) or not _whole(length) or cast(int, offset) + cast(int, length) > body_size:
        return f"offset {str(offset)[:24]} and length {str(length)[:24]} are outside the file's {body_size} bytes"
    if not _whole(meta.get("crc"), 0, 2**32 - 1):
        return "no checksum"
    if meta["type"] == "matrix":
        shape = meta.get("shape")
        if not (
            isinstance(shape, list)
            and len(shape) == 2
            and all(_whole(n) for n in shape)
            and shape[0] * shape[1] * 4 == length
        ):
            return f"matrix shape {str(shape)[:60]} does not fit its {length} bytes"
    return None


def _read(handle: Any, path: Path, namespace: str, models: Mapping[str, type[BaseModel]]) -> SnapshotFile:
    file_size = os.fstat(handle.fileno()).st_size
    start = handle.read(len(_MAGIC) + _LENGTH.size)
    if len(start) < len(_MAGIC) + _LENGTH.size or not start.startswith(_MAGIC):
        raise SnapshotFileError(f"{path}: not a snapshot file of this version")
    (size,) = _LENGTH.unpack(start[len(_MAGIC) :])
    if size > min(1 << 30, file_size):
        raise SnapshotFileError(f"{path}: header of {size} bytes")
    header_bytes = handle.read(size)
    check = handle.read(_LENGTH.size)
    if len(header_bytes) != size or len(check) != _LENGTH.size or _LENGTH.unpack(check)[0] != zlib.crc32(header_bytes):
        raise SnapshotFileError(f"{path}: damaged header")
    base = handle.tell()
    header = _checked_header(path, json.loads(header_bytes), file_size - base)
    if header.get("format") != _FORMAT:
        raise SnapshotFileError(f"{path}: format {str(header.get('format'))[:40]!r}")
    if header.get("namespace") != namespace:
        raise SnapshotFileError(f"{path}: a snapshot of another namespace")  # never shown: names no tenant
    records: dict[str, list[Any]] = {}
    vectors: dict[str, VectorTable] = {}
    ids: dict[str, list[str]] = {}
    for meta in header["sections"]:
        handle.seek(base + meta["offset"])
        length = meta["length"]
        if meta["type"] == "matrix":
            matrix = np.empty(tuple(meta["shape"]), dtype="<f4")
            body: bytes | np.ndarray = _raw(matrix)
            got = handle.readinto(body) if length else 0
        else:
            body = handle.read(length)
            got = len(body)
        if got != length or zlib.crc32(cast(bytes, body)) != meta["crc"]:
            raise SnapshotFileError(f"{path}: section {meta['name'][:60]} is damaged")
        name = meta["name"]
        if meta["type"] == "records":
            if name not in models:
                raise SnapshotFileError(f"{path}: unknown section {name[:60]!r}")
            records[name] = _adapter(models[name]).validate_json(cast(bytes, body))
        elif meta["type"] == "ids":
            listed = json.loads(cast(bytes, body))
            if not isinstance(listed, list) or not all(isinstance(i, str) for i in listed):
                raise SnapshotFileError(f"{path}: section {name[:60]} is not a list of ids")
            ids[name.removesuffix(":ids")] = listed
        else:
            if name not in ids:
                raise SnapshotFileError(f"{path}: matrix {name[:60]} comes before its ids")
            vectors[name] = VectorTable(ids[name], matrix.astype(np.float32, copy=False))
    if set(records) != set(models):
        raise SnapshotFileError(f"{path}: sections missing")
    widths = {table.matrix.shape[1] for table in vectors.values() if len(table)}
    if len(widths) > 1 or not all(np.isfinite(table.matrix).all() for table in vectors.values()):
        raise SnapshotFileError(f"{path}: vectors of widths {sorted(widths)} or not finite numbers")
    return SnapshotFile(
        namespace=namespace,
        generation=header["generation"],
        link=header["link"],
        manifest=header["manifest"],
        records=records,
        vectors=vectors,
    )
