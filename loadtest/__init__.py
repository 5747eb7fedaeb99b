"""Load-test tools for the `reranker` Triton ensemble (see loadtest/README.md)."""
