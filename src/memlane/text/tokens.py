"""Counting tokens the way the model will, offline.

The BPE encodings (cl100k_base, o200k_base) ship gzipped inside the `bpe-openai`
wheel. memlane reads them from there, checks them against the sha256 tiktoken
publishes for the same file, and builds a `tiktoken.Encoding` through its public
constructor, so nothing is ever downloaded and no tiktoken internals are touched.

Which encoding a model uses comes from tiktoken's own model table; a model it
does not know (a local Ollama or vLLM model, say) is counted with cl100k_base.
For such models the count is an estimate (typically within ±15% of the model's
own tokenizer), which governance's safety margin absorbs.

Governance counts every message of every request, and long histories repeat
the same large tool outputs turn after turn, so counts of long texts are
memoised in a bounded LRU keyed by the text's hash and length. Short texts
(roles, chat turns) are memoised too, keyed by the text itself: tiktoken spends
2–15 µs on even a short text, a lookup well under 1 µs, and a resent history
is counted again on every request.
"""

from __future__ import annotations

import base64
import functools
import gzip
import hashlib
import importlib.util
import threading
from collections import OrderedDict
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal, Protocol

import tiktoken
import tiktoken.model

from memlane.types import Message

EncodingName = Literal["cl100k_base", "o200k_base"]
FALLBACK_ENCODING: EncodingName = "cl100k_base"
"""The encoding used for models tiktoken does not know (local models, other vendors)."""

MESSAGE_OVERHEAD = 3
"""Framing tokens around every message (start marker, role separator, end marker)."""
NAME_OVERHEAD = 1
"""Extra token when a message carries a `name`."""
TOOL_CALL_OVERHEAD = 3
"""Framing tokens around each tool call (its id and the call envelope)."""
REPLY_PRIMING = 3
"""Tokens every request spends priming the assistant's reply."""
MEDIA_TOKENS = 1_600
"""What one image or document part is counted as. Its text stands for it as `[image]`
(two tokens), while a provider charges by its pixels: Anthropic about 1,600 for an
image at the largest size it takes unresized, OpenAI up to 1,105 at high detail. Counted
at the larger, a session of screenshots is compacted before the upstream refuses it."""
MEDIA_TYPES = frozenset(
    {"image", "image_url", "input_image", "document", "file", "input_file"}
)  # fmt: skip
"""The `type`s of the content parts `MEDIA_TOKENS` counts, in every wire format."""
_MEDIA_DEPTH = 4
"""How deep media parts are looked for in a message's item (a tool result's content)."""

MEMO_MIN_CHARS = 512
"""Texts from this length on are memoised by hash and length (the memo never holds them)."""
MEMO_SIZE = 16_384
"""Long-text counts remembered per encoding."""
SHORT_MEMO_SIZE = 8_192
"""Short-text counts remembered per encoding, keyed by the text (at most ~4 MB of text)."""


@dataclass(frozen=True, slots=True)
class _Spec:
    """Everything tiktoken's own definition of an encoding holds, minus the download."""

    file: str
    sha256: str
    pat_str: str
    special_tokens: dict[str, int]


_ENDOFTEXT = "<|endoftext|>"
_ENDOFPROMPT = "<|endofprompt|>"

_SPECS: dict[EncodingName, _Spec] = {
    "cl100k_base": _Spec(
        file="cl100k_base.tiktoken.gz",
        sha256="223921b76ee99bde995b7ff738513eef100fb51d18c93597a113bcffe865b2a7",
        pat_str=(
            r"""'(?i:[sdmt]|ll|ve|re)|[^\r\n\p{L}\p{N}]?+\p{L}++|\p{N}{1,3}+|"""
            r""" ?[^\s\p{L}\p{N}]++[\r\n]*+|\s++$|\s*[\r\n]|\s+(?!\S)|\s"""
        ),
        special_tokens={
            _ENDOFTEXT: 100257,
            "<|fim_prefix|>": 100258,
            "<|fim_middle|>": 100259,
            "<|fim_suffix|>": 100260,
            _ENDOFPROMPT: 100276,
        },
    ),
    "o200k_base": _Spec(
        file="o200k_base.tiktoken.gz",
        sha256="446a9538cb6c348e3516120d7c08b09f57c36495e2acfffe59a5bf8b0cfb1a2d",
        pat_str="|".join(
            [
                r"""[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]*[\p{Ll}\p{Lm}\p{Lo}\p{M}]+(?i:'s|'t|'re|'ve|'m|'ll|'d)?""",
                r"""[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]+[\p{Ll}\p{Lm}\p{Lo}\p{M}]*(?i:'s|'t|'re|'ve|'m|'ll|'d)?""",
                r"""\p{N}{1,3}""",
                r""" ?[^\s\p{L}\p{N}]+[\r\n/]*""",
                r"""\s*[\r\n]+""",
                r"""\s+(?!\S)""",
                r"""\s+""",
            ]
        ),
        special_tokens={_ENDOFTEXT: 199999, _ENDOFPROMPT: 200018},
    ),
}

