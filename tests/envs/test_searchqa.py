"""Search-QA env: shipped data, Search-R1 protocol, EM/F1, exact fork (in-process and across processes), file errors."""

import json
import os
import pickle
import re
from concurrent.futures import ThreadPoolExecutor

import pandas as pd
import pytest

import envs
from envs._lucene import MAX_QUERY_TERMS, clip_query
from envs._shared import file_digest
from envs.base import EnvState
from envs.searchqa import corpus
from envs.searchqa.answer import exact_match, f1_score, normalize_answer
from envs.searchqa.dialect import Action, parse_action
from envs.searchqa.env import SearchQAEnv
from tools.make_data import searchqa as make_data
from tools.make_data.searchqa import answerability


@pytest.fixture(scope="module")
def cache_root(tmp_path_factory):
    return tmp_path_factory.mktemp("xdg_cache")


@pytest.fixture(scope="module")
def env(cache_root):
    """The no-argument env (shipped data), its index cached under a temporary XDG_CACHE_HOME."""
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("XDG_CACHE_HOME", str(cache_root))
        return SearchQAEnv()


def first_task(env, source):
    return next(t for t in env.task_ids() if env.task_category(t) == source)


def play(env, actions):
    return [env.step(a) for a in actions]


# ---------------------------------------------------------------- shipped data
def test_shipped_data_is_small_and_regenerates_identically(tmp_path):
    shipped = [corpus.DEFAULT_CORPUS, *sorted(corpus.DEFAULT_QUESTIONS.glob("*.jsonl"))]
    assert sum(p.stat().st_size for p in shipped) < 1_000_000
    paths = make_data.write(tmp_path)
    assert paths["corpus"].read_bytes() == corpus.DEFAULT_CORPUS.read_bytes()
    for split in ("train", "test"):
        assert paths[split].read_bytes() == (corpus.DEFAULT_QUESTIONS / f"{split}.jsonl").read_bytes()


def test_shipped_data_shape(env):
    assert 300 <= len(env.retriever.passages) <= 500
    test_env = SearchQAEnv(split="test")
    assert 100 <= len(env.task_ids()) + len(test_env.task_ids()) <= 200
    assert not set(env.task_ids()) & set(test_env.task_ids())
    for e in (env, test_env):
        assert {e.task_category(t) for t in e.task_ids()} == {"nq_mini", "hotpot_mini"}
    multi = env.question(first_task(env, "hotpot_mini"))
    assert len(multi.expert_queries) == 2


def test_gold_passages_are_retrievable(env):
    for split_env in (env, SearchQAEnv(split="test")):
        stats = answerability(split_env)
        assert stats["all"]["expert"] == 1.0  # every question: the expert searches surface a gold answer
        assert stats["nq_mini"]["question"] == 1.0  # single-hop: the question text alone suffices
        assert stats["hotpot_mini"]["question"] < 0.5  # multi-hop: mostly it does not


# ---------------------------------------------------------------- scoring
def test_normalisation_and_exact_match():
    assert normalize_answer("  The Eiffel   Tower! ") == "eiffel tower"
    assert normalize_answer("An apple, a day.") == "apple day"
    assert normalize_answer("Theatre of the Absurd") == "theatre of absurd"  # 'the' only as a word
    assert exact_match("the Amber Sea.", ["amber sea"]) == 1.0
    assert exact_match("PARIS", ["London", "paris"]) == 1.0  # any of several golds
    assert exact_match("Parisian", ["Paris"]) == 0.0
    assert exact_match("4,179 metres", ["4179 Metres"]) == 1.0
    assert exact_match("anything", []) == 0.0


def test_normalisation_strips_unicode_punctuation_unless_asked_for_ascii():
    # before, only ASCII punctuation went: a gold "。" stayed non-empty, so it was accepted and matched "。"
    assert normalize_answer("。") == "" and normalize_answer("“The” — Paris。") == "paris"
    assert normalize_answer("l’Étoile, ¿sí?") == "létoile sí"
    assert normalize_answer("$1+1=2") == "112"  # ASCII symbols, not Unicode punctuation, still go
    assert exact_match("Paris。", ["“Paris”"]) == 1.0 and f1_score("Don’t Stop", ["dont stop"]) == 1.0
    # Search-R1's and verl-agent's rule, for their protocols
    assert normalize_answer("“Paris”。", "ascii") == "“paris”。"
    assert exact_match("Paris。", ["Paris"], "ascii") == 0.0
    with pytest.raises(ValueError, match="unknown answer normalization 'latin'; known: unicode, ascii"):
        normalize_answer("x", "latin")


