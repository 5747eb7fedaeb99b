"""The "legacy" pipeline a team runs without a serving engine: one request at a time (one worker thread behind the
concurrent clients): tokenize, pad the pairs into one batch, AutoModelForCausalLM / ForSequenceClassification with
sdpa; score = logit(yes) - logit(no) at the last position (Qwen3 reranker) or the logit (cross-encoder)."""

from __future__ import annotations

import asyncio
import statistics
import time

from benchmarks.settings import Settings
from benchmarks.systems.common import drive
from benchmarks.workload import Workload


def run(s: Settings, result: dict, pgid_file=None) -> None:
    import concurrent.futures

    import torch
    from transformers import AutoModelForCausalLM, AutoModelForSequenceClassification

    work = Workload(s)
    deadline = time.monotonic() + s.budgets["hf"] - 10
    dtype = torch.bfloat16 if s.device == "cuda" else torch.float32
    t0 = time.perf_counter()
    cls = AutoModelForCausalLM if work.yes_no else AutoModelForSequenceClassification
    model = cls.from_pretrained(work.model_dir, dtype=dtype, attn_implementation="sdpa").to(s.device).eval()
    tok = work.encoder
    yes_id = no_id = pad_id = None
    if work.yes_no:
        from transformers import AutoTokenizer

        hf_tok = AutoTokenizer.from_pretrained(work.model_dir)
        yes_id, no_id = hf_tok.convert_tokens_to_ids("yes"), hf_tok.convert_tokens_to_ids("no")
        pad_id = hf_tok.pad_token_id
    else:
        pad_id = model.config.pad_token_id
    result["load_s"] = round(time.perf_counter() - t0, 2)
    if s.device == "cuda":
        torch.cuda.reset_peak_memory_stats()
    padded_tokens = []

    @torch.inference_mode()
    def score(k: int) -> list[float]:
        r = work.requests[k]
        ids = tok.encode(r.query, list(r.documents), None).token_ids  # tokenization is part of the legacy request
        longest = max(len(x) for x in ids)
        batch = torch.full((len(ids), longest), pad_id, dtype=torch.long)
        mask = torch.zeros((len(ids), longest), dtype=torch.long)
        for i, x in enumerate(ids):
            if work.yes_no:  # left padding: the answer position is the last one for every row
                batch[i, longest - len(x):] = torch.tensor(x)
                mask[i, longest - len(x):] = 1
            else:
                batch[i, :len(x)] = torch.tensor(x)
                mask[i, :len(x)] = 1
        batch, mask = batch.to(s.device), mask.to(s.device)
        padded_tokens.append(batch.numel())
        if work.yes_no:
            pos = (mask.cumsum(-1) - 1).clamp(min=0)
            logits = model(input_ids=batch, attention_mask=mask, position_ids=pos, logits_to_keep=1).logits[:, -1, :]
            raw = (logits[:, yes_id] - logits[:, no_id]).float()
        else:
            raw = model(input_ids=batch, attention_mask=mask).logits[:, 0].float()
        return raw.cpu().tolist()

    pool = concurrent.futures.ThreadPoolExecutor(max_workers=1)  # the legacy server: one request at a time

    async def send(k: int):
        return await asyncio.get_running_loop().run_in_executor(pool, score, k)

    asyncio.run(drive(s, work, send, send, result, deadline))
    pool.shutdown(wait=True)
    result["workload"] = work.describe()
    result["padded_tokens_per_request_mean"] = round(statistics.mean(padded_tokens))
    result["padding_overhead"] = round(sum(padded_tokens) / sum(work.tokens[: len(padded_tokens)]) - 1, 4)
    if s.device == "cuda":
        result["torch_max_memory_allocated_mib"] = round(torch.cuda.max_memory_allocated() / 2**20)
    result["attn_implementation"] = getattr(model.config, "_attn_implementation", "sdpa")
    result["dtype"] = str(dtype)
