"""reranker-model: check a checkpoint, add it as a variant of the model repository, score pairs with it offline.

    reranker-model check MODEL [--load]
    reranker-model add NAME MODEL [--documents sample.jsonl] [--gpu] [--max-model-len N] [--force]
                       [--max-query-words N] [--accept-truncation]
    reranker-model fit NAME pairs.jsonl [--version V] [--report-dir DIR]
    reranker-model score NAME pairs.jsonl -o scores.jsonl
    reranker-model ensemble NAME DIR [--as ENSEMBLE]
    tritonserver --model-config-name=NAME   (scripts/start_server.sh --model-config-name=NAME)
    tritonserver --model-repository=model_repository --model-repository=DIR   (both models side by side)

MODEL is a folder with config.json, package:<module>/<dir>, or a hub id in the local Hugging Face cache. `score`
writes each pair with its raw_score, which `reranker-calibrate fit --raw-scores-from` reads; `fit` does both and
installs the profile the variant serves.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import re
import sys
import tempfile
import traceback
from collections.abc import Iterator, Sequence
from pathlib import Path

from python_backends.model_repository import (
    ENGINE, REPOSITORY, config_path, engine_args as configured_engine_args, read_config, variant_file,
)

from .checkpoint import PROBE_DOCUMENT as _DOC, PROBE_QUERY as _QUERY, ModelCheck, RefusedModel, check_model, vllm_support

PROBE_QUERY = "What is the capital of France?"
PROBE_PAIR = f"{_QUERY!r} / {_DOC!r}"
PROBE_DOCUMENTS = ["Bananas are yellow.", "Paris is the capital of France."]


def _queue_delays(text: str) -> tuple[int, int, int]:
    values = tuple(int(v) for v in text.split(","))
    if len(values) != 3 or min(values) < 0:
        raise argparse.ArgumentTypeError("expected three microsecond values: PREPROCESS,ENGINE,CALIBRATE")
    return values  # type: ignore[return-value]


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="reranker-model", description=__doc__.split("\n\n")[0])
    parser.add_argument("--repository", type=Path, default=REPOSITORY, help="the model repository (default: %(default)s)")
    sub = parser.add_subparsers(dest="command", required=True)
    check = sub.add_parser("check", help="what the repository would serve this checkpoint as, or why not")
    check.add_argument("model")
    check.add_argument("--load", action="store_true", help="also start the engine once and score two probe pairs")
    check.add_argument("--verbose", action="store_true", help="vLLM's log, and a refused --load's traceback")
    check.add_argument("--parity", type=Path, metavar="PAIRS",
                       help='with --load: JSONL {"query", "document"[, "instruction"]} scored served and by the model '
                            "card's recipe (transformers, fp32), compared")
    add = sub.add_parser("add", help="write configs/NAME.pbtxt of the three steps and a first, unfitted profile")
    add.add_argument("name")
    add.add_argument("model")
    add.add_argument("--documents", type=Path, help="sample: calibration JSONL or one document per line")
    add.add_argument("--force", action="store_true", help="replace a variant of this name that is already there")
    add.add_argument("--gpu", action="store_true", help="one engine per GPU with the GPU engine arguments")
    add.add_argument("--quantization", help="vLLM's quantization of the weights at load, e.g. fp8 (GPU)")
    add.add_argument("--batch-invariant", action="store_true",
                     help="vLLM's batch-invariant mode: a pair's raw score does not depend on what shares its batch "
                          "(GPU, compute capability >= 9.0; slower, docs/PERFORMANCE.md)")
    add.add_argument("--max-model-len", type=int, help="default: from --documents, else the model's limit")
    add.add_argument("--max-query-words", type=int,
                     help="with --documents: the longest query to size for (default: the sample's longest query; "
                          "a sample of documents alone: 64 words)")
    add.add_argument("--accept-truncation", action="store_true",
                     help="write the variant even when max_model_len cuts over 5%% of the sample's documents")
    add.add_argument("--preprocess-instances", type=int)
    add.add_argument("--tokenizer-threads", type=int)
    add.add_argument("--queue-delay-us", type=_queue_delays, help="PREPROCESS,ENGINE,CALIBRATE max_queue_delay")
    fit = sub.add_parser("fit", help="score labelled pairs through the variant, fit its calibration and install "
                                     "the profile it serves")
    fit.add_argument("name", help="a variant (configs/NAME.pbtxt), or 'default' for config.pbtxt")
    fit.add_argument("pairs", type=Path, help='JSONL: {"query", "document", "label": 0|1[, "instruction"]}')
    fit.add_argument("--version", help="the profile's version (default: today's date and the day's count, "
                                       "e.g. 2026-12-06.1)")
    fit.add_argument("--report-dir", type=Path, help="scored.jsonl, report.md and report.png (default: "
                                                     "build/calibration/NAME)")
    fit.add_argument("--instruction", help="a yes/no reranker's instruction for lines without their own")
    fit.add_argument("--quiet", action="store_true", help="no progress bar")
    score = sub.add_parser("score", help="raw scores of pairs through the variant's preprocess and engine, no Triton")
    score.add_argument("name", help="a variant (configs/NAME.pbtxt), or 'default' for config.pbtxt")
    score.add_argument("pairs", type=Path, help='JSONL: {"query", "document", ...}; other fields are kept')
    score.add_argument("-o", "--output", type=Path, required=True)
    score.add_argument("--instruction", help="a yes/no reranker's instruction (its default when not given)")
    ensemble = sub.add_parser("ensemble", help="a second repository serving the variant as its own ensemble")
    ensemble.add_argument("name", help="a variant (configs/NAME.pbtxt), or 'default' for config.pbtxt")
    ensemble.add_argument("out", type=Path, help="the folder to pass as a second --model-repository")
    ensemble.add_argument("--as", dest="ensemble", help="the ensemble's name (default: NAME)")
    return parser


def describe(model: ModelCheck) -> list[str]:
    version, entry = vllm_support(model.loaded_architecture)
    supported = "NOT supported" if entry is None else "supported" + (f" (from {entry})" if entry != model.loaded_architecture else "")
    lines = [
        f"model: {model.reference} ({model.path})",
        f"family: {model.family.name} ({model.architecture}, model_type {model.model_type})",
        f"score type: {model.score_type}, raw scores {model.family.raw_range}; unfitted profile: "
        f"{model.family.unfitted_method}",
        f"vLLM {version}: {model.loaded_architecture} {supported} by its model registry (runner pooling, "
        f"task {model.family.score_kind.task})",
        f"max_position_embeddings: {model.max_position_embeddings}; longest sequence: {model.length_limit} tokens",
        f"template (the pair {PROBE_PAIR} as the model gets it, sequences split by ' | '):",
        *(f"  {line}" for line in model.template.splitlines()),
    ]
    if model.classifier_tokens:
        lines.append("yes/no tokens: " + ", ".join(f"{t!r} = {i}" for t, i in model.classifier_tokens.items()))
    weights = model.weights
    lines.append(f"weights: {', '.join(weights.files)}, {weights.parameters:,} parameters, headers checked"
                 if weights.files else "weights: pickled (pytorch_model.bin), not checked")
    lines.append(f"engine_args it needs: {json.dumps(model.engine_args)}")
    return lines


def run_check(args: argparse.Namespace) -> int:
    if args.parity and not args.load:
        raise ValueError("--parity scores the pairs with the engine: add --load")
    model = check_model(args.model)
    print("\n".join(describe(model)))
    if vllm_support(model.loaded_architecture)[1] is None:
        raise RefusedModel(f"{model.loaded_architecture} is not in this vLLM's model registry: use a vLLM that has it")
    if args.load:
        print("\n".join(_probe(model, args)))
    return 0


def _probe(model: ModelCheck, args: argparse.Namespace) -> list[str]:
    """The probe's lines; whatever vLLM raises while it loads and scores is one refusal naming the checkpoint and
    the cause its engine process printed (vLLM's log, and the refusal's traceback, shown with --verbose)."""
    from .offline import read_pair_rows
    from .probe import probe_lines

    with _stderr_kept() as log:
        try:
            rows = read_pair_rows(args.parity) if args.parity else None
            return probe_lines(model, args.repository, PROBE_QUERY, PROBE_DOCUMENTS, rows)
        except Exception as problem:  # noqa: BLE001 - any failure to load or score is the model's refusal
            failed = problem
            if args.verbose:
                traceback.print_exc()
        finally:
            printed = log.read_text(errors="replace")
            if args.verbose:
                sys.stderr.write(printed)
    first_line = str(failed).splitlines()[0] if str(failed) else ""
    cause = _root_cause(printed)
    raise RefusedModel(f"{model.path}: vLLM could not load it and score the probe pairs ({type(failed).__name__}: "
                       f"{first_line})" + (f"; the cause: {cause}" if cause else "")
                       + ("" if args.verbose else "; --verbose shows vLLM's log")) from None


@contextlib.contextmanager
def _stderr_kept() -> Iterator[Path]:
    """File descriptor 2 (this process's and the engine processes' it starts) into a file for the duration."""
    with tempfile.TemporaryDirectory() as folder:
        path = Path(folder) / "stderr.log"
        sys.stderr.flush()
        saved = os.dup(2)
        with path.open("wb") as sink:
            os.dup2(sink.fileno(), 2)
            try:
                yield path
            finally:
                sys.stderr.flush()
                os.dup2(saved, 2)
                os.close(saved)


def _root_cause(log: str) -> str | None:
    """The last exception line an engine process printed before the engine's own "initialization failed"."""
    causes = [match.group(1) for match in re.finditer(r"(?m)(\b[A-Z]\w*(?:Error|Exception): .+)$", log)
              if "Engine core initialization failed" not in match.group(1)]
    return causes[-1].strip() if causes else None


