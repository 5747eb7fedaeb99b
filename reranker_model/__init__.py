"""The offline model tool, `reranker-model`: check a checkpoint, add it as a variant of the model repository, and
score pairs with it through the serving code without Triton (docs/YOUR_MODEL.md)."""
