"""Prepared stores (envs/store.py): big inputs read one element at a time, prepared once outside env workers, opened
read-only; forks across stores of the same data, refused across stores of other data; missing stores name the
command that prepares them."""

import json
import re
import shutil
import sqlite3
import subprocess
import sys

import pytest

from envs import store
from envs.searchqa import corpus
from envs.searchqa.env import SearchQAEnv
from envs.webshop import catalog
from envs.webshop.env import WebShopEnv
from envs.webshop.prepare import main as prepare_webshop


def test_json_array_is_read_one_element_at_a_time_across_chunk_borders(tmp_path, monkeypatch):
    rows = [{"a": "x]y,[z", "n": [1, 2.5e3]}, 12345, 's"t', [], {}, None, True, -0.5, {"deep": {"b": ["]"]}}]
    path = tmp_path / "rows.json"
    path.write_text(" \n[ " + " ,\n ".join(json.dumps(r) for r in rows) + " ]\n")
    for chunk in (1, 3, 7, 1 << 20):
        monkeypatch.setattr(store, "_CHUNK", chunk)
        assert [v for _, v in store.iter_json_array(path, "test")] == rows
    path.write_text("[1, 2 3]")
    with pytest.raises(ValueError, match=re.escape(f"test file {path} is not valid JSON: expected ','")):
        list(store.iter_json_array(path, "test"))
    path.write_text('[1, {"a": ]')
    with pytest.raises(ValueError, match="element 1"):
        list(store.iter_json_array(path, "test"))
    path.write_text('{"a": 1}')
    with pytest.raises(ValueError, match="not a JSON list"):
        list(store.iter_json_array(path, "test"))


@pytest.fixture(scope="module")
def shop_store(tmp_path_factory):
    out = tmp_path_factory.mktemp("stores") / "shop"
    assert prepare_webshop(["--data-dir", str(catalog.DATA_DIR), "--out", str(out), "--threads", "2"]) == out
    return out


def test_webshop_store_plays_like_the_shipped_catalog_and_refuses_other_catalogs(shop_store, tmp_path):
    manifest = json.loads((shop_store / store.MANIFEST).read_text())
    assert manifest["threads"] == 2 and manifest["counts"]["products"] == manifest["num_docs"] == 175
    assert not any(p.name.startswith(".shop-stage") for p in shop_store.parent.iterdir())  # nothing left behind
    with sqlite3.connect(f"file:{shop_store / store.RECORDS}?mode=ro&immutable=1", uri=True) as db:
        (sql,) = db.execute("SELECT sql FROM sqlite_master WHERE name = 'products'").fetchone()
    assert "WITHOUT ROWID" not in sql  # a 3.2 KB product would spill into overflow pages: 4-6x slower cold reads
    prepared = WebShopEnv(store_dir=shop_store, split="all")
    assert f"products {catalog.DATA_DIR / 'items_shuffle_1000.json'}" in prepared.data_source()
    assert f"(store {shop_store})" in prepared.data_source()
    shipped = WebShopEnv(split="all", cache_dir=tmp_path / "cache")  # the same files, prepared on first use
    assert list(prepared.catalog.goals) == list(shipped.catalog.goals)
    assert list(prepared.catalog.products) == list(shipped.catalog.products)
    assert dict(prepared.catalog.prices) == dict(shipped.catalog.prices)
    assert prepared.catalog.fingerprint == shipped.catalog.fingerprint
    for task in prepared.task_ids()[:5]:
        prepared.reset(options={"task_id": task})
        shipped.reset(options={"task_id": task})
        actions = prepared.expert_actions()
        assert [prepared.step(a) for a in actions[:2]] == [shipped.step(a) for a in actions[:2]]
        state = prepared.snapshot()
        assert shipped.restore(state) == prepared.restore(state)
        assert [prepared.step(a) for a in actions[2:]] == [shipped.step(a) for a in actions[2:]]
    synthetic = WebShopEnv(split="all", human_goals=False, cache_dir=tmp_path / "cache")
    with pytest.raises(ValueError, match="another catalog"):
        synthetic.restore(state)
    with pytest.raises(ValueError, match=re.escape("do not also pass ['data_dir']")):
        WebShopEnv(store_dir=shop_store, data_dir=catalog.DATA_DIR)


def test_missing_store_and_unprepared_big_data_fail_with_the_command(shop_store, tmp_path, monkeypatch):
    with pytest.raises(store.StoreMissingError, match=re.escape("python -m envs.webshop.prepare --data-dir")):
        WebShopEnv(store_dir=tmp_path / "nowhere")
    monkeypatch.setattr(store, "AUTO_PREPARE_BYTES", 100)
    cache = tmp_path / "cache"
    with pytest.raises(store.StoreMissingError) as err:
        WebShopEnv(cache_dir=cache, num_products=7)
    assert f"python -m envs.webshop.prepare --products-file {catalog.DATA_DIR / 'items_shuffle_1000.json'}" in str(
        err.value
    )
    assert "--num-products 7" in str(err.value)
    assert not cache.exists()  # nothing was built in the env process
    big = tmp_path / "wiki.jsonl"
    big.write_bytes(corpus.DEFAULT_CORPUS.read_bytes())
    with pytest.raises(ValueError, match=re.escape(f"python -m envs.searchqa.prepare --corpus-path {big}")):
        SearchQAEnv(corpus_path=big, cache_dir=cache)
    with pytest.raises(ValueError, match="holds a webshop store"):
        SearchQAEnv(index_dir=shop_store)


