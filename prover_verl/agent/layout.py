"""Where an observation goes in the token stream after a reply: the one rule the agent loop plays by and the imitation
(:mod:`prover_verl.imitate`) trains on, so that a model imitates the layout it will be rolled out in.

* chat layout (the default): the observation is a user turn of the chat template. A reply that a stop string ended
  (``</search>``) has no end-of-turn token, and verl's token builder would open the user turn right after it
  (``...</search><|im_start|>user``): the turn is closed first, as the template renders it (:func:`closing_tokens`);
  the policy did not generate that token, so it is not trained.
* inline layout (``Protocol.inline_observations``, Search-R1's): the observation's text continues the assistant's turn
  (:func:`inline_tokens`), and the policy goes on generating in that same turn.
"""

from __future__ import annotations

from typing import Any


def turn_end_id(tokenizer: Any) -> int:
    """The token that ends an assistant turn in the chat template: ChatML's ``<|im_end|>``, else the tokenizer's EOS."""
    return tokenizer.get_vocab().get("<|im_end|>", tokenizer.eos_token_id)


def closing_tokens(token_ids: list[int], tokenizer: Any) -> list[int]:
    """What closes the reply at the end of ``token_ids`` before a chat-layout observation: nothing if it ends with
    an end-of-turn token (or the EOS), else that token."""
    end = turn_end_id(tokenizer)
    return [] if token_ids and token_ids[-1] in (end, tokenizer.eos_token_id) else [end]


def inline_tokens(tokenizer: Any, text: str) -> list[int]:
    """An inline-layout observation's tokens: its text as it stands, no chat-template tokens around it."""
    return tokenizer.encode(text, add_special_tokens=False)
