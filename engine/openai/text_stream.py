"""Turning a growing list of output token ids into text deltas, with stop strings, and chat prompts.

The engine stops on token ids only; stop strings are a text-level rule, so they live here, next to
the detokenizer: the text is cut before the first stop string and the request is ended early. While a
request runs, a tail that could still grow into a stop string (or an incomplete UTF-8 character) is
held back, so a client never receives text that is later taken back.
"""

from dataclasses import dataclass

REPLACEMENT_CHAR = "\ufffd"  # what a byte-level decode shows for an incomplete UTF-8 sequence


@dataclass
class TextDelta:
    text: str  # new text to send now
    stopped: bool  # a stop string was found: the request should end with finish_reason "stop"


class TextStream:
    def __init__(self, tokenizer, stop_strings: list[str]):
        self.tokenizer = tokenizer
        self.stop_strings = [s for s in stop_strings if s]
        self.hold_back = max((len(s) - 1 for s in self.stop_strings), default=0)
        self.num_sent_chars = 0
        self.text = ""

    def update(self, output_token_ids: list[int], finished: bool) -> TextDelta:
        """The text to send after the output grew to `output_token_ids` (all of them so far)."""
        text = self.tokenizer.decode(output_token_ids)
        cut = self._first_stop(text)
        if cut is not None:
            self.text = text[:cut]
            return TextDelta(self._take(len(self.text)), stopped=True)
        self.text = text
        if finished:
            return TextDelta(self._take(len(text)), stopped=False)
        ready = len(text) - self.hold_back
        while ready > self.num_sent_chars and text[ready - 1] == REPLACEMENT_CHAR:
            ready -= 1  # an incomplete character may still become a real one
        return TextDelta(self._take(ready), stopped=False)

    def _first_stop(self, text: str) -> int | None:
        # only the unsent part (and the held-back tail before it) can hold a new stop string
        start = max(0, self.num_sent_chars - self.hold_back)
        hits = [i for i in (text.find(s, start) for s in self.stop_strings) if i >= 0]
        return min(hits) if hits else None

    def _take(self, end: int) -> str:
        if end <= self.num_sent_chars:
            return ""
        delta = self.text[self.num_sent_chars : end]
        self.num_sent_chars = end
        return delta


# ---- chat prompts ------------------------------------------------------------------------------------
def chat_prompt_token_ids(
    tokenizer, messages: list[tuple[str, str]], add_generation_prompt: bool = True
) -> list[int]:
    """The tokenizer's own chat template when it has one, else a plain role-tagged transcript."""
    inner = getattr(tokenizer, "inner", None)
    if inner is not None and getattr(inner, "chat_template", None):
        conversation = [{"role": role, "content": content} for role, content in messages]
        text = inner.apply_chat_template(
            conversation, tokenize=False, add_generation_prompt=add_generation_prompt
        )
        # the template already writes the BOS token when the model wants one
        return list(inner.encode(text, add_special_tokens=False))
    return tokenizer.encode(default_chat_text(messages, add_generation_prompt))


def default_chat_text(messages: list[tuple[str, str]], add_generation_prompt: bool = True) -> str:
    turns = "".join(f"<|{role}|>\n{content}\n" for role, content in messages)
    return turns + ("<|assistant|>\n" if add_generation_prompt else "")
