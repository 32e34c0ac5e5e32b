"""EnvState.fingerprint: GiGPO's exact state identity."""

from envs.base import EnvState


def test_fingerprint_is_the_state_not_when_it_was_reached():
    page = ("catalog", "results", ("red", "shoes"), 1, None, (), None, "")
    first, revisit = EnvState("webshop", "g1", 2, page), EnvState("webshop", "g1", 5, page)
    assert first.fingerprint() == revisit.fingerprint()  # the same page later is the same state
    assert first.fingerprint() != EnvState("webshop", "g2", 2, page).fingerprint()  # another task
    other = ("catalog", "results", ("red", "shoes"), 2, None, (), None, "")
    assert first.fingerprint() != EnvState("webshop", "g1", 2, other).fingerprint()
    assert first.fingerprint() != EnvState("alfworld", "g1", 2, page).fingerprint()
    # a dict payload (ALFWorld's) built in the same key order hashes alike in any process
    a = EnvState("alfworld", "t", 1, {"actions": ("look",), "ops": (3,), "digest": "d", "obs": "x"})
    b = EnvState("alfworld", "t", 1, {"actions": ("look",), "ops": (3,), "digest": "d", "obs": "x"})
    assert a.fingerprint() == b.fingerprint() and len(a.fingerprint()) == 64
