"""Embedders: the real MiniLM model, the endpoint client, the hashing fallback."""

from __future__ import annotations

import json
import threading

import httpx
import numpy as np
import pytest

from memlane.text.embeddings import (
    MINILM_DIM,
    MINILM_MODEL_ID,
    EmbeddingError,
    HashingEmbedder,
    MiniLMEmbedder,
    OpenAIEmbedder,
)
from tests.support.raw_http import RawServer, in_a_thread


def cosine(a: np.ndarray, b: np.ndarray) -> float:
    return float(np.dot(a, b))


# --- MiniLM ------------------------------------------------------------------------------


def test_minilm_shape_dtype_and_unit_norm(minilm_embedder: MiniLMEmbedder) -> None:
    vectors = minilm_embedder.embed(["a short sentence", "another one", "x"])
    assert vectors.shape == (3, MINILM_DIM)
    assert vectors.dtype == np.float32
    np.testing.assert_allclose(np.linalg.norm(vectors, axis=1), 1.0, atol=1e-5)
    assert minilm_embedder.model_id == MINILM_MODEL_ID
    assert minilm_embedder.dim == MINILM_DIM


def test_minilm_paraphrase_beats_unrelated(minilm_embedder: MiniLMEmbedder) -> None:
    anchor, paraphrase, unrelated = minilm_embedder.embed(
        [
            "My flight to Lisbon was cancelled because of the storm.",
            "The storm grounded the plane I was taking to Lisbon.",
            "She baked a chocolate cake for her daughter's birthday.",
        ]
    )
    assert cosine(anchor, paraphrase) > cosine(anchor, unrelated) + 0.3


def test_minilm_semantic_match_without_shared_words(minilm_embedder: MiniLMEmbedder) -> None:
    query, match, other = minilm_embedder.embed(
        ["What pet does Maria own?", "Maria adopted a puppy last spring.", "The invoice is due."]
    )
    assert cosine(query, match) > cosine(query, other)


def test_minilm_identical_text_has_cosine_one(minilm_embedder: MiniLMEmbedder) -> None:
    a, b = minilm_embedder.embed(["the same words", "the same words"])
    assert cosine(a, b) == pytest.approx(1.0, abs=1e-5)


def test_minilm_is_independent_of_batch_company(minilm_embedder: MiniLMEmbedder) -> None:
    alone = minilm_embedder.embed(["A cat sits on the mat."])
    padded = minilm_embedder.embed(["A cat sits on the mat.", "word " * 400, "Another text."])
    assert cosine(alone[0], padded[0]) == pytest.approx(1.0, abs=1e-4)


def test_minilm_truncates_long_text(minilm_embedder: MiniLMEmbedder) -> None:
    head = "Deployment notes for the payment service. " * 40
    long_a, long_b = minilm_embedder.embed([head + "tail one " * 500, head + "other tail " * 500])
    assert cosine(long_a, long_b) == pytest.approx(1.0, abs=1e-4)  # only the head is read


def test_minilm_empty_input(minilm_embedder: MiniLMEmbedder) -> None:
    vectors = minilm_embedder.embed([])
    assert vectors.shape == (0, MINILM_DIM)
    assert vectors.dtype == np.float32


def test_minilm_empty_string_is_a_unit_vector(minilm_embedder: MiniLMEmbedder) -> None:
    (vector,) = minilm_embedder.embed([""])
    assert np.linalg.norm(vector) == pytest.approx(1.0, abs=1e-5)


def test_minilm_batches_keep_input_order(minilm_embedder: MiniLMEmbedder) -> None:
    # lengths vary (longest first) so the length-sorted batching really reorders
    texts = [f"note {i}: " + "about the release plan " * (40 - i) for i in range(40)]
    together = minilm_embedder.embed(texts)
    assert together.shape == (40, MINILM_DIM)
    alone = np.concatenate([minilm_embedder.embed([text]) for text in texts])
    np.testing.assert_allclose(together, alone, atol=1e-4)


