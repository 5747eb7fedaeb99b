"""The caller's response from the responses of a plan's requests, and the errors of a split call in the caller's
document numbering."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
from tritonclient.utils import InferenceServerException

from python_backends.ranking import top_n_ranking

from .planning import RerankPlan
from .server_errors import read_error, with_error
from .results import RerankResponse, make_response
from .wire import ParsedResponse

def rebase_error(error: InferenceServerException, offset: int) -> InferenceServerException:
    """A chunk's error about DOCUMENTS[i] as the caller's DOCUMENTS[i + offset]."""
    read = read_error(error)
    return error if read.index is None or offset == 0 else with_error(error, read.moved(offset))


class CalibrationChangedError(RuntimeError):
    """The requests of one split call were answered under different calibration profiles (a profile was
    swapped mid-call): their scores are not comparable, so the call fails rather than mix them."""


def merge(plan: RerankPlan, parsed: Sequence[ParsedResponse], return_documents: bool) -> RerankResponse:
    """The caller's response from each chunk's (in chunk order).

    A single request keeps the server's ranking. A split call concatenates scores in input order and ranks
    over the raw scores exactly as the server does (stable descending sort of float64(raw), ties in input
    order), then cuts at top_n: ranking by raw score is ranking by calibrated score because calibration is
    monotone and applied per document, and raw scores still separate the ties a flat isotonic step makes.
    """
    documents = plan.documents if return_documents else None
    if not plan.split:
        only = parsed[0]
        return make_response(only.scores, only.raw_scores, only.ranking, only.truncated, only.calibration, documents)
    tags = sorted({p.calibration for p in parsed})
    if len(tags) != 1:
        raise CalibrationChangedError(f"the requests of one call were calibrated by different profiles: {tags}")
    scores = np.concatenate([p.scores for p in parsed])
    raw = np.concatenate([p.raw_scores for p in parsed])
    top_n = len(raw) if plan.top_n is None else int(plan.top_n)
    return make_response(
        scores, raw, top_n_ranking(raw, top_n), sum(p.truncated for p in parsed), tags[0], documents,
        requests=len(parsed),
    )
