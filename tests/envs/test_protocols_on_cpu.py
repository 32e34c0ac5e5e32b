"""WebShop's and ALFWorld's named protocols replay recorded episodes identically.

The expected prompts, pages, actions and rewards are written out by hand from the upstream code (verl-agent's
env managers, memory and projections; the original WebShop's text env, templates and ``parse_action``), not
recorded from this project's env.
"""

import re
import time

import pytest

from envs import protocol as shared
from envs._verl_agent import history_text, project_action
from envs.alfworld import protocol as alf_protocol
from envs.alfworld.env import AlfWorldEnv
from envs.alfworld.games import SHIPPED_DATA
from envs.webshop import catalog
from envs.webshop import protocol as ws_protocol
from envs.webshop.env import WebShopEnv, parse_action_original, split_goal_ids
from tests.envs.test_webshop import raw_product, write_catalog

SHAMPOO = raw_product(
    "B01",
    name="Tea Tree Shampoo",
    pricing="$10.99",
    full_description="Cleans hair.",
    small_description=["Vegan", "Sulfate free"],
    customization_options={"Size": [{"value": "16 fl oz"}, {"value": "8 fl oz"}]},
)
SCARF = raw_product(
    "B02",
    name="Wool Scarf",
    category="fashion",
    query="scarf",
    product_category="Clothing › Scarves",
    pricing="$20.00",
    full_description="Warm.",
    small_description=["Knitted"],
    customization_options={"Color": [{"value": "Red"}]},
)
INS = {
    "B01": {
        "instruction": "i want a tea tree shampoo",
        "instruction_attributes": ["tea tree"],
        "attributes": ["tea tree"],
    },
    "B02": {"instruction": "i want a wool scarf", "instruction_attributes": ["wool"], "attributes": ["wool"]},
}
HUMAN = {"B01": [{"instruction": "i need a tea tree shampoo", "instruction_attributes": ["tea tree"],
                  "instruction_options": ["16 fl oz"]}]}  # fmt: skip


@pytest.fixture(scope="module")
def shop(tmp_path_factory):
    root = tmp_path_factory.mktemp("shop")
    write_catalog(root, [SHAMPOO, SCARF], ins=INS, human=HUMAN)
    return root, tmp_path_factory.mktemp("shop_cache")


def make_shop(shop, protocol, **kwargs):
    root, cache = shop
    return WebShopEnv(data_dir=root, cache_dir=cache, protocol=protocol, split="all", **kwargs)


def item_page(instruction):
    return (
        f"Instruction: [SEP] {instruction} [SEP] Back to Search [SEP] < Prev [SEP] size [SEP] 16 fl oz [SEP] "
        "8 fl oz [SEP] Tea Tree Shampoo [SEP] Price: $10.99 [SEP] Rating: N.A. [SEP] Description [SEP] "
        "Features [SEP] Reviews [SEP] Buy Now"
    )


ITEM_ACTIONS = ["click[back to search]", "click[< prev]", "click[description]", "click[features]",
                "click[reviews]", "click[buy now]", "click[16 fl oz]", "click[8 fl oz]"]  # fmt: skip


# ---------------------------------------------------------------- presets
@pytest.mark.parametrize("env_name", ["webshop", "alfworld"])
def test_presets_are_shared_protocols_and_unknown_names_fail_listing_the_known(env_name):
    table = shared.protocols(env_name)  # checks each preset is an envs.protocol.Protocol with a default
    assert "verl_agent" in table and all(preset.summary for preset in table.values())
    # no preset changes the LLM's side: verl-agent's prompt is not carried by the adapter (docs/environments.md)
    assert all((p.system_prompt, p.stop, p.strip_thoughts) == (None, (), True) for p in table.values())
    with pytest.raises(ValueError, match=f"unknown {env_name} protocol 'search_r1'; known: default, .*verl_agent"):
        shared.selected(env_name, {"protocol": "search_r1"})