def test_token_f1_values():
    # pred {big, red, dog} vs gold {red, dog, barks}: 2 common, p = r = 2/3
    assert f1_score("the big red dog", ["red dog barks"]) == pytest.approx(2 / 3, abs=1e-12)
    # max over golds: 2/3 against the first, p=1 r=2/3 -> 0.8 against the second
    assert f1_score("red dog", ["red dog runs fast", "a big red dog"]) == pytest.approx(0.8, abs=1e-12)
    assert f1_score("dog dog", ["dog"]) == pytest.approx(2 / 3, abs=1e-12)  # repeated tokens count once each
    assert f1_score("cat", ["dog"]) == 0.0
    assert f1_score("The Dog.", ["dog"]) == 1.0
    assert f1_score("", ["dog"]) == 0.0
    assert f1_score("the", ["a"]) == 1.0  # both normalise to nothing


def test_parse_action():
    assert parse_action("<search> capital of X </search>") == Action("search", "capital of X")
    assert parse_action("I know.\n<answer>Zamla\n</answer>").kind == "answer"
    assert parse_action("<answer>Zamla</answer>").content == "Zamla"
    for text, why in [
        ("the answer is Zamla", "no complete"),
        ("<search>unclosed", "no complete"),
        ("<search>a</search><answer>b</answer>", "both"),
        ("<search>a</search> <search>b</search>", "2 <search>"),
        ("<search>   </search>", "empty"),
        ("<answer></answer>", "empty"),
    ]:
        action = parse_action(text)
        assert action.kind == "invalid" and why in action.content, text


# ---------------------------------------------------------------- episodes
def test_single_hop_expert_episode(env):
    task = first_task(env, "nq_mini")
    obs, info = env.reset(options={"task_id": task})
    q = env.question(task)
    assert q.question in obs and "<search>" in obs and "<answer>" in obs
    assert info == {
        "won": False, "admissible_actions": None, "task": q.question, "step": 0, "em": 0.0, "f1": 0.0,
        "answer": None, "data_source": "nq_mini", "num_searches": 0, "action_type": None, "invalid_turns": 0,
    }  # fmt: skip
    actions = env.expert_actions()
    assert actions == [f"<search>{q.expert_queries[0]}</search>", f"<answer>{q.golden_answers[0]}</answer>"]
    obs, reward, terminated, truncated, info = env.step(actions[0])
    assert obs.startswith("<information>Doc 1(Title: ") and obs.endswith("</information>")
    assert obs.count("\nDoc ") == env.topk - 1
    assert normalize_answer(q.golden_answers[0]) in normalize_answer(obs)
    assert (reward, terminated, truncated, info["step"], info["num_searches"]) == (0.0, False, False, 1, 1)
    obs, reward, terminated, truncated, info = env.step(actions[1])
    assert (reward, terminated, truncated) == (1.0, True, False)
    assert info["won"] and info["em"] == 1.0 and info["f1"] == 1.0 and info["answer"] == q.golden_answers[0]
    with pytest.raises(RuntimeError, match="ended"):
        env.step("<answer>again</answer>")


def test_multi_hop_expert_episode(env):
    task = first_task(env, "hotpot_mini")
    env.reset(options={"task_id": task})
    steps = play(env, env.expert_actions())
    assert [s[2] for s in steps] == [False, False, True]
    assert steps[-1][1] == 1.0 and steps[-1][4]["num_searches"] == 2 and steps[-1][4]["won"]


def test_every_expert_wins_on_both_splits(env):
    for split_env in (env, SearchQAEnv(split="test")):
        for task in split_env.task_ids():
            split_env.reset(options={"task_id": task})
            *_, (_, reward, terminated, _, info) = play(split_env, split_env.expert_actions())
            assert terminated and reward == 1.0 and info["won"], task


