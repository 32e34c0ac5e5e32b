"""Search-QA's protocols replay episodes recorded by hand from the upstream code.

Each episode is what the upstream harness shows and scores, written from reading its code (not from running
ours): Search-R1's ``search_r1/llm_agent/generation.py`` (``_postprocess_responses``, ``postprocess_predictions``,
``execute_predictions``, ``_passages2string``), its ``qa_em.py`` and data scripts; verl-agent's
``env_package/search/projection.py``, ``skyrl_gym/envs/search/env.py``, ``tools/search.py``, ``prompts/search.py``.
The retriever is a stub with fixed passages, so the observations can be written out.
"""

import time

import pytest

from envs.searchqa import dialect
from envs.searchqa.corpus import Passage
from envs.searchqa.env import SearchQAEnv
from prover_verl.agent.adapters import make_adapter

TASK = "nq_mini-test-0000"  # "Who won the Battle of Greilplath?", gold "Pluldrunara"
PASSAGES = {
    "Battle of Greilplath": [
        Passage("7", "Battle of Greilplath", "Pluldrunara won the Battle of Greilplath."),
        Passage("9", "Greilplath", "Greilplath is a plain."),
    ]
}


class StubRetriever:
    """Fixed passages per query; records every query it is asked."""

    remote = True
    url = "stub://passages"
    fingerprint = "stub"

    def __init__(self):
        self.queries = []

    def search(self, query, k):
        self.queries.append((query, k))
        return PASSAGES.get(query, [])[:k]


def make_env(protocol, **kwargs):
    env = SearchQAEnv(split="test", retriever_url="http://127.0.0.1:9/retrieve", protocol=protocol, **kwargs)
    env.retriever = StubRetriever()
    return env


SEARCH_R1_PROMPT = (
    "Answer the given question. You must conduct reasoning inside <think> and </think> first every time you get new "
    "information. After reasoning, if you find you lack some knowledge, you can call a search engine by <search> "
    "query </search> and it will return the top searched results between <information> and </information>. You can "
    "search as many times as your want. If you find no further external knowledge needed, you can directly provide "
    "the answer inside <answer> and </answer>, without detailed illustrations. For example, <answer> Beijing "
    "</answer>. Question: Who won the Battle of Greilplath?\n"
)
SEARCH_R1_RESULTS = (
    '\n\n<information>Doc 1(Title: "Battle of Greilplath") Pluldrunara won the Battle of Greilplath.\n'
    'Doc 2(Title: "Greilplath") Greilplath is a plain.</information>\n\n'
)
SEARCH_R1_INVALID = (
    "\nMy previous action is invalid. If I want to search, I should put the query between <search> and </search>. "
    "If I want to give the final answer, I should put the answer between <answer> and </answer>. Let me try again.\n"
)
VERL_AGENT_PROMPT = (
    "\nYou are an expert agent tasked with answering the given question step-by-step.\n"
    "Your question: Who won the Battle of Greilplath?\n\n"
    "Now it's your turn to respond for the current step.\n"
    "You should first conduct reasoning process. This process MUST be enclosed within <think> </think> tags. \n"
    "After completing your reasoning, choose only one of the following actions (do not perform both):\n"
    "(1) If you find you lack some knowledge, you can call a search engine to get more external information using "
    "format: <search> your query </search>.\n"
    "(2) If you have enough knowledge to answer the question confidently, provide your final answer within <answer> "
    "</answer> tags, without detailed illustrations. For example, <answer>Beijing</answer>.\n"
)
# tools/search.py: json.dumps({"result": "Doc 1: <contents>\n..."}), contents being wiki-18's '"Title"\ntext'
VERL_AGENT_RESULTS = (
    r'<information>{"result": "Doc 1: \"Battle of Greilplath\"\nPluldrunara won the Battle of Greilplath.\n'
    r'Doc 2: \"Greilplath\"\nGreilplath is a plain.\n"}</information>'
)
DEFAULT_PROMPT = (
    "Answer the question below. You have 4 turns; in each, reply with exactly one of\n"
    "<search>a search query</search> to search the knowledge base (the top 3 passages come back between "
    "<information> and </information>), or\n"
    "<answer>a short answer</answer> to give your final answer, which ends the episode.\n\n"
    "Question: Who won the Battle of Greilplath?"
)
DEFAULT_RESULTS = (
    "<information>Doc 1(Title: Battle of Greilplath) Pluldrunara won the Battle of Greilplath.\n"
    "Doc 2(Title: Greilplath) Greilplath is a plain.</information>"
)

