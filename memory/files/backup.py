"""Backups of a namespace: export to a portable JSONL file, and restore it into an empty namespace.

The file is one header line, then one record a line. An import checks the whole file before it writes
anything, then writes it in one commit, so a namespace is restored completely or not at all.

Format ``logicmap-namespace`` version 1, UTF-8, every line a JSON object ending in ``\\n``:

- line 1, the header: ``format``, ``version``, ``logicmap`` (the writer's version), ``namespace``,
  ``generation``, ``embedder`` (the identity of the embedder of the vectors), ``dimension`` (vector
  length, null when there is none), ``manifest`` (the namespace's manifest: sessions, topic steps...),
  ``counts`` (records per kind), ``exported_at``, ``body_sha256`` (SHA-256 of every byte after the
  header line) and ``header_sha256`` (SHA-256 of the header's canonical JSON without this field);
- then ``{"kind": K, "record": {...}}`` per record, kinds (``RecordKind.name``) in the order of
  ``memory.records.kinds.RECORD_KINDS``: turn, event, relation, topic, fact, cue, tag, r2_fact (Memory-R2's
  managed facts; a file without them counts none), tombstone (what forgets left, ``memory.records.tombstones``; counted
  only when there are some); a kind with a ``vector_field`` carries ``"vector"``
  (turns, events, facts, cues, Memory-R2 facts): its embedding as little-endian float32, base64, so a
  restored namespace answers queries exactly as the original (a topic's centroid is part of its record).

An import leaves out the turns the tombstones of the namespace the file was exported from match, in this store
(a backup taken before a forget still holds what was forgotten), and what derives only from them, as ``forget``
would (events also citing kept turns are rebuilt from those); ``allow_forgotten=True`` restores the file as it is.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import json
import os
import re
import shutil
import tempfile
import time
from collections import deque
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import IO, Any

import numpy as np
from langchain_core.embeddings import Embeddings
from pydantic import BaseModel, ValidationError

from logicmap.memory.records.forgetting import forget_change, plan_forget, rebuilt_event
from logicmap.memory.records.kinds import BY_NAME, RECORD_KINDS
from logicmap.memory.records.records import Event, Topic, validate_namespace
from logicmap.memory.records.tombstones import Forgotten, Tombstone, said_summary
from logicmap.memory.runtime.contention import commit_with_backoff
from logicmap.memory.store import (
    MAX_GENERATION,
    ChangeSet,
    EmbedderMismatchError,
    Manifest,
    NamespaceSnapshot,
    StoragePort,
    embedder_identity,
)

__all__ = [
    "FORMAT",
    "FORMAT_VERSION",
    "MAX_RESTORED_GENERATION",
    "Backup",
    "BackupError",
    "BackupFormatError",
    "ExportReport",
    "ImportReport",
    "NamespaceNotEmptyError",
    "Progress",
    "export_namespace",
    "import_namespace",
    "read_backup",
]

FORMAT = "logicmap-namespace"
FORMAT_VERSION = 1
MAX_ID = 512  # relation ids join two event ids and a label
# The store's limits a backup is held to, so a restored namespace stays readable and writable:
MAX_RESTORED_GENERATION = 2**30  # leaves about a billion commits before the store's last one (MAX_GENERATION)
MAX_INTEGER = 2**53  # every other whole number: JSON's exact range, with room for the store's +1 arithmetic
MAX_DIMENSION = 65_536
MAX_NORM = 1e18  # a vector whose squared norm overflows float32 cannot be compared (cosine similarity)
Progress = Callable[[str, int, int], None]
"""``progress(phase, done, total)``: phase ``export``, ``read`` or ``commit``."""

_KINDS = tuple(BY_NAME)  # a line's kind, in file order
_OPTIONAL_KINDS = {kind.name for kind in RECORD_KINDS if kind.optional_in_backup}  # older files do not count them
_HEADER_FIELDS = (
    "format",
    "version",
    "logicmap",
    "namespace",
    "generation",
    "embedder",
    "dimension",
    "manifest",
    "counts",
    "exported_at",
    "body_sha256",
    "header_sha256",
)
_CONTROL = re.compile(r"[\x00-\x1f\x7f-\x9f\ud800-\udfff]")


class BackupError(ValueError):
    """A backup that cannot be imported as asked (the message is one line)."""


class BackupFormatError(BackupError):
    """A damaged or foreign file: the message names the file, the line and the field."""

    def __init__(self, path: str, line: int, field: str, problem: str) -> None:
        self.path, self.line, self.field, self.problem = path, line, field, problem
        where = f"line {line}" if line else "file"
        super().__init__(f"{path}: {where}: {field}: {problem}")


class NamespaceNotEmptyError(BackupError):
    """An import into a namespace that already holds memory (a backup never merges or overwrites)."""


@dataclass
class ExportReport:
    """What ``export_namespace`` wrote."""

    namespace: str
    generation: int
    path: str
    counts: dict[str, int]
    bytes: int
    body_sha256: str
    wall_time_s: float


@dataclass
class ImportReport:
    """What ``import_namespace`` restored."""

    namespace: str
    source_namespace: str
    generation: int
    path: str
    counts: dict[str, int]
    wall_time_s: float
    forgotten: int = 0  # turns of the file left out: a tombstone of the namespace it was exported from matched


@dataclass
class Backup:
    """A checked backup file: its header and manifest, and every record with its vector, in file order."""

    header: dict[str, Any]
    manifest: Manifest
    records: dict[str, list[BaseModel]] = field(default_factory=lambda: {k: [] for k in _KINDS})
    vectors: dict[str, list[np.ndarray]] = field(default_factory=lambda: {k: [] for k in _KINDS})
    lines: dict[str, dict[str, int]] = field(default_factory=lambda: {k: {} for k in _KINDS})


# -- export -----------------------------------------------------------------------------------------
def _canonical(value: Any) -> bytes:
    return json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False, allow_nan=False).encode()


def _encode_vector(vector: np.ndarray) -> str:
    return base64.b64encode(np.asarray(vector, dtype="<f4").tobytes()).decode("ascii")


def _body_lines(snap: NamespaceSnapshot) -> Iterator[tuple[str, bytes]]:
    for kind in RECORD_KINDS:
        vectors = getattr(snap, kind.vector_field) if kind.vector_field else {}
        for rid, record in getattr(snap, kind.field).items():
            line: dict[str, Any] = {"kind": kind.name, "record": record.model_dump(mode="json")}
            if kind.vector_field:
                line["vector"] = _encode_vector(vectors[rid])
            yield kind.name, _canonical(line) + b"\n"


def _dimension(snap: NamespaceSnapshot) -> int | None:
    for kind in RECORD_KINDS:
        for vector in (getattr(snap, kind.vector_field) if kind.vector_field else {}).values():
            return int(len(vector))
    for topic in snap.topics.values():
        return len(topic.centroid)
    return None


def _version() -> str:
    try:
        from importlib.metadata import version

        return version("logicmap")
    except Exception:  # a source checkout without installed metadata
        return "unknown"


def export_namespace(
    store: StoragePort, namespace: str, destination: str | Path | IO[bytes], *, progress: Progress | None = None
) -> ExportReport:
    """Write a namespace's committed memory (one consistent snapshot) to a backup file.

    ``destination`` is a path (written to a temporary file beside it, then renamed: a crash leaves no
    half-written backup) or a binary stream. Raises ``UnknownNamespaceError`` for a namespace without memory.
    """
    started = time.perf_counter()
    store.require_namespace(namespace)
    snap = store.snapshot(namespace)
    counts = {kind.name: len(getattr(snap, kind.field)) for kind in RECORD_KINDS}
    if not counts["tombstone"]:
        counts.pop("tombstone")  # a namespace never forgotten exports as it did before tombstones existed
    total = sum(counts.values())
    digest = hashlib.sha256()
    with tempfile.TemporaryFile() as body:
        for done, (_, line) in enumerate(_body_lines(snap), start=1):
            digest.update(line)
            body.write(line)
            if progress is not None:
                progress("export", done, total)
        manifest = snap.manifest.model_dump(mode="json")
        manifest["void"] = []  # generations lost by this store's writers mean nothing elsewhere
        manifest.pop("purge_requested", None)  # this store's own purge bookkeeping (``memory.store.purge``)
        if not manifest.get("forgets"):
            manifest.pop("forgets", None)  # a namespace never forgotten exports as it did before forgetting existed
        header: dict[str, Any] = {
            "format": FORMAT,
            "version": FORMAT_VERSION,
            "logicmap": _version(),
            "namespace": namespace,
            "generation": snap.generation,
            "embedder": snap.manifest.embedder or store.embedder,
            "dimension": _dimension(snap),
            "manifest": manifest,
            "counts": counts,
            "exported_at": datetime.now(UTC).isoformat(),
            "body_sha256": digest.hexdigest(),
        }
        header["header_sha256"] = hashlib.sha256(_canonical(header)).hexdigest()
        # Written in this order for people reading it; the checksum covers its canonical (sorted) form.
        head = json.dumps(header, separators=(",", ":"), ensure_ascii=False).encode() + b"\n"
        size = len(head) + body.tell()
        body.seek(0)
        if isinstance(destination, (str, Path)):
            path = Path(destination)
            _write_atomically(path, head, body)
            where = str(path)
        else:
            destination.write(head)
            shutil.copyfileobj(body, destination)
            where = getattr(destination, "name", "<stream>")
    return ExportReport(
        namespace=namespace,
        generation=snap.generation,
        path=str(where),
        counts=counts,
        bytes=size,
        body_sha256=header["body_sha256"],
        wall_time_s=time.perf_counter() - started,
    )


def _write_atomically(path: Path, head: bytes, body: IO[bytes]) -> None:
    if path.exists() and not path.is_file():  # the rename would put the backup in place of a directory or device
        raise BackupError(f"{path}: exists and is not a regular file; nothing was written there")
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    try:
        with tmp.open("wb") as out:
            out.write(head)
            shutil.copyfileobj(body, out)
            out.flush()
            os.fsync(out.fileno())
        os.replace(tmp, path)
    except OSError as exc:
        tmp.unlink(missing_ok=True)
        raise BackupError(f"{path}: cannot be written ({exc.strerror or exc}); nothing was written there") from None
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise


# -- reading and checking ---------------------------------------------------------------------------
class _Reader:
    """Where the check is in the file, for errors that name file, line and field."""

    def __init__(self, path: str, size: int = 0) -> None:
        self.path = path
        self.size = size
        self.line = 0

    def error(self, field: str, problem: str, line: int | None = None) -> BackupFormatError:
        return BackupFormatError(self.path, self.line if line is None else line, field, problem)


def _identifier_problem(value: object) -> str | None:
    if not isinstance(value, str):
        return f"not a string ({type(value).__name__})"
    if not value.strip():
        return "empty"
    if len(value) > MAX_ID:
        return f"longer than {MAX_ID} characters ({len(value)})"
    if _CONTROL.search(value):
        return "contains a control character"
    if value != value.strip():
        return "has leading or trailing whitespace"
    return None


def _parse_line(reader: _Reader, raw: bytes) -> dict[str, Any]:
    if not raw.endswith(b"\n"):
        raise reader.error("json", "the file ends inside this line (truncated)")
    try:
        text = raw[:-1].decode("utf-8")
    except UnicodeDecodeError as exc:
        raise reader.error("json", f"not UTF-8 text (byte {exc.start})") from None
    try:
        value = json.loads(text, parse_constant=_reject_constant)
    except (json.JSONDecodeError, ValueError) as exc:
        raise reader.error("json", f"not JSON ({str(exc)[:120]})") from None
    except RecursionError:
        raise reader.error("json", "nested too deeply") from None
    if not isinstance(value, dict):
        raise reader.error("json", f"a JSON {type(value).__name__}, not an object")
    if "\\u" in text:  # an escape can spell a lone surrogate, which no store can encode
        try:
            json.dumps(value, ensure_ascii=False).encode("utf-8")
        except UnicodeEncodeError:
            raise reader.error("json", "holds a lone surrogate (\\ud800-\\udfff): not encodable text") from None
    return value


def _reject_constant(name: str) -> Any:
    raise ValueError(f"{name} is not a number JSON allows")


def _number_problem(value: Any) -> tuple[str, str] | None:
    """The first number (path, problem) a store could not keep as it is: a float that is not finite (JSON's
    ``1e400`` reads as infinity) or a whole number outside +-2^53 (None: every number is fine)."""
    stack: deque[tuple[str, Any]] = deque([("", value)])  # breadth first: a top-level field is named first
    while stack:
        where, item = stack.popleft()
        if isinstance(item, dict):
            stack.extend((f"{where}.{str(k)[:40]}" if where else str(k)[:40], v) for k, v in item.items())
        elif isinstance(item, list):
            stack.extend((f"{where}.{i}" if where else str(i), v) for i, v in enumerate(item))
        elif isinstance(item, bool):
            continue
        elif isinstance(item, float) and not np.isfinite(item):
            return where, f"{item} is not a finite number"
        elif isinstance(item, int) and abs(item) > MAX_INTEGER:
            return where, f"{str(item)[:40]} is outside the whole numbers a store keeps (+-2^53)"
    return None


def _read_header(reader: _Reader, raw: bytes) -> dict[str, Any]:
    if not raw:
        raise reader.error("header", f"the file is empty, not a {FORMAT} export")
    header = _parse_line(reader, raw)
    if header.get("format") != FORMAT:
        raise reader.error("format", f"{header.get('format')!r} is not {FORMAT!r}: not a LogicMap namespace export")
    version = header.get("version")
    if not isinstance(version, int) or isinstance(version, bool):
        raise reader.error("version", f"{version!r} is not a format version number")
    if version != FORMAT_VERSION:
        newer = " (written by a newer LogicMap: upgrade to import it)" if version > FORMAT_VERSION else ""
        raise reader.error(
            "version", f"format version {version} is not supported (this LogicMap reads {FORMAT_VERSION}){newer}"
        )
    found = _number_problem(header)  # before the checksum: its canonical form has no infinity
    if found is not None:
        raise reader.error(*found)
    unknown = sorted(set(header) - set(_HEADER_FIELDS))
    if unknown:
        raise reader.error(unknown[0], "unknown header field")
    missing = [name for name in _HEADER_FIELDS if name not in header]
    if missing:
        raise reader.error(missing[0], "missing from the header")
    sealed = {k: v for k, v in header.items() if k != "header_sha256"}
    if hashlib.sha256(_canonical(sealed)).hexdigest() != header["header_sha256"]:
        raise reader.error("header_sha256", "the header does not match its checksum: the file is damaged or was edited")
    _check_header_types(reader, header)
    return header


def _check_header_types(reader: _Reader, header: dict[str, Any]) -> None:
    try:
        validate_namespace(header["namespace"])
    except ValueError as exc:
        raise reader.error("namespace", str(exc)) from None
    for name in ("generation", "dimension"):
        value = header[name]
        if value is None and name == "dimension":
            continue
        if not isinstance(value, int) or isinstance(value, bool) or value < 1:
            raise reader.error(name, f"{str(value)[:40]} is not a positive integer")
    if header["generation"] > MAX_RESTORED_GENERATION:
        raise reader.error(
            "generation",
            f"{str(header['generation'])[:40]} is past {MAX_RESTORED_GENERATION}: a "
            f"namespace restored there would run out of generations (the store's last is "
            f"{MAX_GENERATION})",
        )
    if header["dimension"] is not None and header["dimension"] > MAX_DIMENSION:
        raise reader.error("dimension", f"{str(header['dimension'])[:40]} is more than {MAX_DIMENSION} values a vector")
    if not isinstance(header["embedder"], str) or not header["embedder"]:
        raise reader.error("embedder", f"{header['embedder']!r} is not an embedder identity")
    counts = header["counts"]
    if not isinstance(counts, dict) or not set(_KINDS) - _OPTIONAL_KINDS <= set(counts) <= set(_KINDS):
        raise reader.error("counts", f"must count each of {', '.join(_KINDS)}")
    for kind, count in counts.items():
        if not isinstance(count, int) or isinstance(count, bool) or count < 0:
            raise reader.error(f"counts.{kind}", f"{str(count)[:40]} is not a count")
        if reader.size and count > reader.size:
            raise reader.error(
                f"counts.{kind}", f"{str(count)[:40]} records cannot fit in a file of {reader.size} bytes"
            )
    if not isinstance(header["body_sha256"], str):
        raise reader.error("body_sha256", "not a checksum")


def _read_manifest(reader: _Reader, header: dict[str, Any]) -> Manifest:
    body = header["manifest"]
    if not isinstance(body, dict):
        raise reader.error("manifest", "not an object")
    try:
        manifest = Manifest.model_validate(body)
    except ValidationError as exc:
        raise reader.error(f"manifest.{_error_field(exc)}", _error_text(exc)) from None
    if manifest.namespace != header["namespace"]:
        raise reader.error("manifest.namespace", f"{manifest.namespace!r} is not the header's {header['namespace']!r}")
    if manifest.generation != header["generation"]:
        raise reader.error("manifest.generation", f"{manifest.generation} is not the header's {header['generation']}")
    if manifest.topic_steps < 0:
        raise reader.error("manifest.topic_steps", f"{manifest.topic_steps} is not a count")
    outside = [n for n in manifest.void if not 1 <= n <= manifest.generation]
    if outside:
        raise reader.error("manifest.void", f"generation {outside[0]} is outside 1..{manifest.generation}")
    for sid, session in manifest.sessions.items():
        problem = _identifier_problem(sid)
        if problem is None and session.session_id != sid:
            problem = f"holds session {session.session_id!r}"
        if problem is None and not 1 <= session.generation <= manifest.generation:
            problem = f"generation {session.generation} is outside 1..{manifest.generation}"
        if problem is None and min(session.events, session.relations, *(f.calls for f in session.fallbacks)) < 0:
            problem = "a negative count"
        if problem is not None:
            raise reader.error(f"manifest.sessions.{sid[:40]}", problem)
    return manifest


def _error_field(exc: ValidationError) -> str:
    first = exc.errors()[0]
    return ".".join(str(p) for p in first.get("loc", ())) or "value"


def _error_text(exc: ValidationError) -> str:
    return str(exc.errors()[0].get("msg", "invalid"))[:160]


def _read_record(reader: _Reader, line: dict[str, Any], backup: Backup) -> None:
    kind = line.get("kind")
    if kind not in _KINDS:
        raise reader.error("kind", f"{str(kind)[:40]!r} is not a record kind ({', '.join(_KINDS)})")
    model, vector_attr = BY_NAME[kind].model, BY_NAME[kind].vector_field
    allowed = {"kind", "record", "vector"} if vector_attr else {"kind", "record"}
    unknown = sorted(set(line) - allowed)
    if unknown:
        raise reader.error(unknown[0], f"not a field of a {kind} line")
    body = line.get("record")
    if not isinstance(body, dict):
        raise reader.error("record", f"a {kind} line needs a record object")
    extra = sorted(set(body) - set(model.model_fields))
    if extra:
        raise reader.error(f"record.{extra[0][:40]}", f"not a field of a {kind}")
    found = _number_problem(body)
    if found is not None:
        raise reader.error(f"record.{found[0]}", found[1])
    try:
        record = model.model_validate(body)
    except ValidationError as exc:
        raise reader.error(f"record.{_error_field(exc)}", _error_text(exc)) from None
    _check_identity(reader, kind, record, backup)
    if vector_attr:
        backup.vectors[kind].append(_read_vector(reader, line.get("vector"), backup.header["dimension"]))
    elif isinstance(record, Topic):
        _check_values(reader, "record.centroid", record.centroid, backup.header["dimension"])
    backup.records[kind].append(record)


def _check_identity(reader: _Reader, kind: str, record: Any, backup: Backup) -> None:
    id_field = BY_NAME[kind].id_field
    rid = getattr(record, id_field)
    problem = _identifier_problem(rid)
    if problem is not None:
        raise reader.error(f"record.{id_field}", problem)
    if record.namespace != backup.header["namespace"]:
        raise reader.error(
            "record.namespace", f"{record.namespace!r} is not the header's {backup.header['namespace']!r}"
        )
    first = backup.lines[kind].setdefault(rid, reader.line)
    if first != reader.line:
        raise reader.error(f"record.{id_field}", f"{kind} {rid!r} repeats line {first}")
    session = getattr(record, "session_id", None)
    if BY_NAME[kind].session_bound and session not in backup.manifest.sessions:
        raise reader.error("record.session_id", f"session {str(session)[:40]!r} is not among the manifest's sessions")


def _read_vector(reader: _Reader, value: object, dimension: int | None) -> np.ndarray:
    if not isinstance(value, str):
        raise reader.error("vector", "missing (base64 of little-endian float32)")
    try:
        raw = base64.b64decode(value, validate=True)
    except (binascii.Error, ValueError):
        raise reader.error("vector", "not base64") from None
    if len(raw) % 4:
        raise reader.error("vector", f"{len(raw)} bytes is not a whole number of float32")
    vector = np.frombuffer(raw, dtype="<f4").astype(np.float32)
    _check_values(reader, "vector", vector, dimension)
    return vector


def _check_values(reader: _Reader, name: str, values: Any, dimension: int | None) -> None:
    if dimension is None or len(values) != dimension:
        raise reader.error(name, f"{len(values)} values, the header's dimension is {dimension}")
    numbers = np.asarray(values, dtype=np.float64)
    if not np.isfinite(numbers).all():
        raise reader.error(name, "holds a value that is not a finite number")
    with np.errstate(over="ignore"):
        norm = float(np.linalg.norm(numbers))
    if norm > MAX_NORM:
        raise reader.error(name, f"its length {norm:.3g} is too large to compare (at most {MAX_NORM:g})")


def _check_references(reader: _Reader, backup: Backup) -> None:
    """Every record cites records the file holds (the restored namespace must be consistent)."""
    have = {kind: backup.lines[kind] for kind in _KINDS}

    def cited(kind: str, rid: str, attr: str, target: str, ids: list[str]) -> None:
        for ref in ids:
            if ref not in have[target]:
                raise reader.error(
                    f"record.{attr}", f"{target} {str(ref)[:60]!r} is not in the file", line=backup.lines[kind][rid]
                )

    for kind in RECORD_KINDS:
        for record in backup.records[kind.name]:
            for ref, ids in kind.references(record):
                if ref.checked_in_backup:
                    cited(kind.name, kind.record_id(record), ref.field, ref.target, ids)


def read_backup(path: str | Path, *, progress: Progress | None = None) -> Backup:
    """Read and check a whole backup file (nothing is written). Raises ``BackupFormatError``."""
    name = str(path)
    try:
        handle = open(path, "rb")  # closed below; an unreadable path is a one-line error
        reader = _Reader(name, os.fstat(handle.fileno()).st_size)
    except OSError as exc:
        raise BackupError(f"{name}: cannot be read ({exc.strerror or exc})") from None
    with handle:
        reader.line = 1
        header = _read_header(reader, handle.readline())
        backup = Backup(header=header, manifest=_read_manifest(reader, header))
        digest = hashlib.sha256()
        total = sum(header["counts"].values())
        for raw in handle:
            reader.line += 1
            digest.update(raw)
            _read_record(reader, _parse_line(reader, raw), backup)
            if progress is not None:
                progress("read", reader.line - 1, total)
    for kind, expected in header["counts"].items():
        if len(backup.records[kind]) != expected:
            raise reader.error(
                f"counts.{kind}",
                f"the header counts {expected} {kind} records, the file holds "
                f"{len(backup.records[kind])} (lines lost or added)",
                line=1,
            )
    _check_references(reader, backup)
    if digest.hexdigest() != header["body_sha256"]:
        raise reader.error(
            "body_sha256", "the records do not match the header's checksum: the file is damaged or was edited", line=1
        )
    return backup


# -- import -----------------------------------------------------------------------------------------
def _change_set(backup: Backup, namespace: str) -> ChangeSet:
    def moved(kind: str) -> list[Any]:
        return [r.model_copy(update={"namespace": namespace}) for r in backup.records[kind]]

    def vectors(kind: str) -> list[list[float]]:
        return [v.tolist() for v in backup.vectors[kind]]

    fields: dict[str, Any] = {}
    for kind in RECORD_KINDS:
        fields[kind.field] = moved(kind.name)
        if kind.vector_field is not None:
            fields[kind.vector_field] = vectors(kind.name)
    return ChangeSet(namespace=namespace, base_generation=0, embedder=backup.header["embedder"], **fields)


def _check_dimension(store: StoragePort, embeddings: Embeddings | None, dimension: int | None, name: str) -> None:
    """The file's vectors are as wide as the store's embedder makes them (else every later search breaks)."""
    if dimension is None:
        return
    if embeddings is None:
        if store.embedder != embedder_identity(store.settings):
            return  # a store given another embedder's identity by hand: its settings cannot make that embedder
        from logicmap.memory.indexes.embeddings import make_embeddings

        embeddings = make_embeddings(store.settings)
    try:
        width = len(embeddings.embed_query("the width of this embedder's vectors"))
    except Exception as exc:  # any failure of the embedder is one line here
        raise BackupError(
            f"{name}: the store's embedder {store.embedder!r} could not be asked for the width of "
            f"its vectors ({str(exc).splitlines()[0][:160] if str(exc) else type(exc).__name__}); "
            "nothing was restored"
        ) from None
    if width != dimension:
        raise BackupFormatError(
            name,
            1,
            "dimension",
            f"the file's vectors have {dimension} values but this store's "
            f"embedder {store.embedder!r} makes {width}; nothing was restored",
        )


def _not_empty(namespace: str, generation: int, path: str) -> NamespaceNotEmptyError:
    return NamespaceNotEmptyError(
        f"{path}: namespace {namespace!r} already holds memory (generation {generation}); an import never merges "
        "into or overwrites a namespace: import into a new one with -n NAME"
    )


def import_namespace(
    store: StoragePort,
    path: str | Path,
    namespace: str | None = None,
    *,
    embeddings: Embeddings | None = None,
    progress: Progress | None = None,
    allow_forgotten: bool = False,
) -> ImportReport:
    """Restore a backup file into an empty namespace (default: the one it was exported from).

    The whole file is checked first (format, checksums, every record and every number in it against the
    store's limits, references between records, the embedder and its vector width); then everything is
    written in one commit. ``embeddings`` is the store's embedder (default: the one its settings make), asked
    once for the width of its vectors. Raises ``BackupFormatError`` for a bad file, ``NamespaceNotEmptyError``
    when the namespace holds memory, ``EmbedderMismatchError`` when the file's vectors come from another
    embedder than the store's. A crashed import leaves the namespace empty: re-run it.

    Turns the tombstones of the namespace the file was exported from (in this store) match are left out, with
    what derives only from them (``ImportReport.forgotten``; see the module); ``allow_forgotten`` restores them.
    """
    started = time.perf_counter()
    name = str(path)
    target = validate_namespace(namespace) if namespace is not None else None
    if target is not None and store.has_namespace(target):
        raise _not_empty(target, store.manifest(target).generation, name)
    backup = read_backup(path, progress=progress)
    header = backup.header
    target = target or header["namespace"]
    if header["embedder"] != store.embedder:
        raise EmbedderMismatchError(
            f"{name}: line 1: embedder: the file's vectors come from {header['embedder']!r} but this store embeds "
            f"with {store.embedder!r}; mixing them would corrupt search: set LOGICMAP_EMBEDDING_PROVIDER (or "
            "--embeddings) to the file's embedder"
        )
    _check_dimension(store, embeddings, header["dimension"], name)
    current = store.manifest(target).generation
    if current:
        raise _not_empty(target, current, name)
    manifest = backup.manifest.model_copy(update={"namespace": target})
    change = _change_set(backup, target)
    counts, forgotten = dict(header["counts"]), 0
    if not allow_forgotten:
        change, manifest, forgotten = _without_forgotten(store, header["namespace"], change, manifest, embeddings)
        if forgotten:
            counts = {
                kind.name: len(getattr(change, kind.field))
                for kind in RECORD_KINDS
                if kind.name in counts or getattr(change, kind.field)
            }
    if progress is not None:
        progress("commit", 0, 1)

    def restore() -> Manifest:
        now = store.manifest(target).generation
        if now:  # another writer got there first: an import only fills an empty namespace
            raise _not_empty(target, now, name)
        return store.restore(change, manifest)

    # Lost races (a server-mode writer holding the namespace) wait and retry like every commit.
    commit_with_backoff(target, restore, bound_s=store.settings.run_deadline_s)
    if progress is not None:
        progress("commit", 1, 1)
    return ImportReport(
        namespace=target,
        source_namespace=header["namespace"],
        generation=manifest.generation,
        path=name,
        counts=counts,
        wall_time_s=time.perf_counter() - started,
        forgotten=forgotten,
    )


# -- what was forgotten since the backup was taken ----------------------------------------------------
def _snapshot_of(change: ChangeSet, manifest: Manifest) -> NamespaceSnapshot:
    """The namespace a whole-namespace change set would restore, as a snapshot (for ``plan_forget``)."""
    snap = NamespaceSnapshot(namespace=change.namespace, manifest=manifest)
    for kind in RECORD_KINDS:
        records = getattr(change, kind.field)
        setattr(snap, kind.field, {kind.record_id(r): r for r in records})
        if kind.vector_field is not None:
            rows = getattr(change, kind.vector_field)
            setattr(
                snap,
                kind.vector_field,
                {kind.record_id(r): np.asarray(v, dtype=np.float32) for r, v in zip(records, rows)},
            )
    return snap


def _applied(change: ChangeSet, forgotten: ChangeSet) -> ChangeSet:
    """``change`` (a whole namespace) with ``forgotten`` (a ``forget_change`` on it) applied: the retired records
    left out, the rebuilt and rewritten ones in place of their old versions."""
    update: dict[str, Any] = {}
    for kind in RECORD_KINDS:
        gone = set(forgotten.retire.get(kind.field, ()))
        new = {kind.record_id(r): i for i, r in enumerate(getattr(forgotten, kind.field))}
        records, vectors = [], []
        for i, record in enumerate(getattr(change, kind.field)):
            rid = kind.record_id(record)
            if rid in gone:
                continue
            source, at = (forgotten, new[rid]) if rid in new else (change, i)
            records.append(getattr(source, kind.field)[at])
            if kind.vector_field is not None:
                vectors.append(getattr(source, kind.vector_field)[at])
        update[kind.field] = records
        if kind.vector_field is not None:
            update[kind.vector_field] = vectors
    return change.model_copy(update=update)


def _without_forgotten(
    store: StoragePort, source: str, change: ChangeSet, manifest: Manifest, embeddings: Embeddings | None
) -> tuple[ChangeSet, Manifest, int]:
    """The change set and manifest without the turns ``source``'s tombstones match, and how many those were.

    What derives only from them goes as ``forget`` would take it; an event that also cites kept turns is rebuilt
    from them with the no-LLM summary. The restored namespace keeps the tombstones that matched (moved to it),
    and an audit record of the import's forget."""
    stones = store.snapshot(source).tombstones if store.has_namespace(source) else {}
    index = Forgotten.of(stones)
    matched = {t.dia_id: ids for t in change.turns if (ids := index.matches_turn(t))}
    if not matched:
        return change, manifest, 0
    snap = _snapshot_of(change, manifest)
    plan = plan_forget(snap, set(matched))
    events, notes = _rebuilt_events(snap, plan.rebuild_events)
    if events:
        if embeddings is None:
            from logicmap.memory.indexes.embeddings import make_embeddings

            embeddings = make_embeddings(store.settings)
        vectors = embeddings.embed_documents([e.summary for e in events])
    else:
        vectors = []
    forgotten = forget_change(snap, plan, rebuilt=events, rebuilt_vectors=vectors, surface="import", extra_notes=notes)
    restored = _applied(change, forgotten)
    kept: dict[str, Tombstone] = {t.id: t for t in restored.tombstones}
    for ids in matched.values():
        for sid in ids:
            kept.setdefault(sid, stones[sid].model_copy(update={"namespace": change.namespace}))
    restored.tombstones = list(kept.values())
    manifest = manifest.model_copy(deep=True)
    for session_id in plan.sessions_emptied:
        manifest.sessions.pop(session_id, None)
    assert forgotten.forget is not None
    manifest.forgets.append(forgotten.forget.model_copy(update={"generation": manifest.generation}))
    return restored, manifest, len(matched)


def _rebuilt_events(snap: NamespaceSnapshot, rebuild: dict[str, list[str]]) -> tuple[list[Event], list[str]]:
    """Events citing forgotten and kept turns, made again from the kept ones (as ``graphs.writes.forget`` does)."""
    events, notes = [], []
    for eid, kept in rebuild.items():
        old = snap.events[eid]
        session = snap.manifest.sessions.get(old.session_id)
        heuristic = old.source == "heuristic" or (session is not None and session.policy == "heuristic")
        if not heuristic:
            notes.append(f"event {eid}: rebuilt from its kept turns without a model (fallback)")
        events.append(
            rebuilt_event(old, [snap.turns[t] for t in kept], said_summary, "heuristic" if heuristic else "fallback")
        )
    return events, notes
