"""Triton adapter of the preprocess step; the logic is `python_backends.preprocess`.

`execute` prices each request from its sizes, refuses at once what is invalid or past the work in flight, hands the
admitted ones to one tokenizing thread and returns None; each request is answered through its response sender
(default, non-decoupled mode) when its turn is done. So Triton keeps handing over batches while a large request is
tokenized, and what waits is only admitted work, bounded by batch_token_budget.
"""

import time
from concurrent.futures import ThreadPoolExecutor

import numpy as np
import triton_python_backend_utils as pb_utils

from python_backends.preprocess.metrics import PreprocessMetrics
from python_backends.preprocess.request import RequestTensors
from python_backends.preprocess.settings import PreprocessSettings
from python_backends.preprocess.step import REFUSED_AS, Preprocessed, Preprocessor, size_tokenizer_pool
from python_backends.prometheus import Refusals, model_labels
from python_backends.triton_io import error_response, input_array, release_senders, required_array


class TritonPythonModel:
    def initialize(self, args: dict) -> None:
        settings = PreprocessSettings.from_args(args)
        size_tokenizer_pool(settings.tokenizer_threads)  # before the first batch builds the pool
        self.preprocess = Preprocessor.from_settings(settings)
        self.metrics = PreprocessMetrics(pb_utils, model_labels(args))
        self.refusals = Refusals(pb_utils, model_labels(args), REFUSED_AS)
        self.tokenizing = ThreadPoolExecutor(max_workers=1, thread_name_prefix="preprocess")  # in admission order

    def execute(self, requests: list) -> None:
        started = time.monotonic()
        raws = [self._raw(request) for request in requests]
        for request, raw, decision in zip(requests, raws, self.preprocess.admit(raws)):
            sender = request.get_response_sender()
            if isinstance(decision, Exception):
                self._answer(sender, decision, started)
            else:
                self.tokenizing.submit(self._run, sender, raw, decision, started)
        return None

    def _run(self, sender, raw: RequestTensors, cost: int, started: float) -> None:
        try:
            result = self.preprocess.run(raw, cost)
        except Exception as exc:  # noqa: BLE001 - every admitted request gets its one answer (INTERNAL here)
            # answered here, not kept in a local: its traceback holds this frame, and a frame holding the exception
            # (with the sender and the inputs) would be a garbage cycle
            self._answer(sender, exc, started)
            return
        self._answer(sender, result, started)

    def _answer(self, sender, result: Preprocessed | Exception, started: float) -> None:
        if isinstance(result, Exception):
            self.refusals.count(result)
            response = error_response(pb_utils, result)
        else:
            self.metrics.record(result, time.monotonic() - started)
            response = self._response(result)
        sender.send(response, flags=pb_utils.TRITONSERVER_RESPONSE_COMPLETE_FINAL)

    def finalize(self) -> None:
        self.tokenizing.shutdown(wait=True)  # admitted requests are answered before the step goes
        self.metrics.close()
        self.refusals.close()
        release_senders()

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
    def _response(out: Preprocessed):
        outputs = {**out.sequences.tensors(), "TRUNCATED": np.array([[out.truncated]], dtype=np.int32)}
        return pb_utils.InferenceResponse(output_tensors=[pb_utils.Tensor(name, array) for name, array in outputs.items()])
