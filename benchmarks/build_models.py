"""Build full-size random-weight rerankers offline, for speed measurements (no hub, no download).

Two checkpoints, each written where a hub id resolves offline (``benchmarks/hf_cache.py``: the id comes from the
committed configuration's ``engine_args``):

- Qwen3-Reranker-0.6B shape: a ``Qwen3ForCausalLM`` (28 layers, hidden 1024, intermediate 3072, 16 query / 8
  key-value heads of 128, vocab 151936, tied embeddings, 40960 positions) with the REAL Qwen3 BPE tokenizer
  (``benchmarks/qwen3_tokenizer.py``), so token counts and tokenization cost are what users see;
- bge-reranker-v2-m3 shape: an ``XLMRobertaForSequenceClassification`` (24 layers, hidden 1024, 16 heads,
  intermediate 4096, vocab 250002, 8194 positions, num_labels 1) with a WordLevel tokenizer as large as its
  vocabulary whose first words are those of the benchmark's English text (``benchmarks/corpus.py``: one word
  or punctuation mark = one token; XLM-R's SentencePiece model cannot be had offline).

Weights are seeded normal(0, init_std) tensors (norm weights 1, biases 0) written straight to safetensors in
bf16, without instantiating the model (a 0.6B model is ~1.2 GB: a few seconds, on the GPU when there is one).
The parameter names and shapes come from the transformers class built on the meta device, so they are exactly
what ``from_pretrained`` expects.

    python -m benchmarks.build_models --hf-home /tmp/bench/hf            # both, full size
    python -m benchmarks.build_models --hf-home /tmp/tiny --tiny         # 2-layer versions for a CPU check
"""

from __future__ import annotations

import argparse
import collections
import json
import re
import sys
import time
import zlib
from dataclasses import asdict, dataclass
from pathlib import Path

if __package__ in (None, ""):
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from benchmarks import corpus, engine_config, hf_cache, qwen3_tokenizer  # noqa: E402

# The committed GPU variants whose engine_args name the model ids the checkpoints stand in for.
VARIANTS = {"qwen3": "gpu", "xlmr": "gpu-bge-m3"}
PUNCTUATION = list(".,:;!?\"'()-<>/")


@dataclass(frozen=True)
class ModelShape:
    layers: int
    hidden: int
    intermediate: int
    heads: int
    vocab: int
    max_positions: int


@dataclass(frozen=True)
class Qwen3Shape(ModelShape):
    """Qwen3 adds grouped-query attention: fewer key-value heads, and a head size of its own."""

    kv_heads: int
    head_dim: int


# The sizes of the checkpoints the variants name: Qwen3-Reranker-0.6B and bge-reranker-v2-m3 (XLM-R large).
QWEN3_FULL = Qwen3Shape(layers=28, hidden=1024, intermediate=3072, heads=16, vocab=151936, max_positions=40960,
                        kv_heads=8, head_dim=128)
XLMR_FULL = ModelShape(layers=24, hidden=1024, intermediate=4096, heads=16, vocab=250002, max_positions=8194)
QWEN3_TINY = Qwen3Shape(layers=2, hidden=64, intermediate=128, heads=2, vocab=151936, max_positions=2048,
                        kv_heads=1, head_dim=32)
XLMR_TINY = ModelShape(layers=2, hidden=64, intermediate=128, heads=2, vocab=4096, max_positions=1026)


def hub_id(kind: str) -> str:
    """The model id the committed configuration serves for `kind` (its engine_args "model")."""
    return engine_config.engine_args(VARIANTS[kind])["model"]


def text_words() -> list[str]:
    """Words and punctuation marks of the benchmark's English text, most frequent first (XLM-R's vocabulary head)."""
    counts = collections.Counter(re.findall(r"\w+|[^\w\s]", corpus.english_text()))
    return [w for w, _ in sorted(counts.items(), key=lambda kv: (-kv[1], kv[0]))]


def _fill(vocab: list[str], size: int, tail: list[str] = ()) -> list[str]:
    """Pad the vocabulary with filler words w0, w1, ... to exactly `size` entries (`tail` goes last)."""
    seen = set(vocab) | set(tail)
    if len(seen) != len(vocab) + len(tail):
        raise ValueError("duplicate tokens in the vocabulary")
    out, i = list(vocab), 0
    while len(out) < size - len(tail):
        word = f"w{i}"
        i += 1
        if word not in seen:
            out.append(word)
    out.extend(tail)
    if len(out) != size:
        raise ValueError(f"vocabulary of {len(out)} tokens, wanted {size}")
    return out


