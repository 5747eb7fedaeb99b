"""The same distinct requests for every system: text (benchmarks/corpus.py), the preprocess step's own token ids for
each prompt, and the exact prefill FLOPs (benchmarks/flops.py). Built once per settings (the build step) and cached."""

from __future__ import annotations

import json
import pickle
import statistics
import time

from benchmarks import corpus
from benchmarks.flops import FlopModel
from benchmarks.settings import Settings


class Workload:
    def __init__(self, s: Settings):
        from python_backends.families import Qwen3YesNo, detect_model, make_encoder
        from python_backends.families.qwen3_yes_no import qwen3_reranker_prompt

        t0 = time.perf_counter()
        self.model_dir = str(s.model_dir)
        self.max_model_len = int(s.engine_args()["max_model_len"])
        self.info = detect_model(self.model_dir)
        self.yes_no = self.info.family is Qwen3YesNo
        self.encoder = make_encoder(self.info.family, self.model_dir, self.max_model_len)
        self.flop_model = FlopModel.from_config(self.model_dir)
        key = json.dumps([self.model_dir, s.total_requests(), self.max_model_len, s.shape.__dict__], sort_keys=True)
        cache = s.work / f"workload-{s.model}{'-tiny' if s.tiny else ''}.pkl"
        cached = pickle.loads(cache.read_bytes()) if cache.is_file() else {}
        if cached.get("key") == key:
            self.requests, self.token_ids, self.types = cached["requests"], cached["token_ids"], cached["types"]
            self.encode_ms = cached["encode_ms"]
        else:
            self.requests = corpus.make_requests(self.model_dir, s.total_requests(), 0, s.shape)
            self.token_ids, self.types, self.encode_ms = [], [], []
            for r in self.requests:
                t = time.perf_counter()
                enc = self.encoder.encode(r.query, list(r.documents), None)
                self.encode_ms.append((time.perf_counter() - t) * 1000)
                if enc.truncated:
                    raise ValueError(f"{enc.truncated} pairs exceed max_model_len={self.max_model_len}")
                self.token_ids.append(enc.token_ids)
                self.types.append(enc.token_type_ids)
            cache.write_bytes(pickle.dumps({"key": key, "requests": self.requests, "token_ids": self.token_ids,
                                            "types": self.types, "encode_ms": self.encode_ms}))
        self.lengths = [[len(x) for x in ids] for ids in self.token_ids]
        self.flops = [self.flop_model.request(lengths) for lengths in self.lengths]
        self.tokens = [sum(x) for x in self.lengths]
        self._prompt = qwen3_reranker_prompt
        self.seconds = round(time.perf_counter() - t0, 2)

    def pairs(self, k: int) -> int:
        return len(self.requests[k].documents)

    def describe(self) -> dict:
        all_lengths = [n for ls in self.lengths for n in ls]
        return {
            "model_dir": self.model_dir,
            "family": self.info.family.name,
            "text": corpus.corpus_info(),
            "requests": len(self.requests),
            "docs_per_request": len(self.requests[0].documents),
            "top_n": self.requests[0].top_n,
            "tokens_per_pair_mean": round(statistics.mean(all_lengths), 1),
            "tokens_per_pair_min": min(all_lengths),
            "tokens_per_pair_max": max(all_lengths),
            "tokens_per_request_mean": round(statistics.mean(self.tokens), 1),
            "encode_ms_per_request_median": round(statistics.median(self.encode_ms), 2),
            "flop_per_token": round(sum(self.flops) / sum(self.tokens)),
            "non_embedding_linear_params": self.flop_model.linear_params,
            "prepare_s": self.seconds,
        }

    def vllm_body(self, k: int, top_n: int | None = None) -> dict:
        """POST /rerank body; for an LLM reranker vLLM concatenates query + document, so the query carries the
        Qwen3 template head and each document its suffix: the prompt tokens equal the Triton path's."""
        r = self.requests[k]
        if self.yes_no:
            p = self._prompt(r.query)
            query, docs = p.head, [d + p.suffix for d in r.documents]
        else:
            query, docs = r.query, list(r.documents)
        return {"model": "bench", "query": query, "documents": docs, "top_n": top_n or r.top_n}
