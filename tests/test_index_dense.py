"""Integration tests of the dense side of `scholarqa.retrieval`: embedding cache, incremental index updates, FAISS persistence,
the `scholarqa index` / `scholarqa search` commands, and the ONNX backend."""
import json, subprocess, sys
from pathlib import Path

import numpy as np
import pytest

from scholarqa.ingest import Corpus
from scholarqa.doc import iter_paragraphs
from scholarqa.datasets import load_dataset, demo_dir
from scholarqa.retrieval.dense import Encoder, DenseRetriever, chunk_int_id, onnx_available
from scholarqa.retrieval.vector_index import VectorIndex, ann_recall
from scholarqa.retrieval.store import IndexStore, build_index
from scholarqa.retrieval.chunk import chunk_corpus
from scholarqa.retrieval.base import chunk_index_text

ROOT = Path(__file__).resolve().parents[1]
CLI = [sys.executable, '-c', 'from scholarqa.cli import cli_main; cli_main()']


def scholarqa(*args, timeout=900):
    return subprocess.run(CLI + [str(a) for a in args], capture_output=True, text=True, timeout=timeout, cwd=ROOT)


@pytest.fixture(scope='module')
def st_model():
    "MiniLM loaded once for the whole module (every Encoder below shares it)."
    return Encoder(progress=False).st


@pytest.fixture(scope='module')
def demo():
    return load_dataset('demo')


def test_embedding_cache_survives_a_new_process_view(tmp_path, st_model, demo):
    texts = [p.text for _, p in iter_paragraphs(demo.papers[0])]
    enc = Encoder(st_model, cache_dir=tmp_path, progress=False)
    first = enc.encode(texts)
    assert first.shape == (len(texts), 384) and first.dtype == np.float32
    np.testing.assert_allclose(np.linalg.norm(first, axis=1), 1, atol=1e-5)
    assert enc.stats['encoded'] == len(set(texts)) and enc.stats['cached'] == len(texts) - len(set(texts))
    again = Encoder(st_model, cache_dir=tmp_path, progress=False)       # a new object reads the cache from disk
    second = again.encode(texts)
    assert again.stats == {'encoded': 0, 'cached': len(texts), 'truncated': 0}
    np.testing.assert_array_equal(first, second)
    edited = texts[:1] + [texts[1] + ' An added sentence.']
    again.reset_stats(); again.encode(edited)
    assert (again.stats['encoded'], again.stats['cached']) == (1, 1)      # only the changed text is encoded
    # the cached vector is the vector the model gives
    np.testing.assert_allclose(again.encode(texts[:3], use_cache=False), first[:3], atol=1e-5)
    # another token window is another cache key: nothing is served from the 256-token vectors
    short = Encoder(st_model, cache_dir=tmp_path, max_seq_length=32, progress=False)
    short.encode(texts[:2])
    assert short.stats['encoded'] == 2 and st_model.max_seq_length == 256   # the shared model is left as it was


def test_incremental_update_encodes_only_the_new_paper(tmp_path, st_model, demo):
    papers = demo.papers[:6]
    store = build_index(papers[:5], tmp_path / 'ix', encoder=Encoder(st_model, cache_dir=tmp_path / 'ix' / 'embeddings', progress=False))
    n5 = len(store)
    assert store.meta['counts'] == {'papers': 5, 'chunks': n5, 'vectors': n5}
    # a new process: load the folder with a fresh encoder (empty in-memory state, the on-disk cache of the folder)
    fresh = Encoder(st_model, cache_dir=tmp_path / 'ix' / 'embeddings', progress=False)
    back = IndexStore.load(tmp_path / 'ix', encoder=fresh)
    rep = back.update(papers)
    new_texts = {chunk_index_text(c) for c in back.chunks if c.paper_id == papers[5].id}
    assert rep['added_papers'] == 1 and rep['removed_papers'] == 0 and rep['unchanged_papers'] == 5
    assert fresh.stats['encoded'] == len(new_texts) == rep['encoded'] > 0
    assert fresh.stats['cached'] == 0                                     # old chunks were not even looked up
    assert len(back) == n5 + rep['added_chunks'] == len(back.dense().index)
    # build_index on the same folder and papers: nothing to do
    rep2 = IndexStore.load(tmp_path / 'ix', encoder=fresh).update(papers)
    assert (rep2['added_papers'], rep2['encoded']) == (0, 0)
    # removing a paper removes its chunks from chunks.jsonl, FAISS and BM25
    gone = papers[2]
    again = IndexStore.load(tmp_path / 'ix', encoder=fresh)
    rep3 = again.update([p for p in papers if p.id != gone.id])
    assert rep3['removed_papers'] == 1 and rep3['removed_chunks'] > 0
    reopened = IndexStore.load(tmp_path / 'ix', encoder=fresh)
    assert gone.id not in {c.paper_id for c in reopened.chunks}
    assert gone.id not in reopened.meta['papers']
    for name in ('bm25', 'dense', 'hybrid'):
        assert all(h.chunk.paper_id != gone.id for h in reopened.retriever(name).retrieve(gone.title, 30)), name
    assert len(reopened.dense().index) == len(reopened.chunks)


