#!/usr/bin/env python3
"""Send the probe's token ids to tiny_classify over gRPC; compare with the logits vLLM gave directly."""
import json
import sys
import time

import numpy as np
import tritonclient.grpc as tc

ref = json.load(open(sys.argv[1]))
timeout = float(sys.argv[2]) if len(sys.argv) > 2 else 180
c = tc.InferenceServerClient("localhost:8001")
t0 = time.time()
while True:
    try:
        if c.is_model_ready("tiny_classify"):
            break
    except Exception:
        pass
    if time.time() - t0 > timeout:
        print("VLLM_IN_TRITON FAIL: not ready after", timeout, "s"); sys.exit(1)
    time.sleep(1)
ready_s = time.time() - t0
got = []
for ids in ref["pair_ids"]:
    x = np.array(ids, dtype=np.int64)
    i = tc.InferInput("INPUT_IDS", list(x.shape), "INT64")
    i.set_data_from_numpy(x)
    got.append(float(c.infer("tiny_classify", [i]).as_numpy("LOGIT")[0]))
err = max(abs(a - b) for a, b in zip(got, ref["raw"]))
ok = err < 2e-2
print("VLLM_IN_TRITON", json.dumps({"ready_after_s": round(ready_s, 1), "triton": got, "direct": ref["raw"],
                                    "max_abs_diff": err, "ok": ok}))
sys.exit(0 if ok else 1)
