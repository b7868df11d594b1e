"Tests of the retrieval floor (scholarqa.retrieval): chunk provenance on the demo corpus, BM25 parity with rank-bm25 on real data, fusion, metrics."
import math

import numpy as np
import pytest
from scholarqa.datasets import load_dataset, DatasetUnavailable
from scholarqa.doc import iter_paragraphs, iter_sections, parse_label, count_tokens
from scholarqa.retrieval.base import Chunk, Hit, chunk_index_text
from scholarqa.retrieval.bm25 import BM25Index, bm25_tokenize, bm25_speed_comparison
from scholarqa.retrieval.chunk import chunk_paper, chunk_corpus, default_tokenizer
from scholarqa.retrieval.fusion import reciprocal_rank_fusion, score_fusion, HybridRetriever
from scholarqa.eval.metrics import hit_at_k, recall_at_k, mrr, average_precision, map_at_k, ndcg_at_k, evaluate_run


def _load(name):
    try: return load_dataset(name)
    except DatasetUnavailable as e: pytest.skip(str(e))


@pytest.fixture(scope='module')
def demo(): return load_dataset('demo')

@pytest.fixture(scope='module')
def tok(): return default_tokenizer()


def _paras(paper):
    return [p for _, p in iter_paragraphs(paper) if p.text.strip()]

def _nospace(texts): return ''.join(''.join(t.split()) for t in texts)


# ---------------------------------------------------------------- chunk provenance (demo corpus)

def test_paragraph_chunks_labels_parse_back(demo, tok):
    for paper in demo.papers:
        chunks = chunk_paper(paper, 'paragraph', tok)
        pairs = [(s, p) for s, p in iter_paragraphs(paper) if p.text.strip()]
        assert len(chunks) == len(pairs)
        for c, (s, p) in zip(chunks, pairs):
            assert parse_label(c.label) == (paper.id, s.path, p.index) == (c.paper_id, c.section_path, c.paragraph_start)
            assert (c.id, c.label, c.text, c.kind, c.paragraph_ids) == (p.id, p.label, p.text, p.kind, [p.id])
            assert c.paragraph_end == c.paragraph_start and c.sentence_span is None
            assert c.section_titles and c.section_titles[-1] == s.title
            assert c.n_tokens == count_tokens([c.text], tok)[0]
            assert c.source_id and c.source_id.split(':', 1)[1] in map(str, paper.source_ids.values())


def test_fixed_chunks_cover_text_in_order(demo, tok):
    for paper in demo.papers:
        chunks = chunk_paper(paper, 'fixed', tok, size=200)
        paras = _paras(paper)
        assert _nospace(c.text for c in chunks) == _nospace(p.text for p in paras)     # every character, in order, no gaps
        assert all(c.n_tokens == 200 for c in chunks[:-1]) and 0 < chunks[-1].n_tokens <= 200
        assert sum(c.n_tokens for c in chunks) == sum(count_tokens([p.text for p in paras], tok))
        order = [p.id for p in paras]
        for a, b in zip(chunks, chunks[1:]):                                             # windows advance through paragraphs
            assert order.index(b.paragraph_ids[0]) in (order.index(a.paragraph_ids[-1]), order.index(a.paragraph_ids[-1]) + 1)
        for c in chunks:
            assert [order.index(i) for i in c.paragraph_ids] == list(range(order.index(c.paragraph_ids[0]), order.index(c.paragraph_ids[-1]) + 1))
            assert c.id.startswith(f'{paper.id}-Cfixed-')
    default = chunk_corpus(demo.papers, 'fixed', tok)                                   # VanillaRAG default: 1,000 tokens
    assert max(c.n_tokens for c in default) == 1000


