"Tests of the 02_index experiment code (runs at CI size on the demo corpus) and of the hand-written unArXive question file."
import json, random, re
from collections import Counter
from pathlib import Path

import numpy as np
import pytest
from scholarqa.datasets import load_dataset, DatasetUnavailable
from scholarqa.doc import iter_paragraphs, paragraph_label
from scholarqa.retrieval.bm25 import BM25Index
from scholarqa.retrieval.dense import DenseRetriever, Encoder, SentenceWindowRetriever
from scholarqa.retrieval.fusion import HybridRetriever, fuse_runs
from scholarqa.retrieval.chunk import chunk_corpus
from scholarqa.eval.questions import load_eval_questions, question_qrels, chunk_qrels, run_retrievers, retrieval_table, hit_curve, all_found_at_k, demo_eval_questions, pubmedqa_retrieval_task
from scholarqa.retrieval.store import recommended_hybrid, RECOMMENDED_HYBRID
from scholarqa.retrieval.speed import speed_table

QUESTIONS = Path(__file__).resolve().parents[1] / 'data' / 'eval' / 'unarxive_questions.jsonl'


def _load(name):
    try: return load_dataset(name)
    except DatasetUnavailable as e: pytest.skip(str(e))


@pytest.fixture(scope='module')
def enc():
    return Encoder(progress=False)


@pytest.fixture(scope='module')
def demo():
    return load_dataset('demo')


# ---------------------------------------------------------------- the benchmark code at CI size (demo corpus)

@pytest.fixture(scope='module')
def demo_bench(demo, enc):
    qs = [q for q in demo_eval_questions() if q['kind'] == 'single']
    raw = chunk_corpus(demo.papers, 'paragraph', tokenizer=enc.tokenizer)
    hdr = chunk_corpus(demo.papers, 'paragraph', tokenizer=enc.tokenizer, context_header=True)
    bm, de = BM25Index(raw), DenseRetriever(raw, enc)
    rets = {'bm25': bm, 'dense': de, 'rrf': HybridRetriever([bm, de], 'rrf'), 'hybrid+': recommended_hybrid(hdr, enc)}
    qrels = chunk_qrels(question_qrels(qs, demo.papers), raw)
    runs = run_retrievers(rets, {q['id']: q['question'] for q in qs}, k=20)
    return qs, qrels, runs, retrieval_table(runs, qrels).set_index('retriever')


def test_demo_questions_resolve(demo):
    qs = demo_eval_questions()
    qr = question_qrels(qs, demo.papers)
    assert len(qs) == 13 and all(len(v) == len(q['gold']) for q, v in zip(qs, qr.values()))
    two = [q for q in qs if q['kind'] == 'two_paper'][0]
    assert len({g['key'] for g in two['gold']}) == 2


def test_demo_benchmark_metrics_are_sane(demo_bench):
    qs, qrels, runs, table = demo_bench
    assert set(table.index) == {'bm25', 'dense', 'rrf', 'hybrid+'} and (table['queries'] == 12).all()
    for col in ('hit@1', 'hit@3', 'hit@5', 'mrr', 'recall@5', 'ndcg@10'):
        assert table[col].between(0, 1).all(), col
    assert (table['hit@1'] <= table['hit@3']).all() and (table['hit@3'] <= table['hit@5']).all()
    assert (table['mrr'] >= table['hit@1']).all()                       # MRR counts every first hit at rank 1 fully
    # one relevant paragraph per question: Recall@5 is Hit@5
    assert np.allclose(table['recall@5'], table['hit@5'])
    # the demo questions are answerable: every retriever finds most of them, the recommended hybrid at least as many as BM25
    assert (table['hit@5'] >= 0.5).all()
    assert table.loc['hybrid+', 'hit@5'] >= table.loc['bm25', 'hit@5']
    curve = hit_curve(runs['hybrid+'], qrels, 20)
    assert curve.shape == (20,) and np.all(np.diff(curve) >= 0) and curve[4] == table.loc['hybrid+', 'hit@5']


def test_recommended_hybrid_config(demo, enc):
    hdr = chunk_corpus(demo.papers[:3], 'paragraph', tokenizer=enc.tokenizer, context_header=True)
    h = recommended_hybrid(hdr, enc)
    assert (h.method, h.name, len(h.retrievers)) == (RECOMMENDED_HYBRID['method'], 'hybrid+', 2)
    hits = h.retrieve(hdr[5].text, k=5)
    assert hits[0].chunk.id == hdr[5].id and len(hits) == 5             # a paragraph's own text finds it first
    assert len(recommended_hybrid(hdr, enc, sentence_window=2).retrievers) == 3


