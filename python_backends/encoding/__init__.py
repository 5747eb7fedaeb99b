"""Turning one request's texts into token sequences, below both the model families (each lays its pairs out with
it) and the preprocess step (which runs a family's encoder): the tokenizer's bounded use, long documents, and the
exact tiktoken twin of a byte-level BPE tokenizer."""
