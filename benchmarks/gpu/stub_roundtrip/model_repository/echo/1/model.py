"""Echo model: returns its BYTES and FP32 inputs unchanged, plus which numpy/python the stub runs."""
import json
import os
import sys

try:
    import numpy as np
except ImportError as e:  # say where the stub looked before failing
    raise ImportError(f"{e}; sys.path={sys.path}; PYTHONPATH={os.environ.get('PYTHONPATH')!r}; "
                      f"PYTHONHOME={os.environ.get('PYTHONHOME')!r}; prefix={sys.prefix}") from e
import triton_python_backend_utils as pb_utils


class TritonPythonModel:
    def initialize(self, args):
        self.info = json.dumps({
            "numpy": np.__version__,
            "numpy_file": np.__file__,
            "python": sys.version.split()[0],
            "executable": sys.executable,
            "sys_path": sys.path,
            "PYTHONPATH": os.environ.get("PYTHONPATH"),
            "PYTHONHOME": os.environ.get("PYTHONHOME"),
            "VIRTUAL_ENV": os.environ.get("VIRTUAL_ENV"),
            "prefix": sys.prefix,
        })
        pb_utils.Logger.log_info("echo stub info: " + self.info)

    def execute(self, requests):
        responses = []
        for request in requests:
            text = pb_utils.get_input_tensor_by_name(request, "TEXT").as_numpy()
            values = pb_utils.get_input_tensor_by_name(request, "VALUES").as_numpy()
            responses.append(pb_utils.InferenceResponse(output_tensors=[
                pb_utils.Tensor("TEXT_OUT", np.array(list(text), dtype=np.object_)),
                pb_utils.Tensor("VALUES_OUT", values.astype(np.float32)),
                pb_utils.Tensor("INFO", np.array([self.info.encode()], dtype=np.object_)),
            ]))
        return responses
