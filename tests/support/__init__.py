"""Helpers shared by the test folders.

- ports: free TCP ports on the loopback interface.
- triton_server: the real tritonserver (scripts/start_server.sh) started and stopped for tests, its stubs, model
  repository copies and statistics.
- shared_server: the run's one shared tritonserver, kept by a process scripts/test.sh starts.
- loading: one server start or engine load at a time across the run's processes.
- run_summary: the phase times, counts and leftovers scripts/test.sh prints at its end.
- shared_memory: which /dev/shm files the run's processes held, and removing those they left behind.
- tiny_models: tiny random-weight checkpoints of every model family, built offline.
- tensors: request tensors as the Python-backend steps receive them.
- waiting: polling for a condition with a deadline.
"""