def run_add(args: argparse.Namespace, argv: Sequence[str]) -> int:
    from .sizing import memory_lines
    from .variant import VariantSpec, check_name, engine_args, write_variant

    replaced = set(check_name(args.name, args.repository, args.force))
    model = check_model(args.model)
    length = _max_model_len(args, model)
    if length > model.length_limit:
        raise RefusedModel(f"max_model_len {length} is over {model.reference}'s limit of {model.length_limit} tokens")
    spec = VariantSpec(args.name, model, length, args.gpu, args.preprocess_instances, args.tokenizer_threads,
                       args.queue_delay_us, args.quantization, args.batch_invariant,
                       command=["reranker-model", *argv[argv.index("add"):]])
    written = write_variant(spec, args.repository)
    if args.documents is not None:
        base = configured_engine_args(read_config(config_path(args.repository, ENGINE)))
        print("\n".join(memory_lines(model, engine_args(spec, base), _gpu_bytes())))
    for path in written:
        print(f"{'replaced' if path in replaced else 'wrote'} {path.relative_to(args.repository)}")
    print(f"serve it: tritonserver --model-config-name={args.name} (scripts/start_server.sh --model-config-name={args.name})")
    return 0


def _max_model_len(args: argparse.Namespace, model: ModelCheck) -> int:
    """--max-model-len; else what the sample needs, never less than the variant being replaced accepted; else the
    model's limit. With a sample, what the length cuts of it is printed, and past 5% refused unless accepted."""
    from .sizing import choose_length, read_sample, sample_lengths, takes_line, truncation_line

    if args.documents is None:
        return args.max_model_len or model.length_limit
    measured = sample_lengths(model, read_sample(args.documents), args.max_query_words)
    choice = choose_length(measured.lengths, model.length_limit)
    print(f"queries: {measured.queries}")
    print("\n".join(choice.lines(model.length_limit)))
    length = args.max_model_len or choice.max_model_len
    before = _replaced_length(args.repository, args.name) if args.max_model_len is None else None
    if before is not None and before > length:
        length = min(before, model.length_limit)
        print(f"max_model_len {length}: what the variant it replaces accepted (--max-model-len sets a shorter one)")
    print(truncation_line(measured.lengths, length, args.accept_truncation))
    print(takes_line(model, length))
    return length


