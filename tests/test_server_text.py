"""Text deltas and stop strings (what a streaming client sees adds up to the whole answer, never more
than the text before the first stop string), and chat prompts with and without a tokenizer template."""

from hypothesis import given, settings
from hypothesis import strategies as st

from engine.openai.text_stream import TextStream, chat_prompt_token_ids, default_chat_text
from engine.tokenizer import ByteTokenizer

TOKENIZER = ByteTokenizer(512)


def stream_all(token_ids: list[int], stops: list[str]) -> tuple[str, bool, str]:
    """Feeds the ids one by one as the engine would; returns (streamed text, stopped, final text)."""
    text, streamed = TextStream(TOKENIZER, stops), ""
    for n in range(1, len(token_ids) + 1):
        delta = text.update(token_ids[:n], finished=n == len(token_ids))
        streamed += delta.text
        if delta.stopped:
            return streamed, True, text.text
    return streamed, False, text.text


@settings(max_examples=200, deadline=None)
@given(
    ids=st.lists(st.integers(3, 511), min_size=1, max_size=40),
    stops=st.lists(st.text(alphabet="ab\u00e9c", min_size=1, max_size=3), max_size=3),
)
def test_streamed_text_is_the_whole_text_cut_at_the_first_stop(ids, stops):
    streamed, stopped, final = stream_all(ids, stops)
    full = TOKENIZER.decode(ids)
    cuts = [full.find(s) for s in stops if s in full]
    assert streamed == final
    if stopped:
        assert final == full[: min(cuts)]
    else:
        assert final == full and not cuts


def test_incomplete_utf8_is_held_back_until_complete():
    e_acute = [b + 3 for b in "é".encode()]  # two bytes: the first alone is not a character
    text = TextStream(TOKENIZER, [])
    assert text.update(e_acute[:1], finished=False).text == ""
    assert text.update(e_acute, finished=False).text == "é"


def test_stop_string_split_across_tokens_is_never_sent():
    ids = [b + 3 for b in b"xyEND tail"]
    deltas = []
    text = TextStream(TOKENIZER, ["END"])
    for n in range(1, len(ids) + 1):
        delta = text.update(ids[:n], finished=False)
        deltas.append(delta.text)
        if delta.stopped:
            break
    assert "".join(deltas) == "xy" and "E" not in "".join(deltas)


def test_default_chat_prompt_tags_each_role():
    messages = [("system", "be brief"), ("user", "hi")]
    assert default_chat_text(messages) == "<|system|>\nbe brief\n<|user|>\nhi\n<|assistant|>\n"
    assert chat_prompt_token_ids(TOKENIZER, messages) == TOKENIZER.encode(
        default_chat_text(messages)
    )


def test_a_tokenizers_own_chat_template_is_used(tmp_path):
    from tokenizers import Tokenizer, models, pre_tokenizers
    from transformers import PreTrainedTokenizerFast

    from engine.tokenizer import HFTokenizer

    words = ["<s>", "</s>", "<unk>", "[user]", "[bot]", "hello", "there"]
    core = Tokenizer(models.WordLevel({w: i for i, w in enumerate(words)}, unk_token="<unk>"))
    core.pre_tokenizer = pre_tokenizers.WhitespaceSplit()
    fast = PreTrainedTokenizerFast(
        tokenizer_object=core, bos_token="<s>", eos_token="</s>", unk_token="<unk>"
    )
    fast.chat_template = (
        "{% for m in messages %}[{{ m['role'] }}] {{ m['content'] }} {% endfor %}"
        "{% if add_generation_prompt %}[bot]{% endif %}"
    )
    fast.save_pretrained(tmp_path)
    tokenizer = HFTokenizer(str(tmp_path))
    ids = chat_prompt_token_ids(tokenizer, [("user", "hello there")])
    assert [words[i] for i in ids] == ["[user]", "hello", "there", "[bot]"]
