"""The journal's prompt digest: stable across processes (made-up tool-call ids left out)."""

from __future__ import annotations

from crew_runtime.journal_llm import _stdlib_prompt_hash, prompt_hash, same_prompt


def _asked(*ids: str) -> list[dict[str, str]]:
    return [{"role": "assistant", "content": f"tool call {i}"} for i in ids]


def test_made_up_ids_count_by_their_place_and_other_words_stay() -> None:
    # CrewAI's ``call_{id(part)}``: another process makes other numbers, the same places.
    assert prompt_hash(_asked("call_140123456", "call_140999999", "call_140123456"), None) == (
        prompt_hash(_asked("call_777777777", "call_55555", "call_777777777"), None)
    )
    assert prompt_hash(_asked("call_140123456", "call_140123456"), None) != (
        prompt_hash(_asked("call_777777777", "call_55555"), None)
    )
    # Not a made-up id: inside a word, or too short to be an address.
    assert prompt_hash(_asked("recall_140123456"), None) != prompt_hash(
        _asked("recall_77777"), None
    )
    assert prompt_hash(_asked("call_1234"), None) != prompt_hash(_asked("call_4321"), None)


def test_a_turn_digested_the_earlier_way_is_the_same_prompt_and_no_other_is() -> None:
    asked = [{"role": "user", "content": "Ötter facts, please"}, *_asked("call_140123456")]
    tools = [{"type": "function", "function": {"name": "search", "parameters": {}}}]
    digest, earlier = prompt_hash(asked, tools), _stdlib_prompt_hash(asked, tools)
    assert digest != earlier  # another writer of the JSON, another digest
    assert same_prompt(digest, digest, asked, tools)
    assert same_prompt(earlier, digest, asked, tools)
    other = [{"role": "user", "content": "Kelp facts, please"}]
    assert not same_prompt(_stdlib_prompt_hash(other, tools), digest, asked, tools)
    assert not same_prompt(None, digest, asked, tools)


def test_a_prompt_orjson_cannot_write_is_digested_all_the_same() -> None:
    huge = [{"role": "user", "content": "count", "n": 2**70}]  # past 64 bits
    assert prompt_hash(huge, None) == prompt_hash([dict(huge[0])], None)
    assert prompt_hash(huge, None) != prompt_hash([{**huge[0], "n": 2**70 + 1}], None)