def test_minilm_loads_offline_once_across_threads(no_network: None) -> None:
    embedder = MiniLMEmbedder()
    results: list[np.ndarray] = []
    errors: list[BaseException] = []

    def work() -> None:
        try:
            results.append(embedder.embed(["loaded by whichever thread comes first"]))
        except BaseException as exc:  # pragma: no cover - reported below
            errors.append(exc)

    threads = [threading.Thread(target=work) for _ in range(3)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert not errors
    assert len(results) == 3
    for result in results[1:]:
        np.testing.assert_allclose(result, results[0], atol=1e-6)


# --- hashing -----------------------------------------------------------------------------


def test_hashing_is_deterministic_across_instances() -> None:
    texts = ["Deploy the payment service on Friday", "another note"]
    np.testing.assert_array_equal(HashingEmbedder().embed(texts), HashingEmbedder().embed(texts))


def test_hashing_shape_norm_and_id(hashing_embedder: HashingEmbedder) -> None:
    vectors = hashing_embedder.embed(["one text", "two texts here"])
    assert vectors.shape == (2, 256)
    assert vectors.dtype == np.float32
    np.testing.assert_allclose(np.linalg.norm(vectors, axis=1), 1.0, atol=1e-5)
    assert hashing_embedder.model_id == "hashing-256"
    assert HashingEmbedder(64).model_id == "hashing-64"


def test_hashing_shared_words_score_higher(hashing_embedder: HashingEmbedder) -> None:
    query, overlap, disjoint = hashing_embedder.embed(
        ["payment service deploy", "we deploy the payment service tomorrow", "lunch at noon"]
    )
    assert cosine(query, overlap) > cosine(query, disjoint)


def test_hashing_text_without_terms_is_zero(hashing_embedder: HashingEmbedder) -> None:
    vectors = hashing_embedder.embed(["", "the and of"])
    assert not vectors.any()
    assert hashing_embedder.embed([]).shape == (0, 256)


# --- OpenAI-compatible endpoint ---------------------------------------------------------


class EmbeddingsEndpoint:
    """An OpenAI-compatible /embeddings handler for `httpx.MockTransport`, recording requests."""

    def __init__(self, dim: int = 4, *, status: int = 200, body: object | None = None) -> None:
        self.dim = dim
        self.status = status
        self.body = body
        self.requests: list[httpx.Request] = []

    def __call__(self, request: httpx.Request) -> httpx.Response:
        self.requests.append(request)
        if self.status != 200 or self.body is not None:
            return httpx.Response(self.status, json=self.body or {"error": {"message": "boom"}})
        texts = json.loads(request.content)["input"]
        data = [
            {
                "object": "embedding",
                "index": i,
                "embedding": [float(len(t)), 1.0] + [0.0] * (self.dim - 2),
            }
            for i, t in enumerate(texts)
        ]
        return httpx.Response(200, json={"object": "list", "data": list(reversed(data))})


def make_openai(endpoint: EmbeddingsEndpoint, **kwargs: object) -> OpenAIEmbedder:
    return OpenAIEmbedder(
        "http://embed.test/v1/",
        "nomic-embed-text",
        transport=httpx.MockTransport(endpoint),
        **kwargs,  # type: ignore[arg-type]
    )


def test_openai_posts_model_and_inputs_and_orders_by_index() -> None:
    endpoint = EmbeddingsEndpoint(dim=4)
    embedder = make_openai(endpoint, api_key="sk-test")
    vectors = embedder.embed(["ab", "abcd"])
    request = endpoint.requests[0]
    assert request.url == "http://embed.test/v1/embeddings"
    assert request.headers["authorization"] == "Bearer sk-test"
    assert json.loads(request.content) == {"model": "nomic-embed-text", "input": ["ab", "abcd"]}
    assert vectors.shape == (2, 4)
    expected = np.array([[2.0, 1.0, 0, 0], [4.0, 1.0, 0, 0]], dtype=np.float32)
    expected /= np.linalg.norm(expected, axis=1, keepdims=True)
    np.testing.assert_allclose(vectors, expected, atol=1e-6)
    assert embedder.model_id == "openai:nomic-embed-text"


def test_openai_discovers_dim_from_first_answer() -> None:
    endpoint = EmbeddingsEndpoint(dim=6)
    embedder = make_openai(endpoint)
    assert embedder.dim == 6
    assert len(endpoint.requests) == 1
    embedder.embed(["x"])
    assert embedder.dim == 6
    assert len(endpoint.requests) == 2


def test_openai_batches_large_inputs() -> None:
    endpoint = EmbeddingsEndpoint()
    vectors = make_openai(endpoint).embed([f"t{i}" for i in range(130)])
    assert vectors.shape == (130, 4)
    assert len(endpoint.requests) == 3


def test_openai_empty_input_makes_no_request() -> None:
    endpoint = EmbeddingsEndpoint()
    assert make_openai(endpoint).embed([]).shape[0] == 0
    assert endpoint.requests == []


def test_openai_rejects_a_changed_dimension() -> None:
    embedder = make_openai(EmbeddingsEndpoint(dim=4), dim=8)
    with pytest.raises(EmbeddingError, match="expected 8"):
        embedder.embed(["x"])


@pytest.mark.parametrize(
    ("endpoint", "reason"),
    [
        (EmbeddingsEndpoint(status=500), "HTTP 500"),
        (EmbeddingsEndpoint(body={"data": [{"index": 0}]}), "malformed"),
        (EmbeddingsEndpoint(body={"unexpected": True}), "malformed"),
        (EmbeddingsEndpoint(body={"data": []}), "0 vectors for 1 texts"),
    ],
)
def test_openai_failures_raise_embedding_error(endpoint: EmbeddingsEndpoint, reason: str) -> None:
    with pytest.raises(EmbeddingError, match=reason):
        make_openai(endpoint, api_key="sk-secret").embed(["x"])


def test_openai_unreachable_raises_embedding_error() -> None:
    def refuse(request: httpx.Request) -> httpx.Response:
        raise httpx.ConnectError("refused", request=request)

    embedder = OpenAIEmbedder("http://embed.test/v1", "m", transport=httpx.MockTransport(refuse))
    with pytest.raises(EmbeddingError, match="unreachable"):
        embedder.embed(["x"])


def test_openai_asks_once_more_on_a_kept_alive_connection_the_server_closed() -> None:
    """A pooled connection the endpoint resets as it is reused (its idle timeout reached
    as the request went out): embedding changes nothing there, so it is asked again on a
    new connection instead of failing the stage."""
    body = json.dumps({"data": [{"index": 0, "embedding": [1.0, 0.0, 0.0, 0.0]}]}).encode()
    server = RawServer(body, reset_reused=True)
    with in_a_thread(server) as url:
        embedder = OpenAIEmbedder(url, "m")
        try:
            for _ in range(2):
                assert embedder.embed(["x"]).shape == (1, 4)
        finally:
            embedder.close()
    assert server.resets == 1
    assert server.connections == 2
    assert len(server.answered) == 2
