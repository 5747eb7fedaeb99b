"""Tiny random-weight checkpoints of every model family, built offline for the tests.

Each builder writes a folder that `transformers` and vLLM load like a hub checkpoint: `config.json`,
`model.safetensors`, and a fast tokenizer (`tokenizer.json` + `tokenizer_config.json`) made with the
`tokenizers` library from a small word vocabulary. Weights are seeded, so a folder is the same on every run.

Sizes follow what vLLM's CPU attention backend accepts (head size >= 32): hidden 64, 2 heads of 32, 2 layers.

    python -m tests.support.tiny_models /tmp/tiny   # writes /tmp/tiny/{bert,qwen3,xlmr}
"""

from __future__ import annotations

import sys
from pathlib import Path

# Words every test sentence is made of; anything else becomes the unknown token.
WORDS = sorted(
    set(
        """
        a an the of to in on for and or is are was be it its this that with as by at from what which who how
        why when where do does did not can will would should has have had many much more most some any all
        yes no query document passage answer relevant irrelevant capital city country france paris germany
        berlin italy rome spain madrid europe river mountain population largest small big old new year years
        people live lives water food weather rain sun cold hot summer winter cat cats dog dogs animal animals
        eat eats sleep sleeps run runs fast slow car cars train trains bus road computer computers software
        program code python language model models neural network learning machine data search engine web
        retrieve rank ranking score scores result results good bad best worst one two three four five ten
        hundred thousand million first second last time day night week history war king queen empire built
        tower eiffel famous museum art painting music song book books read write written story
        whether meets requirements based provided only passages
        """.split()
    )
)
PUNCTUATION = list(".,:;!?\"'()-<>/")


def _word_level(vocab_tokens: list[str], unk: str, lowercase: bool, keep_newlines: bool):
    from tokenizers import Regex, Tokenizer, models, normalizers, pre_tokenizers

    vocab = {token: index for index, token in enumerate(vocab_tokens)}
    tokenizer = Tokenizer(models.WordLevel(vocab=vocab, unk_token=unk))
    if lowercase:
        tokenizer.normalizer = normalizers.Sequence([normalizers.NFD(), normalizers.Lowercase(), normalizers.StripAccents()])
    if keep_newlines:
        # Words, single punctuation marks and each "\n" are tokens; spaces and tabs separate them and vanish.
        tokenizer.pre_tokenizer = pre_tokenizers.Sequence(
            [
                pre_tokenizers.Split(Regex(r"[ \t\r]+"), behavior="removed"),
                pre_tokenizers.Split(Regex(r"\w+|[^\w\s]|\n"), behavior="isolated"),
            ]
        )
    else:
        tokenizer.pre_tokenizer = pre_tokenizers.BertPreTokenizer()
    return tokenizer


# Every model is this small; the initializer range is larger than the usual 0.02 so that random logits spread out
# and token types visibly matter.
TINY_SIZE = {
    "hidden_size": 64,
    "num_attention_heads": 2,
    "num_hidden_layers": 2,
    "intermediate_size": 128,
    "initializer_range": 0.2,
}


def _save_model(out: Path, model_class: type, config, seed: int) -> Path:
    """Seeded random weights of `model_class` (also the checkpoint's architecture) saved as safetensors."""
    import torch

    config.architectures = [model_class.__name__]
    torch.manual_seed(seed)
    model_class(config).eval().save_pretrained(out, safe_serialization=True)
    return out


def _encoder_tokenizer(out: Path, specials: dict[str, str], single: str, pair: str, **fast_options) -> int:
    """A lowercasing word-level tokenizer whose vocabulary starts with `specials` (role -> token, in vocabulary
    order) and whose post-processor wraps one text in `single` and a pair in `pair`; returns the vocabulary size."""
    from tokenizers import processors
    from transformers import PreTrainedTokenizerFast

    special_tokens = list(dict.fromkeys(specials.values()))  # a token may hold two roles (XLM-R's <s> is also CLS)
    vocab = special_tokens + WORDS + PUNCTUATION
    tokenizer = _word_level(vocab, specials["unk_token"], lowercase=True, keep_newlines=False)
    in_templates = f"{single} {pair}".split()
    tokenizer.post_processor = processors.TemplateProcessing(
        single=single,
        pair=pair,
        special_tokens=[(token, vocab.index(token)) for token in special_tokens if token in in_templates],
    )
    PreTrainedTokenizerFast(tokenizer_object=tokenizer, **specials, **fast_options).save_pretrained(out)
    return len(vocab)


def build_bert_cross_encoder(out: Path, seed: int = 0) -> Path:
    """`BertForSequenceClassification`, num_labels=1, with a `[CLS] q [SEP] d [SEP]` pair template and token types."""
    from transformers import BertConfig, BertForSequenceClassification

    out = Path(out)
    vocab_size = _encoder_tokenizer(
        out,
        {"pad_token": "[PAD]", "unk_token": "[UNK]", "cls_token": "[CLS]", "sep_token": "[SEP]", "mask_token": "[MASK]"},
        single="[CLS] $A [SEP]",
        pair="[CLS] $A [SEP] $B:1 [SEP]:1",
        model_input_names=["input_ids", "token_type_ids", "attention_mask"],
        model_max_length=128,
    )
    config = BertConfig(
        vocab_size=vocab_size, max_position_embeddings=128, type_vocab_size=2, num_labels=1, pad_token_id=0, **TINY_SIZE
    )
    return _save_model(out, BertForSequenceClassification, config, seed)