def test_sentence_window_retriever(demo, enc):
    hdr = chunk_corpus(demo.papers[:4], 'paragraph', tokenizer=enc.tokenizer, context_header=True)
    sw = SentenceWindowRetriever(hdr, enc, window=2)
    assert len(sw.owner) == sum(len(sw.windows(c)) for c in hdr)
    assert all(t.startswith(hdr[0].header) for t in sw.windows(hdr[0]))
    target = max(hdr, key=lambda c: len(c.text))
    window = sw.windows(target)[-1]                                     # the last window of the longest paragraph
    hits = sw.retrieve(window, k=3)
    assert hits[0].chunk.id == target.id and hits[0].score > 0.99       # the window itself is in the index
    assert len({h.chunk.id for h in hits}) == 3


def test_fusion_of_stored_runs_matches_live_hybrid(demo_bench, demo, enc):
    qs, qrels, runs, table = demo_bench
    raw = chunk_corpus(demo.papers, 'paragraph', tokenizer=enc.tokenizer)
    bm, de = BM25Index(raw), DenseRetriever(raw, enc)
    texts = {q['id']: q['question'] for q in qs}
    stored = {n: dict(zip(texts, r.retrieve_many(list(texts.values()), 100))) for n, r in (('bm25', bm), ('dense', de))}
    assert fuse_runs(stored, ['bm25', 'dense']) == runs['rrf']           # same depth (100), same rule: same rankings


def test_all_found_needs_every_gold():
    qrels = {'q': {'a', 'b'}}
    assert all_found_at_k({'q': ['a', 'x', 'b']}, qrels, 3) == 1.0
    assert all_found_at_k({'q': ['a', 'x', 'b']}, qrels, 2) == 0.0


def test_speed_table_small(demo, enc):
    chunks = chunk_corpus(demo.papers, 'paragraph', tokenizer=enc.tokenizer)
    vecs = enc.encode_chunks(chunks)
    lat, ann = speed_table([c.text for c in chunks], vecs, ['citation graphs', 'dense retrieval'], enc, sizes=(100, 400))
    assert list(lat.chunks.unique()) == [100, 400] and set(lat.retriever) == {'bm25', 'dense', 'hybrid', 'rrf'}
    assert list(lat.drop_duplicates('chunks').vectors) == ['real', 'synthetic']    # 193 real texts: 400 needs resampling
    assert (lat.p50_ms > 0).all() and (lat.p95_ms >= lat.p50_ms).all() and (lat.n == 2).all()
    assert lat.alone.isin([True, False, None]).all()                                # every row says whether it ran alone
    assert ann['recall@10'].between(0, 1).all() and set(ann['index']) == {'ivf', 'hnsw'}


# ---------------------------------------------------------------- PubMedQA-1k as retrieval (real data)

@pytest.fixture(scope='module')
def pubmed_task():
    pqal, pqaa = _load('pubmedqa'), _load('pubmedqa_artificial')
    return pqal, pqaa, pubmedqa_retrieval_task(pqal, pqaa)


def test_pubmedqa_task_shape(pubmed_task):
    pqal, pqaa, (papers, queries, qrels) = pubmed_task
    assert len(queries) == 1000 and set(queries) == set(qrels)
    assert 1000 < len(papers) <= 1500
    para_paper = {para.id: p.id for p in papers for _, para in iter_paragraphs(p)}
    by_q = {q.id: q for q in pqal.questions}
    for qid, rel in qrels.items():
        assert rel and {para_paper[r] for r in rel} == set(by_q[qid].paper_ids)   # exactly the entry's own paragraphs
    sample = pubmedqa_retrieval_task(pqal, pqaa, n_questions=50, seed=3)
    assert len(sample[1]) == 50 and sample[1] == pubmedqa_retrieval_task(pqal, pqaa, n_questions=50, seed=3)[1]
    assert len(sample[0]) == len(papers)                                 # a question sample keeps the whole corpus


