"""The offline BPE tokenizer: exact counts, the model table, framing, the memo, no network."""

from __future__ import annotations

import gzip
import hashlib

import pytest
import tiktoken

from memlane.text.tokens import (
    FALLBACK_ENCODING,
    MEDIA_TOKENS,
    MESSAGE_OVERHEAD,
    REPLY_PRIMING,
    TOOL_CALL_OVERHEAD,
    BPETokenizer,
    count_messages,
    encoding_for_model,
    get_tokenizer,
    load_encoding,
    media_parts,
    packaged_file,
)
from memlane.types import Message, ToolCall

# Counts checked against tiktoken's own encodings (same files, tiktoken's published hash).
KNOWN_COUNTS = [
    ("cl100k_base", "hello world", 2),
    ("cl100k_base", "Hello, world!", 4),
    ("cl100k_base", "The quick brown fox jumps over the lazy dog.", 10),
    ("cl100k_base", "def f(x):\n    return x**2\n", 10),
    ("cl100k_base", "こんにちは世界", 4),
    ("cl100k_base", "", 0),
    ("o200k_base", "hello world", 2),
    ("o200k_base", "The quick brown fox jumps over the lazy dog.", 10),
    ("o200k_base", "こんにちは世界", 2),
]

PUBLIC_URLS = {
    "cl100k_base": "https://openaipublic.blob.core.windows.net/encodings/cl100k_base.tiktoken",
    "o200k_base": "https://openaipublic.blob.core.windows.net/encodings/o200k_base.tiktoken",
}


@pytest.mark.parametrize(("encoding", "text", "expected"), KNOWN_COUNTS)
def test_known_token_counts(encoding: str, text: str, expected: int) -> None:
    tokenizer = get_tokenizer(encoding)  # type: ignore[arg-type]
    assert tokenizer.name == encoding
    assert tokenizer.count(text) == expected


@pytest.mark.parametrize("encoding", ["cl100k_base", "o200k_base"])
def test_loading_touches_no_network(encoding: str, no_network: None) -> None:
    loaded = load_encoding(encoding)  # type: ignore[arg-type]
    assert loaded.name == encoding
    assert len(loaded.encode("memlane keeps the whole conversation")) > 0


@pytest.mark.parametrize("encoding", ["cl100k_base", "o200k_base"])
def test_encoding_equals_tiktokens_own_definition(
    encoding: str, tmp_path, monkeypatch: pytest.MonkeyPatch, no_network: None
) -> None:
    """With the packaged file placed in tiktoken's cache, tiktoken's own registry agrees."""
    cache_name = hashlib.sha1(PUBLIC_URLS[encoding].encode()).hexdigest()
    (tmp_path / cache_name).write_bytes(
        gzip.decompress(packaged_file(f"{encoding}.tiktoken.gz").read_bytes())
    )
    monkeypatch.setenv("TIKTOKEN_CACHE_DIR", str(tmp_path))
    reference = tiktoken.get_encoding(encoding)
    mine = load_encoding(encoding)  # type: ignore[arg-type]
    sample = "Governance counts tokens: 12345 ünïcödé 🚀 \n\n\tdef f(): return {'a': 1}"
    assert mine.encode(sample) == reference.encode(sample)
    assert mine.special_tokens_set == reference.special_tokens_set
    assert mine.n_vocab == reference.n_vocab


@pytest.mark.parametrize(
    ("model", "encoding"),
    [
        ("gpt-4o", "o200k_base"),
        ("gpt-4o-mini-2024-07-18", "o200k_base"),
        ("gpt-4.1", "o200k_base"),
        ("gpt-5", "o200k_base"),
        ("o1", "o200k_base"),
        ("o3-mini", "o200k_base"),
        ("o4-mini", "o200k_base"),
        ("gpt-oss-20b", "o200k_base"),
        ("openai/gpt-4o", "o200k_base"),
        ("gpt-4", "cl100k_base"),
        ("gpt-3.5-turbo", "cl100k_base"),
        ("text-embedding-3-small", "cl100k_base"),
        ("llama3.1:8b", FALLBACK_ENCODING),
        ("qwen2.5-coder", FALLBACK_ENCODING),
        ("", FALLBACK_ENCODING),
        (None, FALLBACK_ENCODING),
    ],
)
def test_model_chooses_encoding(model: str | None, encoding: str) -> None:
    assert encoding_for_model(model) == encoding


