"""Floating-point operations of one prefill, counted exactly from a checkpoint's config.json.

Per sequence of L tokens (multiply-add = 2 FLOPs):
- linear layers: 2 x (non-embedding matrix parameters) x L (q/k/v/o projections, MLP; norms and biases ignored);
- attention: QK^T and PV, 2 x 2 x (heads x head_dim) per query-key pair and layer: L(L+1)/2 pairs for a causal
  decoder (Qwen3), L^2 for a bidirectional encoder (XLM-R, BERT);
- the score head: Qwen3-Reranker as vLLM loads it is one vector (lm_head[yes] - lm_head[no]) at the last token,
  XLM-R's classifier is dense(H, H) + out_proj(H, 1) on the first token: counted, though negligible.
Embedding lookups cost no FLOPs. For Qwen3-Reranker-0.6B that is 0.88 GFLOP/token linear + ~0.06 attention at
L ~ 550: ~0.94 GFLOP/token.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path


@dataclass(frozen=True)
class FlopModel:
    kind: str  # "causal" or "bidirectional"
    layers: int
    hidden: int
    q_width: int  # heads x head_dim
    linear_params: int  # non-embedding matrix parameters, all layers
    head_flops_per_seq: int

    @classmethod
    def from_config(cls, model_dir: str | Path) -> "FlopModel":
        cfg = json.loads((Path(model_dir) / "config.json").read_text())
        h, n = cfg["hidden_size"], cfg["num_hidden_layers"]
        heads = cfg["num_attention_heads"]
        if cfg.get("model_type") == "qwen3":
            hd = cfg.get("head_dim") or h // heads
            kv = cfg.get("num_key_value_heads", heads)
            inter = cfg["intermediate_size"]
            per_layer = h * heads * hd + 2 * h * kv * hd + heads * hd * h + 3 * h * inter
            return cls("causal", n, h, heads * hd, n * per_layer, 2 * h)
        inter = cfg["intermediate_size"]  # BERT / XLM-R encoder
        per_layer = 4 * h * h + 2 * h * inter
        return cls("bidirectional", n, h, h, n * per_layer, 2 * h * h + 2 * h)

    def sequence(self, length: int) -> dict[str, int]:
        linear = 2 * self.linear_params * length
        pairs = length * (length + 1) // 2 if self.kind == "causal" else length * length
        attention = 4 * self.q_width * pairs * self.layers
        return {"linear": linear, "attention": attention, "head": self.head_flops_per_seq,
                "total": linear + attention + self.head_flops_per_seq}

    def request(self, lengths: list[int]) -> int:
        return sum(self.sequence(int(n))["total"] for n in lengths)

    def per_token(self, length: int) -> float:
        return self.sequence(length)["total"] / length
