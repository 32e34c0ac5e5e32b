"""Search-QA reads Search-R1's and verl-agent's question parquets as they ship (rows written from their data
scripts: Search-R1 ``scripts/data_process/qa_search_train_merge.py``, verl-agent
``examples/data_preprocess/preprocess_search_r1_dataset.py``)."""

import pandas as pd

from envs.searchqa.corpus import load_questions

NOBEL = "who got the first nobel prize in physics?"


def search_r1_row(index, source, question, golds):
    return {
        "id": f"train_{index}",  # FlashRAG's ids, which repeat across the merged datasets
        "question": question,
        "golden_answers": golds,
        "data_source": source,
        "prompt": [{"role": "user", "content": f"Answer the given question. ... Question: {question}\n"}],
        "ability": "fact-reasoning",
        "reward_model": {"ground_truth": {"target": golds}, "style": "rule"},
        "extra_info": {"split": "train", "index": index},
    }


def verl_agent_row(index, source, question, golds):
    truth = {"target": golds}
    return {
        # no top-level question: only extra_info and the tool's create_kwargs keep it
        "data_source": source,
        "prompt": [
            {"role": "system", "content": "You are a helpful and harmless assistant."},
            {"role": "user", "content": question},
        ],
        "ability": "fact-reasoning",
        "reward_model": {"ground_truth": truth, "style": "rule"},
        "extra_info": {
            "index": index,
            "need_tools_kwargs": True,
            "question": question,
            "split": "train",
            "tools_kwargs": {
                "search": {"create_kwargs": {"ground_truth": truth, "question": question, "data_source": source}}
            },
        },
        "metadata": None,
    }


def test_search_r1_parquet(tmp_path):
    rows = [
        search_r1_row(0, "nq", NOBEL, ["Wilhelm Conrad Röntgen"]),
        search_r1_row(0, "hotpotqa", "Which band came first?", ["The", "Blur"]),
    ]
    pd.DataFrame(rows).to_parquet(tmp_path / "train.parquet")
    questions = load_questions(tmp_path, "train")
    assert [(q.qid, q.question, q.golden_answers, q.data_source) for q in questions] == [
        ("nq/train_0", NOBEL, ("Wilhelm Conrad Röntgen",), "nq"),
        ("hotpotqa/train_0", "Which band came first?", ("Blur",), "hotpotqa"),  # "The" dropped, the row kept
    ]


def test_verl_agent_parquet_keeps_the_question_in_extra_info(tmp_path):
    # before: "a question row needs a non-empty string 'question'"
    rows = [verl_agent_row(0, "nq", NOBEL, ["Wilhelm Conrad Röntgen"])]
    rows.append(verl_agent_row(1, "hotpotqa", "Q2?", ["a", "B"]))
    pd.DataFrame(rows).to_parquet(tmp_path / "train.parquet")
    questions = load_questions(tmp_path / "train.parquet", "train")
    assert [(q.qid, q.question, q.golden_answers, q.data_source) for q in questions] == [
        ("0", NOBEL, ("Wilhelm Conrad Röntgen",), "nq"),
        ("1", "Q2?", ("B",), "hotpotqa"),
    ]
    del rows[1]["reward_model"]  # the tool's create_kwargs hold the gold answers too
    pd.DataFrame(rows).to_parquet(tmp_path / "train.parquet")
    assert load_questions(tmp_path / "train.parquet", "train")[1].golden_answers == ("B",)
