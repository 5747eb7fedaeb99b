"""Probe: vLLM LLM(runner="pooling") in-process inside the Triton Python stub.

Tensor I/O through pb_utils' numpy interop when the stub runs numpy 1.x (what the
nvidia-pytriton 0.7.0 stub was built for), through torch DLPack otherwise (numpy-independent)."""
import json
import os
import time

os.environ.setdefault("VLLM_ENABLE_V1_MULTIPROCESSING", "0")  # engine core in this process
os.environ.setdefault("VLLM_USE_FLASHINFER_SAMPLER", "0")

import numpy as np
import triton_python_backend_utils as pb_utils

NUMPY_IO = int(np.__version__.split(".")[0]) < 2


class TritonPythonModel:
    def initialize(self, args):
        cfg = json.loads(args["model_config"])
        path = cfg["parameters"]["model_path"]["string_value"]
        t = time.time()
        import torch
        from vllm import LLM, PoolingParams
        from vllm.inputs import TokensPrompt
        self.torch, self.TokensPrompt, self.params = torch, TokensPrompt, PoolingParams(use_activation=False)
        kw = json.loads(cfg["parameters"].get("llm_kwargs", {}).get("string_value") or "{}")
        self.llm = LLM(model=path, runner="pooling", **kw)
        pb_utils.Logger.log_info(f"tiny_classify: vLLM up in {time.time() - t:.1f}s, numpy {np.__version__}, "
                                 f"io {'numpy' if NUMPY_IO else 'dlpack'}")

    def _ids(self, request):
        t = pb_utils.get_input_tensor_by_name(request, "INPUT_IDS")
        if NUMPY_IO:
            return t.as_numpy().astype(np.int64).tolist()
        return self.torch.from_dlpack(t.to_dlpack()).to(self.torch.int64).tolist()

    def _out(self, value):
        if NUMPY_IO:
            return pb_utils.Tensor("LOGIT", np.array([value], dtype=np.float32))
        return pb_utils.Tensor.from_dlpack("LOGIT", self.torch.tensor([value], dtype=self.torch.float32))

    def execute(self, requests):
        prompts = [self.TokensPrompt(prompt_token_ids=self._ids(r)) for r in requests]
        outs = self.llm.classify(prompts, pooling_params=self.params, use_tqdm=False)
        return [pb_utils.InferenceResponse(output_tensors=[self._out(o.outputs.probs[0])]) for o in outs]