def test_searchqa_stores_prepared_apart_from_the_same_corpus_accept_each_others_states(tmp_path):
    one = corpus.prepare_index(corpus.DEFAULT_CORPUS, tmp_path / "one", threads=1)["index_dir"]
    two = corpus.prepare_index(corpus.DEFAULT_CORPUS, tmp_path / "two", threads=2)["index_dir"]
    a, b = SearchQAEnv(index_dir=one), SearchQAEnv(index_dir=two)
    assert a.retriever.fingerprint == b.retriever.fingerprint  # the same content, whatever the build's layout
    task = a.task_ids()[0]
    a.reset(options={"task_id": task})
    steps = [a.step(action) for action in a.expert_actions()[:-1]]
    assert b.restore(a.snapshot()) == (steps[-1][0], steps[-1][4])
    other_corpus = tmp_path / "other.jsonl"
    other_corpus.write_text("".join(line + "\n" for line in corpus.DEFAULT_CORPUS.read_text().splitlines()[:-1]))
    other = SearchQAEnv(index_dir=corpus.prepare_index(other_corpus, tmp_path / "other", threads=1)["index_dir"])
    with pytest.raises(ValueError, match="other data"):
        other.restore(a.snapshot())


def test_webshop_searches_a_prebuilt_index(shop_store, tmp_path):
    # the original repo's search_engine/indexes: pyserini's JsonCollection of {"id": asin, "contents": text}
    shards = tmp_path / "docs"
    shards.mkdir()
    shipped = WebShopEnv(store_dir=shop_store, split="all").catalog
    docs = [{"id": asin, "contents": shipped.products[asin].search_text()} for asin in shipped.products]
    extra = {"id": "B0NOTSOLD", "contents": "lavender soap bar"}  # an index may hold products the catalog lacks
    (shards / "docs.jsonl").write_text("".join(json.dumps(d) + "\n" for d in [*docs, extra]))
    store.index_collection(shards, tmp_path / "indexes", threads=1)
    out = tmp_path / "with_index"
    prepare_webshop(["--data-dir", str(catalog.DATA_DIR), "--index-dir", str(tmp_path / "indexes"), "--out", str(out)])
    env = WebShopEnv(store_dir=out, split="all")
    own = WebShopEnv(store_dir=shop_store, split="all")
    assert env.catalog.search("lavender soap bar") == tuple(
        a for a in own.catalog.search("lavender soap bar") if a != "B0NOTSOLD"
    )
    assert "B0NOTSOLD" in env.catalog.index.search("lavender soap bar")
    assert env.catalog.fingerprint != own.catalog.fingerprint  # another search engine: states are not exchanged
    task = env.task_ids()[0]
    env.reset(options={"task_id": task})
    assert env.step(env.expert_actions()[0])[0].startswith("Instruction:")


def test_an_env_process_does_not_import_pyserinis_dense_searchers(shop_store):
    # pyserini.search.lucene imports transformers, torch and scikit-learn: ~9 s and ~570 MB per env process
    code = (
        "import sys; from envs.webshop.env import WebShopEnv\n"
        f"env = WebShopEnv(store_dir={str(shop_store)!r}, split='all')\n"
        "env.reset(options={'task_id': env.task_ids()[0]}); env.step(env.expert_actions()[0])\n"
        "print(sorted(m for m in ('pyserini.search.lucene', 'torch', 'transformers') if m in sys.modules))"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.strip().splitlines()[-1] == "[]"


@pytest.mark.parametrize(
    "manifest",
    [b"\xff\xfe\x00garbage", b'{"kind": "searchqa", "format": ', b"[]", "no fingerprint"],
    ids=["not utf-8", "truncated", "a list", "no fingerprint"],
)
def test_a_corrupt_store_json_names_the_file_and_the_rebuild(tmp_path, manifest):
    """Before: a raw UnicodeDecodeError / JSONDecodeError / KeyError from envs/store.py, no 'corrupt', no command
    (issue 41)."""
    index_dir = corpus.open_retriever(cache_dir=tmp_path).index_dir  # the shipped corpus, cached under tmp_path
    path = index_dir / store.MANIFEST
    if manifest == "no fingerprint":
        manifest = json.dumps({k: v for k, v in json.loads(path.read_text()).items() if k != "fingerprint"}).encode()
    path.write_bytes(manifest)
    with pytest.raises(store.CorruptStoreError) as raised:
        corpus.open_retriever(cache_dir=tmp_path)
    message = str(raised.value)
    assert f"store manifest {path} is corrupt" in message
    assert (
        f"rebuild the store: rm -r {index_dir}, then prepare it again with:\n  python -m envs.searchqa.prepare"
        in message
    )
    shutil.rmtree(index_dir)  # as the message says: the next use builds it again
    assert corpus.open_retriever(cache_dir=tmp_path).search("river", 2)


def test_a_cached_index_without_its_segments_files_names_the_rebuild(tmp_path):
    """Before: "no Lucene index at DIR (expected a directory with segments_* files)", no way to rebuild it."""
    index_dir = corpus.open_retriever(cache_dir=tmp_path).index_dir
    for segments in index_dir.glob("segments_*"):
        segments.unlink()
    with pytest.raises(FileNotFoundError) as raised:
        corpus.open_retriever(cache_dir=tmp_path)
    assert str(raised.value) == (
        f"Lucene index {index_dir} has no segments_* file (deleted, or never written); rebuild it with:\n"
        f"  rm -r {index_dir} (it is built again on next use)"
    )
    shutil.rmtree(index_dir)
    assert corpus.open_retriever(cache_dir=tmp_path).search("river", 2)