def test_special_token_text_is_counted_as_text(tokenizer: BPETokenizer) -> None:
    assert tokenizer.count("<|endoftext|>") > 1


def test_message_framing(tokenizer: BPETokenizer) -> None:
    text = "What is in the repository?"
    plain = Message(role="user", text=text)
    assert tokenizer.count_message(plain) == (
        MESSAGE_OVERHEAD + tokenizer.count("user") + tokenizer.count(text)
    )
    named = Message(role="user", text=text, name="alice")
    assert tokenizer.count_message(named) > tokenizer.count_message(plain)


def test_tool_calls_count_names_and_arguments(tokenizer: BPETokenizer) -> None:
    call = ToolCall(id="call_1", name="read_file", arguments='{"path": "src/memlane/app.py"}')
    message = Message(role="assistant", kind="tool_call", tool_calls=(call,))
    base = MESSAGE_OVERHEAD + tokenizer.count("assistant")
    expected = (
        base + TOOL_CALL_OVERHEAD + tokenizer.count(call.name) + tokenizer.count(call.arguments)
    )
    assert tokenizer.count_message(message) == expected
    two = Message(role="assistant", kind="tool_call", tool_calls=(call, call))
    assert tokenizer.count_message(two) == expected + (expected - base)


def test_count_messages_adds_reply_priming(tokenizer: BPETokenizer) -> None:
    messages = [Message(role="system", text="Be brief."), Message(role="user", text="Hi")]
    total = sum(tokenizer.count_message(m) for m in messages)
    assert count_messages(tokenizer, messages) == total + REPLY_PRIMING


def test_long_texts_are_memoised_and_bounded() -> None:
    tokenizer = BPETokenizer(load_encoding("cl100k_base"), memo_size=2)
    texts = [f"line {i}: " + "tool output " * 200 for i in range(3)]
    first = tokenizer.count(texts[0])
    assert tokenizer.count(texts[0]) == first
    assert tokenizer.memo_entries == 1
    for text in texts[1:]:
        tokenizer.count(text)
    assert tokenizer.memo_entries == 2
    assert tokenizer.count(texts[0]) == first  # evicted, recounted, still right
    assert tokenizer.count("short text") == 2
    assert tokenizer.memo_entries == 2  # short texts are not memoised


def test_tokenizers_are_shared_per_encoding() -> None:
    assert get_tokenizer("o200k_base") is get_tokenizer("o200k_base")
    assert get_tokenizer("o200k_base") is not get_tokenizer("cl100k_base")


def test_short_texts_are_memoised_exactly_and_bounded() -> None:
    encoding = load_encoding("cl100k_base")
    tokenizer = BPETokenizer(encoding, short_memo_size=2)
    texts = ["user", "a chat turn of a few words", "assistant"]
    for text in texts:
        assert tokenizer.count(text) == len(encoding.encode(text))
    assert tokenizer.short_memo_entries == 2
    assert tokenizer.count(texts[0]) == len(encoding.encode(texts[0]))  # evicted, recounted
    for text in ("aaaaaaaa", "a a a a "):  # keyed by the text, not by its length
        assert tokenizer.count(text) == len(encoding.encode(text))
    assert tokenizer.memo_entries == 0  # the long-text memo holds none of them


