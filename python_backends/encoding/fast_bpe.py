"""An exact twin, on tiktoken, of a byte-level BPE tokenizer (Qwen2's and Qwen3's layout): the same ids as
`Tokenizer.encode(text, add_special_tokens=False)` in ~1/5 of the time on one core. `fast_bpe` builds it only where
the `tokenizers` library provably gives the same ids for every text; otherwise it returns None (the reason logged at
debug level) and the caller keeps the `tokenizers` tokenizer.

What `tokenizers` does to a text, and how the twin matches each step:

1. Added tokens ('<|im_end|>') are split off the raw text first: at the leftmost place one starts, the longest one;
   a special one is left as text when `encode_special_tokens` is set. The twin splits the same way; a token with
   lstrip, rstrip, single_word or normalized set (matched after normalization) is refused.
2. Each piece between them is normalized on its own (NFC, or not at all): the twin applies the same normalizer to
   the piece, skipping text that NFC leaves alone in every Unicode version (checked against it when built).
3. The piece is split by the pre-tokenizer's regular expression, each part taken as its UTF-8 bytes (ByteLevel) and
   merged by BPE; tiktoken does the same with the pattern and the token bytes as ranks (rank = id). The BPEs agree
   when (checked when built) every byte is a token (no unknown token, no byte fallback) and:
   - merges are in id order: the HF BPE merges the adjacent listed pair of lowest merge index, tiktoken the adjacent
     pair whose concatenation has the lowest id (both leftmost first), so each merge's token id must exceed the one
     before it;
   - every token of the vocabulary, tokenized by the HF BPE alone, is itself. tiktoken merges any two parts whose
     concatenation is a token, listed or not; if it ever merged an unlisted pair, the first such merge (x, y into t)
     would follow only listed merges within t's bytes, which the HF BPE on t alone makes too, in the same order; it
     would end at x, y and stop: t would not be itself. The check also makes tiktoken's lookup of a whole part in the
     vocabulary (and the HF BPE's, with ignore_merges) harmless.
   The pattern runs on Oniguruma in `tokenizers` and on fancy-regex in tiktoken, each with its own Unicode tables:
   it is accepted only if VERIFIED_PATTERNS lists it (its syntax backtracks in the same order in both engines) and
   each character class it uses has the same members in both engines over all of Unicode.
"""

from __future__ import annotations

import functools
import json
import logging
import os
import re
import threading
from concurrent.futures import ThreadPoolExecutor
from typing import Any, NamedTuple

from tokenizers import Regex, Tokenizer, models, normalizers

try:
    import tiktoken
except ImportError:  # vLLM depends on it, so the serving images have it; without it the HF tokenizer serves alone
    tiktoken = None

log = logging.getLogger(__name__)

# Qwen2's split pattern (Qwen2.5 and Qwen3 share it) and the classes it is built of: its other characters are
# literal ('\r', '\n', ' ', letters of the contractions), its constructs (alternation, greedy ? + *, classes, an
# inline case-insensitive group, a negative lookahead) backtrack in the same order in both engines. No character's
# case folding is one of the contractions' letter pairs, so single characters decide the case-insensitive matches.
QWEN2_PATTERN = (
    r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+"
)
# Each pattern's one-character classes, in groups: a group is compared over all of Unicode as one alternation, then
# each of its members over the characters the group matched.
VERIFIED_PATTERNS = {QWEN2_PATTERN: ((r"\p{L}",), (r"\p{N}",), (r"\s",), tuple(f"(?i:{c})" for c in "'strevmld"))}
# fancy-regex stops a match whose backtracking stack passes 1,000,000 entries, as a run of ~1M blanks makes it, and
# tiktoken then panics: longer texts go to the HF tokenizer.
MAX_TWIN_CHARS = 100_000
# Characters NFC leaves alone in any Unicode version and next to any of them: Latin-1 and the dashes, quotes,
# bullets and ellipsis of U+2010-U+2027 (combining class 0, no decomposition that NFC does not compose back, no
# second part of a composition). Most text is only these; it skips the normalizer's per-character bookkeeping.
NFC_STABLE = "\x00-\xff\u2010-\u2027"
# Put between the texts of one tiktoken call, as a special token: tiktoken splits the call's text at it and runs the
# pattern and the BPE on each text alone, as on each text by itself. A text holding it is tokenized alone.
SEPARATOR = "\x00"
# Post-processors that add nothing without special tokens (ByteLevel only moves offsets), alone or in a Sequence
POST_PROCESSORS = {"ByteLevel", "TemplateProcessing", "RobertaProcessing", "BertProcessing"}