def build_xlmr_cross_encoder(out: Path, seed: int = 2) -> Path:
    """`XLMRobertaForSequenceClassification` (type_vocab_size 1), pair template `<s> A </s></s> B </s>`."""
    from transformers import XLMRobertaConfig, XLMRobertaForSequenceClassification

    out = Path(out)
    vocab_size = _encoder_tokenizer(
        out,
        {"bos_token": "<s>", "pad_token": "<pad>", "eos_token": "</s>", "unk_token": "<unk>", "mask_token": "<mask>",
         "sep_token": "</s>", "cls_token": "<s>"},
        single="<s> $A </s>",
        pair="<s> $A </s> </s> $B </s>",
        model_input_names=["input_ids", "attention_mask"],
        model_max_length=126,
    )
    config = XLMRobertaConfig(
        vocab_size=vocab_size,
        max_position_embeddings=130,  # RoBERTa positions start after padding_idx (1): 128 usable
        type_vocab_size=1,
        num_labels=1,
        pad_token_id=1,
        bos_token_id=0,
        eos_token_id=2,
        **TINY_SIZE,
    )
    return _save_model(out, XLMRobertaForSequenceClassification, config, seed)


QWEN3_SPECIALS = ["<|endoftext|>", "<|im_start|>", "<|im_end|>", "<think>", "</think>"]


def build_qwen3_reranker(out: Path, seed: int = 1) -> Path:
    """`Qwen3ForCausalLM` shaped like Qwen3-Reranker, with "yes"/"no" in its vocabulary.

    vLLM's `is_original_qwen3_reranker` loader looks the two tokens up with
    `tokenizer.convert_tokens_to_ids("no")` / `("yes")` and keeps lm_head[yes] - lm_head[no] as the classifier.
    """
    from huggingface_hub.repocard import metadata_save
    from tokenizers import AddedToken
    from transformers import PreTrainedTokenizerFast, Qwen3Config, Qwen3ForCausalLM

    from python_backends.families import Qwen3YesNo

    out = Path(out)
    # Case is kept (like Qwen's BPE): the template's "Judge", "Query", "Document" are words of their own.
    template_words = "Judge Document Query Instruct Note Given system user assistant".split()
    words = WORDS + sorted({word.capitalize() for word in WORDS} | set(template_words))
    vocab = ["<unk>"] + words + PUNCTUATION + ["\n"]
    tokenizer = _word_level(vocab, "<unk>", lowercase=False, keep_newlines=True)
    tokenizer.add_special_tokens([AddedToken(token, special=True, normalized=False) for token in QWEN3_SPECIALS])
    fast = PreTrainedTokenizerFast(
        tokenizer_object=tokenizer,
        unk_token="<unk>",
        eos_token="<|im_end|>",
        pad_token="<|endoftext|>",
        model_input_names=["input_ids", "attention_mask"],
        model_max_length=128,
    )
    fast.save_pretrained(out)
    assert fast.convert_tokens_to_ids("yes") != fast.unk_token_id and fast.convert_tokens_to_ids("no") != fast.unk_token_id
    config = Qwen3Config(
        vocab_size=len(fast),
        num_key_value_heads=1,
        head_dim=32,
        max_position_embeddings=128,
        tie_word_embeddings=False,  # lm_head must be loaded from the checkpoint (Qwen3-Reranker-8B is untied too)
        bos_token_id=None,
        eos_token_id=fast.convert_tokens_to_ids("<|im_end|>"),
        pad_token_id=fast.convert_tokens_to_ids("<|endoftext|>"),
        **TINY_SIZE,
    )
    _save_model(out, Qwen3ForCausalLM, config, seed)
    metadata_save(out / "README.md", {"pipeline_tag": Qwen3YesNo.PIPELINE_TAG})  # a reranker's card, as Qwen's
    return out


BUILDERS = {
    "bert": build_bert_cross_encoder,
    "qwen3": build_qwen3_reranker,
    "xlmr": build_xlmr_cross_encoder,
}


def build_all(root: Path, names: tuple[str, ...] = tuple(BUILDERS)) -> dict[str, Path]:
    root = Path(root)
    return {name: BUILDERS[name](root / name) for name in names}


def session_models(tmp_path_factory) -> dict[str, Path]:
    """All tiny models, built once per pytest session under its base temp dir (for session fixtures).

    Several test folders each declare a session fixture that calls this; the folder is shared, so the
    models are built by whichever comes first and reused by the others.
    """
    root = Path(tmp_path_factory.getbasetemp()) / "tiny_models"
    done = root / "BUILT"
    if not done.is_file():
        build_all(root)
        done.write_text("ok\n")
    return {name: root / name for name in BUILDERS}


if __name__ == "__main__":
    for name, path in build_all(Path(sys.argv[1] if len(sys.argv) > 1 else "tiny_models")).items():
        print(name, path)
