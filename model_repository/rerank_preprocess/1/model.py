"""Triton adapter of the preprocess step; the logic is `python_backends.preprocessing`."""

import numpy as np
import triton_python_backend_utils as pb_utils

from python_backends.metrics import PreprocessMetrics, model_labels
from python_backends.preprocessing import Preprocessor
from python_backends.request_validation import InvalidRequest
from python_backends.triton_io import input_array, required_array, respond
from python_backends.triton_params import ModelParameters


class TritonPythonModel:
    def initialize(self, args: dict) -> None:
        self.preprocess = Preprocessor.from_parameters(ModelParameters.from_model_config(args["model_config"]))
        self.metrics = PreprocessMetrics(pb_utils, model_labels(args))

    def execute(self, requests: list) -> list:
        return [respond(pb_utils, self._handle, request) for request in requests]

    def _handle(self, request) -> dict[str, np.ndarray]:
        try:
            out = self.preprocess(
                required_array(pb_utils, request, "QUERY"),
                required_array(pb_utils, request, "DOCUMENTS"),
                input_array(pb_utils, request, "INSTRUCTION"),
                input_array(pb_utils, request, "TOP_N"),
            )
        except InvalidRequest:
            self.metrics.rejected.increment(1)
            raise
        self.metrics.accepted(pairs=out.documents, tokens=int(out.token_ids.size), truncated=out.truncated)
        return {
            "TOKEN_IDS": out.token_ids[None, :],
            "TOKEN_TYPE_IDS": out.token_type_ids[None, :],
            "SEQUENCE_LENGTHS": out.sequence_lengths[None, :],
            "SEQUENCE_DOCUMENTS": out.sequence_documents[None, :],
            "TRUNCATED": np.array([[out.truncated]], dtype=np.int32),
            "RANK_LIMIT": np.array([[out.top_n]], dtype=np.int32),
        }
