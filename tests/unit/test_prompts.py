"""The Qwen3-Reranker prompt, character for character as its model card (and docs BRIEF) writes it."""

from python_backends.families.qwen3_yes_no import QWEN3_DEFAULT_INSTRUCTION, QWEN3_PREFIX, QWEN3_SUFFIX, qwen3_reranker_prompt

# Written out by hand from the model card; the code's constants are not used to build it.
LITERAL = (
    "<|im_start|>system\n"
    "Judge whether the Document meets the requirements based on the Query and the Instruct provided. "
    'Note that the answer can only be "yes" or "no".<|im_end|>\n'
    "<|im_start|>user\n"
    "<Instruct>: {instruction}\n"
    "<Query>: {query}\n"
    "<Document>: {doc}<|im_end|>\n"
    "<|im_start|>assistant\n"
    "<think>\n\n</think>\n\n"
)
DEFAULT = "Given a web search query, retrieve relevant passages that answer the query"


def test_prompt_with_instruction_is_exact():
    query, doc = "What is the capital of China?", "The capital of China is Beijing."
    instruction = "Judge legal relevance"
    rendered = qwen3_reranker_prompt(query, instruction).render(doc)
    assert rendered == LITERAL.format(instruction=instruction, query=query, doc=doc)


def test_default_instruction_is_exact():
    assert QWEN3_DEFAULT_INSTRUCTION == DEFAULT
    query, doc = "explain gravity", "Gravity is a force that attracts two bodies towards each other."
    expected = LITERAL.format(instruction=DEFAULT, query=query, doc=doc)
    assert qwen3_reranker_prompt(query).render(doc) == expected
    assert qwen3_reranker_prompt(query, None).render(doc) == expected
    assert qwen3_reranker_prompt(query, "").render(doc) == expected


def test_prefix_head_and_suffix_split_the_template():
    prompt = qwen3_reranker_prompt("q", "i")
    assert prompt.head.startswith(QWEN3_PREFIX)
    assert prompt.head == QWEN3_PREFIX + "<Instruct>: i\n<Query>: q\n<Document>: "
    assert prompt.suffix == QWEN3_SUFFIX == "<|im_end|>\n<|im_start|>assistant\n<think>\n\n</think>\n\n"
    assert QWEN3_PREFIX + "<Instruct>: i\n<Query>: q\n<Document>: d" + QWEN3_SUFFIX == prompt.render("d")


def test_text_is_inserted_verbatim():
    # Braces, newlines and template-looking text in user input are not interpreted.
    query, doc, instruction = "{doc} <Query>: x", "line one\nline two {query}", "{instruction}"
    expected = (
        QWEN3_PREFIX
        + "<Instruct>: {instruction}\n<Query>: {doc} <Query>: x\n<Document>: line one\nline two {query}"
        + QWEN3_SUFFIX
    )
    assert qwen3_reranker_prompt(query, instruction).render(doc) == expected