# tiktoken names encodings memlane does not ship; each maps to the closest one it does.
_ALIASES: dict[str, EncodingName] = {
    "o200k_harmony": "o200k_base",  # same ranks, more special tokens
    "cl100k_base": "cl100k_base",
    "o200k_base": "o200k_base",
}


class TokenizerError(Exception):
    """The packaged encoding is missing or damaged (a broken install)."""


class Tokenizer(Protocol):
    name: str

    def count(self, text: str) -> int: ...

    def count_message(self, message: Message) -> int:
        """Tokens a message costs in a request, including per-message framing."""
        ...

    def bound(self, message: Message) -> int:
        """At least `count_message(message)`, found without encoding anything: whether a
        request fits is then known in microseconds, and its exact count can wait."""
        ...


def encoding_for_model(model: str | None) -> EncodingName:
    """The encoding a model counts with: tiktoken's table, else the documented fallback.

    A provider prefix (`openai/gpt-4o`) is ignored; an empty model gets the fallback.
    """
    if not model:
        return FALLBACK_ENCODING
    bare = model.rsplit("/", 1)[-1].strip()
    try:
        name = tiktoken.model.encoding_name_for_model(bare)
    except KeyError:
        return FALLBACK_ENCODING
    return _ALIASES.get(name, FALLBACK_ENCODING)


class BPETokenizer:
    """A real BPE tokenizer (tiktoken) with a memo for long texts. Thread-safe."""

    def __init__(
        self,
        encoding: tiktoken.Encoding,
        *,
        memo_size: int = MEMO_SIZE,
        short_memo_size: int = SHORT_MEMO_SIZE,
    ) -> None:
        self.name: str = encoding.name
        self._encoding = encoding
        self._memo: OrderedDict[tuple[int, int], int] = OrderedDict()
        self._memo_size = memo_size
        self._lock = threading.Lock()
        self._short = functools.lru_cache(maxsize=short_memo_size)(self._encode_len)

    def count(self, text: str) -> int:
        if len(text) < MEMO_MIN_CHARS:
            return self._short(text)
        # Python's string hash is fast (and cached on the string object); with the
        # length it makes a 64+ bit key, so a wrong hit needs a collision among a
        # few thousand live entries: negligible, and the memo lives only in-process.
        key = (hash(text), len(text))
        with self._lock:
            cached = self._memo.get(key)
            if cached is not None:
                self._memo.move_to_end(key)
                return cached
        counted = self._encode_len(text)
        with self._lock:
            self._memo[key] = counted
            if len(self._memo) > self._memo_size:
                self._memo.popitem(last=False)
        return counted

    @property
    def memo_entries(self) -> int:
        """How many long-text counts are remembered (bounded by `memo_size`)."""
        return len(self._memo)

    @property
    def short_memo_entries(self) -> int:
        """How many short-text counts are remembered (bounded by `short_memo_size`)."""
        return self._short.cache_info().currsize

    def forget_texts(self) -> None:
        """Drop the short-text counts, keyed by the texts themselves (the long-text memo
        holds only hashes and lengths)."""
        self._short.cache_clear()

    def count_message(self, message: Message) -> int:
        counted = message.counted(self.name)
        if counted is not None:  # a message resent as the same object (`types.resent`)
            return counted
        total = MESSAGE_OVERHEAD + self.count(message.role) + self.count(message.text)
        total += MEDIA_TOKENS * media_parts(message.raw)
        if message.name:
            total += NAME_OVERHEAD + self.count(message.name)
        for call in message.tool_calls:
            total += TOOL_CALL_OVERHEAD + self.count(call.name) + self.count(call.arguments)
        message.note_count(self.name, total)
        return total

    def bound(self, message: Message) -> int:
        """Every token of a byte-level BPE stands for at least one byte of UTF-8: a text
        costs at most its byte length (a lone surrogate is encoded as U+FFFD, three bytes,
        as `surrogatepass` counts it)."""
        total = MESSAGE_OVERHEAD + _utf8_len(message.role) + _utf8_len(message.text)
        total += MEDIA_TOKENS * media_parts(message.raw)
        if message.name:
            total += NAME_OVERHEAD + _utf8_len(message.name)
        for call in message.tool_calls:
            total += TOOL_CALL_OVERHEAD + _utf8_len(call.name) + _utf8_len(call.arguments)
        return total

    def _encode_len(self, text: str) -> int:
        # Special-token strings in user text are counted as plain text, never rejected.
        return len(self._encoding.encode(text, disallowed_special=()))


