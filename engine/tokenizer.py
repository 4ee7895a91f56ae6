"""Tokenizers: the model directory's own (Hugging Face, local files only), or a byte-level one for presets."""

import functools
from pathlib import Path


class ByteTokenizer:
    """ids 0-2 are <unk>, <s>, </s>; id 3 + b is byte b. Ids past 258 (a dummy model's random picks)
    decode to byte (id - 3) mod 256, so every id shows as something."""

    NUM_SPECIAL = 3

    def __init__(self, vocab_size: int, bos_token_id: int | None = 1, eos_token_id: int | None = 2):
        if vocab_size < self.NUM_SPECIAL + 256:
            raise ValueError(
                f"vocab_size {vocab_size} is too small for a byte tokenizer; expected ≥ 259"
            )
        self.vocab_size = vocab_size
        self.bos_token_id, self.eos_token_id = bos_token_id, eos_token_id

    # the most characters one token can stand for: a longer text cannot fit in fewer tokens
    max_chars_per_token = 1

    def encode(self, text: str) -> list[int]:
        ids = [b + self.NUM_SPECIAL for b in text.encode("utf-8")]
        return ([self.bos_token_id] if self.bos_token_id is not None else []) + ids

    def decode(self, token_ids: list[int]) -> str:
        special = {self.bos_token_id, self.eos_token_id, 0}
        data = bytes((t - self.NUM_SPECIAL) % 256 for t in token_ids if t not in special)
        return data.decode("utf-8", errors="replace")


class HFTokenizer:
    def __init__(self, directory: str):
        from transformers import AutoTokenizer

        self.inner = AutoTokenizer.from_pretrained(directory, local_files_only=True)
        self.vocab_size = len(self.inner)
        self.bos_token_id, self.eos_token_id = self.inner.bos_token_id, self.inner.eos_token_id

    @functools.cached_property
    def max_chars_per_token(self) -> int:
        """Twice the longest token's spelling: normalisation (NFKC and the like) may shorten a text."""
        return 2 * max((len(token) for token in self.inner.get_vocab()), default=1)

    def encode(self, text: str) -> list[int]:
        return list(self.inner.encode(text))

    def decode(self, token_ids: list[int]) -> str:
        return self.inner.decode(token_ids, skip_special_tokens=True)


def load_tokenizer(model: str, vocab_size: int, bos_token_id: int | None, eos_token_id: int | None):
    directory = Path(model)
    if directory.is_dir() and any(
        (directory / f).exists() for f in ("tokenizer.json", "tokenizer_config.json")
    ):
        return HFTokenizer(model)
    return ByteTokenizer(vocab_size, bos_token_id, eos_token_id)