def build_xlmr_tokenizer(out: Path, vocab_size: int, max_len: int):
    """WordLevel tokenizer with XLM-R's specials and pair template `<s> A </s></s> B </s>`."""
    from tokenizers import Tokenizer, models, pre_tokenizers, processors
    from transformers import PreTrainedTokenizerFast

    specials = ["<s>", "<pad>", "</s>", "<unk>"]  # XLM-R's ids 0..3; <mask> is the last id
    words = [w for w in dict.fromkeys(PUNCTUATION + text_words()) if w not in specials]
    vocab = _fill(specials + words[: vocab_size - len(specials) - 1], vocab_size, tail=["<mask>"])
    tok = Tokenizer(models.WordLevel(vocab={t: i for i, t in enumerate(vocab)}, unk_token="<unk>"))
    tok.pre_tokenizer = pre_tokenizers.BertPreTokenizer()
    tok.post_processor = processors.TemplateProcessing(
        single="<s> $A </s>", pair="<s> $A </s> </s> $B </s>", special_tokens=[("<s>", 0), ("</s>", 2)]
    )
    fast = PreTrainedTokenizerFast(
        tokenizer_object=tok,
        bos_token="<s>", eos_token="</s>", sep_token="</s>", cls_token="<s>",
        unk_token="<unk>", pad_token="<pad>", mask_token="<mask>",
        model_input_names=["input_ids", "attention_mask"],
        model_max_length=max_len,
    )
    fast.save_pretrained(out)
    return fast


def _seed_of(name: str, seed: int) -> int:
    return (zlib.crc32(name.encode()) + 1_000_003 * seed) % (2**63)


def write_random_weights(model_cls, config, out: Path, seed: int, init_std: float, device: str,
                         dtype_name: str = "bfloat16", skip: tuple[str, ...] = ()) -> dict:
    """Seeded random parameters of `model_cls(config)` written to model.safetensors without building the model."""
    import torch
    from safetensors.torch import save_file

    dtype = getattr(torch, dtype_name)
    with torch.device("meta"):
        meta = model_cls(config)
    tensors, n_params = {}, 0
    for name, param in meta.named_parameters():  # tied parameters appear once, under their first name
        if name in skip:
            continue
        shape = tuple(param.shape)
        gen = torch.Generator(device=device).manual_seed(_seed_of(name, seed))
        if name.endswith("bias"):
            value = torch.zeros(shape, dtype=dtype, device=device)
        elif "norm" in name.lower() and len(shape) == 1:  # LayerNorm / RMSNorm weights
            value = torch.ones(shape, dtype=dtype, device=device)
        else:
            value = (torch.randn(shape, generator=gen, device=device, dtype=torch.float32) * init_std).to(dtype)
        tensors[name] = value.cpu().contiguous()
        n_params += value.numel()
    del meta
    save_file(tensors, str(out / "model.safetensors"), metadata={"format": "pt"})
    return {"parameters": n_params, "tensors": len(tensors)}


def build_qwen3(out: Path, shape: Qwen3Shape = QWEN3_FULL, seed: int = 0, init_std: float = 0.02,
                device: str = "cpu", max_len: int = 8192) -> dict:
    from huggingface_hub.repocard import metadata_save
    from transformers import PreTrainedTokenizerFast, Qwen3Config, Qwen3ForCausalLM

    from python_backends.families import Qwen3YesNo

    out.mkdir(parents=True, exist_ok=True)
    t0 = time.perf_counter()
    qwen3_tokenizer.copy_into(out)
    fast = PreTrainedTokenizerFast.from_pretrained(out)
    if fast.convert_tokens_to_ids("yes") != 9693 or fast.convert_tokens_to_ids("no") != 2152:
        raise AssertionError("not the Qwen3 vocabulary")
    config = Qwen3Config(
        vocab_size=shape.vocab, hidden_size=shape.hidden, intermediate_size=shape.intermediate,
        num_hidden_layers=shape.layers, num_attention_heads=shape.heads, num_key_value_heads=shape.kv_heads,
        head_dim=shape.head_dim, max_position_embeddings=shape.max_positions, tie_word_embeddings=True,
        rope_theta=1_000_000.0, rms_norm_eps=1e-6, initializer_range=init_std,
        bos_token_id=None, eos_token_id=fast.convert_tokens_to_ids("<|im_end|>"),
        pad_token_id=fast.convert_tokens_to_ids("<|endoftext|>"), architectures=["Qwen3ForCausalLM"],
    )
    config.dtype = "bfloat16"
    info = write_random_weights(Qwen3ForCausalLM, config, out, seed, init_std, device, skip=("lm_head.weight",))
    config.save_pretrained(out)
    metadata_save(out / "README.md", {"pipeline_tag": Qwen3YesNo.PIPELINE_TAG})  # a reranker's card, as Qwen's
    info.update(kind="qwen3", path=str(out), shape=asdict(shape), seconds=round(time.perf_counter() - t0, 2))
    return info