def test_wrong_answer_scores_partial_f1(env):
    task = next(t for t in env.task_ids() if len(env.question(t).golden_answers) == 1)
    gold = env.question(task).golden_answers[0]
    env.reset(options={"task_id": task})
    _, reward, terminated, _, info = env.step(f"<answer>{gold} Valley</answer>")
    assert terminated and reward == 0.0 and not info["won"] and info["em"] == 0.0
    n = len(normalize_answer(gold).split())  # n of the n + 1 predicted tokens are right: p = n/(n+1), r = 1
    assert info["f1"] == pytest.approx(2 * (n / (n + 1)) / (n / (n + 1) + 1), abs=1e-12)


def test_malformed_actions_give_feedback_and_count_as_steps(env):
    env.reset(options={"task_id": env.task_ids()[0]})
    for i, action in enumerate(["The answer is 42.", "<search></search>", "<search>x</search><answer>y</answer>"]):
        obs, reward, terminated, truncated, info = env.step(action)
        assert obs.startswith("Invalid action: ") and "<search>your query</search>" in obs
        assert (reward, terminated, truncated, info["step"], info["action_type"]) == (
            0.0,
            False,
            False,
            i + 1,
            "invalid",
        )
    _, reward, terminated, truncated, info = env.step("still no tag")
    assert (reward, terminated, truncated, info["step"]) == (0.0, False, True, 4)  # max_steps=4 reached


def test_truncation_after_max_steps(env):
    short = SearchQAEnv(max_steps=2)
    assert short.retriever is env.retriever  # one index per process, however many envs
    short.reset(options={"task_id": short.task_ids()[0]})
    assert short.step("<search>river</search>")[2:4] == (False, False)
    obs, reward, terminated, truncated, info = short.step("<search>mountain</search>")
    assert (reward, terminated, truncated, info["em"], info["f1"]) == (0.0, False, True, 0.0, 0.0)
    assert obs.startswith("<information>")
    with pytest.raises(RuntimeError):
        short.step("<answer>x</answer>")


def test_overlong_query_is_cut_not_an_error(env):
    env.reset(options={"task_id": env.task_ids()[0]})
    obs = env.step("<search>" + " ".join(f"river{i}" for i in range(3000)) + " river</search>")[0]
    assert obs.startswith(f"(Query cut to its first {MAX_QUERY_TERMS} terms of up to 64 characters.)\n<information>")


def test_query_of_few_words_but_many_terms_is_cut_not_an_error(env):
    # 200 words, but the analyzer makes each CJK character a term: 2,000 terms, cut to the first 256 of them
    words = ["".join(chr(0x4E00 + 10 * w + c) for c in range(10)) for w in range(200)]
    query = " ".join(words)
    assert clip_query(query) == (" ".join("".join(words)[:MAX_QUERY_TERMS]), True)
    assert clip_query(" ".join(words[:25])) == (" ".join(words[:25]), False)  # 250 terms
    env.reset(options={"task_id": env.task_ids()[0]})
    obs, reward, terminated, truncated, info = env.step(f"<search>{query}</search>")
    cut = f"(Query cut to its first {MAX_QUERY_TERMS} terms of up to 64 characters.)\n"
    assert obs == cut + "<information>No passages found.</information>"
    assert (reward, terminated, truncated, info["step"], info["action_type"]) == (0.0, False, False, 1, "search")


def test_registry_passes_constructor_arguments():
    made = envs.make("searchqa", split="test", topk=2)
    assert isinstance(made, SearchQAEnv) and made.topk == 2 and made.task_ids()[0].startswith(("nq_mini", "hotpot"))


