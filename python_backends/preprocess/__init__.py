"""The preprocess step: validated request in, flat token tensors for the engine out.

`settings` (the step's parameters, read once), `request` (decode and check one request's tensors against the request
limits), `tokenization` (what every family's encoder shares: bounded tokenizing, long documents), `step` (admission
by work, encoding, the engine's tensors), `metrics` (its Prometheus series). How a family's pairs become
token ids is the family's own (python_backends/families).
"""
