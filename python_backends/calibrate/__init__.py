"""The calibrate step: raw engine scores -> calibrated probabilities and a ranking (numpy only on the request path).

`settings` (the step's parameters, read once), `step` (the profile in force and its hot reload, input checks,
calibrate), `profiles` and `profile_schema` (the profile format and how it is applied), `drift` (is the live raw-score
distribution still the profile's?), `metrics` (its Prometheus series). The ranking rule is the contract's
(`python_backends/ranking.py`): the client and the gateway rank with it too.
"""
