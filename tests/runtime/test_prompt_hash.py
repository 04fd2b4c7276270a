"""The journal's prompt digest: stable across processes (made-up tool-call ids left out)."""

from __future__ import annotations

from crew_runtime.journal_llm import prompt_hash


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
