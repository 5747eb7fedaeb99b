"""Rerank three passages through the running server over gRPC: `python examples/rerank_grpc.py [host:port]`."""

import sys

from reranker_client import RerankClient

url = sys.argv[1] if len(sys.argv) > 1 else "localhost:8001"
client = RerankClient(url, protocol="grpc")
documents = [
    "Bananas are a good source of potassium.",
    "Paris is the capital and largest city of France.",
    "France borders Spain, Italy, Germany and Belgium.",
]
response = client.rerank("What is the capital of France?", documents, top_n=2, return_documents=True)
print(f"calibration profile: {response.calibration}, truncated pairs: {response.truncated}")
for result in response.results:
    print(f"  #{result.index}  score={result.relevance_score:.4f}  raw={result.raw_score:+.4f}  {result.document}")
