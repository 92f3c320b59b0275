"""An in-process cache of one embedding model's vectors, for brute-force cosine search.

SQLite holds the vectors (the truth); this keeps them as L2-normalised float32
matrices, one per scope (the partition key: a scope filter reads only its own
rows, no gather), with per-row codes for the other filters, so a query is a
matrix-vector product per partition plus numpy masks. The cache stays correct
when other processes write: before each query it compares two cheap numbers
with the database — the highest vector id (new rows are loaded incrementally)
and an epoch that triggers bump whenever rows go away or move (then the row
metadata is re-read; cached vectors are kept by id).
"""

from __future__ import annotations

import sqlite3
import threading
from dataclasses import dataclass
from typing import Any

import numpy as np
import numpy.typing as npt

from memlane.store.base import SearchFilter, StoreError, Vector
from memlane.store.codec import vector_from_bytes
from memlane.store.documents import TURN_ROLES

KIND_CODES = {"fact": 1, "event": 3}  # 2 was a message's, which is no document now
ROLE_CODES = {None: 0, "memory": 1, "user": 2, "assistant": 3, "summary": 4}
_TURN_CODES = frozenset(ROLE_CODES[role] for role in TURN_ROLES)

_NEW_ROWS = """SELECT v.id, v.doc_id, v.vec, d.kind, d.role, d.scope, d.session_id
    FROM vectors v JOIN docs d ON d.rowid = v.doc_id
    WHERE v.model = ? AND v.id > ? ORDER BY v.id LIMIT ?"""
_ALL_ROW_META = """SELECT v.id, v.doc_id, d.kind, d.role, d.scope, d.session_id
    FROM vectors v JOIN docs d ON d.rowid = v.doc_id
    WHERE v.model = ? ORDER BY v.id"""
_SCOPE_SIZES = """SELECT d.scope, count(*) FROM vectors v JOIN docs d ON d.rowid = v.doc_id
    WHERE v.model = ? GROUP BY d.scope"""
LOAD_CHUNK = 20_000  # vectors read per query while loading: bounds the memory a load needs


@dataclass(frozen=True, slots=True)
class Candidate:
    doc_id: int
    score: float


@dataclass(frozen=True, slots=True)
class _Row:
    vector_id: int
    doc_id: int
    kind: int
    role: int
    session: int


