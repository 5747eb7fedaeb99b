"""Tools run from a checkout: the air-gapped GPU kit (offline_gpu/, shell scripts) and the helpers that the tests
and the benchmarks both use to run a server locally (local_server)."""
