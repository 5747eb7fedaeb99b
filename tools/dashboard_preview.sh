#!/usr/bin/env bash
# The picture in docs/OPERATIONS.md: a CPU server and a gateway (shadowing the default model against itself) under
# locust load and a trickle of gateway calls, scraped by Prometheus every 5 s; then tools/dashboard_preview.py draws
# docs/dashboard.png. Needs Debian's prometheus on PATH and `scripts/setup.sh --tests` (locust, matplotlib); uses
# ports 28000-28002, 28080 and 29090; RUN_DIR (build/dashboard-run) holds the logs.
set -uo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
D="${RUN_DIR:-build/dashboard-run}"
rm -rf "$D"; mkdir -p "$D/prom"
HTTP_PORT=28000 GRPC_PORT=28001 METRICS_PORT=28002 RUN_DIR=$D TRITON_ADMIN_KEY=dash START_TIMEOUT_S=300 \
  bash scripts/start_server.sh > $D/server.log 2>&1 < /dev/null &
for i in $(seq 300); do curl -sf localhost:28000/v2/health/ready && break; sleep 1; done; echo "server ready after $i s"
TRITON_GRPC_URL=127.0.0.1:28001 GATEWAY_PORT=28080 GATEWAY_SHADOW_MODEL=reranker GATEWAY_SHADOW_FRACTION=0.5 \
  GATEWAY_SHADOW_PROFILE=model_repository/rerank_calibrate/profiles/all-minilm-l6-v2.json GATEWAY_SHADOW_DRIFT_WINDOW=200 \
  GATEWAY_SHADOW_TOP_K=3 GATEWAY_LOG_LEVEL=warning .venv/bin/python -m gateway > $D/gateway.log 2>&1 &
GW=$!
cat > $D/prometheus.yml <<'YML'
global: {scrape_interval: 5s}
scrape_configs:
  - job_name: triton
    static_configs: [{targets: ["127.0.0.1:28002"]}]
  - job_name: gateway
    static_configs: [{targets: ["127.0.0.1:28080"]}]
YML
prometheus --config.file=$D/prometheus.yml --storage.tsdb.path=$D/prom --web.listen-address=127.0.0.1:29090 > $D/prom.log 2>&1 &
PROM=$!
sleep 5
# locust against Triton's gRPC port: 4 users, 16 documents of ~100 tokens each, for 5 minutes
TRITON_GRPC_URL=127.0.0.1:28001 LOAD_N_DOCS=16 LOAD_DOC_TOKENS=100 .venv/bin/locust -f loadtest/locustfile.py --headless \
  --tags grpc -u 4 -r 1 --run-time 300s --only-summary > $D/locust.log 2>&1 &
LOCUST=$!
# the gateway: one call a second, every tenth with an empty document (refused), each twentieth with a 64-word query
end=$((SECONDS + 300)); n=0
while [ $SECONDS -lt $end ]; do
  n=$((n + 1))
  if [ $((n % 10)) -eq 0 ]; then docs='["", "b"]'; else docs='["the market opens at dawn", "the river runs through town", "bananas are yellow", "paris is the capital of france"]'; fi
  curl -s -o /dev/null -w "%{http_code}\n" localhost:28080/v2/rerank -H 'Content-Type: application/json' \
    -d "{\"query\": \"when does the market open\", \"documents\": $docs}" >> $D/gateway-calls.log
  sleep 1
done
wait $LOCUST
sleep 15
.venv/bin/python tools/dashboard_preview.py --prometheus http://127.0.0.1:29090 --minutes 6 --out docs/dashboard.png
kill $GW $PROM
HTTP_PORT=28000 RUN_DIR=$D bash scripts/stop_server.sh
sort $D/gateway-calls.log | uniq -c
tail -20 $D/locust.log