# (reply, observation, reward, terminated, truncated) per turn
EPISODES = {
    "search_r1": [
        # the reply is cut after </search>: the made-up <information> that follows is never read
        (
            "<think>I need to find who won.</think>\n<search> Battle of Greilplath </search>\n\n<information>x",
            SEARCH_R1_RESULTS,
            0.0,
            False,
            False,
        ),
        ("<search></search>", "\n\n<information></information>\n\n", 0.0, False, False),  # an empty query searches
        ("The answer is Pluldrunara.", SEARCH_R1_INVALID, 0.0, False, False),
        # cut after </search>, then the first block of either kind: the answer
        ("<answer> pluldrunara </answer> <search>more</search>", "", 1.0, True, False),
    ],
    "verl_agent": [
        ("<think>Search first.</think>\n<SEARCH>Battle of Greilplath</SEARCH>", VERL_AGENT_RESULTS, 0.0, False, False),
        # two <search> tags: the first is played, the turn flagged invalid
        (
            "<search>Greilplath</search> or <search>Pluldrunara</search>",
            '<information>{"result": ""}</information>',
            0.0,
            False,
            False,
        ),  # fmt: skip
        ("I am not sure.", "", 0.0, False, False),  # no block: no observation
        # EM with ASCII punctuation, less 0.01 per invalid turn (two)
        ("<answer>Pluldrunara.</answer>", "", 0.98, True, False),
    ],
    "default": [
        ("<search>Battle of Greilplath</search>", DEFAULT_RESULTS, 0.0, False, False),
        (
            "<search></search>",
            "Invalid action: the <search> tag is empty. Reply with <search>your query</search> to search, or "
            "<answer>your answer</answer> to give the final answer.",
            0.0,
            False,
            False,
        ),
        ("<answer>Pluldrunara</answer>", "Final answer received: Pluldrunara", 1.0, True, False),
    ],
}
QUERIES = {
    "search_r1": [("Battle of Greilplath", 3), ("", 3)],
    "verl_agent": [("Battle of Greilplath", 3), ("Greilplath", 3)],
    "default": [("Battle of Greilplath", 3)],
}
PROMPTS = {"search_r1": SEARCH_R1_PROMPT, "verl_agent": VERL_AGENT_PROMPT, "default": DEFAULT_PROMPT}


@pytest.mark.parametrize("protocol", ["search_r1", "verl_agent", "default"])
def test_recorded_episodes_replay_identically(protocol):
    env = make_env(protocol)
    obs, _ = env.reset(options={"task_id": TASK})
    assert obs == PROMPTS[protocol]
    for turn, (reply, *expected) in enumerate(EPISODES[protocol]):
        obs, reward, terminated, truncated, info = env.step(reply)
        assert [obs, pytest.approx(reward), terminated, truncated] == expected, (protocol, turn)
        if turn == 1:  # a fork here replays the rest alike in another env
            state = env.snapshot()
    assert env.retriever.queries == QUERIES[protocol]
    assert info["won"] and info["em"] == 1.0
    other = make_env(protocol)
    other.restore(state)
    for reply, *expected in EPISODES[protocol][2:]:
        obs, reward, terminated, truncated, _ = other.step(reply)
        assert [obs, pytest.approx(reward), terminated, truncated] == expected


@pytest.mark.parametrize(("protocol", "searched"), [("search_r1", 4), ("verl_agent", 3), ("default", 4)])
def test_the_last_turn_search_is_run_by_our_protocol_only(protocol, searched):
    # Search-R1 runs max_turns=4 searching turns, then a last generation whose search is not run; verl-agent ends
    # the episode at max_steps=4 before running the search
    env = make_env(protocol)
    env.reset(options={"task_id": TASK})
    steps = [env.step("<search>Battle of Greilplath</search>") for _ in range(env.max_steps)]
    assert [s[3] for s in steps] == [False] * (env.max_steps - 1) + [True]
    assert (steps[-1][0] == "") == (protocol != "default") and steps[-1][1] == 0.0
    assert len(env.retriever.queries) == searched