def test_vector_index_save_load_and_remove(tmp_path, st_model, demo):
    chunks = chunk_corpus(demo.papers[:4], 'paragraph')
    enc = Encoder(st_model, progress=False)
    vecs = enc.encode_chunks(chunks)                                      # (n, 384)
    ids = [chunk_int_id(c.id) for c in chunks]
    queries = enc.encode([p.title for p in demo.papers[:4]] + ['retrieval of scholarly paragraphs'], use_cache=False)
    exact = VectorIndex(384); exact.add(ids, vecs)
    for kind in ('flat', 'ivf', 'hnsw'):
        ix = VectorIndex(384, kind, nlist=4, nprobe=4)
        ix.add(ids, vecs)
        if kind != 'ivf': assert ann_recall(exact, ix, queries, 5) >= 0.95, kind
        S, I = ix.search(queries, 5)
        ix.save(tmp_path / kind)
        back = VectorIndex.load(tmp_path / kind)
        S2, I2 = back.search(queries, 5)
        np.testing.assert_array_equal(I, I2); np.testing.assert_array_equal(S, S2)
        # remove by id: the removed ids never come back, also after another save/load
        drop = I[:, 0].tolist()
        n = back.remove(drop)
        assert n == len(set(drop)) and len(back) == len(ids) - n
        back.save(tmp_path / kind)
        reback = VectorIndex.load(tmp_path / kind)
        _, I3 = reback.search(queries, 10)
        assert not set(drop) & set(I3.ravel().tolist()), kind
        # re-adding a removed id works (HNSW: after a rebuild drops its tombstone)
        reback.add(drop[:1], vecs[ids.index(drop[0])][None])
        _, I4 = reback.search(queries[:1], 1)
        assert I4[0, 0] == drop[0], kind
    # a torn write (index and id list from different saves) is refused
    ix = VectorIndex(384); ix.add(ids[:3], vecs[:3]); ix.save(tmp_path / 'torn')
    other = VectorIndex(384); other.add(ids[:4], vecs[:4]); other.save(tmp_path / 'other')
    (tmp_path / 'torn' / 'faiss.index').write_bytes((tmp_path / 'other' / 'faiss.index').read_bytes())
    with pytest.raises(ValueError, match='does not match'): VectorIndex.load(tmp_path / 'torn')


def test_dense_retriever_finds_a_paragraph_from_its_own_text(st_model, demo):
    chunks = chunk_corpus(demo.papers, 'paragraph')
    r = DenseRetriever(chunks, Encoder(st_model, progress=False))
    picks = chunks[::17]
    for c, hits in zip(picks, r.retrieve_many([c.text for c in picks], 1)):
        assert hits[0].chunk.id == c.id and hits[0].retriever == 'dense'
        assert hits[0].score == pytest.approx(1, abs=1e-4)


@pytest.fixture(scope='module')
def demo_index(tmp_path_factory, demo_cli_copy):
    "The demo corpus and index as `scholarqa ingest` / `scholarqa index --json` write them (tests/conftest.py), and the index report."
    return demo_cli_copy(tmp_path_factory.mktemp('cli'))


def test_cli_index_then_search_json_points_at_real_paragraphs(demo_index):
    root, rep = demo_index
    corpus = Corpus.load(root / 'corpus')
    n_paragraphs = sum(1 for p in corpus for _ in iter_paragraphs(p))
    assert rep['papers'] == len(corpus) and rep['chunks'] == n_paragraphs and rep['encoded'] > 0
    paragraphs = {(p.id, s.path, para.index): para.text for p in corpus for s, para in iter_paragraphs(p)}
    for retriever in ('bm25', 'dense', 'hybrid', 'rrf', 'splade', 'hybrid+splade'):
        r = scholarqa('search', root / 'index', 'How does a citation graph help retrieval?', '-k', '5', '--retriever', retriever, '--json')
        assert r.returncode == 0, r.stderr[-2000:]
        hits = json.loads(r.stdout)
        assert len(hits) == 5
        scores = [h['score'] for h in hits]
        assert scores == sorted(scores, reverse=True)
        for h in hits:
            assert {'score', 'text', 'paper_id', 'source_id', 'section', 'paragraph', 'label', 'retriever'} <= set(h)
            assert h['retriever'] == {'hybrid': 'score', 'hybrid+splade': 'score'}.get(retriever, retriever)   # the store's hybrids are score fusions
            assert paragraphs[(h['paper_id'], h['section']['path'], h['paragraph'])] == h['text']
            paper = corpus[h['paper_id']]
            assert h['source_id'].split(':', 1)[1] in map(str, paper.source_ids.values())
            assert h['label'] == f"Paper-{h['paper_id']}-Section-{h['section']['path']}-Paragraph-{h['paragraph']}"
            assert h['section']['titles'] and isinstance(h['section']['titles'], list)
    assert any((root / 'index' / 'splade').glob('*/shards.json'))       # SPLADE vectors are cached inside the index folder


