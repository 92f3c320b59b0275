"""An in-process cache of one embedding model's vectors, for brute-force cosine search.

SQLite holds the vectors (the truth); this keeps them as one L2-normalised
float32 matrix with per-row filter codes, so a query is one matrix-vector
product plus numpy masks (~ms at 100k x 384). The cache stays correct when
other processes write: before each query it compares two cheap numbers with
the database — the highest vector id (new rows are loaded incrementally) and
an epoch bumped by triggers whenever rows go away or move (then the row
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

KIND_CODES = {"fact": 1, "message": 2, "event": 3}
ROLE_CODES = {None: 0, "memory": 1, "user": 2, "assistant": 3, "summary": 4}

IntArray = npt.NDArray[np.int64]


@dataclass(frozen=True, slots=True)
class Candidate:
    doc_id: int
    score: float


class _Codes:
    """Small ints for strings (scopes, session ids) so filters are numpy comparisons."""

    def __init__(self) -> None:
        self._codes: dict[str | None, int] = {None: 0}

    def code(self, value: str | None) -> int:
        found = self._codes.get(value)
        if found is None:
            found = self._codes[value] = len(self._codes)
        return found

    def known(self, values: tuple[str, ...]) -> list[int]:
        return [self._codes[v] for v in values if v in self._codes]


class VectorCache:
    """Vectors of one model; thread-safe; refreshed against the database before each search."""

    def __init__(self, model: str) -> None:
        self.model = model
        self._lock = threading.Lock()
        self._hwm = 0
        self._epoch = -1
        self._n = 0
        self._dim = 0
        self._ids: IntArray = np.zeros(0, np.int64)
        self._doc_ids: IntArray = np.zeros(0, np.int64)
        self._kinds = np.zeros(0, np.int8)
        self._roles = np.zeros(0, np.int8)
        self._scopes = np.zeros(0, np.int32)
        self._sessions = np.zeros(0, np.int32)
        self._matrix: npt.NDArray[np.float32] = np.zeros((0, 0), np.float32)
        self._row_of_doc: dict[int, int] = {}
        self._scope_codes = _Codes()
        self._session_codes = _Codes()

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
                hwm = int(hwm_row[0] or 0)
                if epoch != self._epoch:
                    self._reload(conn)
                    self._epoch = epoch
                elif hwm > self._hwm:
                    self._load_new(conn)
            finally:
                conn.execute("COMMIT")

    def _load_new(self, conn: sqlite3.Connection) -> None:
        rows = conn.execute(
            """SELECT v.id, v.doc_id, v.vec, d.kind, d.role, d.scope, d.session_id
               FROM vectors v JOIN docs d ON d.rowid = v.doc_id
               WHERE v.model = ? AND v.id > ? ORDER BY v.id""",
            (self.model, self._hwm),
        ).fetchall()
        for row in rows:
            self._put_row(row)
            self._hwm = max(self._hwm, int(row[0]))

    def _reload(self, conn: sqlite3.Connection) -> None:
        """Re-read every row's metadata; keep the cached vectors, fetch only unknown ones."""
        old_rows = {int(self._ids[i]): i for i in range(self._n)}
        old_matrix = self._matrix
        meta = conn.execute(
            """SELECT v.id, v.doc_id, d.kind, d.role, d.scope, d.session_id
               FROM vectors v JOIN docs d ON d.rowid = v.doc_id
               WHERE v.model = ? ORDER BY v.id""",
            (self.model,),
        ).fetchall()
        self._reset(capacity=len(meta))
        missing: list[tuple[Any, ...]] = []
        for vid, doc_id, kind, role, scope, session_id in meta:
            row = old_rows.get(int(vid))
            if row is None:
                missing.append((vid, doc_id, kind, role, scope, session_id))
                continue
            self._append(int(vid), int(doc_id), kind, role, scope, session_id, old_matrix[row])
        for vid, doc_id, kind, role, scope, session_id in missing:
            blob = conn.execute("SELECT vec FROM vectors WHERE id = ?", (vid,)).fetchone()[0]
            self._put_row((vid, doc_id, blob, kind, role, scope, session_id))
        self._hwm = max((int(m[0]) for m in meta), default=0)

    def _reset(self, capacity: int) -> None:
        self._n = 0
        self._row_of_doc = {}
        self._allocate(max(capacity, 16), self._dim)

    def _allocate(self, capacity: int, dim: int) -> None:
        def grow(array: npt.NDArray[Any], shape: tuple[int, ...]) -> npt.NDArray[Any]:
            out = np.zeros(shape, array.dtype)
            keep = min(self._n, capacity)
            if array.shape[0] and (len(shape) == 1 or array.shape[1:] == shape[1:]):
                out[:keep] = array[:keep]
            return out

        self._ids = grow(self._ids, (capacity,))
        self._doc_ids = grow(self._doc_ids, (capacity,))
        self._kinds = grow(self._kinds, (capacity,))
        self._roles = grow(self._roles, (capacity,))
        self._scopes = grow(self._scopes, (capacity,))
        self._sessions = grow(self._sessions, (capacity,))
        self._matrix = grow(self._matrix, (capacity, dim))

    def _put_row(self, row: tuple[Any, ...]) -> None:
        vid, doc_id, blob, kind, role, scope, session_id = row
        vector = vector_from_bytes(blob)
        norm = float(np.linalg.norm(vector))
        if norm > 0:
            vector = vector / norm
        existing = self._row_of_doc.get(int(doc_id))
        if existing is not None:  # the vector of this document was replaced
            self._set(existing, int(vid), int(doc_id), kind, role, scope, session_id, vector)
            return
        self._append(int(vid), int(doc_id), kind, role, scope, session_id, vector)

    def _append(
        self,
        vid: int,
        doc_id: int,
        kind: str,
        role: str | None,
        scope: str,
        session_id: str | None,
        vector: Vector,
    ) -> None:
        if self._dim == 0:
            self._dim = int(vector.shape[0])
            self._allocate(max(self._ids.shape[0], 16), self._dim)
        if vector.shape[0] != self._dim:
            return  # a vector of another size under the same model name: not comparable
        if self._n == self._ids.shape[0]:
            self._allocate(self._n * 2, self._dim)
        self._set(self._n, vid, doc_id, kind, role, scope, session_id, vector)
        self._n += 1

    def _set(
        self,
        row: int,
        vid: int,
        doc_id: int,
        kind: str,
        role: str | None,
        scope: str,
        session_id: str | None,
        vector: Vector,
    ) -> None:
        if vector.shape[0] != self._dim:
            return
        self._ids[row] = vid
        self._doc_ids[row] = doc_id
        self._kinds[row] = KIND_CODES.get(kind, 0)
        self._roles[row] = ROLE_CODES.get(role, 0)
        self._scopes[row] = self._scope_codes.code(scope)
        self._sessions[row] = self._session_codes.code(session_id)
        self._matrix[row] = vector
        self._row_of_doc[doc_id] = row

    # --- search -------------------------------------------------------------
    def search(self, query: Vector, flt: SearchFilter, k: int) -> list[Candidate]:
        """The `k` best rows passing `flt`, by cosine similarity, best first."""
        with self._lock:
            n = self._n
            if n == 0 or k <= 0:
                return []
            if query.shape[0] != self._dim:
                raise StoreError(
                    f"query vector has {query.shape[0]} dimensions but the stored vectors of "
                    f"model {self.model!r} have {self._dim}"
                )
            norm = float(np.linalg.norm(query))
            q = query / norm if norm > 0 else query
            rows = np.flatnonzero(self._mask(flt, n))
            if rows.size == 0:
                return []
            # A selective filter scores only its rows; a broad one scores all and picks.
            selective = rows.size * 4 < n
            scores = self._matrix[rows] @ q if selective else (self._matrix[:n] @ q)[rows]
            k = min(k, rows.size)
            top = np.argpartition(-scores, k - 1)[:k] if k < rows.size else np.arange(rows.size)
            top = top[np.argsort(-scores[top], kind="stable")]
            doc_ids = self._doc_ids[rows[top]]
            return [Candidate(int(d), float(s)) for d, s in zip(doc_ids, scores[top], strict=True)]

    def _mask(self, flt: SearchFilter, n: int) -> npt.NDArray[np.bool_]:
        kinds = [KIND_CODES[k] for k in flt.kinds if k in KIND_CODES]
        mask = np.isin(self._kinds[:n], kinds)
        if flt.scopes is not None:
            mask &= np.isin(self._scopes[:n], self._scope_codes.known(flt.scopes))
        if flt.session_id is not None:
            codes = self._session_codes.known((flt.session_id,))
            mask &= self._sessions[:n] == (codes[0] if codes else -1)
        if flt.fact_roles is not None:
            roles = [ROLE_CODES[r] for r in flt.fact_roles if r in ROLE_CODES]
            is_fact = self._kinds[:n] == KIND_CODES["fact"]
            mask &= ~is_fact | np.isin(self._roles[:n], roles)
        return mask
