#!/usr/bin/env bash
# Stop the server scripts/quickstart.sh started (SIGTERM: Triton finishes in-flight requests first).
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
[ -f "$ROOT/build/server.pid" ] && kill -TERM -- "-$(cat "$ROOT/build/server.pid")" 2>/dev/null; rm -f "$ROOT/build/server.pid"
