"""Echo through DLPack only (no pb_utils.Tensor.as_numpy / numpy-built Tensor): torch if it
imports (what an engine model would use), else numpy.  Informational: seen on CPU with the
nvidia-pytriton 0.7.0 stub, numpy 2.2 passes this path and numpy 1.26 breaks it (capsule name)."""
import triton_python_backend_utils as pb_utils

try:
    import torch as _lib
except ImportError:
    import numpy as _lib


class TritonPythonModel:
    def execute(self, requests):
        responses = []
        for request in requests:
            out = []
            for name in ("VALUES", "IDS"):
                t = pb_utils.get_input_tensor_by_name(request, name)
                arr = _lib.from_dlpack(t.to_dlpack()) if _lib.__name__ == "torch" else _lib.from_dlpack(t)
                arr = arr.clone() if _lib.__name__ == "torch" else arr.copy()
                out.append(pb_utils.Tensor.from_dlpack(name + "_OUT", arr))
            responses.append(pb_utils.InferenceResponse(output_tensors=out))
        return responses