@pytest.mark.slow  # the first test to open the module's shop pays its index (4-10 s here)
@pytest.mark.timeout(120)
def test_settings_given_explicitly_win_over_the_protocols(shop):
    env = make_shop(shop, "default", pages="original", win_reward=2.0, split_scheme="verl_agent", max_steps=3)
    assert (env.pages, env.win_reward, env.split_scheme, env.max_steps) == ("original", 2.0, "verl_agent", 3)
    with pytest.raises(ValueError, match="pages must be one of .*'ours', 'original'.*got 'html'"):
        make_shop(shop, "default", pages="html")
    with pytest.raises(ValueError, match="win_reward must be a number > 0"):
        make_shop(shop, "default", win_reward=-1)
    alf = AlfWorldEnv(data_dir=SHIPPED_DATA, protocol="verl_agent", win_reward=1, max_steps=7)
    assert (alf.win_reward, alf.max_steps) == (1.0, 7)
    with pytest.raises(ValueError, match="unknown alfworld protocol 'original'; known: default, verl_agent"):
        AlfWorldEnv(data_dir=SHIPPED_DATA, protocol="original")


@pytest.mark.slow
def test_default_protocol_is_todays_behaviour(shop):
    # today's constructor defaults: human goals, 15 steps, this project's pages, reward = score
    env = make_shop(shop, "default")
    assert (env.max_steps, env.pages, env.win_reward, env.split_scheme) == (15, "ours", None, "default")
    obs, info = env.reset(options={"task_id": "0"})
    assert obs == f"WebShop\nInstruction:\n{info['task']}\nSearch box: search[your query]"
    assert info["admissible_actions"] == ["search[...]"]
    assert env.step("click[search]")[0].startswith("Invalid action: click[search]\n")
    alf = AlfWorldEnv(data_dir=SHIPPED_DATA)
    assert (alf.max_steps, alf.win_reward, alf.protocol) == (50, 1.0, "default")


# ---------------------------------------------------------------- WebShop splits and goals
def test_webshop_split_schemes():
    ids = lambda n, split, scheme: split_goal_ids(n, split, scheme)  # noqa: E731
    # verl-agent: train on goals [500, n), validate on [0, 500) (its synthetic goals of the 1,000-product files)
    assert ids(6910, "train", "verl_agent") == [str(i) for i in range(500, 6910)]
    assert ids(6910, "test", "verl_agent") == [str(i) for i in range(500)]
    assert ids(6910, "train_and_eval", "default") == ids(6910, "train", "verl_agent")
    # the original bounds whatever the size; the default keeps 20/10/70 % under 1,500 goals
    assert ids(1200, "train", "original") == [] and ids(1200, "eval", "original")[0] == "500"
    assert ids(240, "test", "original") == [str(i) for i in range(240)]
    assert ids(240, "test", "default") == [str(i) for i in range(48)]
    assert ids(12087, "train", "default")[0] == ids(12087, "train", "original")[0] == "1500"
    with pytest.raises(ValueError, match="split scheme 'nope'"):
        split_goal_ids(10, "train", "nope")


@pytest.mark.slow
def test_verl_agent_plays_synthetic_goals_of_the_small_files(tmp_path, shop):
    root, cache = shop
    env = WebShopEnv(data_dir=root, cache_dir=cache, protocol="verl_agent")
    assert len(env.catalog.goals) == 3  # one per product and option combination: 2 shampoo sizes + 1 scarf colour
    assert env.task_ids() == [] and env.max_steps == 15  # train = [500, n): none of 3 goals
    assert WebShopEnv(data_dir=root, cache_dir=cache, protocol="verl_agent", split="test").task_ids() == ["0", "1", "2"]
    # use_small reads the 1,000-product files even beside the full ones (the default prefers the full ones)
    write_catalog(tmp_path, [SHAMPOO], ins=INS, human=HUMAN)
    (tmp_path / "items_shuffle.json").write_text("[]")  # would fail: "no usable product"
    assert len(WebShopEnv(data_dir=tmp_path, cache_dir=cache, protocol="verl_agent").catalog.products) == 1
    with pytest.raises(ValueError, match="no usable product"):
        WebShopEnv(data_dir=tmp_path, cache_dir=cache)