def _replaced_length(repository: Path, name: str) -> int | None:
    """The max_model_len of the variant `add --force` replaces, if there is one."""
    path = variant_file(repository, ENGINE, name)
    return int(configured_engine_args(read_config(path))["max_model_len"]) if path.is_file() else None


def _gpu_bytes() -> int | None:
    import torch

    return torch.cuda.mem_get_info()[1] if torch.cuda.is_available() else None


def run_score(args: argparse.Namespace) -> int:
    from .offline import read_pair_rows, score_rows

    rows = read_pair_rows(args.pairs)
    result = score_rows(args.repository, args.name, rows, args.instruction)
    with args.output.open("w", encoding="utf-8") as out:
        for row in result.rows:
            out.write(json.dumps(row, ensure_ascii=False) + "\n")
    print(f"{len(rows)} pairs in {result.seconds:.1f} s: {result.rate:.1f} pairs/s -> {args.output}")
    return 0


def run_fit(args: argparse.Namespace) -> int:
    from .fitting import fit_variant

    report_dir = args.report_dir or Path("build") / "calibration" / args.name
    print("\n".join(fit_variant(args.repository, args.name, args.pairs, report_dir, args.version, args.instruction,
                                args.quiet)))
    return 0


def run_ensemble(args: argparse.Namespace, argv: Sequence[str]) -> int:
    from .beside import SecondEnsemble
    from .fitting import shown as _shown

    name = args.ensemble or args.name
    command = ("reranker-model", *argv[argv.index("ensemble"):])
    written = SecondEnsemble(args.repository, args.name, args.out, name, command).write()
    steps = " -> ".join(path.parent.name for path in written[1:] if path.name == "config.pbtxt")
    print(f"ensemble {name}: {steps}")
    for path in written:
        print(f"wrote {_shown(path)}")
    print(f"serve both: scripts/start_server.sh --model-repository={_shown(args.out)} "
          f"(tritonserver --model-repository={_shown(args.repository)} --model-repository={_shown(args.out)})")
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    from_command_line = argv is None
    argv = list(sys.argv[1:] if argv is None else argv)
    args = build_parser().parse_args(argv)
    if from_command_line and not getattr(args, "verbose", False):
        # this tool's report on stdout alone: vLLM's log (its engine processes' too, which read the same
        # variables when they start) only with --verbose, unless the caller set its level
        os.environ["VLLM_LOGGING_LEVEL"] = os.environ.get("VLLM_LOGGING_LEVEL") or "CRITICAL"
    try:
        if args.command == "check":
            return run_check(args)
        if args.command == "add":
            return run_add(args, argv)
        if args.command == "ensemble":
            return run_ensemble(args, argv)
        if args.command == "fit":
            return run_fit(args)
        return run_score(args)
    except (RefusedModel, ValueError, FileNotFoundError) as exc:
        print(f"reranker-model {args.command}: refused: {exc}", file=sys.stderr)
        return 2
