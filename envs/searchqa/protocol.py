"""Search-QA's protocols (:mod:`envs.protocol`): this project's default, Search-R1's and verl-agent's.

The upstream prompt templates are quoted word for word (a template is part of the protocol: a changed word is
another benchmark). ``{question}``, ``{max_steps}`` and ``{topk}`` are filled in; ``prompt_template`` can be given
in the env kwargs to replace a protocol's. docs/environments.md has the table of what each setting changes.
"""

from __future__ import annotations

from envs.protocol import Protocol

# this project's first observation, unchanged since before protocols existed
PROVER_TEMPLATE = (
    "Answer the question below. You have {max_steps} turns; in each, reply with exactly one of\n"
    "<search>a search query</search> to search the knowledge base (the top {topk} passages come back between "
    "<information> and </information>), or\n"
    "<answer>a short answer</answer> to give your final answer, which ends the episode.\n\n"
    "Question: {question}"
)

# Search-R1, scripts/data_process/qa_search_{train,test}_merge.py, make_prefix(template_type="base")
SEARCH_R1_TEMPLATE = (
    "Answer the given question. You must conduct reasoning inside <think> and </think> first every time you get "
    "new information. After reasoning, if you find you lack some knowledge, you can call a search engine by "
    "<search> query </search> and it will return the top searched results between <information> and "
    "</information>. You can search as many times as your want. If you find no further external knowledge needed, "
    "you can directly provide the answer inside <answer> and </answer>, without detailed illustrations. For "
    "example, <answer> Beijing </answer>. Question: {question}\n"
)

# verl-agent, agent_system/environments/prompts/search.py, SEARCH_TEMPLATE_NO_HIS (its trailing space included)
VERL_AGENT_TEMPLATE = (
    "\nYou are an expert agent tasked with answering the given question step-by-step.\n"
    "Your question: {question}\n\n"
    "Now it's your turn to respond for the current step.\n"
    "You should first conduct reasoning process. This process MUST be enclosed within <think> </think> tags. \n"
    "After completing your reasoning, choose only one of the following actions (do not perform both):\n"
    "(1) If you find you lack some knowledge, you can call a search engine to get more external information using "
    "format: <search> your query </search>.\n"
    "(2) If you have enough knowledge to answer the question confidently, provide your final answer within "
    "<answer> </answer> tags, without detailed illustrations. For example, <answer>Beijing</answer>.\n"
)

PROTOCOLS: dict[str, Protocol] = {
    "default": Protocol(
        summary="this project's: one block per turn, explained invalid turns, Unicode-aware EM",
        settings={
            "max_steps": 4,
            "topk": 3,
            "dialect": "prover",
            "prompt_template": PROVER_TEMPLATE,
            "question_mark": False,
            "normalization": "unicode",
            "invalid_penalty": 0.0,
        },
    ),
    "search_r1": Protocol(
        summary="Search-R1 v0.2 (search_r1/llm_agent/generation.py, scripts/nq_hotpotqa/v0.2/train_grpo.sh)",
        settings={
            # max_turns=4 searching turns, then one more generation whose search is not run
            "max_steps": 5,
            "topk": 3,
            "dialect": "search_r1",
            "prompt_template": SEARCH_R1_TEMPLATE,
            "question_mark": True,
            "normalization": "ascii",
            "invalid_penalty": 0.0,
        },
        system_prompt="",
        stop=("</search>", "</answer>"),
        strip_thoughts=False,
        strip_observations=False,
        # search_r1/llm_agent/generation.py: the information block is concatenated to the response being generated
        inline_observations=True,
    ),
    "verl_agent": Protocol(
        summary="verl-agent / GiGPO (env_package/search, prompts/search.py, examples/*/run_search*.sh)",
        settings={
            "max_steps": 4,
            "topk": 3,
            "dialect": "verl_agent",
            "prompt_template": VERL_AGENT_TEMPLATE,
            "question_mark": False,
            "normalization": "ascii",
            # actor_rollout_ref.actor.invalid_action_penalty_coef, per invalid turn, off the episode's reward
            "invalid_penalty": 0.01,
        },
        system_prompt="",
        strip_thoughts=False,
        strip_observations=False,
    ),
}

__all__ = ["PROTOCOLS", "PROVER_TEMPLATE", "SEARCH_R1_TEMPLATE", "VERL_AGENT_TEMPLATE"]
