"""Triton adapter of the engine step; the vLLM logic is `python_backends.engine`.

All requests of one `execute` (one dynamic batch) are scored in a single vLLM call.
"""


import numpy as np
import triton_python_backend_utils as pb_utils

from python_backends.engine import EngineSettings, SequenceBatch, VllmScorer
from python_backends.triton_io import error_response, required_array
from python_backends.triton_params import ModelParameters


class TritonPythonModel:
    def initialize(self, args: dict) -> None:
        settings = EngineSettings.from_parameters(ModelParameters.from_model_config(args["model_config"]))
        on_gpu = args.get("model_instance_kind") == "GPU"
        self.scorer = VllmScorer(settings, device_id=int(args["model_instance_device_id"]) if on_gpu else None)

    def execute(self, requests: list) -> list:
        responses: list = [None] * len(requests)
        batches, slots = [], []
        for slot, request in enumerate(requests):
            try:
                batch = SequenceBatch(
                    required_array(pb_utils, request, "TOKEN_IDS")[0],
                    required_array(pb_utils, request, "TOKEN_TYPE_IDS")[0],
                    required_array(pb_utils, request, "SEQUENCE_LENGTHS")[0],
                    required_array(pb_utils, request, "SEQUENCE_DOCUMENTS")[0],
                )
                batch.split()  # shape check now, so one malformed request cannot fail the others
            except Exception as exc:  # noqa: BLE001
                responses[slot] = error_response(pb_utils, exc)
                continue
            batches.append(batch)
            slots.append(slot)
        if batches:
            try:
                scores = self.scorer.score(batches)
            except Exception as exc:  # noqa: BLE001 - the engine failed this batch; every request hears why
                for slot in slots:
                    responses[slot] = error_response(pb_utils, exc)
            else:
                for slot, raw in zip(slots, scores):
                    responses[slot] = pb_utils.InferenceResponse(
                        output_tensors=[pb_utils.Tensor("RAW_SCORES", raw[None, :].astype(np.float32))]
                    )
        return responses

    def finalize(self) -> None:
        self.scorer.close()
