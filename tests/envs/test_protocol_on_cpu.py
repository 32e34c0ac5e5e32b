"""envs.protocol: named protocols of an env family, resolved with errors that name the known ones."""

import pytest

import envs
from envs import protocol
from envs.protocol import Protocol

TABLE = {
    "default": Protocol("ours", {"max_steps": 4, "topk": 3}),
    "other": Protocol("theirs", {"max_steps": 5}, system_prompt="", stop=("</x>",), strip_thoughts=False),
}


def test_settings_take_the_protocols_values_unless_given():
    given = {"max_steps": None, "topk": None}
    assert protocol.settings("toy", TABLE, "default", given) == {"max_steps": 4, "topk": 3}
    assert protocol.settings("toy", TABLE, "other", given) == {"max_steps": 5, "topk": None}
    assert protocol.settings("toy", TABLE, "other", {"max_steps": 2, "topk": 7}) == {"max_steps": 2, "topk": 7}


def test_unknown_names_fail_naming_the_known_ones():
    with pytest.raises(ValueError, match=r"unknown toy protocol 'search_r2'; known: default, other"):
        protocol.settings("toy", TABLE, "search_r2", {})
    with pytest.raises(ValueError, match=r"sets \['topk'\], which are not settings"):
        protocol.settings("toy", TABLE, "default", {"max_steps": None})
    with pytest.raises(ValueError, match="env 'toy' has no protocols"):
        protocol.resolve("toy", None, "other")
    assert protocol.resolve("toy", None, None) is None
    assert protocol.resolve("toy", TABLE, None) is TABLE["default"]


def test_env_families_find_their_table():
    assert protocol.protocols("nosuchenv") is None
    assert protocol.protocols("keydoor") is None  # a family without envs/<name>/protocol.py
    searchqa = protocol.protocols("searchqa")
    assert {"default", "search_r1", "verl_agent"} <= set(searchqa)
    assert protocol.selected("searchqa", {"protocol": "search_r1"}) is searchqa["search_r1"]
    assert protocol.selected("searchqa", {}) is searchqa["default"]
    with pytest.raises(ValueError, match="known: default, search_r1, verl_agent"):
        protocol.selected("searchqa", {"protocol": "searchr1"})


@pytest.mark.parametrize("env_name", ["searchqa", "webshop", "alfworld"])
@pytest.mark.parametrize("given", [["search_r1"], {"name": "default"}, 3])
def test_a_protocol_that_is_not_a_name_fails_naming_the_key(env_name, given):
    """Before: ``TypeError: unhashable type: 'list'`` (issue 41)."""
    with pytest.raises(ValueError, match=rf"'protocol' of env '{env_name}' must be a name \(a string; one of: default"):
        protocol.selected(env_name, {"protocol": given})
    with pytest.raises(ValueError, match=rf"'protocol' of env '{env_name}' must be a name"):
        envs.make(env_name, protocol=given)


def test_keydoor_asked_for_a_protocol_says_it_has_none():
    """Before: ``TypeError: KeyDoorEnv.__init__() got an unexpected keyword argument 'protocol'`` (issue 41)."""
    for given in ("default", ["default"]):
        with pytest.raises(ValueError, match=r"env 'keydoor' has no protocols .*drop 'protocol' from its kwargs"):
            envs.make("keydoor", protocol=given)
    with pytest.raises(ValueError, match="env 'keydoor' has no protocols"):
        protocol.selected("keydoor", {"protocol": "default"})
    with pytest.raises(ValueError, match=r"env 'keydoor' does not take env_kwargs \['num_task'\]"):
        envs.make("keydoor", num_task=3)  # any other misspelt kwarg: named too, not a raw TypeError