def test_recursive_chunks_size_and_overlap(demo, tok):
    chunks = chunk_corpus(demo.papers, 'recursive', tok)
    assert all(c.n_tokens <= 100 and c.n_tokens == count_tokens([c.text], tok)[0] for c in chunks)
    text = {p.id: p.text for paper in demo.papers for _, p in iter_paragraphs(paper)}
    overlaps = []
    for a, b in zip(chunks, chunks[1:]):
        if a.paragraph_ids[-1] == b.paragraph_ids[0] and b.char_span[0] < a.char_span[1]:
            overlaps.append(count_tokens([text[b.paragraph_ids[0]][b.char_span[0]:a.char_span[1]]], tok)[0])
    assert overlaps and max(overlaps) <= 16 and max(overlaps) >= 12      # word-level splits repeat up to 16 tokens
    for paper in demo.papers:                                             # no text is lost
        mine = [c for c in chunks if c.paper_id == paper.id]
        for p in _paras(paper):
            covered = np.zeros(len(p.text), bool)
            for c in mine:
                if p.id in c.paragraph_ids:
                    i = c.paragraph_ids.index(p.id)
                    a = c.char_span[0] if i == 0 else 0
                    b = c.char_span[1] if i == len(c.paragraph_ids) - 1 else len(p.text)
                    covered[a:b] = True
            assert all(covered[i] or p.text[i].isspace() for i in range(len(p.text))), p.id


def test_semantic_chunks_cover_text(demo, tok):
    def embed(texts):                                                     # deterministic hashed bag of words
        v = np.zeros((len(texts), 64))
        for i, t in enumerate(texts):
            for w in bm25_tokenize(t): v[i, sum(map(ord, w)) % 64] += 1
        return v + 1e-3
    for paper in demo.papers[:4]:
        chunks = chunk_paper(paper, 'semantic', tok, embed=embed)
        assert len(chunks) >= 2
        assert _nospace(c.text for c in chunks) == _nospace(p.text for p in _paras(paper))


def test_context_header_changes_index_text_only(demo, tok):
    paper = demo.papers[0]
    plain, headed = chunk_paper(paper, 'paragraph', tok), chunk_paper(paper, 'paragraph', tok, context_header=True)
    for a, b in zip(plain, headed):
        assert a.text == b.text and chunk_index_text(a) == a.text
        assert chunk_index_text(b) == f'{paper.title} > {" > ".join(b.section_titles)}: {b.text}'
        assert a.content_hash != b.content_hash


# ---------------------------------------------------------------- BM25 parity with rank-bm25 (real data)

@pytest.fixture(scope='module')
def pubmed():
    ds = _load('pubmedqa')
    paras, qs = [], []
    for paper, q in zip(ds.papers, ds.questions):
        ps = [(p.id, p.text) for _, p in iter_paragraphs(paper) if p.text.strip()]
        if len(paras) + len(ps) > 2000: break
        paras += ps; qs.append(q.question)
    assert len(paras) >= 1900 and len(qs) >= 50
    return paras, qs[:50]


@pytest.mark.parametrize('k1,b', [(1.5, 0.75), (1.2, 0.3)])
def test_bm25_matches_rank_bm25(pubmed, k1, b):
    rank_bm25 = pytest.importorskip('rank_bm25')
    paras, queries = pubmed
    chunks = [Chunk(pid, text, 'x', '1', [], 0, 0) for pid, text in paras]
    ours = BM25Index(chunks, k1=k1, b=b)
    docs = [bm25_tokenize(t) for _, t in paras]
    ref = rank_bm25.BM25Okapi(docs, k1=k1, b=b)
    sets = [set(d) for d in docs]
    strict = 0
    for q in queries:
        qt = bm25_tokenize(q)
        theirs = ref.get_scores(qt)
        assert np.allclose(ours.scores(q), theirs, rtol=1e-10, atol=1e-10)
        matched = np.array([i for i, d in enumerate(sets) if d.intersection(qt)])     # retrieve returns only these
        want = matched[np.argsort(-theirs[matched], kind='stable')][:10]
        top = [ours._row[h.chunk.id] for h in ours.retrieve(q, 10)]
        assert len(top) == min(10, len(matched))
        assert np.allclose(theirs[top], theirs[want], rtol=1e-10, atol=1e-10)          # same scores at every rank
        gaps = np.diff(np.sort(theirs[matched])[::-1][:11])
        if np.all(np.abs(gaps) > 1e-9): assert top == list(want); strict += 1          # no ties: identical ranking
    assert strict >= 45