def build_xlmr(out: Path, shape: ModelShape = XLMR_FULL, seed: int = 1, init_std: float = 0.02,
               device: str = "cpu", max_len: int = 8192) -> dict:
    from transformers import XLMRobertaConfig, XLMRobertaForSequenceClassification

    out.mkdir(parents=True, exist_ok=True)
    t0 = time.perf_counter()
    build_xlmr_tokenizer(out, shape.vocab, min(max_len, shape.max_positions - 2))
    config = XLMRobertaConfig(
        vocab_size=shape.vocab, hidden_size=shape.hidden, num_hidden_layers=shape.layers,
        num_attention_heads=shape.heads, intermediate_size=shape.intermediate,
        max_position_embeddings=shape.max_positions, type_vocab_size=1, num_labels=1,
        initializer_range=init_std, layer_norm_eps=1e-5, pad_token_id=1, bos_token_id=0, eos_token_id=2,
        architectures=["XLMRobertaForSequenceClassification"],
    )
    config.dtype = "bfloat16"
    info = write_random_weights(XLMRobertaForSequenceClassification, config, out, seed, init_std, device)
    config.save_pretrained(out)
    info.update(kind="xlmr", path=str(out), shape=asdict(shape), seconds=round(time.perf_counter() - t0, 2))
    return info


def build(hf_home: Path, models: list[str], tiny: bool, device: str, init_std: float | None, seed: int) -> dict:
    """Each checkpoint into the hub cache under its committed model id; a BUILD.json beside them says what."""
    report = {"tiny": tiny, "device": device, "models": {}}
    std = init_std if init_std is not None else (0.2 if tiny else 0.02)
    if "qwen3" in models:
        out = hf_cache.snapshot_dir(hf_home, hub_id("qwen3"))
        report["models"]["qwen3"] = build_qwen3(out, QWEN3_TINY if tiny else QWEN3_FULL, seed, std, device,
                                                max_len=2048 if tiny else 8192)
    if "xlmr" in models:
        out = hf_cache.snapshot_dir(hf_home, hub_id("xlmr"))
        report["models"]["xlmr"] = build_xlmr(out, XLMR_TINY if tiny else XLMR_FULL, seed + 1, std, device,
                                              max_len=1024 if tiny else 8192)
    stamp = hf_home / "BUILD.json"  # models built earlier into the same cache stay listed
    earlier = json.loads(stamp.read_text())["models"] if stamp.is_file() else {}
    report["models"] = {**earlier, **report["models"]}
    stamp.write_text(json.dumps(report, indent=1) + "\n")
    return report


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--hf-home", required=True, type=Path, help="the HF_HOME whose hub cache receives them")
    ap.add_argument("--models", default="qwen3,xlmr", help="comma-separated: qwen3, xlmr")
    ap.add_argument("--tiny", action="store_true", help="2-layer, hidden-64 versions (CPU checks)")
    ap.add_argument("--device", default="auto", help="where the random tensors are drawn: auto, cpu, cuda")
    ap.add_argument("--init-std", type=float, default=None, help="weight std (default 0.02; 0.2 when --tiny)")
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args(argv)
    device = args.device
    if device == "auto":
        import torch

        device = "cuda" if torch.cuda.is_available() else "cpu"
    report = build(args.hf_home, [m.strip() for m in args.models.split(",") if m.strip()], args.tiny, device,
                   args.init_std, args.seed)
    for name, info in report["models"].items():
        print(f"built {name}: {info['parameters'] / 1e6:.1f}M parameters in {info['seconds']} s -> {info['path']}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
