"""Env steps are atomic and take any text (issue 41, item 1), in every env: ALFWorld, WebShop, Search-QA, KeyDoor
and the pools' toy.

* Unencodable text: a lone UTF-16 surrogate (``"\\ud800"``, what a JSON escape hands a served client's env) reached
  the JVM bridge of WebShop's and Search-QA's search and raised ``UnicodeEncodeError`` mid-step. Every env now
  replaces each one by U+FFFD at the boundary (``envs.base.clean_text``): the property test plays random actions
  with random surrogates in one env and the same actions cleaned in another, and every step, snapshot, restore
  (into a third env) and the valid action after must agree.
* A step that raises (a search engine or retrieval server failing, a game engine error) leaves the env exactly as
  before it: the same snapshot, and the next action answered as in an env that never saw the failed one.
"""

import random

import pytest

import envs
from envs.alfworld.games import SHIPPED_DATA
from envs.base import TextEnv, clean_text
from envs.toy import ToyEnv

NAMES = ["alfworld", "webshop", "searchqa", "keydoor", "toy"]
SEARCH = {"webshop": "search[{}]", "searchqa": "<search>{}</search>"}
JUNK = ["", "   ", "look", "click[", "<answer>", "search[]", "press", "go to desk 1", "<search></search>"]


@pytest.fixture(scope="module")
def make(tmp_path_factory):
    """``make(name)``: a new env of ``name`` on the shipped data (the data is loaded once per process)."""
    cache = {name: str(tmp_path_factory.mktemp(f"{name}_cache")) for name in ("webshop", "searchqa")}
    kwargs = {
        "alfworld": {"data_dir": str(SHIPPED_DATA)},
        "webshop": {"split": "all", "cache_dir": cache["webshop"]},
        "searchqa": {"cache_dir": cache["searchqa"]},
        "keydoor": {},
    }

    def build(name: str) -> TextEnv:
        return ToyEnv() if name == "toy" else envs.make(name, **kwargs[name])

    return build


def dirty(text: str, rng: random.Random) -> str:
    """``text`` with one to three lone surrogates (high or low) at random places."""
    for _ in range(rng.randint(1, 3)):
        at = rng.randint(0, len(text))
        text = text[:at] + chr(rng.randint(0xD800, 0xDFFF)) + text[at:]
    return text


def candidates(env: TextEnv, info: dict, expert: list[str]) -> list[str]:
    """Texts worth trying: the expert's first actions, the admissible ones now, a search, junk."""
    texts = [*JUNK, *expert[:3], *expert[:3]]
    texts += list(info.get("admissible_actions") or [])[:8]
    if env.name in SEARCH:
        texts.append(SEARCH[env.name].format("Velmora serum"))
    return texts


def valid_action(info: dict, expert: list[str]) -> str:
    """A well-formed action now: the first admissible one, else the expert's first."""
    return (info.get("admissible_actions") or expert)[0]


@pytest.mark.parametrize("name", NAMES)
def test_random_unencodable_actions_play_as_their_cleaned_text_and_fork_exactly(make, name):
    rng = random.Random(f"surrogates {name}")
    dirty_env, clean_env, fork_env = make(name), make(name), make(name)
    task_ids = dirty_env.task_ids()
    for episode in range(6):
        task = task_ids[rng.randrange(len(task_ids))]
        start = dirty_env.reset(options={"task_id": task})
        assert clean_env.reset(options={"task_id": task}) == start
        expert = dirty_env.expert_actions()
        info, over = start[1], False
        for _ in range(rng.randint(1, 4)):
            text = rng.choice(candidates(dirty_env, info, expert))
            action = dirty(text, rng)
            assert clean_text(action) != action and clean_text(action).encode("utf-8")  # two may pair up
            result = dirty_env.step(action)  # before: UnicodeEncodeError out of WebShop's and Search-QA's search
            assert result == clean_env.step(clean_text(action)), f"{name} episode {episode}: {action!r}"
            info, over = result[4], result[2] or result[3]
            if over:
                break
        state = dirty_env.snapshot()
        assert state == clean_env.snapshot()
        str(state.payload).encode("utf-8")  # the state holds no surrogate: it is the cleaned text's
        assert fork_env.restore(state) == dirty_env.restore(state) == clean_env.restore(state)
        if not over:
            action = valid_action(info, expert)
            after = dirty_env.step(action)
            assert fork_env.step(action) == after == clean_env.step(action)


def test_a_surrogate_pair_is_read_as_its_character():
    assert clean_text("a\ud83d\ude00b") == "a\U0001f600b"
    assert clean_text("\udc80x\ud800") == "\ufffdx\ufffd"
    plain = "no surrogates here, ünïcödé 漢字"
    assert clean_text(plain) is plain


