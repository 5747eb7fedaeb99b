"""A checkpoint's files as the serving code reads them (config.json, tokenizer.json, its model card), with
huggingface_hub and the `tokenizers` library alone.

The preprocess step reads them in every instance's process: transformers (AutoConfig, AutoTokenizer) would import
torch there, ~3.7 s and ~400 MB per process for nothing the step uses. A file is found as transformers finds it: in
a local folder, or for a hub id through the Hugging Face cache (downloaded where the hub is reachable and
HF_HUB_OFFLINE is not set).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from tokenizers import AddedToken, Tokenizer

# tokenizer_config.json's keys that name one special token each, in the order transformers adds them
SPECIAL_TOKEN_ROLES = ("bos_token", "eos_token", "unk_token", "sep_token", "pad_token", "cls_token", "mask_token")
# ... and those that name a list of them (extra_special_tokens: a list, or a name -> token map)
SPECIAL_TOKEN_LISTS = ("additional_special_tokens", "extra_special_tokens")


class MissingTokenizerError(ValueError):
    """The checkpoint has no tokenizer.json, the fast tokenizer the serving code tokenizes with."""


def checkpoint_file(model: str, name: str) -> str | None:
    """The path of a file of `model` (a local folder, or a hub id); None when the checkpoint has no such file, or
    when it is a hub id that is neither reachable nor in the local cache (as transformers' cached_file)."""
    folder = Path(model)
    if folder.is_dir():
        path = folder / name
        return str(path) if path.is_file() else None
    from huggingface_hub import hf_hub_download  # a hub id only: a folder needs none of it
    from huggingface_hub.errors import EntryNotFoundError

    try:
        return hf_hub_download(model, name)  # the cached copy when offline (HF_HUB_OFFLINE) or unreachable
    except EntryNotFoundError:  # not in the repository, or offline and not cached
        return None


def checkpoint_json(model: str, name: str) -> dict[str, Any] | None:
    """A JSON file of the checkpoint, parsed; None when it has none."""
    path = checkpoint_file(model, name)
    return json.loads(Path(path).read_text(encoding="utf-8")) if path else None


def served_tokenizer(model: str) -> Tokenizer:
    """The checkpoint's fast tokenizer as transformers' AutoTokenizer builds it, with padding and truncation off (the
    encoders place every cut themselves).

    That is tokenizer.json, plus what tokenizer_config.json changes in it: the special tokens it names that
    tokenizer.json lacks as added tokens are added (otherwise "[SEP]" in a text would be split into word pieces, not
    matched as the token), and split_special_tokens is applied."""
    path = checkpoint_file(model, "tokenizer.json")
    if path is None:
        raise MissingTokenizerError(f"{model}: a fast (Rust) tokenizer is required, tokenizer.json is missing")
    tokenizer = Tokenizer.from_file(path)
    config = checkpoint_json(model, "tokenizer_config.json") or {}
    present = {token.content for token in tokenizer.get_added_tokens_decoder().values()}
    missing: dict[str, AddedToken] = {}
    for token in _config_special_tokens(model, config):
        if token.content not in present:
            missing.setdefault(token.content, token)  # the first declaration of a token is the one added
    if missing:
        tokenizer.add_tokens(list(missing.values()))
    tokenizer.encode_special_tokens = bool(config.get("split_special_tokens", False))
    tokenizer.no_padding()
    tokenizer.no_truncation()
    return tokenizer


def _config_special_tokens(model: str, config: dict[str, Any]) -> list[AddedToken]:
    """The added and special tokens tokenizer_config.json declares (special_tokens_map.json's roles too, which
    transformers still reads when the config has no added_tokens_decoder), in the order transformers adds them."""
    declared = sorted(config.get("added_tokens_decoder", {}).items(), key=lambda item: int(item[0]))
    tokens = [AddedToken(**_fields(entry)) for _, entry in declared]
    roles = dict(config)
    if "added_tokens_decoder" not in config:
        roles.update(checkpoint_json(model, "special_tokens_map.json") or {})
    named = [roles.get(role) for role in SPECIAL_TOKEN_ROLES]
    for key in SPECIAL_TOKEN_LISTS:
        listed = roles.get(key) or []
        named.extend(listed.values() if isinstance(listed, dict) else listed)
    return tokens + [_special(value) for value in named if value]


def _fields(entry: dict[str, Any]) -> dict[str, Any]:
    """An added token's serialized fields, less transformers' own type tag."""
    return {key: value for key, value in entry.items() if key != "__type"}


def _special(value: str | dict[str, Any]) -> AddedToken:
    """A special token as tokenizer_config.json names it: its text, or its serialized fields."""
    if isinstance(value, str):
        return AddedToken(value, special=True, normalized=False)
    return AddedToken(**{**_fields(value), "special": True})
