"""Logic of the Triton reranker: the `model.py` files under `model_repository/` only adapt tensors to this package."""
