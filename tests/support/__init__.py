"""Helpers shared by the test folders.

- ports: free TCP ports on the loopback interface.
- triton_server: the real tritonserver (scripts/start_server.sh) started and stopped for tests, its stubs, model
  repository copies and statistics.
- shared_memory: which /dev/shm files the run's processes held, and removing those they left behind.
- tiny_models: tiny random-weight checkpoints of every model family, built offline.
- tensors: request tensors as the Python-backend steps receive them.
- waiting: polling for a condition with a deadline.
"""