def test_envs_in_threads_share_one_index_safely(env):
    """A LocalEnvPool steps several env instances from threads, all over one searcher."""
    tasks = env.task_ids()[:40]

    def episode(task, target):
        target.reset(options={"task_id": task})
        return [target.step(a) for a in target.expert_actions()]

    sequential = [episode(t, env) for t in tasks]
    workers = [SearchQAEnv() for _ in range(4)]  # worker w plays tasks w, w + 4, ... on its own instance
    with ThreadPoolExecutor(4) as pool:
        chunks = list(pool.map(lambda w: [episode(t, workers[w]) for t in tasks[w::4]], range(4)))
    assert [chunks[i % 4][i // 4] for i in range(len(tasks))] == sequential


# ---------------------------------------------------------------- fork
def test_snapshot_restore_replay_is_exact(env):
    task = first_task(env, "hotpot_mini")
    obs0, info0 = env.reset(options={"task_id": task})
    expert = env.expert_actions()
    actions = ["<search>first try</search>", expert[0], "not an action", expert[1]]  # the 4th step truncates
    states, results = [env.snapshot()], []
    for action in actions:
        results.append(env.step(action))
        states.append(env.snapshot())
    assert [s.step_count for s in states] == list(range(5))
    assert all(len(pickle.dumps(s)) < 1024 for s in states)
    other = SearchQAEnv()  # a second instance restores the same way
    for t in range(len(actions)):
        for target in (env, other):
            obs, info = target.restore(states[t])
            assert (obs, info) == ((obs0, info0) if t == 0 else (results[t - 1][0], results[t - 1][4]))
            assert play(target, actions[t:]) == results[t:]
    env.restore(states[2])
    env.step(f"<answer>{env.question(task).golden_answers[0]}</answer>")
    done = env.snapshot()
    obs, info = other.restore(done)
    assert obs.startswith("Final answer received") and info["won"]
    with pytest.raises(RuntimeError, match="ended"):
        other.step("<search>more</search>")


def test_restore_rejects_foreign_states(env):
    env.reset(options={"task_id": env.task_ids()[0]})
    env.step("<search>river</search>")
    state = env.snapshot()
    with pytest.raises(ValueError, match="other data, another retriever or other protocol settings"):
        SearchQAEnv(topk=2).restore(state)
    with pytest.raises(ValueError, match="other protocol settings"):  # same topk, another rule for the replies
        SearchQAEnv(protocol="verl_agent").restore(state)
    with pytest.raises(ValueError, match="malformed"):
        env.restore(EnvState("searchqa", state.task_id, 1, "garbage"))
    with pytest.raises(ValueError, match="step_count"):
        env.restore(EnvState("searchqa", state.task_id, 2, state.payload))


# ---------------------------------------------------------------- files
def test_cached_index_is_reused_not_rebuilt(env, monkeypatch):
    def no_build(*args, **kwargs):
        raise AssertionError("rebuilt a cached index")

    monkeypatch.setattr(corpus.store, "index_collection", no_build)
    path = corpus.DEFAULT_CORPUS
    again = corpus.cached_index(path, file_digest(path), env.retriever.index_dir.parent)
    assert again == env.retriever.index_dir


def write_jsonl(path, rows):
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return path


WIKI_STYLE = [
    {"id": "0", "contents": '"Orlen Bay"\nOrlen Bay is a harbour town famous for its blue ferries.'},
    {"id": "1", "contents": '"Tamsk"\nTamsk is a mining village in the northern hills.'},
    {"id": "2", "contents": '"Blue ferry"\nThe blue ferry was first built by Irma Kolt.'},
]


def test_official_formats_jsonl_corpus_and_parquet_questions(env, tmp_path):
    corpus_path = write_jsonl(tmp_path / "wiki.jsonl", WIKI_STYLE)
    rows = [  # Search-R1's processed parquet: the golds under reward_model.ground_truth.target
        {"id": "train_0", "question": "Which town is famous for blue ferries?", "data_source": "nq",
         "reward_model": {"style": "rule", "ground_truth": {"target": ["Orlen Bay"]}}},
        {"id": "train_0", "question": "Who built the first blue ferry?", "data_source": "hotpotqa",
         "golden_answers": ["Irma Kolt", "Kolt"]},
    ]  # fmt: skip
    pd.DataFrame(rows).to_parquet(tmp_path / "train.parquet")
    sqa = SearchQAEnv(corpus_path=corpus_path, questions_path=tmp_path, cache_dir=tmp_path / "cache")
    assert sqa.task_ids() == ["nq/train_0", "hotpotqa/train_0"]  # repeated ids get their data source
    assert sqa.question("hotpotqa/train_0").golden_answers == ("Irma Kolt", "Kolt")
    obs, _ = sqa.reset(options={"task_id": "nq/train_0"})
    obs = sqa.step("<search>blue ferries town</search>")[0]
    assert obs.startswith("<information>Doc 1(Title: Orlen Bay) Orlen Bay is a harbour town")
    assert sqa.step("<answer>orlen bay</answer>")[1] == 1.0
    assert sqa.task_category("hotpotqa/train_0") == "hotpotqa"
    # FlashRAG jsonl with 'answers' and no data_source; '{split}' in the path picks the file
    write_jsonl(tmp_path / "test.jsonl", [{"id": "q", "question": "Where is Tamsk?", "answers": ["northern hills"]}])
    test = SearchQAEnv(corpus_path=corpus_path, questions_path=tmp_path / "{split}.jsonl", split="test",
                       cache_dir=tmp_path / "cache")  # fmt: skip
    assert test.retriever is sqa.retriever and test.task_category("q") == tmp_path.name


def test_prebuilt_index_with_stored_text(tmp_path):
    corpus._lucene.start_jvm()
    from pyserini.index.lucene import LuceneIndexer

    index = tmp_path / "index"
    indexer = LuceneIndexer(args=["-index", str(index), "-storeRaw"], threads=1)
    for row in WIKI_STYLE:
        indexer.add_doc_raw(json.dumps(row))
    indexer.close()
    questions = write_jsonl(tmp_path / "q.jsonl", [{"id": "a", "question": "Who built it?", "golden_answers": ["x"]}])
    sqa = SearchQAEnv(index_dir=index, questions_path=questions)
    assert sqa.retriever.passages is None
    sqa.reset()
    assert sqa.step("<search>mining village</search>")[0].startswith("<information>Doc 1(Title: Tamsk) Tamsk is a")


def test_index_without_stored_text_needs_its_corpus(env):
    with pytest.raises(ValueError, match=re.escape(f"index {env.retriever.index_dir} stores no passage text")):
        SearchQAEnv(index_dir=env.retriever.index_dir)
    # with its corpus it works
    paired = SearchQAEnv(index_dir=env.retriever.index_dir, corpus_path=corpus.DEFAULT_CORPUS)
    paired.reset(options={"task_id": env.task_ids()[0]})
    assert paired.step(paired.expert_actions()[0])[0] == env.search(env.question(env.task_ids()[0]).expert_queries[0])


def test_bad_files_fail_at_construction_naming_the_file(env, tmp_path):
    missing = tmp_path / "nowhere.jsonl"
    with pytest.raises(FileNotFoundError, match=re.escape(str(missing))):
        SearchQAEnv(corpus_path=missing, cache_dir=tmp_path)
    bad = tmp_path / "bad.jsonl"
    bad.write_text(json.dumps(WIKI_STYLE[0]) + "\n{not json\n")
    with pytest.raises(ValueError, match=re.escape(f"{bad}:2: not valid JSON")):
        SearchQAEnv(corpus_path=bad, cache_dir=tmp_path)
    no_text = write_jsonl(tmp_path / "no_text.jsonl", [{"id": "1", "title": "T"}])
    with pytest.raises(ValueError, match=re.escape(f"{no_text}:1: ") + ".*'contents'"):
        SearchQAEnv(corpus_path=no_text, cache_dir=tmp_path)
    dup = write_jsonl(tmp_path / "dup.jsonl", [WIKI_STYLE[0], WIKI_STYLE[0]])
    with pytest.raises(ValueError, match=re.escape(f"{dup}:2: duplicate")):
        SearchQAEnv(corpus_path=dup, cache_dir=tmp_path)
    with pytest.raises(FileNotFoundError, match=re.escape(str(tmp_path / "no_index"))):
        SearchQAEnv(index_dir=tmp_path / "no_index")
    with pytest.raises(FileNotFoundError, match=re.escape(f"questions file {missing}")):
        SearchQAEnv(questions_path=missing)
    with pytest.raises(
        FileNotFoundError, match=re.escape(f"no dev.jsonl or dev.parquet in questions directory {tmp_path}")
    ):
        SearchQAEnv(questions_path=tmp_path, split="dev")
    no_gold = write_jsonl(tmp_path / "nogold.jsonl", [{"id": "1", "question": "Why?", "golden_answers": []}])
    with pytest.raises(ValueError, match=re.escape(f"{no_gold}:1: no gold answers")):
        SearchQAEnv(questions_path=no_gold)
    not_parquet = tmp_path / "train.parquet"
    not_parquet.write_text("plain text")
    with pytest.raises(ValueError, match=re.escape(f"cannot read parquet questions file {not_parquet}")):
        SearchQAEnv(questions_path=not_parquet)
    with pytest.raises(ValueError, match="topk"):
        SearchQAEnv(topk=0)
    assert os.path.isdir(env.retriever.index_dir)


@pytest.mark.parametrize("gold", [".", "the", " a ", "An!", "。", "“The”"])
def test_gold_answer_that_normalises_to_empty_is_dropped_with_a_warning(tmp_path, gold, caplog):
    # kept before, and then "." or "a" as the policy's answer scored EM 1.0; then refused with the whole file
    # (Search-R1's NQ has such golds); now dropped, and only a row left with none fails, naming file and line
    rows = [{"id": "1", "question": "Who?", "golden_answers": ["Ada"]}]
    rows.append({"id": "2", "question": "What?", "golden_answers": ["fine", gold]})
    path = write_jsonl(tmp_path / "q.jsonl", rows)
    with caplog.at_level("WARNING", logger="envs.searchqa.corpus"):
        env = SearchQAEnv(questions_path=path)
    assert env.question("2").golden_answers == ("fine",)
    assert f"{path}:2: {gold.strip()!r}" in caplog.text and "dropped 1 gold answers" in caplog.text
    rows[1]["golden_answers"] = [gold]
    write_jsonl(path, rows)
    with pytest.raises(ValueError, match=re.escape(f"{path}:2: every gold answer ([{gold.strip()!r}]) is empty")):
        SearchQAEnv(questions_path=path)


def test_split_typo_fails_before_the_corpus_is_indexed(tmp_path, monkeypatch):
    """The questions are checked first: before, a split typo failed only after the index build (minutes)."""
    built = []
    monkeypatch.setattr("envs.searchqa.env.open_retriever", lambda *args: built.append(args))
    with pytest.raises(FileNotFoundError, match="no tset.jsonl or tset.parquet"):
        SearchQAEnv(split="tset", corpus_path=tmp_path / "big_corpus.jsonl", cache_dir=tmp_path)
    assert built == []


def test_non_utf8_files_fail_at_construction_naming_the_file(env, tmp_path):
    bad_corpus = tmp_path / "latin1.jsonl"
    bad_corpus.write_bytes(json.dumps(WIKI_STYLE[0]).encode() + b'\n{"id": "9", "contents": "caf\xe9"}\n')
    with pytest.raises(ValueError, match=re.escape(f"{bad_corpus}:2: not UTF-8")):
        SearchQAEnv(corpus_path=bad_corpus, cache_dir=tmp_path)
    bad_questions = tmp_path / "q.jsonl"
    bad_questions.write_bytes(b'{"id": "1", "question": "Who?", "golden_answers": ["Jos\xe9"]}\n')
    with pytest.raises(ValueError, match=re.escape(f"{bad_questions}:1: not UTF-8")):
        SearchQAEnv(questions_path=bad_questions)


def test_edited_corpus_and_questions_are_read_again_in_the_same_process(tmp_path):
    corpus_path = write_jsonl(tmp_path / "wiki.jsonl", WIKI_STYLE)
    questions = [{"id": "q0", "question": "Where is Tamsk?", "answers": ["northern hills"]}]
    questions_path = write_jsonl(tmp_path / "train.jsonl", questions)
    kwargs = {"corpus_path": corpus_path, "questions_path": questions_path, "cache_dir": tmp_path / "cache"}
    before = SearchQAEnv(**kwargs)
    assert before.task_ids() == ["q0"]
    write_jsonl(questions_path, [*questions, {"id": "q1", "question": "Who built it?", "answers": ["Irma Kolt"]}])
    again = SearchQAEnv(**kwargs)
    assert again.task_ids() == ["q0", "q1"] and again.retriever is before.retriever  # the corpus did not change
    moved = {"id": "1", "contents": '"Tamsk"\nTamsk is a fishing village on the southern coast.'}
    write_jsonl(corpus_path, [WIKI_STYLE[0], moved, WIKI_STYLE[2]])
    after = SearchQAEnv(**kwargs)
    assert after.retriever is not before.retriever
    after.reset(options={"task_id": "q0"})
    assert "southern coast" in after.step("<search>Tamsk village</search>")[0]
