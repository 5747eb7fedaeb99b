"""Triton adapter of the engine step; the vLLM logic is `python_backends.engine`.

`execute` validates each request on its own, hands it to vLLM's AsyncLLM and returns None, never blocking: a
request waits for in-flight room inside the step, and past the step's bound of waiting work it is refused at once
(UNAVAILABLE, counted under `work_budget`). Every request is answered later through its response sender (default,
non-decoupled mode), so several dynamic batches are in flight at once. A request's timeout (Triton's `timeout` parameter) counts from here: once it passes, or its client
is gone, its work in vLLM is aborted and it is answered UNAVAILABLE (CANCELLED). A dead engine is reported: requests
get UNAVAILABLE and the model unloads itself, so its ready endpoint and the ensemble stop reporting ready
(vllm_backend's health check does the same).
"""

import logging

import triton_python_backend_utils as pb_utils

from python_backends.engine import (
    REFUSED_AS, TENSORS, AsyncEngine, Deadline, EngineDead, EngineSettings, ReplyThread, SequenceBatch,
)
from python_backends.engine.metrics import EngineMetrics
from python_backends.prometheus import Refusals, model_labels
from python_backends.seal import ScoreSeal
from python_backends.tracing import StepTracer
from python_backends.triton_io import release_senders, required_array
from python_backends.triton_params import ModelParameters

log = logging.getLogger(__name__)


class TritonPythonModel:
    def initialize(self, args: dict) -> None:
        self.name = args["model_name"]
        settings = EngineSettings.from_parameters(ModelParameters.from_model_config(args["model_config"]))
        on_gpu = args.get("model_instance_kind") == "GPU"
        self.tracer = StepTracer(self.name)  # spans of requests Triton traces (OTEL_EXPORTER_OTLP_TRACES_ENDPOINT)
        self.engine = AsyncEngine(settings, device_id=int(args["model_instance_device_id"]) if on_gpu else None,
                                  tracer=self.tracer)
        self.metrics = EngineMetrics(pb_utils, model_labels(args))
        self.refusals = Refusals(pb_utils, model_labels(args), REFUSED_AS)
        self.replies = ReplyThread(pb_utils, ScoreSeal().outputs, self.metrics, lambda: self.engine.unfinished_sequences)
        self.engine.watch_stop()  # a stop signalled to this stub drains the step (`stopping.py`)
        self.engine.on_death(self._unload)
        self.engine.on_refusal(self.refusals.count)

    def execute(self, requests: list) -> None:
        for request in requests:
            sender = request.get_response_sender()
            deadline = Deadline.from_request(request.timeout(), sender.is_cancelled)
            try:
                if not self.engine.alive:
                    raise EngineDead("the vLLM engine is dead; the model is being unloaded")
                arrays = {name: required_array(pb_utils, request, name) for name in TENSORS}
                batch = SequenceBatch.from_arrays(arrays, self.engine.limits)
                future = self.engine.submit(batch, deadline, self.tracer.parent_of(request))
            except Exception as exc:  # noqa: BLE001 - this request's answer (INVALID_ARG, UNAVAILABLE, INTERNAL)
                self.refusals.count(exc)
                self.replies.send_error(sender, exc)
                continue
            self.replies.send_when_done(sender, future)
        return None

    def _unload(self) -> None:
        """Explicit model control only; elsewhere the deep health check (reranker_client.healthcheck) sees it."""
        try:
            pb_utils.unload_model(self.name)
        except Exception as exc:  # noqa: BLE001 - the server may not allow it; requests still get UNAVAILABLE
            log.error("could not unload %s after its engine died: %s", self.name, exc)

    def finalize(self) -> None:
        self.engine.close()
        self.replies.close()
        self.metrics.close()
        self.refusals.close()
        release_senders()