def test_bm25_incremental_equals_fresh(pubmed):
    paras, queries = pubmed
    chunks = [Chunk(pid, text, 'x', '1', [], 0, 0) for pid, text in paras]
    inc = BM25Index(chunks[:1500])
    inc.add(chunks[1500:])
    assert inc.remove([c.id for c in chunks[::20]]) == len(chunks[::20])
    kept = [c for i, c in enumerate(chunks) if i % 20]
    fresh = BM25Index(kept)
    for q in queries[:10]:
        order = [inc._row[c.id] for c in kept]
        assert np.allclose(inc.scores(q)[order], fresh.scores(q), rtol=1e-12, atol=1e-12)


def test_bm25_speed_comparison_runs_small(pubmed):
    paras, queries = pubmed
    df = bm25_speed_comparison([t for _, t in paras], queries, sizes=(300,), n_queries=3)
    assert list(df.n_chunks) == [300] and df.max_abs_score_diff.iloc[0] < 1e-9
    assert (df[['index_s_ours', 'query_ms_ours', 'query_ms_rank_bm25']] > 0).all().all()


# ---------------------------------------------------------------- fusion

def _h(cid, s): return Hit(Chunk(cid, cid, 'p', '1', [], 0, 0), s, 'x')


def test_rrf_hand_case():
    bm25 = [_h('a', 9), _h('b', 5), _h('c', 1)]
    dense = [_h('c', .9), _h('d', .8), _h('a', .5)]
    fused = reciprocal_rank_fusion([bm25, dense], k=60)
    assert [h.chunk.id for h in fused] == ['a', 'c', 'b', 'd']                 # a, c tie at 1/61 + 1/63: id decides
    assert math.isclose(fused[0].score, 1 / 61 + 1 / 63) and math.isclose(fused[2].score, 1 / 62)
    assert all(h.retriever == 'rrf' for h in fused)
    assert [h.chunk.id for h in reciprocal_rank_fusion([dense, bm25])] == ['a', 'c', 'b', 'd']   # list order cannot decide
    assert [h.chunk.id for h in reciprocal_rank_fusion([[_h('a', 1), _h('b', 1)], [_h('b', 1)]], k=1)] == ['b', 'a']
    sf = score_fusion([bm25, dense])
    assert [(h.chunk.id, round(h.score, 6)) for h in sf] == [('a', 1.0), ('c', 1.0), ('d', 0.75), ('b', 0.5)]
    assert all(h.retriever == 'score' for h in sf)


# ---------------------------------------------------------------- metrics

def test_metrics_hand_case():
    ranked, rel = ['a', 'b', 'c', 'd', 'e'], {'b', 'd', 'z'}
    assert (hit_at_k(ranked, rel, 1), hit_at_k(ranked, rel, 3)) == (0.0, 1.0)
    assert math.isclose(recall_at_k(ranked, rel, 5), 2 / 3)
    assert mrr(ranked, rel) == 0.5 and mrr(['x'], rel) == 0.0
    assert math.isclose(average_precision(ranked, rel), (1 / 2 + 2 / 4) / 3)
    assert math.isclose(map_at_k(ranked, rel, 3), (1 / 2) / 3)                 # seed 001: denominator R_q, M = K
    assert math.isclose(map_at_k(['b', 'd', 'z'], rel, 2), 2 / 3)
    dcg = 1 / math.log2(3) + 1 / math.log2(5); idcg = 1 + 1 / math.log2(3) + 1 / math.log2(4)
    assert math.isclose(ndcg_at_k(ranked, rel, 5), dcg / idcg)
    assert ndcg_at_k(['d', 'b', 'z'], rel, 3) == 1.0
    ev = evaluate_run({'q1': ranked, 'q2': ['x']}, {'q1': rel, 'q2': {'x'}, 'q3': {'y'}}, ks=(1,))
    assert ev['n_queries'] == 3 and math.isclose(ev['mrr'], (0.5 + 1 + 0) / 3) and math.isclose(ev['hit@1'], 1 / 3)


def test_hybrid_on_demo_bm25(demo, tok):
    chunks = chunk_corpus(demo.papers, 'paragraph', tok)
    bm = BM25Index(chunks)
    hy = HybridRetriever([bm, bm], depth=20)
    q = 'citation graph attention for multi-paper retrieval'
    assert [h.chunk.id for h in hy.retrieve(q, 5)] == [h.chunk.id for h in bm.retrieve(q, 5)]