def media_parts(item: Any, depth: int = 0) -> int:
    """How many image or document parts a message's wire item holds (`MEDIA_TYPES`),
    its content's and its tool results' (Claude Code returns screenshots in those)."""
    if depth > _MEDIA_DEPTH:
        return 0
    if isinstance(item, Mapping):
        if item.get("type") in MEDIA_TYPES:
            return 1
        content = item.get("content")
        return media_parts(content, depth + 1) if isinstance(content, list) else 0
    if isinstance(item, list):
        return sum(media_parts(part, depth + 1) for part in item)
    return 0


def _utf8_len(text: str) -> int:
    return len(text) if text.isascii() else len(text.encode("utf-8", "surrogatepass"))


def count_messages(tokenizer: Tokenizer, messages: list[Message]) -> int:
    """Tokens a whole request's messages cost, including the reply priming."""
    return REPLY_PRIMING + sum(tokenizer.count_message(m) for m in messages)


_TOKENIZERS: dict[EncodingName, BPETokenizer] = {}
_TOKENIZERS_LOCK = threading.Lock()


def get_tokenizer(encoding: EncodingName) -> BPETokenizer:
    """The process-wide tokenizer of an encoding, loaded once (0.1–0.3 s) on first use."""
    with _TOKENIZERS_LOCK:
        tokenizer = _TOKENIZERS.get(encoding)
        if tokenizer is None:
            tokenizer = BPETokenizer(load_encoding(encoding))
            _TOKENIZERS[encoding] = tokenizer
        return tokenizer


def forget_texts() -> None:
    """Every process-wide tokenizer drops the texts its memo is keyed by (a session was
    deleted: what it said leaves this process's memory too)."""
    with _TOKENIZERS_LOCK:
        tokenizers = list(_TOKENIZERS.values())
    for tokenizer in tokenizers:
        tokenizer.forget_texts()


def load_encoding(name: EncodingName) -> tiktoken.Encoding:
    """Build an encoding from the file shipped in `bpe-openai`, after checking its hash."""
    spec = _SPECS[name]
    path = packaged_file(spec.file)
    try:
        data = gzip.decompress(path.read_bytes())
    except (OSError, EOFError, gzip.BadGzipFile) as exc:
        raise TokenizerError(f"cannot read the {name} encoding at {path}: {exc}") from exc
    if hashlib.sha256(data).hexdigest() != spec.sha256:
        raise TokenizerError(f"the {name} encoding at {path} is damaged (hash mismatch)")
    return tiktoken.Encoding(
        name=name,
        pat_str=spec.pat_str,
        mergeable_ranks=_parse_ranks(data),
        special_tokens=spec.special_tokens,
    )


def _parse_ranks(data: bytes) -> dict[bytes, int]:
    ranks: dict[bytes, int] = {}
    for line in data.splitlines():
        if line:
            token, rank = line.split()
            ranks[base64.b64decode(token)] = int(rank)
    return ranks


def packaged_file(filename: str) -> Path:
    """Where an encoding file sits inside the installed `bpe-openai` package."""
    # find_spec locates the data folder without importing bpe-openai's native bindings.
    spec = importlib.util.find_spec("bpe_openai")
    if spec is None or not spec.submodule_search_locations:
        raise TokenizerError("the bpe-openai package (memlane's token encodings) is not installed")
    return Path(next(iter(spec.submodule_search_locations))) / "data" / filename