def test_an_action_that_is_not_a_string_is_refused_by_every_env(make):
    for name in NAMES:
        env = make(name)
        env.reset(options={"task_id": env.task_ids()[0]})
        with pytest.raises(TypeError, match=f"a {name} action is a string, got bytes"):
            env.step(b"look")
        assert env.snapshot().step_count == 0


class Once:
    """Raise ``RuntimeError`` on the first call, after calling ``fn`` when ``after``; then behave as ``fn``."""

    def __init__(self, fn, after: bool = False):
        self.fn, self.after, self.raised = fn, after, False

    def __call__(self, *args, **kwargs):
        if self.raised:
            return self.fn(*args, **kwargs)
        self.raised = True
        if self.after:
            self.fn(*args, **kwargs)
        raise RuntimeError("injected failure")


def inject(env: TextEnv, monkeypatch) -> Once:
    """Make the env's next step fail deep inside, where a real failure would come from."""
    if env.name == "searchqa":  # the retriever (a server down, the JVM): nothing of the turn may stay
        failing = Once(env.retriever.search)
        monkeypatch.setattr(env.retriever, "search", failing)
    elif env.name == "webshop":  # the catalog's search, while the page is changing
        failing = Once(env.catalog.search)
        monkeypatch.setattr(env.catalog, "search", failing)
    elif env.name == "alfworld":  # the game engine fails after it moved: the env must put it back
        failing = Once(env._engine.step, after=True)
        monkeypatch.setattr(env._engine, "step", failing)
    elif env.name == "keydoor":  # rendering the new room
        import envs.keydoor.env as keydoor

        failing = Once(keydoor.render_observation)
        monkeypatch.setattr(keydoor, "render_observation", failing)
    else:
        failing = Once(env._obs)  # the toy's observation, after its counters moved
        monkeypatch.setattr(env, "_obs", failing)
    return failing


@pytest.mark.parametrize("name", NAMES)
@pytest.mark.parametrize("depth", [0, 1])
def test_a_step_that_raises_leaves_the_env_as_before(make, monkeypatch, name, depth):
    env, clean = make(name), make(name)
    task = env.task_ids()[0]
    env.reset(options={"task_id": task})
    clean.reset(options={"task_id": task})
    expert = env.expert_actions()
    for action in expert[:depth]:
        assert env.step(action) == clean.step(action)
    before = env.snapshot()
    failing, action = inject(env, monkeypatch), expert[depth]
    if name == "searchqa" and not action.startswith("<search>"):  # a question the expert answers after one search
        action = expert[0]
    with pytest.raises(RuntimeError, match="injected failure"):
        env.step(action)
    assert failing.raised
    assert env.snapshot() == before  # counters, page, dialogue: as before the step
    # the same action again, now without the failure, and the next ones: as in an env that never failed (the
    # ALFWorld engine had moved: the env put it back)
    for again in [action, *expert[depth + 1 : depth + 3]]:
        assert env.step(again) == clean.step(again)
    assert env.restore(env.snapshot()) == clean.restore(clean.snapshot())


def play_toy(actions: list[str]) -> tuple:
    env = ToyEnv(hang_s=0.0)
    env.reset(options={"task_id": "code-0"})
    return [env.step(action) for action in actions][-1]


async def test_pools_replay_what_the_env_holds_after_a_failed_step_and_unencodable_text(ray_cluster):
    from envs.pools.local import LocalEnvPool
    from envs.pools.ray_pool import EnvPool, EnvWorkerError

    class FailingToy(ToyEnv):  # local, so that Ray ships the class itself to the workers
        """The toy whose step raises after its counters moved, for an action naming ``fail`` (as a flaky env)."""

        def _advance(self, action):
            result = super()._advance(action)
            if "fail" in action:
                raise RuntimeError("injected failure")
            return result

    envs.register_env("toy_failing", FailingToy)
    dirty_action = "press \ud800 1"
    with EnvPool("toy_failing", num_workers=1, call_timeout_s=20.0) as pool:
        local = LocalEnvPool("toy_failing")
        for each in (pool, local):
            await each.reset("a", task_id="code-0")
            assert await each.step("a", dirty_action) == play_toy([clean_text(dirty_action)])
            with pytest.raises(RuntimeError, match="injected failure"):
                await each.step("a", "press 1 fail")
            # the live env is as before the failed step, and the pool did not record it
            assert await each.step("a", "press 2") == play_toy([clean_text(dirty_action), "press 2"])
        local.shutdown()
        with pytest.raises(EnvWorkerError, match="restarted"):
            await pool.step("a", "crash")
        # rebuilt from what the pool recorded (the surrogate action, as sent): the same episode
        assert await pool.step("a", "press 3") == play_toy([clean_text(dirty_action), "press 2", "press 3"])
        assert pool.stats()["replayed_actions"] == 2