class _Partition:
    """The rows of one scope: growable arrays, filled up to `n`."""

    def __init__(self, dim: int) -> None:
        self.n = 0
        self.vector_ids = np.zeros(16, np.int64)
        self.doc_ids = np.zeros(16, np.int64)
        self.kinds = np.zeros(16, np.int8)
        self.roles = np.zeros(16, np.int8)
        self.sessions = np.zeros(16, np.int32)
        self.matrix = np.zeros((16, dim), np.float32)

    def append(self, row: _Row, vector: Vector) -> int:
        if self.n == self.vector_ids.shape[0]:
            self._grow(self.n + self.n // 4 + 16)
        self.set(self.n, row, vector)
        self.n += 1
        return self.n - 1

    def extend(self, columns: dict[str, list[int]], matrix: npt.NDArray[np.float32]) -> int:
        """Append many rows at once; return the index of the first."""
        first, count = self.n, matrix.shape[0]
        capacity = self.vector_ids.shape[0]
        if first + count > capacity:
            self._grow(max(capacity + capacity // 4 + 16, first + count))
        for name, values in columns.items():
            getattr(self, name)[first : first + count] = values
        self.matrix[first : first + count] = matrix
        self.n += count
        return first

    def reserve(self, count: int) -> None:
        """Room for `count` more rows, exactly (a cache's matrices are most of its memory)."""
        if self.n + count > self.vector_ids.shape[0]:
            self._grow(self.n + count)

    def set(self, index: int, row: _Row, vector: Vector) -> None:
        self.vector_ids[index] = row.vector_id
        self.doc_ids[index] = row.doc_id
        self.kinds[index] = row.kind
        self.roles[index] = row.role
        self.sessions[index] = row.session
        self.matrix[index] = vector

    def _grow(self, capacity: int) -> None:
        def grown(array: npt.NDArray[Any]) -> npt.NDArray[Any]:
            out = np.zeros((capacity, *array.shape[1:]), array.dtype)
            out[: self.n] = array[: self.n]
            return out

        self.vector_ids = grown(self.vector_ids)
        self.doc_ids = grown(self.doc_ids)
        self.kinds = grown(self.kinds)
        self.roles = grown(self.roles)
        self.sessions = grown(self.sessions)
        self.matrix = grown(self.matrix)

    def mask(self, kinds: list[int] | None, session: int | None, roles: list[int] | None) -> Any:
        """Rows passing the non-scope filters, or None when every row passes."""
        n = self.n
        mask: npt.NDArray[np.bool_] | None = None
        if kinds is not None:
            mask = np.isin(self.kinds[:n], kinds)
        if session is not None:
            same = self.sessions[:n] == session
            mask = same if mask is None else mask & same
        if roles is not None:
            allowed = (self.kinds[:n] != KIND_CODES["fact"]) | np.isin(self.roles[:n], roles)
            mask = allowed if mask is None else mask & allowed
        return mask


class VectorCache:
    """Vectors of one model; thread-safe; refreshed against the database before each search."""

    def __init__(self, model: str) -> None:
        self.model = model
        self._lock = threading.Lock()
        self._hwm = 0
        self._epoch = -1
        self._dim = 0
        self._parts: dict[int, _Partition] = {}
        self._where: dict[int, tuple[int, int]] = {}  # doc id -> (scope code, row)
        self._scope_codes: dict[str, int] = {}
        self._session_codes: dict[str | None, int] = {None: 0}

    # --- refresh ------------------------------------------------------------
    def refresh(self, conn: sqlite3.Connection) -> None:
        """Bring the cache up to date, inside one read snapshot."""
        with self._lock:
            conn.execute("BEGIN")
            try:
                epoch = int(conn.execute("SELECT n FROM vector_epoch WHERE id = 1").fetchone()[0])
                hwm_row = conn.execute(
                    "SELECT max(id) FROM vectors WHERE model = ?", (self.model,)
                ).fetchone()
                if epoch != self._epoch:
                    self._reload(conn)
                    self._epoch = epoch
                elif int(hwm_row[0] or 0) > self._hwm:
                    self._load_new(conn)
            finally:
                conn.execute("COMMIT")

    def _load_new(self, conn: sqlite3.Connection) -> None:
        """Read the rows above the high-water mark, a chunk at a time; on a first load the
        partitions are sized exactly beforehand."""
        if not self._parts:
            first = conn.execute(
                "SELECT dim FROM vectors WHERE model = ? ORDER BY id LIMIT 1", (self.model,)
            ).fetchone()
            if first is not None:
                self._dim = int(first[0])
                for scope, count in conn.execute(_SCOPE_SIZES, (self.model,)).fetchall():
                    self._reserve(scope, int(count))
        while True:
            rows = conn.execute(_NEW_ROWS, (self.model, self._hwm, LOAD_CHUNK)).fetchall()
            self._load(rows)
            if len(rows) < LOAD_CHUNK:
                return

    def _reserve(self, scope: str, count: int) -> None:
        code = self._scope_codes.setdefault(scope, len(self._scope_codes))
        part = self._parts.get(code)
        if part is None:
            part = self._parts[code] = _Partition(self._dim)
        part.reserve(count)

    def _load(self, rows: list[tuple[Any, ...]]) -> None:
        """Add rows of `_NEW_ROWS`; new documents in bulk, one matrix per scope."""
        fresh: dict[int, list[tuple[Any, ...]]] = {}
        for row in rows:
            vector_id, doc_id, blob, kind, role, scope, session_id = row
            if self._dim == 0:
                self._dim = len(blob) // 4
            if int(doc_id) in self._where or len(blob) != self._dim * 4:
                self._put(vector_id, doc_id, vector_from_bytes(blob), kind, role, scope, session_id)
                continue
            code = self._scope_codes.setdefault(scope, len(self._scope_codes))
            fresh.setdefault(code, []).append(row)
        for code, group in fresh.items():
            matrix = np.frombuffer(b"".join(r[2] for r in group), dtype="<f4")
            matrix = matrix.reshape(len(group), self._dim).astype(np.float32)
            norms = np.linalg.norm(matrix, axis=1, keepdims=True)
            matrix /= np.where(norms > 0, norms, 1.0)
            part = self._parts.get(code)
            if part is None:
                part = self._parts[code] = _Partition(self._dim)
            sessions = self._session_codes
            columns = {
                "vector_ids": [r[0] for r in group],
                "doc_ids": [r[1] for r in group],
                "kinds": [KIND_CODES.get(r[3], 0) for r in group],
                "roles": [ROLE_CODES.get(r[4], 0) for r in group],
                "sessions": [sessions.setdefault(r[6], len(sessions)) for r in group],
            }
            first = part.extend(columns, matrix)
            for offset, row in enumerate(group):
                self._where[int(row[1])] = (code, first + offset)
            self._hwm = max(self._hwm, int(group[-1][0]))

    def _reload(self, conn: sqlite3.Connection) -> None:
        """Rebuild from the database; vectors already cached are copied, not re-read."""
        old_parts, dim = self._parts, self._dim
        self._parts, self._where, self._hwm, self._dim = {}, {}, 0, 0
        if not old_parts:
            self._load_new(conn)
            return
        # where each cached vector id sits: sorted ids, and their (partition, row)
        old_ids = np.concatenate([p.vector_ids[: p.n] for p in old_parts.values()])
        old_code = np.concatenate([np.full(p.n, c, np.int64) for c, p in old_parts.items()])
        old_row = np.concatenate([np.arange(p.n, dtype=np.int64) for p in old_parts.values()])
        order = np.argsort(old_ids)
        old_ids, old_code, old_row = old_ids[order], old_code[order], old_row[order]
        meta = conn.execute(_ALL_ROW_META, (self.model,)).fetchall()
        self._dim = dim
        sizes: dict[str, int] = {}
        for row in meta:
            sizes[row[4]] = sizes.get(row[4], 0) + 1
        for scope, count in sizes.items():
            self._reserve(scope, count)
        for first in range(0, len(meta), LOAD_CHUNK):
            chunk = meta[first : first + LOAD_CHUNK]
            ids = np.fromiter((r[0] for r in chunk), np.int64, len(chunk))
            at = np.minimum(np.searchsorted(old_ids, ids), max(old_ids.shape[0] - 1, 0))
            cached = old_ids[at] == ids
            missing = [int(i) for i in ids[~cached]]
            blobs: dict[int, bytes] = {}
            for start in range(0, len(missing), 500):
                part_ids = missing[start : start + 500]
                marks = ", ".join("?" for _ in part_ids)
                blobs.update(
                    conn.execute(f"SELECT id, vec FROM vectors WHERE id IN ({marks})", part_ids)
                )
            rows: list[tuple[Any, ...]] = []
            for i, (vector_id, doc_id, kind, role, scope, session_id) in enumerate(chunk):
                if cached[i]:
                    source = old_parts[int(old_code[at[i]])]
                    blob = source.matrix[int(old_row[at[i]])].astype("<f4").tobytes()
                else:
                    blob = blobs[int(vector_id)]
                rows.append((vector_id, doc_id, blob, kind, role, scope, session_id))
            self._load(rows)

    def _put(
        self,
        vector_id: int,
        doc_id: int,
        vector: Vector,
        kind: str,
        role: str | None,
        scope: str,
        session_id: str | None,
    ) -> None:
        self._hwm = max(self._hwm, int(vector_id))
        if self._dim == 0:
            self._dim = int(vector.shape[0])
        if vector.shape[0] != self._dim:
            return  # another size under the same model name: not comparable, not searchable
        norm = float(np.linalg.norm(vector))
        unit = vector / norm if norm > 0 else vector
        row = _Row(
            int(vector_id),
            int(doc_id),
            KIND_CODES.get(kind, 0),
            ROLE_CODES.get(role, 0),
            self._session_codes.setdefault(session_id, len(self._session_codes)),
        )
        scope_code = self._scope_codes.setdefault(scope, len(self._scope_codes))
        found = self._where.get(row.doc_id)
        if found is not None and found[0] == scope_code:  # this document's vector was replaced
            self._parts[scope_code].set(found[1], row, unit)
            return
        part = self._parts.get(scope_code)
        if part is None:
            part = self._parts[scope_code] = _Partition(self._dim)
        self._where[row.doc_id] = (scope_code, part.append(row, unit))

    # --- search -------------------------------------------------------------
    def search(self, query: Vector, flt: SearchFilter, k: int) -> list[Candidate]:
        """Up to `k` best rows passing `flt`, by cosine similarity, best first."""
        with self._lock:
            if not self._parts or k <= 0:
                return []
            if query.shape[0] != self._dim:
                raise StoreError(
                    f"query vector has {query.shape[0]} dimensions but the stored vectors of "
                    f"model {self.model!r} have {self._dim}"
                )
            norm = float(np.linalg.norm(query))
            q = query / norm if norm > 0 else query
            if flt.scopes is None:
                codes = list(self._parts)
            else:
                known = (self._scope_codes.get(scope) for scope in flt.scopes)
                codes = [c for c in known if c is not None and c in self._parts]
            kinds = sorted({KIND_CODES[k] for k in flt.kinds})
            session: int | None = None
            if flt.session_id is not None:
                session = self._session_codes.get(flt.session_id, -1)
            roles = None
            if flt.fact_roles is not None:
                roles = [ROLE_CODES[r] for r in flt.fact_roles]
            # the scope whose remembered turns are left out keeps its facts of the other roles
            left_out, no_turns = -1, roles
            if flt.turns_left_out is not None:
                left_out = self._scope_codes.get(flt.turns_left_out, -1)
                no_turns = [r for r in (roles or ROLE_CODES.values()) if r not in _TURN_CODES]
            kind_filter = None if len(kinds) == len(KIND_CODES) else kinds
            doc_ids: list[npt.NDArray[np.int64]] = []
            scores: list[npt.NDArray[np.float32]] = []
            for code in codes:
                part = self._parts[code]
                mask = part.mask(kind_filter, session, no_turns if code == left_out else roles)
                found = _top(part, q, mask, k)
                if found is not None:
                    doc_ids.append(found[0])
                    scores.append(found[1])
            if not doc_ids:
                return []
            all_ids, all_scores = np.concatenate(doc_ids), np.concatenate(scores)
            order = np.argsort(-all_scores, kind="stable")[:k]
            return [Candidate(int(all_ids[i]), float(all_scores[i])) for i in order]


def _top(
    part: _Partition, q: Vector, mask: Any, k: int
) -> tuple[npt.NDArray[np.int64], npt.NDArray[np.float32]] | None:
    n = part.n
    if n == 0:
        return None
    # einsum, not `@`: a BLAS matrix-vector product spreads over threads, which on a
    # busy machine makes it ten times slower; this is memory-bound anyway.
    scores = np.einsum("ij,j->i", part.matrix[:n], q)
    doc_ids = part.doc_ids[:n]
    if mask is not None:
        scores, doc_ids = scores[mask], doc_ids[mask]
    if scores.shape[0] == 0:
        return None
    if scores.shape[0] > k:
        best = np.argpartition(-scores, k - 1)[:k]
        scores, doc_ids = scores[best], doc_ids[best]
    return doc_ids, scores
