"""Triton adapter of the preprocess step; the logic is `python_backends.preprocess`."""

import numpy as np
import triton_python_backend_utils as pb_utils

from python_backends.preprocess.admission_metrics import PreprocessMetrics
from python_backends.preprocess.request import RequestTensors
from python_backends.preprocess.settings import PreprocessSettings
from python_backends.preprocess.step import EngineInputs, Preprocessor, size_tokenizer_pool
from python_backends.prometheus import Refusals, model_labels
from python_backends.triton_io import error_response, input_array, required_array


class TritonPythonModel:
    def initialize(self, args: dict) -> None:
        settings = PreprocessSettings.from_model_config(args["model_config"])
        size_tokenizer_pool(settings.tokenizer_threads)  # before the first batch builds the pool
        self.preprocess = Preprocessor.from_settings(settings)
        self.metrics = PreprocessMetrics(pb_utils, model_labels(args))
        self.refusals = Refusals(pb_utils, model_labels(args), ("invalid", "work_budget"))

    def execute(self, requests: list) -> list:
        raws = [self._raw(request) for request in requests]
        results = self.preprocess.run_batch([raw for raw in raws if not isinstance(raw, Exception)])
        answers = iter(results)
        responses = []
        for raw in raws:
            result = raw if isinstance(raw, Exception) else next(answers)
            if isinstance(result, Exception):
                self.refusals.count(result)
                responses.append(error_response(pb_utils, result))
            else:
                self.metrics.record(result)
                responses.append(self._response(result))
        return responses

    def finalize(self) -> None:
        self.metrics.close()
        self.refusals.close()

    @staticmethod
    def _raw(request) -> RequestTensors | Exception:
        try:
            return RequestTensors(
                required_array(pb_utils, request, "QUERY"),
                required_array(pb_utils, request, "DOCUMENTS"),
                input_array(pb_utils, request, "INSTRUCTION"),
                input_array(pb_utils, request, "TOP_N"),
                input_array(pb_utils, request, "MAX_TOKENS_PER_DOC"),
            )
        except Exception as exc:  # noqa: BLE001 - one request's failure must not take the batch down
            return exc

    @staticmethod
    def _response(out: EngineInputs):
        outputs = {
            "TOKEN_IDS": out.token_ids[None, :],
            "TOKEN_TYPE_IDS": out.token_type_ids[None, :],
            "SEQUENCE_LENGTHS": out.sequence_lengths[None, :],
            "SEQUENCE_DOCUMENTS": out.sequence_documents[None, :],
            "TRUNCATED": np.array([[out.truncated]], dtype=np.int32),
        }
        return pb_utils.InferenceResponse(output_tensors=[pb_utils.Tensor(name, array) for name, array in outputs.items()])
