"""Optional cross-encoder reranking, from a configured local model or endpoint.

No PyPI wheel ships a cross-encoder's weights, so memlane never assumes one:
`memory_reranker_path` names a folder holding `model.onnx` and `tokenizer.json`
(e.g. an exported ms-marco-MiniLM-L-6-v2), `memory_reranker_url` a `/v1/rerank`
endpoint (llama.cpp server, vLLM, Infinity, TEI). Its raw scores are min-max
normalised over the batch (best 1.0, worst 0.0) and become the relevance.
Without a reranker (the default), or when it fails, the fusion score is the
relevance (see `fuse`), and retrieval carries on.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

import numpy as np

from memlane.config import Settings
from memlane.engine import threads
from memlane.engine.retrieval.candidates import Candidate
from memlane.engine.retrieval.fuse import min_max
from memlane.text.tls import ssl_context

if TYPE_CHECKING:
    import httpx

log = logging.getLogger("memlane.retrieval")
MAX_PAIR_TOKENS = 512


class RerankError(Exception):
    pass


class Reranker(Protocol):
    name: str

    async def score(self, query: str, texts: Sequence[str]) -> list[float]:
        """One raw relevance score per text (higher is better). Raises `RerankError`."""
        ...


async def rerank(
    reranker: Reranker | None, query: str, candidates: Sequence[Candidate]
) -> list[Candidate]:
    """Relevance from the reranker, best first; unchanged (fusion order) without one."""
    if reranker is None or len(candidates) < 2:
        return list(candidates)
    try:
        raw = await reranker.score(query, [c.text for c in candidates])
    except RerankError as exc:
        log.warning("reranker %s failed, keeping the fusion order: %s", reranker.name, exc)
        return list(candidates)
    if len(raw) != len(candidates):
        log.warning(
            "reranker %s returned %d scores for %d texts", reranker.name, len(raw), len(candidates)
        )
        return list(candidates)
    relevance = min_max(raw)
    ranked = [c.scored(r, r) for c, r in zip(candidates, relevance, strict=True)]
    return sorted(ranked, key=lambda c: -c.relevance)


def threshold(candidates: Sequence[Candidate], minimum: float | None) -> list[Candidate]:
    """Drop candidates whose relevance is below `minimum` (None keeps everything)."""
    if minimum is None:
        return list(candidates)
    return [c for c in candidates if c.relevance >= minimum]


class EndpointReranker:
    """A `/v1/rerank` endpoint: `{query, documents}` in, `{results: [{index, score}]}` out."""

    def __init__(
        self,
        url: str,
        *,
        model: str | None = None,
        transport: httpx.AsyncBaseTransport | None = None,
        timeout: float = 10.0,
    ) -> None:
        self.url = url
        self.name = url
        self.model = model
        self._transport = transport
        self._timeout = timeout

    async def score(self, query: str, texts: Sequence[str]) -> list[float]:
        import httpx  # here: a CLI command that ranks nothing through an endpoint never loads it

        body: dict[str, Any] = {"query": query, "documents": list(texts), "top_n": len(texts)}
        if self.model:
            body["model"] = self.model
        try:
            async with httpx.AsyncClient(
                transport=self._transport, timeout=self._timeout, verify=ssl_context()
            ) as c:
                response = await c.post(self.url, json=body)
            response.raise_for_status()
            data = response.json()
        except (httpx.HTTPError, ValueError) as exc:
            raise RerankError(f"{self.url}: {exc}") from None
        return _scores_from(data, len(texts))


def _scores_from(data: Any, count: int) -> list[float]:
    results = data.get("results") if isinstance(data, dict) else data
    if not isinstance(results, list):
        raise RerankError("answer has no results list")
    scores = [float("-inf")] * count
    for item in results:
        if not isinstance(item, dict) or not isinstance(item.get("index"), int):
            raise RerankError("a result has no integer index")
        value = item.get("relevance_score", item.get("score"))
        if not isinstance(value, int | float) or not 0 <= item["index"] < count:
            raise RerankError("a result has no numeric score or a bad index")
        scores[item["index"]] = float(value)
    if any(s == float("-inf") for s in scores):
        raise RerankError("results do not cover every document")
    return scores


class OnnxCrossEncoder:
    """A cross-encoder exported to ONNX, run with onnxruntime on the CPU (no torch)."""

    def __init__(self, folder: Path) -> None:
        import onnxruntime
        from tokenizers import Tokenizer

        self.name = str(folder)
        self._tokenizer = Tokenizer.from_file(str(folder / "tokenizer.json"))
        self._tokenizer.enable_truncation(MAX_PAIR_TOKENS)
        self._tokenizer.enable_padding()
        options = onnxruntime.SessionOptions()
        options.intra_op_num_threads = 1
        self._session = onnxruntime.InferenceSession(
            str(folder / "model.onnx"), options, providers=["CPUExecutionProvider"]
        )
        self._inputs = {i.name for i in self._session.get_inputs()}

    async def score(self, query: str, texts: Sequence[str]) -> list[float]:
        return await threads.to_thread(self._score, query, texts)

    def _score(self, query: str, texts: Sequence[str]) -> list[float]:
        try:
            encoded = self._tokenizer.encode_batch([(query, t) for t in texts])
            feeds = {
                "input_ids": np.array([e.ids for e in encoded], dtype=np.int64),
                "attention_mask": np.array([e.attention_mask for e in encoded], dtype=np.int64),
                "token_type_ids": np.array([e.type_ids for e in encoded], dtype=np.int64),
            }
            logits = self._session.run(None, {k: v for k, v in feeds.items() if k in self._inputs})
        except Exception as exc:  # onnxruntime raises its own untyped errors
            raise RerankError(str(exc)) from None
        out = np.asarray(logits[0], dtype=np.float64)
        column = out[:, -1] if out.ndim == 2 else out
        return [float(v) for v in column]


def make_reranker(settings: Settings) -> Reranker | None:
    """The configured reranker, or None (logged) when none is set or it cannot load."""
    return make_reranker_from(url=settings.memory_reranker_url, path=settings.memory_reranker_path)


def make_reranker_from(*, url: str | None, path: str | None) -> Reranker | None:
    if url:
        return EndpointReranker(url)
    if path:
        folder = Path(path).expanduser()
        try:
            return OnnxCrossEncoder(folder)
        except Exception as exc:  # a bad model file must not stop the proxy
            log.warning("reranker at %s not loaded, using the fusion score: %s", folder, exc)
    return None