def test_cli_human_output_rerun_and_errors(demo_index, tmp_path):
    root, _ = demo_index
    r = scholarqa('search', root / 'index', 'sentence embeddings', '-k', '2', '--retriever', 'bm25')
    assert r.returncode == 0, r.stderr
    lines = r.stdout.splitlines()
    # per hit: rank. title (year) and score / section trail / snippet with the query's words / [label]
    assert len(lines) == 8 and lines[0].startswith('  1. ') and 'score' in lines[0] and lines[1].strip().startswith('§ ')
    assert 'embedding' in lines[2].lower() and lines[3].strip().startswith('[Paper-') and lines[4].startswith('  2. ')
    # indexing the same corpus again encodes nothing
    r = scholarqa('index', root / 'corpus', '--out', root / 'index', '--json')
    assert r.returncode == 0, r.stderr[-2000:]
    assert json.loads(r.stdout.strip().splitlines()[-1])['encoded'] == 0
    # a folder of raw papers is not a corpus; a folder without an index is not an index
    r = scholarqa('index', demo_dir(), '--out', tmp_path / 'x')
    assert r.returncode == 2 and str(demo_dir()) in r.stderr and 'ingest' in r.stderr
    r = scholarqa('search', tmp_path / 'nothing', 'query')
    assert r.returncode == 2 and 'no index' in r.stderr
    r = scholarqa('search', root / 'index', 'query', '--retriever', 'nope')
    assert r.returncode == 2


@pytest.mark.skipif(not onnx_available(), reason="the ONNX backend needs the 'onnx' package (pip install onnx)")
def test_onnx_backend_matches_torch(tmp_path, st_model, demo):
    texts = [p.text for paper in demo.papers[:3] for _, p in iter_paragraphs(paper)]
    ref = Encoder(st_model, progress=False).encode(texts, use_cache=False)
    onnx = Encoder(st_model, backend='onnx', onnx_dir=tmp_path, progress=False)
    got = onnx.encode(texts, use_cache=False)
    assert got.shape == ref.shape
    assert (got * ref).sum(1).min() > 0.99
    assert any(tmp_path.glob('*.onnx'))                                   # exported to the folder it was given
    int8 = Encoder(st_model, backend='onnx-int8', onnx_dir=tmp_path, progress=False).encode(texts, use_cache=False)
    assert (int8 * ref).sum(1).mean() > 0.98                             # per-channel int8 (per-tensor gave 0.945)


def test_cli_adapt_then_index_with_the_adapted_model(demo_index, tmp_path):
    "`scholarqa adapt` fine-tunes MiniLM on the ingested demo corpus; the folder it writes indexes and searches like any model."
    root, _ = demo_index
    r = scholarqa('adapt', root / 'corpus', '--out', tmp_path / 'model', '--examples', '32', '--json')
    assert r.returncode == 0, r.stderr[-2000:]
    rec = json.loads(r.stdout.strip().splitlines()[-1])
    assert (rec['examples'], rec['steps'], rec['seed']) == (32, 1, 0) and rec['path'] == str(tmp_path / 'model')
    assert json.loads((tmp_path / 'model' / 'ict_record.json').read_text())['base_model'] == rec['base_model']
    r = scholarqa('index', root / 'corpus', '--out', tmp_path / 'index', '--model', tmp_path / 'model', '--json')
    assert r.returncode == 0, r.stderr[-2000:]
    meta = json.loads((tmp_path / 'index' / 'meta.json').read_text())
    assert meta['model_id'] == rec['model_id'] and meta['model_id'] != json.loads((root / 'index' / 'meta.json').read_text())['model_id']
    r = scholarqa('search', tmp_path / 'index', 'How does a citation graph help retrieval?', '-k', '3', '--retriever', 'dense', '--json')
    assert r.returncode == 0 and len(json.loads(r.stdout)) == 3, r.stderr[-2000:]
    # bad input: not a corpus, and nonsense sizes, fail with exit status 2 and a message naming the problem
    r = scholarqa('adapt', demo_dir(), '--out', tmp_path / 'x')
    assert r.returncode == 2 and 'not an ingested corpus' in r.stderr and not (tmp_path / 'x').exists()
    r = scholarqa('adapt', root / 'corpus', '--out', tmp_path / 'x', '--examples', '0')
    assert r.returncode == 2 and '--examples' in r.stderr