class Refused(ValueError):
    """Why a tokenizer has no exact twin."""


class Proven(NamedTuple):
    """What the checks establish for a tokenizer: tiktoken's ranks and pattern, and the normalizer of each piece."""

    ranks: dict[bytes, int]
    pattern: str
    normalizer: normalizers.Normalizer | None


class FastBpe:
    """The twin: `encode_batch(texts)` gives each text's ids, as `tokenizer.encode(text, add_special_tokens=False)`.

    On `threads` > 1 the texts are split among as many threads, each with a tiktoken encoding of its own (~37 MB
    each): tiktoken's regex serves the first thread that uses it fast and makes the others queue, so two threads on
    one encoding were slower than one alone, and on one each ~1.7x faster (64 documents, 2 cores).

    Each thread tokenizes its share in one tiktoken call, the texts joined by SEPARATOR: tiktoken holds no GIL for
    the call's length, where a call per text takes the GIL back after every text, as often as a request has
    documents, from each of the threads. A text holding an added token or the separator, or too long for the regex
    engine, is tokenized alone (`_encode`)."""

    def __init__(self, proven: Proven, added: dict[str, int | None], tokenizer: Tokenizer, threads: int) -> None:
        self._separator_id = max(proven.ranks.values()) + 1  # an id no text's BPE gives
        self._make_encoding = functools.partial(
            tiktoken.Encoding, "fast_bpe", pat_str=proven.pattern, mergeable_ranks=proven.ranks,
            special_tokens={SEPARATOR: self._separator_id},
        )
        # one per tokenizing thread, built here, first run there: the thread a regex first runs on keeps its fast path
        self._idle_encodings = [self._make_encoding() for _ in range(threads)]
        self._local = threading.local()
        self._pool = ThreadPoolExecutor(threads, thread_name_prefix="fast-bpe") if threads > 1 else None
        self._threads = threads
        self._normalizer = proven.normalizer
        self._stable = re.compile(f"[{NFC_STABLE}]*")
        self._added = added  # content -> id; None: a special token matched and left as text
        self._split = re.compile("|".join(re.escape(token) for token in sorted(added, key=len, reverse=True)) or "(?!)")
        self._tok = tokenizer

    def encode_batch(self, texts: list[str]) -> list[list[int]]:
        if self._pool is None:
            return self._encode_all(texts)
        size = max(1, -(-len(texts) // self._threads))
        chunks = self._pool.map(self._encode_all, [texts[start:start + size] for start in range(0, len(texts), size)])
        return [ids for chunk in chunks for ids in chunk]

    def _encode_all(self, texts: list[str]) -> list[list[int]]:
        encoding = self._encoding()
        prepared = [self._joinable(text) for text in texts]
        joined = iter(self._encode_joined([text for text in prepared if text is not None], encoding))
        return [self._encode(text, encoding) if ready is None else next(joined) for text, ready in zip(texts, prepared)]

    def _encoding(self) -> Any:
        encoding = getattr(self._local, "encoding", None)
        if encoding is None:
            try:
                encoding = self._idle_encodings.pop()
            except IndexError:  # a second thread calling a twin without a pool
                encoding = self._make_encoding()
            self._local.encoding = encoding
        return encoding

    def _joinable(self, text: str) -> str | None:
        """The text as tiktoken must see it (normalized) if it can share a call with others, else None."""
        if len(text) > MAX_TWIN_CHARS or SEPARATOR in text or self._split.search(text):
            return None
        return self._normalized(text)  # NFC makes no separator of other characters

    def _encode_joined(self, texts: list[str], encoding: Any) -> list[list[int]]:
        if not texts:
            return []
        ids = encoding.encode(SEPARATOR.join(texts), allowed_special={SEPARATOR})
        pieces, start = [], 0
        for _ in range(len(texts) - 1):
            end = ids.index(self._separator_id, start)
            pieces.append(ids[start:end])
            start = end + 1
        pieces.append(ids[start:])
        return pieces

    def _encode(self, text: str, encoding: Any) -> list[int]:
        if len(text) > MAX_TWIN_CHARS:
            return self._tok.encode(text, add_special_tokens=False).ids
        ids: list[int] = []
        start = 0
        for match in self._split.finditer(text):
            token = self._added[match.group()]
            if token is not None:
                ids += self._piece(text[start:match.start()], encoding)
                ids.append(token)
                start = match.end()
        ids += self._piece(text[start:], encoding)
        return ids

    def _piece(self, text: str, encoding: Any) -> list[int]:
        return encoding.encode_ordinary(self._normalized(text))

    def _normalized(self, text: str) -> str:
        if self._normalizer is None or self._stable.fullmatch(text):
            return text
        return self._normalizer.normalize_str(text)


def fast_bpe(tokenizer: Tokenizer) -> FastBpe | None:
    """The exact tiktoken twin of `tokenizer` (as python_backends.checkpoint_files.served_tokenizer builds it), or
    None where none is proven to give the same ids. It tokenizes on as many threads as the step gives the Rust
    tokenizer (RAYON_NUM_THREADS, which it sets from tokenizer_threads); unset, on the calling thread alone."""
    if tiktoken is None:
        _warn_no_tiktoken()
        return None
    try:
        proven = _prove(tokenizer.to_str())
        added = _added_tokens(tokenizer)
    except Refused as reason:
        log.debug("the tokenizer is kept for every text, no exact tiktoken twin: %s", reason)
        return None
    return FastBpe(proven, added, tokenizer, int(os.environ.get("RAYON_NUM_THREADS") or 1))


@functools.cache
def _warn_no_tiktoken() -> None:
    log.warning("tiktoken is not installed: byte-level BPE tokenizers run on the tokenizers library alone (slower)")


@functools.lru_cache(maxsize=1)  # a preprocess step builds one; tests build several encoders of one checkpoint
def _prove(serialized: str) -> Proven:
    """What a serialized tokenizer's twin is made of, once every check holds (else Refused)."""
    config = json.loads(serialized)
    ranks = _ranks(config["model"])
    normalizer = _normalizer(config["normalizer"])
    _check_nothing_added(config)
    pattern = _split_pattern(config["pre_tokenizer"])
    _check_merge_order(config["model"])
    _check_tokens_are_themselves(config["model"])
    _check_pattern(pattern)
    return Proven(ranks, pattern, normalizer)


def _normalizer(config: dict | None) -> normalizers.Normalizer | None:
    if config is None:
        return None
    if config != {"type": "NFC"}:
        raise Refused(f"normalizer {config.get('type')}: only NFC or none are reproduced")
    normalizer = normalizers.NFC()
    stable = re.findall(f"[{NFC_STABLE}]", "".join(map(chr, range(0x2028))))
    pairs = "".join(a + b for a in stable for b in stable)
    if normalizer.normalize_str(pairs) != pairs:  # the NFC_STABLE shortcut holds for this library's tables
        raise Refused("NFC changes text of the characters taken as stable")
    return normalizer


def _check_nothing_added(config: dict) -> None:
    """Nothing after the BPE changes the ids of a text tokenized without special tokens."""
    if config["truncation"] or config["padding"]:
        raise Refused("truncation or padding is set")
    processor = config["post_processor"] or {"type": "Sequence", "processors": []}
    steps = processor["processors"] if processor["type"] == "Sequence" else [processor]
    if not POST_PROCESSORS.issuperset(step["type"] for step in steps):
        raise Refused(f"post-processor {processor['type']}")


def _split_pattern(pre_tokenizer: dict | None) -> str:
    """The pre-tokenizer's pattern, for Qwen2's layout: Split(pattern, isolated) then ByteLevel without its regex."""
    steps = (pre_tokenizer or {}).get("pretokenizers") or [pre_tokenizer]
    if len(steps) != 2 or steps[0].get("type") != "Split" or steps[1].get("type") != "ByteLevel":
        raise Refused("the pre-tokenizer is not Sequence[Split, ByteLevel]")
    split, byte_level = steps
    if split["behavior"] != "Isolated" or split["invert"] or "Regex" not in split["pattern"]:
        raise Refused("the split is not an isolating regular expression")
    if byte_level["add_prefix_space"] or byte_level["use_regex"]:
        raise Refused("ByteLevel adds a prefix space or splits by its own regex")
    return split["pattern"]["Regex"]


def _ranks(model: dict) -> dict[bytes, int]:
    """tiktoken's ranks: each token's bytes (read through GPT-2's byte-to-character table) and its id."""
    if model["type"] != "BPE":
        raise Refused(f"model {model['type']}")
    if model["dropout"] or model["byte_fallback"] or model["continuing_subword_prefix"] or model["end_of_word_suffix"]:
        raise Refused("BPE dropout, byte fallback, a subword prefix or an end-of-word suffix")
    to_byte = {character: byte for byte, character in bytes_to_unicode().items()}
    vocab = model["vocab"]
    if not set(to_byte).issubset(vocab) or len(set(vocab.values())) != len(vocab):
        raise Refused("a byte is no token, or two tokens share an id")
    try:
        return {bytes(to_byte[character] for character in token): index for token, index in vocab.items()}
    except KeyError:
        raise Refused("a token is not byte-level text") from None


def bytes_to_unicode() -> dict[int, str]:
    """GPT-2's reversible byte -> printable character table (what ByteLevel pre-tokenization produces)."""
    printable = [*range(ord("!"), ord("~") + 1), *range(ord("¡"), ord("¬") + 1), *range(ord("®"), ord("ÿ") + 1)]
    unprintable = [byte for byte in range(256) if byte not in printable]
    return {**{byte: chr(byte) for byte in printable}, **{byte: chr(256 + i) for i, byte in enumerate(unprintable)}}


def _check_merge_order(model: dict) -> None:
    vocab, last = model["vocab"], -1
    for index, (left, right) in enumerate(model["merges"]):
        merged = vocab.get(left + right, -1)
        if merged <= last:
            raise Refused(f"merge {index} ({left!r}, {right!r}) makes id {merged}, not above the one before ({last})")
        last = merged


def _check_tokens_are_themselves(model: dict) -> None:
    """Every token, tokenized by the HF BPE alone (no whole-word lookup, no cache), is itself."""
    vocab = model["vocab"]
    bpe = models.BPE(vocab=vocab, merges=[tuple(merge) for merge in model["merges"]], cache_capacity=0)
    tokens = list(vocab)
    for token, encoding in zip(tokens, Tokenizer(bpe).encode_batch_fast(tokens, add_special_tokens=False)):
        if encoding.ids != [vocab[token]]:
            raise Refused(f"token {token!r} is tokenized as {encoding.ids}, not as itself")


@functools.cache  # per pattern: it depends on the two libraries' engines alone
def _check_pattern(pattern: str) -> None:
    if pattern not in VERIFIED_PATTERNS:
        raise Refused(f"split pattern {pattern!r} is not one whose syntax both regex engines are known to agree on")
    for group in VERIFIED_PATTERNS[pattern]:
        members = _same_members("|".join(group), _every_character())
        if len(group) > 1:  # each atom's members are among the group's: read them there (a few characters)
            for atom in group:
                _same_members(atom, members)


def _same_members(atom: str, text: str) -> str:
    """The characters of `text` that a one-character pattern matches, the same in both engines (else Refused)."""
    # Oniguruma: drop the characters that are not members; fancy-regex: encode only the members (tiktoken drops
    # what its pattern does not match), byte by byte
    onig = normalizers.Replace(Regex(f"(?!{atom})[\\s\\S]"), "").normalize_str(text)
    single_bytes = {bytes([byte]): byte for byte in range(256)}
    probe = tiktoken.Encoding("class_probe", pat_str=atom, mergeable_ranks=single_bytes, special_tokens={})
    if bytes(probe.encode_ordinary(text)).decode() != onig:
        raise Refused(f"the regex engines disagree on the members of {atom}")
    return onig


def _every_character() -> str:
    """Every Unicode scalar value (surrogates are no text), in order."""
    return "".join(map(chr, [*range(0xD800), *range(0xE000, 0x110000)]))


def _added_tokens(tokenizer: Tokenizer) -> dict[str, int | None]:
    """Each added token's text -> its id, or None for a special token `encode_special_tokens` leaves as text."""
    added = {}
    for index, token in tokenizer.get_added_tokens_decoder().items():
        # normalized tokens are matched in a second pass, after normalization
        if token.lstrip or token.rstrip or token.single_word or token.normalized:
            raise Refused(f"added token {token.content!r} strips blanks, matches single words or is normalized")
        added[token.content] = None if token.special and tokenizer.encode_special_tokens else index
    return added