@pytest.mark.parametrize(
    ("reply", "search_r1", "verl_agent"),
    [
        ("<answer>x</answer> <search>q</search>", ("answer", "x", True), ("search", "q", False)),
        ("<search>q</search><search>r</search>", ("search", "q", True), ("search", "q", False)),
        ("<Search>q</Search>", ("invalid", None, False), ("search", "q", True)),
        ("<search>q", ("invalid", None, False), ("invalid", None, False)),
        ("<answer></answer>", ("answer", "", True), ("answer", "", True)),
        # Search-R1: the first <search> runs lazily to the first </search>; verl-agent: a projected action that
        # holds <answer> and </answer> ends the episode, scored on its last <answer> block
        ("<search>a</answer> <answer>b</search>", ("search", "a</answer> <answer>b", True), ("answer", "", False)),
        (
            "<search>who <answer>Pluldrunara</answer></search>",
            ("search", "who <answer>Pluldrunara</answer>", True),
            ("answer", "Pluldrunara", False),
        ),  # fmt: skip
    ],
)
def test_edge_case_replies_parse_as_upstream(reply, search_r1, verl_agent):
    for parse, (kind, content, valid) in [(dialect.parse_search_r1, search_r1), (dialect.parse_verl_agent, verl_agent)]:
        action = parse(reply)
        assert (action.kind, action.valid) == (kind, valid), (parse.__name__, reply)
        if content is not None:
            assert action.content == content


def test_search_r1_ends_the_question_with_a_mark_and_the_template_can_be_replaced(tmp_path):
    questions = tmp_path / "q.jsonl"
    questions.write_text('{"id": "q", "question": " who won the battle of greilplath ", "golden_answers": ["P"]}\n')
    obs, _ = make_env("search_r1", questions_path=questions).reset(options={"task_id": "q"})
    assert obs.endswith("Question: who won the battle of greilplath?\n")
    env = make_env("search_r1", questions_path=questions, prompt_template="Q: {question} ({max_steps} turns, {topk})")
    assert env.reset(options={"task_id": "q"})[0] == "Q: who won the battle of greilplath? (5 turns, 3)"
    with pytest.raises(ValueError, match="prompt_template cannot be filled"):
        make_env("search_r1", questions_path=questions, prompt_template="{answer}")
    with pytest.raises(ValueError, match="unknown searchqa protocol 'search-r1'; known: default, search_r1"):
        make_env("search-r1")


def test_the_adapter_speaks_the_protocol():
    obs, info = make_env("search_r1").reset(options={"task_id": TASK})
    adapter = make_adapter("searchqa", env_kwargs={"protocol": "search_r1"})
    # Search-R1's prompt is one user message, its trailing line break kept; no system message
    assert adapter.initial_messages(obs, info) == [{"role": "user", "content": SEARCH_R1_PROMPT}]
    assert adapter.sampling_params() == {"stop": ["</search>", "</answer>"], "include_stop_str_in_output": True}
    assert adapter.observation_message(SEARCH_R1_RESULTS, {}) == SEARCH_R1_RESULTS
    # the reply reaches the env whole: a search written inside a thought is a search, as upstream
    assert adapter.parse_action("<think>maybe <search>q</search></think>") == "<think>maybe <search>q</search></think>"
    default = make_adapter("searchqa")
    assert default.sampling_params() == {} and default.initial_messages("obs ", {})[0]["role"] == "system"
    assert default.parse_action("<think>maybe <search>q</search></think> <answer>a</answer>") == "<answer>a</answer>"


@pytest.mark.parametrize("protocol", ["search_r1", "verl_agent", "default"])
@pytest.mark.parametrize(
    "reply",
    [
        "<search>" * 131072,
        "<answer>" * 131072,
        "<search><answer>" * 65536,
        "<think>" * 149796,
        "<search>" + "x " * 2**19,
        "<search>" + "word " * 209715 + "</search>",
        "<answer>" + "x" * 2**20 + "</answer>",
        "<search>a</search>" * 58254,
    ],
    ids=["search", "answer", "both", "think", "unclosed", "long-query", "long-answer", "many"],
)
def test_a_megabyte_reply_of_any_shape_steps_within_a_second(protocol, reply):
    # before: 64 KB of "<search>" took ~4 s to parse, 1 MB never returned (CPU time: others load this machine too)
    env = make_env(protocol)
    env.reset(options={"task_id": TASK})
    adapter = make_adapter("searchqa", env_kwargs={"protocol": protocol})
    start = time.process_time()
    env.step(adapter.parse_action(reply))
    assert time.process_time() - start < 1.0