def test_pubmedqa_bm25_subset(pubmed_task):
    "BM25 on 50 sampled questions: PubMedQA questions share their abstract's words, so BM25 finds most entries."
    pqal, pqaa, (papers, queries, qrels) = pubmed_task
    chunks = chunk_corpus(papers, 'paragraph')
    qs = dict(list(queries.items())[:50])
    runs = run_retrievers({'bm25': BM25Index(chunks)}, qs, k=10)
    t = retrieval_table(runs, chunk_qrels({q: qrels[q] for q in qs}, chunks)).iloc[0]
    assert t['queries'] == 50 and t['hit@3'] >= 0.8 and t['hit@1'] <= t['hit@3']


# ---------------------------------------------------------------- the hand-written unArXive question file

STOP = set("""a an the and or but if of to in on at by for with from as into onto over under about after before between through during without within
is are was were be been being do does did done have has had having can could may might must shall should will would
this that these those it its they them their there here what which who whom whose when where why how whether than then
not no nor so such too very also just only both each either neither any all some more most other another same own
i we you he she our your his her one two us up out off per via vs etc e g ie eg
used use using does do get got make made show shown give given find found say said""".split())


def _content(text):
    return [w for w in re.findall(r'[a-z0-9]+', text.lower()) if w not in STOP and len(w) > 1]


def _overlap(q, text, stem=False):
    qw, tw = set(_content(q)), set(_content(text))
    if stem: qw, tw = {w[:5] for w in qw}, {w[:5] for w in tw}
    return round(len(qw & tw) / max(1, len(qw)), 3)


@pytest.fixture(scope='module')
def questions():
    return load_eval_questions(QUESTIONS)


def test_question_file_structure(questions):
    ids = [q['id'] for q in questions]
    assert len(ids) == len(set(ids)) and len({q['question'] for q in questions}) == len(questions)
    kinds = Counter(q['kind'] for q in questions)
    assert kinds['single'] >= 150 and kinds['two_paper'] >= 25 and set(kinds) == {'single', 'two_paper'}
    for q in questions:
        assert set(q) >= {'id', 'question', 'answer', 'gold', 'kind', 'split', 'overlap', 'overlap_prefix5'}
        assert len(q['gold']) == (1 if q['kind'] == 'single' else 2) and q['answer'].strip()
        if q['kind'] == 'two_paper': assert q['gold'][0]['arxiv'] != q['gold'][1]['arxiv']
    assert len(load_eval_questions(QUESTIONS, kind='single', split='heldout')) == \
        sum(q['kind'] == 'single' and q['split'] == 'heldout' for q in questions)


def test_splits_are_the_seeded_shuffle(questions):
    "Splits are fixed: per kind, sorted ids shuffled by random.Random(2212) (singles first), first 60 % dev."
    rng = random.Random(2212)
    for kind in ('single', 'two_paper'):
        ids = sorted(q['id'] for q in questions if q['kind'] == kind)
        rng.shuffle(ids)
        dev = set(ids[:round(0.6 * len(ids))])
        assert {q['id'] for q in questions if q['kind'] == kind and q['split'] == 'dev'} == dev


def test_gold_paragraphs_exist_and_overlap_is_reproducible(questions):
    ux = _load('unarxive')
    by_arxiv = {p.source_ids['arxiv']: p for p in ux.papers}
    covered = set()
    for q in questions:
        texts = []
        for g in q['gold']:
            p = by_arxiv[g['arxiv']]
            assert p.id == g['paper_id']
            match = [(s, para) for s, para in iter_paragraphs(p) if s.path == g['section_path'] and para.index == g['paragraph_index']]
            assert len(match) == 1, (q['id'], g)
            s, para = match[0]
            assert g['label'] == paragraph_label(p.id, s.path, para.index)
            texts.append(para.text)
            if q['kind'] == 'single': covered.add(p.id)
        assert q['overlap'] == _overlap(q['question'], ' '.join(texts)), q['id']
        assert q['overlap_prefix5'] == _overlap(q['question'], ' '.join(texts), stem=True), q['id']
    assert covered == {p.id for p in ux.papers}                        # every paper has at least one question
    qr = question_qrels(questions, ux.papers)                          # the experiment's resolver agrees
    assert all(len(v) == len(q['gold']) for q, v in zip(questions, qr.values()))


def test_questions_do_not_copy_their_paragraphs(questions):
    single = [q['overlap'] for q in questions if q['kind'] == 'single']
    assert np.mean(single) < 0.5 and max(single) < 0.9


