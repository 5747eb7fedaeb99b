"""The calibrate step: raw engine scores -> calibrated probabilities and a ranking (numpy only).

`step` (settings, the profile in force and its hot reload, input checks, calibrate), `ranking` (best first, ties in
input order), `drift` (is the live raw-score distribution still the profile's?), `monitoring` (its Prometheus series).
"""