# ---------------------------------------------------------------- WebShop: the original text env
def test_original_parse_action_is_the_regex_in_linear_time():
    regex = re.compile(r"(.+)\[(.+)\]")

    def reference(action):
        m = regex.match(action)
        return (action, None) if m is None else (m.group(1), m.group(2).lower())

    cases = ["click[Buy Now]", "search[a [b] c]", "click[x] extra", "Click[x]", " click[x]", "click[]", "click[x",
             "[x]", "a[]]", "a[b]]", "x[[y]", "search[a\nb]", "click[b01]\n<action>", "a[b]c[d]", "]["]  # fmt: skip
    alphabet = "ab[]\n "
    cases += ["".join(alphabet[(i // 6**k) % 6] for k in range(6)) for i in range(0, 6**6, 7)]
    for action in cases:
        assert parse_action_original(action) == reference(action), action


def test_original_protocol_episode(shop):
    env = make_shop(shop, "original")
    assert env.max_steps == 100
    goal = next(g for g in env.catalog.goals if g.asin == "B01")
    instr = goal.instruction
    obs, info = env.reset(options={"task_id": goal.goal_id})
    assert obs == f"WebShop [SEP] Instruction: [SEP] {instr} [SEP] Search"
    assert info["admissible_actions"] == ["search[<your query>]", "click[search]"]
    assert info["available_actions"] == {"has_search_bar": True, "clickables": ["search"]}
    assert env.step("click[search]")[0] == obs  # listed, but not clickable: the page stays, without a word
    results = f"Instruction: [SEP] {instr} [SEP] Back to Search [SEP] Page 1 (Total results: 1) [SEP] Next > [SEP] "
    results += "B01 [SEP] Tea Tree Shampoo [SEP] $10.99"
    obs, reward, done, _, info = env.step("search[Tea Tree]")
    assert (obs, reward, done) == (results, 0.0, False)
    assert info["admissible_actions"] == ["click[back to search]", "click[next >]", "click[b01]"]
    page2 = f"Instruction: [SEP] {instr} [SEP] Back to Search [SEP] Page 2 (Total results: 1) [SEP] < Prev [SEP] Next >"
    assert env.step("click[Next >]")[0] == page2  # always offered; the argument is lower-cased
    assert env.step("Click[< prev]")[0] == page2  # the name is not: invalid, page unchanged
    assert env.step("click[< prev] now")[0] == results  # text after the bracket is ignored
    obs, _, _, _, info = env.step("click[b01]")
    assert obs == item_page(instr) and info["admissible_actions"] == ITEM_ACTIONS
    assert env.step("click[features]")[0] == f"Instruction: [SEP] {instr} [SEP] Back to Search [SEP] < Prev [SEP] " \
        "Vegan [SEP] Sulfate free"  # fmt: skip
    assert env.step("click[< prev]")[0] == item_page(instr)
    # search is valid on every page of the original
    obs = env.step("search[wool scarf]")[0]
    assert obs.endswith("Page 1 (Total results: 1) [SEP] Next > [SEP] B02 [SEP] Wool Scarf [SEP] $20.0")
    env.step("click[b02]")
    obs, reward, done, _, info = env.step("click[buy now]")
    # another product type: the type reward zeroes the score, and the reward is the score
    assert done and reward == info["score"] == 0.0 and not info["won"]
    assert obs == f"Thank you for shopping with us! [SEP] Your score (min 0.0, max 1.0) [SEP] {info['score']}"


# ---------------------------------------------------------------- WebShop: verl-agent
def test_verl_agent_projection_edge_cases():
    assert project_action("<think>a</think><action> Click[B01] </action>", 20) == ("click[b01]", True)
    assert project_action("<think>a</think> click[16 fl oz]", 20) == ("ink> click[16 fl oz]", False)  # last 20
    assert project_action("<think>a</think> go to shelf 1", 30) == ("<think>a</think> go to shelf 1"[-30:], False)
    assert project_action("<action>click[b01]</action>", 20) == ("click[b01]", False)  # no <think>...</think>
    assert project_action("<think>想</think><action>look</action>", 30) == ("look", False)  # a CJK ideograph
    # the first <action> and the first </action>: a closing tag first gives an empty (valid) action
    assert project_action("<think></think></action>x<action>look</action>", 30) == ("", True)
    assert project_action("<think></think><action>a</action><action>b</action>", 30) == ("a", True)


def test_history_text_shows_the_last_steps_numbered_by_step():
    pairs = [("o1", "a1"), ("o2", "a2"), ("o3", "a3")]
    assert history_text(pairs, 2) == ("[Observation 2: 'o2', Action 2: 'a2']\n[Observation 3: 'o3', Action 3: 'a3']", 2)
    assert history_text(pairs[:1], 2) == ("[Observation 1: 'o1', Action 1: 'a1']", 1)
    assert history_text(pairs, 0) == ("", 0)


def test_verl_agent_webshop_episode(shop):
    root, cache = shop
    env = WebShopEnv(data_dir=root, cache_dir=cache, protocol="verl_agent", split="test")
    goal = next(g for g in env.catalog.goals if g.asin == "B01" and g.options == ("16 fl oz",))
    first, info = env.reset(options={"task_id": goal.goal_id})
    task = ws_protocol.verl_agent_task(first)
    assert task == goal.instruction and task.startswith("i want a tea tree shampoo with size: 16 fl oz")
    replies = [
        "<think>find it</think><action>search[Tea Tree Shampoo]</action>",
        "I pick it <action>click[b01]</action>",  # no <think>: invalid for the penalty, but stepped
        "<think>x</think> click[16 fl oz]",  # no action tags: its last 20 characters, which the env refuses
        "<think>ok</think><action>click[16 fl oz]</action>",
        "<think>买</think><action>click[buy now]</action>",  # a CJK ideograph: invalid, but stepped
    ]
    history, prompts, valids, obs, admissible = [], [], [], first, info["admissible_actions"]
    for reply in replies:
        shown = ws_protocol.verl_agent_observation(obs, task)
        prompts.append(ws_protocol.verl_agent_prompt(task, shown, admissible, history, 2))
        action, valid = project_action(reply, ws_protocol.VERL_AGENT_TAIL_CHARS)
        valids.append(valid)
        obs, reward, done, _, info = env.step(action)
        history.append((shown, action))
        admissible = info["admissible_actions"]
    assert valids == [True, False, False, True, False]
    assert prompts[0] == (
        "\nYou are an expert autonomous agent operating in the WebShop e\u2011commerce environment. \n"
        f"Your task is to: {task}.\nYour current observation is: 'Search'.\n"
        "Your admissible actions of the current situation are: \n[\n'search[<your query>]',\n'click[search]',\n].\n\n"
        "Now it's your turn to take one action for the current step.\nYou should first reason step-by-step about "
        "the current situation, then think carefully which admissible action best advances the shopping goal. This "
        "reasoning process MUST be enclosed within <think> </think> tags. \nOnce you've finished your reasoning, you "
        "should choose an admissible action for current step and present it within <action> </action> tags.\n"
    )
    results = "'Back to Search' [SEP] 'Page 1 (Total results: 1)' [SEP] 'Next >' [SEP] 'B01' [SEP] 'Tea Tree Shampoo'"
    results += " [SEP] '$10.99'"
    assert prompts[1] == (
        "\nYou are an expert autonomous agent operating in the WebShop e\u2011commerce environment.\n"
        f"Your task is to: {task}.\nPrior to this step, you have already taken 1 step(s). Below are the most recent "
        "1 observations and the corresponding actions you took: [Observation 1: ''Search'', Action 1: "
        f"'search[tea tree shampoo]']\nYou are now at step 2 and your current observation is: {results}.\n"
        "Your admissible actions of the current situation are: \n[\n'click[back to search]',\n'click[next >]',\n"
        "'click[b01]',\n].\n\n" + prompts[0].split("].\n\n", 1)[1]
    )
    item = "'" + "' [SEP] '".join(item_page(task).split(" [SEP] ")[2:]) + "'"
    assert (
        prompts[3].count("[Observation") == 2
        and (
            f"[Observation 2: '{results}', Action 2: 'click[b01]']\n"
            f"[Observation 3: '{item}', Action 3: 'ink> click[16 fl oz]']\nYou are now at step 4 "
        )
        in prompts[3]
    )  # the refused action left the page as it was
    assert "\n'click[16 fl oz]',\n'click[8 fl oz]',\n]." in prompts[3]
    assert done and reward == 10.0 and info["won"] and info["score"] == 1.0  # 10 for a purchase scoring 1


# ---------------------------------------------------------------- ALFWorld: verl-agent
@pytest.mark.slow
def test_verl_agent_alfworld_episode():
    env = AlfWorldEnv(data_dir=SHIPPED_DATA, protocol="verl_agent")
    task_id = next(t for t in env.task_ids() if t.startswith("look_at_obj_in_light-CellPhone"))
    obs, info = env.reset(options={"task_id": task_id})
    plan = env.expert_actions()
    assert "help" in info["admissible_actions"]
    replies = [f"<think>step {i}</think><action>{a.upper()}</action>" for i, a in enumerate(plan)]
    replies.insert(1, "<think>hmm</think> i will go to the desk 1 now")  # untagged: its last 30 characters
    history, prompts, valids, rewards = [], [], [], []
    for reply in replies:
        prompts.append(alf_protocol.verl_agent_prompt(info["task"], obs, info["admissible_actions"], history, 2))
        action, valid = project_action(reply, alf_protocol.VERL_AGENT_TAIL_CHARS)
        valids.append(valid)
        history.append((obs, action))
        obs, reward, done, _, info = env.step(action)
        rewards.append(reward)
    assert valids == [True, False, *[True] * (len(plan) - 1)]
    untagged = "k> i will go to the desk 1 now"  # the last 30 characters of the lower-cased reply
    assert history[1][1] == untagged and history[2][0] == "Nothing happens."
    admissible = "\n ".join(f"'{a}'" for a in ["go to bed 1", "go to desk 1", "go to drawer 1", "go to drawer 2"])
    assert prompts[0].startswith(
        "\nYou are an expert agent operating in the ALFRED Embodied Environment.\nYour current observation is: "
        "-= Welcome to TextWorld, ALFRED! =-\n\nYou are in the middle of a room."
    )
    assert f"Your admissible actions of the current situation are: [{admissible}\n 'go to garbagecan 1'" in prompts[0]
    assert "'help'" not in prompts[0]
    task = "look at cellphone under the desklamp."
    assert prompts[2].startswith(
        "\nYou are an expert agent operating in the ALFRED Embodied Environment. Your task is to: "
        f"{task}\nPrior to this step, you have already taken 2 step(s). Below are the most recent 2 observaitons "
        "and the corresponding actions you took: [Observation 1: '-= Welcome to TextWorld, ALFRED! =-"
    )
    assert f"Action 1: '{plan[0]}']\n[Observation 2: " in prompts[2]
    assert (
        f"Action 2: '{untagged}']\nYou are now at step 3 and your current observation is: Nothing happens."
        in prompts[2]
    )
    assert rewards[-1] == 10.0 and done and sum(rewards) == 10.0  # 10 for the win, nothing before


# ---------------------------------------------------------------- bad input: 1 MB actions
MB = 1 << 20
SHAPES = {
    "repeated tags": "<action>" * (MB // 8),
    "repeated brackets": "click[" * (MB // 6),
    "closing brackets": "]" * MB,
    "one huge word": "a" * MB,
    "many lines": "click[b01]\n" * (MB // 11),
    "binary-ish": bytes(range(256)).decode("latin-1") * (MB // 256),
    "huge search": "search[" + "tea " * (MB // 4) + "]",
}


@pytest.mark.parametrize("protocol", ["default", "original", "verl_agent"])
def test_a_1mb_action_of_any_shape_returns_within_a_second_webshop(shop, protocol):
    env = make_shop(shop, protocol)
    for shape, action in SHAPES.items():
        env.reset(options={"task_id": "0"})
        start = time.perf_counter()
        obs, *_ = env.step(action)
        assert time.perf_counter() - start < 1.0, shape
        assert len(obs) < 20_000, shape  # the page (a query is shown clipped), not the action echoed back


@pytest.mark.parametrize("protocol", sorted(alf_protocol.PROTOCOLS))
def test_a_1mb_action_of_any_shape_returns_within_a_second_alfworld(protocol):
    env = AlfWorldEnv(data_dir=SHIPPED_DATA, protocol=protocol)
    for shape, action in SHAPES.items():
        env.reset(options={"task_id": env.task_ids()[0]})
        start = time.perf_counter()
        obs, *_ = env.step(action)
        assert time.perf_counter() - start < 1.0, shape
        assert obs == "Nothing happens.", shape


def test_a_store_of_other_goals_than_the_protocol_plays_is_refused(shop, tmp_path):
    root, _ = shop
    store_dir = catalog.prepare(catalog.resolve_sources(root), tmp_path / "store")  # human goals
    assert WebShopEnv(store_dir=store_dir, protocol="original").protocol == "original"
    with pytest.raises(ValueError, match="holds human goals, but protocol 'verl_agent' plays synthetic goals"):
        WebShopEnv(store_dir=store_dir, protocol="verl_agent")