BOUND_TEXTS = [
    "",
    "hello world",
    "    indented\n\n\n\t\ttabs   and   runs of spaces      ",
    "12345678901234567890 3.14159 0xDEADBEEF",
    "こんにちは世界, 你好世界, 안녕하세요",
    "emoji 🧠🚀👩‍💻 and flags 🇫🇷🇯🇵",
    "a lone surrogate \ud800 in the middle",
    "<|endoftext|> and <|fim_prefix|> typed by a user",
    "ﬁ ligatures, Ω ohm, é e-acute, combining e\u0301",
    "x" * 5000,
    '{"path": "src/memlane/engine/pipeline.py", "lines": [1, 2, 3]}',
]


@pytest.mark.parametrize("encoding", ["cl100k_base", "o200k_base"])
@pytest.mark.parametrize("text", BOUND_TEXTS)
def test_the_bound_is_never_below_the_count(encoding: str, text: str) -> None:
    """Governance skips counting a request whose bound is under its threshold: a bound below
    the count would let an oversized request through uncompacted."""
    tokenizer = BPETokenizer(load_encoding(encoding))  # type: ignore[arg-type]
    message = Message(
        role="assistant",
        text=text,
        name=text[:20] or None,
        tool_calls=(ToolCall(id="c1", name="edit", arguments=text),),
    )
    assert tokenizer.bound(message) >= tokenizer.count_message(message)
    assert tokenizer.bound(Message(role="user", text=text)) >= tokenizer.count_message(
        Message(role="user", text=text)
    )


def test_the_bound_encodes_nothing(monkeypatch: pytest.MonkeyPatch) -> None:
    tokenizer = BPETokenizer(load_encoding("cl100k_base"))

    def refused(text: str) -> int:
        raise AssertionError("the bound encoded a text")

    monkeypatch.setattr(tokenizer, "_encode_len", refused)
    text = "The quick brown fox jumps over the lazy dog."
    assert tokenizer.bound(Message(role="user", text=text)) == MESSAGE_OVERHEAD + 4 + len(text)
    assert tokenizer.bound(Message(role="user", text="é")) == MESSAGE_OVERHEAD + 4 + 2


def test_a_message_is_counted_once_per_encoding(monkeypatch: pytest.MonkeyPatch) -> None:
    """A resent history hands governance the same `Message` objects request after request
    (`types.resent`): each is counted once, not looked up text by text again."""
    cl100k = BPETokenizer(load_encoding("cl100k_base"))
    message = Message(role="user", text="The quick brown fox jumps over the lazy dog.")
    first = cl100k.count_message(message)
    looked_up: list[str] = []
    real = cl100k.count

    def count(text: str) -> int:
        looked_up.append(text)
        return real(text)

    monkeypatch.setattr(cl100k, "count", count)
    assert cl100k.count_message(message) == first
    assert looked_up == []
    copy = message.with_text("another text")  # a changed copy is counted anew
    assert cl100k.count_message(copy) == MESSAGE_OVERHEAD + real("user") + real("another text")
    assert looked_up == ["user", "another text"]
    o200k = BPETokenizer(load_encoding("o200k_base"))  # so is one for another encoding
    assert o200k.count_message(message) == MESSAGE_OVERHEAD + 1 + 10
    assert cl100k.count_message(message) == first


def test_an_image_or_document_part_counts_as_a_provider_charges_it() -> None:
    chat = {"role": "user", "content": [{"type": "text", "text": "see"}, {"type": "image_url"}]}
    responses = {"role": "user", "content": [{"type": "input_image"}, {"type": "input_file"}]}
    claude_tool_result = {
        "role": "user",
        "content": [
            {"type": "tool_result", "content": [{"type": "image", "source": {}}]},
            {"type": "document", "source": {}},
        ],
    }
    assert [media_parts(i) for i in (chat, responses, claude_tool_result, None)] == [1, 2, 2, 0]
    tokenizer = get_tokenizer("cl100k_base")
    seen = Message(role="user", text="see\n[image]", raw=chat)
    plain = Message(role="user", text="see\n[image]")
    assert tokenizer.count_message(seen) == tokenizer.count_message(plain) + MEDIA_TOKENS
    assert tokenizer.bound(seen) >= tokenizer.count_message(seen)