# ---------------------------------------------------------------- the second, unseen question file (04_structrag's acceptance check)

FRESH = QUESTIONS.parent / 'unarxive_questions_fresh.jsonl'


def _gold_texts(q, by_arxiv) -> list:
    "The text of each gold paragraph of `q`, asserting that it exists exactly once and that its label is the paragraph's."
    texts = []
    for g in q['gold']:
        p = by_arxiv[g['arxiv']]
        match = [para for s, para in iter_paragraphs(p) if s.path == g['section_path'] and para.index == g['paragraph_index']]
        assert len(match) == 1 and g['label'] == paragraph_label(p.id, g['section_path'], g['paragraph_index']), (q['id'], g)
        texts.append(match[0].text)
    return texts


def test_fresh_question_file_is_new_and_resolves(questions):
    fresh = load_eval_questions(FRESH)
    assert Counter(q['kind'] for q in fresh) == {'single': 40, 'two_paper': 24} and {q['split'] for q in fresh} == {'heldout'}
    assert len({q['id'] for q in fresh}) == len(fresh) and not {q['id'] for q in fresh} & {q['id'] for q in questions}
    old_gold = {g['label'] for q in questions for g in q['gold']}
    old_pairs = {frozenset(g['arxiv'] for g in q['gold']) for q in questions if q['kind'] == 'two_paper'}
    ux = _load('unarxive')
    by_arxiv = {p.source_ids['arxiv']: p for p in ux.papers}
    for q in fresh:
        assert len(q['gold']) == (1 if q['kind'] == 'single' else 2) and q['answer'].strip()
        assert not {g['label'] for g in q['gold']} & old_gold, q['id']                # no gold of the first file
        if q['kind'] == 'two_paper':
            assert q['gold'][0]['arxiv'] != q['gold'][1]['arxiv'] and frozenset(g['arxiv'] for g in q['gold']) not in old_pairs, q['id']
        texts = _gold_texts(q, by_arxiv)
        assert q['overlap'] == _overlap(q['question'], ' '.join(texts)), q['id']
    assert np.mean([q['overlap'] for q in fresh]) < 0.45 and max(q['overlap'] for q in fresh) < 0.8
    assert all(len(v) == len(q['gold']) for q, v in zip(fresh, question_qrels(fresh, ux.papers).values()))


# ---------------------------------------------------------------- the two-paper dev file (02p_two_paper / 02q's choices)

TWO_DEV = QUESTIONS.parent / 'unarxive_two_paper_dev.jsonl'


def _runs(text, n=4):
    w = re.findall(r'[a-z0-9]+', text.lower())
    return {tuple(w[i:i + n]) for i in range(len(w) - n + 1)}


def test_two_paper_dev_file_is_new_resolves_and_copies_nothing(questions):
    two = load_eval_questions(TWO_DEV)
    assert len(two) >= 40 and {q['kind'] for q in two} == {'two_paper'} and {q['split'] for q in two} == {'dev'}
    assert len({q['id'] for q in two}) == len(two) and len({q['question'] for q in two}) == len(two)
    assert len({q['pattern'] for q in two}) >= 5                       # more than one way of asking
    fresh = load_eval_questions(FRESH)
    used = {g['label'] for q in questions + fresh for g in q['gold']}
    used_pairs = {frozenset(g['arxiv'] for g in q['gold']) for q in questions + fresh if q['kind'] == 'two_paper'}
    ux = _load('unarxive')
    by_arxiv = {p.source_ids['arxiv']: p for p in ux.papers}
    for q in two:
        assert not {g['label'] for g in q['gold']} & used, q['id']    # paragraphs no other set uses
        assert q['gold'][0]['arxiv'] != q['gold'][1]['arxiv'] and frozenset(g['arxiv'] for g in q['gold']) not in used_pairs, q['id']
        texts = _gold_texts(q, by_arxiv)
        for g, text in zip(q['gold'], texts):
            assert not _runs(q['question']) & _runs(text), (q['id'], 'a 4-word run copied from', g['label'])
        assert q['overlap'] == _overlap(q['question'], ' '.join(texts)), q['id']
        assert q['overlap_prefix5'] == _overlap(q['question'], ' '.join(texts), stem=True), q['id']
    assert np.mean([q['overlap'] for q in two]) < 0.45
