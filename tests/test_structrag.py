"Integration tests of 04_structrag: diversity optimality, `scholarqa ask --method structrag` on an indexed demo corpus, and the unArXive acceptance check."
import json, os, subprocess, sys
from pathlib import Path

import numpy as np
import pytest
from scholarqa.datasets import load_dataset, DatasetUnavailable
from scholarqa.ingest import Corpus
from scholarqa.doc import iter_paragraphs
from scholarqa.retrieval.base import Chunk, Hit
from scholarqa.retrieval.dense import Encoder, default_cache_dir
from scholarqa.retrieval.store import IndexStore, build_index
from scholarqa.evaluate import load_eval_questions, question_qrels, chunk_qrels
from scholarqa.methods.structrag import (source_diverse_rerank, source_mmr_rerank, max_distinct_sources, distinct_sources,
                                         hit_source, method_hits, pipelines_for_store)

ROOT = Path(__file__).resolve().parents[1]
QUESTIONS = ROOT / 'data' / 'eval' / 'unarxive_questions.jsonl'
FRESH = ROOT / 'data' / 'eval' / 'unarxive_questions_fresh.jsonl'   # unseen before the pipeline was fixed


def _load(name):
    try: return load_dataset(name)
    except DatasetUnavailable as e: pytest.skip(f'real data not available ({e}); set SCHOLARQA_DATA to the shared data folder')


def _pool(rng, n=15, n_src=None):
    n_src = n_src or int(rng.integers(1, 13))
    spec = sorted(((f'S{int(rng.integers(n_src))}', float(rng.random())) for _ in range(n)), key=lambda x: -x[1])
    return [Hit(Chunk(f'c{i}', '', s, '1', [], i, i, source_id=s), sc, 'toy') for i, (s, sc) in enumerate(spec)]


# ---------------------------------------------------------------- the diversity step

@pytest.mark.parametrize('seed', range(5))
def test_greedy_cap1_reaches_the_most_sources_any_5_of_15_can(seed):
    rng = np.random.default_rng(seed)
    for _ in range(100):
        pool = _pool(rng)
        best = max_distinct_sources(pool, 5)                  # brute force over all C(15, 5) subsets
        for kt in (0, 1):
            out = source_diverse_rerank(pool, 5, cap=1, keep_top=kt)
            assert len(out) == 5 and distinct_sources(out) == best
            assert [h.score for h in out] == sorted((h.score for h in out), reverse=True)   # returned in relevance order
            assert len({h.chunk.id for h in out}) == 5


def test_greedy_respects_cap_keep_top_and_relevance():
    rng = np.random.default_rng(7)
    for _ in range(200):
        pool = _pool(rng)
        out = source_diverse_rerank(pool, 5, cap=2, keep_top=2)
        assert [h.chunk.id for h in out[:2]] == [h.chunk.id for h in pool[:2]]
        # the cap binds unless the pool lacks sources to fill 5 slots
        if len({hit_source(h) for h in pool}) >= 3: assert max(sum(hit_source(h) == s for h in out) for s in {hit_source(h) for h in out}) <= 2
        # within a source, the kept paragraphs are that source's best ones
        for s in {hit_source(h) for h in out}:
            mine = [h.score for h in pool if hit_source(h) == s]
            kept = sorted((h.score for h in out if hit_source(h) == s), reverse=True)
            assert kept == mine[:len(kept)]
        lam1 = source_mmr_rerank(pool, 5, lam=1.0)
        assert [h.chunk.id for h in lam1] == [h.chunk.id for h in pool[:5]]


# ---------------------------------------------------------------- the CLI on an ingested + indexed demo corpus

def _cli(*args, timeout=600):
    exe = Path(sys.executable).parent / 'scholarqa'
    r = subprocess.run([str(exe) if exe.exists() else 'scholarqa', *args], capture_output=True, text=True, timeout=timeout, cwd=ROOT)
    assert r.returncode == 0, r.stderr[-2000:]
    return r.stdout


@pytest.fixture(scope='module')
def demo_index(tmp_path_factory):
    d = tmp_path_factory.mktemp('structrag_cli')
    _cli('ingest', str(ROOT / 'data' / 'demo'), '--out', str(d / 'C'))
    _cli('index', str(d / 'C'), '--out', str(d / 'I'))
    return d


@pytest.mark.parametrize('method', ['structrag', 'vanilla'])
def test_ask_method_hits_are_the_context(demo_index, method):
    q = 'How is the spread of the top passages over independent sources measured?'
    out = json.loads(_cli('ask', str(demo_index / 'I'), q, '--method', method, '--generator', 'extractive', '-k', '5', '--json'))
    assert out['method'] == method and 1 <= len(out['hits']) <= 5
    corpus = Corpus.load(demo_index / 'C')
    paras = {(p.id, s.path, para.index): para.text for p in corpus for s, para in iter_paragraphs(p)}
    for h in out['hits']:
        assert h['source_id'] and h['paper_id'] in corpus.papers
        assert h['source_id'].split(':', 1)[-1] in {str(v) for v in corpus.papers[h['paper_id']].source_ids.values()}
        key = (h['paper_id'], h['section']['path'], h['paragraph'])
        assert key in paras, key                                   # section path + paragraph index name a real paragraph
        if method == 'structrag': assert h['text'] == paras[key]   # a StructRAG hit is that whole paragraph
        else: assert h['text'].split('\n\n')[0] in paras[key]     # a vanilla chunk starts inside it
    cited = {c['label'] for c in out['citations']}
    assert cited <= {h['label'] for h in out['hits']} and not out['invented']
    if method == 'structrag':
        assert (demo_index / 'I' / 'structrag' / 'entities.json').exists()       # the derived cache lives in the index folder
        assert len({h['source_id'] for h in out['hits']}) >= 2



def test_ask_structrag_with_the_splade_channel(demo_index):
    q = 'How is the spread of the top passages over independent sources measured?'
    out = json.loads(_cli('ask', str(demo_index / 'I'), q, '--method', 'structrag', '--sparse-weight', '1', '--generator', 'extractive', '--json'))
    assert out['sparse_weight'] == 1.0 and 1 <= len(out['hits']) <= 5
    assert any((demo_index / 'I' / 'splade').glob('*/shards.json'))           # the channel's vectors are cached in the index
    plain = json.loads(_cli('ask', str(demo_index / 'I'), q, '--method', 'structrag', '--generator', 'extractive', '--json'))
    assert plain['sparse_weight'] == 0.0
    for bad in (['--method', 'vanilla', '--sparse-weight', '1'], ['--method', 'structrag', '--sparse-weight', '-1']):
        exe = Path(sys.executable).parent / 'scholarqa'
        r = subprocess.run([str(exe) if exe.exists() else 'scholarqa', 'ask', str(demo_index / 'I'), q, *bad, '--generator', 'extractive'],
                           capture_output=True, text=True, timeout=600, cwd=ROOT)
        assert r.returncode == 2 and '--sparse-weight' in r.stderr

# ---------------------------------------------------------------- acceptance on the unArXive held-out questions

@pytest.fixture(scope='module')
def ux_store(unarxive_index):
    store, ux = unarxive_index                                      # tests/conftest.py: built once per session
    pipelines_for_store(store, papers=ux.papers)
    return store, ux


@pytest.fixture(scope='module')
def acceptance_results(ux_store):
    "StructRAG, VanillaRAG and the plain hybrid over the held-out split of the first question file and the whole unseen second file."
    store, ux = ux_store
    res = {}
    for name, path, split, n in (('heldout', QUESTIONS, 'heldout', (83, 12)), ('fresh', FRESH, None, (40, 24))):
        qs = load_eval_questions(path, split=split)
        qrels = question_qrels(qs, ux.papers)
        r = {'single': [], 'two': [], 'single_hybrid': [], 'two_hybrid': [], 'src_structrag': [], 'src_vanilla': []}
        for q in qs:
            s = method_hits(store, q['question'], k=5, method='structrag')
            v = method_hits(store, q['question'], k=5, method='vanilla')
            h = store.retriever('hybrid').retrieve(q['question'], 5)
            assert len(s) == 5 and len(v) == 5 and all(x.retriever == 'structrag' for x in s)
            kind = 'single' if q['kind'] == 'single' else 'two'
            r[kind].append(qrels[q['id']] <= {x.chunk.id for x in s})
            r[f'{kind}_hybrid'].append(qrels[q['id']] <= {x.chunk.id for x in h})
            r['src_structrag'].append(distinct_sources(s)); r['src_vanilla'].append(distinct_sources(v))
        assert (len(r['single']), len(r['two'])) == n
        res[name] = {k: float(np.mean(x)) for k, x in r.items()} | {'n_two': len(r['two']), 'n_single': len(r['single'])}
    return res


def test_heldout_single_paragraph_gold_in_5(acceptance_results):
    assert acceptance_results['heldout']['single'] >= 0.80, acceptance_results    # measured 0.867 (hybrid alone: 0.855)


def test_unseen_single_paragraph_no_worse_than_its_own_relevance(acceptance_results):
    # StructRAG re-ranks the hybrid's relevance for diversity; on questions no setting was chosen on, the diversity must not
    # cost relevance: it may not find the gold paragraph for more than one question fewer than the hybrid alone. (A floor
    # typed from the number measured when the test was written would test the measurement, not the method.)
    r = acceptance_results['fresh']
    n = r['n_single'] if 'n_single' in r else None
    slack = 1 / n if n else 0.03
    assert r['single'] >= r['single_hybrid'] - slack - 1e-9, acceptance_results


@pytest.mark.parametrize('which', ['heldout', 'fresh'])
def test_structrag_spans_more_papers_than_vanilla(acceptance_results, which):
    r = acceptance_results[which]
    assert r['src_structrag'] > r['src_vanilla'], acceptance_results    # measured 2.89 vs 1.98 (held-out), 2.05 vs 1.57 (unseen)


def test_two_paper_both_found_beats_hybrid(acceptance_results):
    # both gold paragraphs in five slots is rarely reached by this pipeline (held-out 1 of 12, unseen 4 of 24):
    # outputs/04_structrag/two_paper_diagnosis.md shows the gold papers are found but the gold paragraphs rank too low inside
    # them for five slots to hold both. What holds, and is asserted over both files: diversity finds both more often than
    # the plain hybrid (measured 5 of 36 vs 2 of 36).
    def both(key): return sum(acceptance_results[w][key] * acceptance_results[w]['n_two'] for w in ('heldout', 'fresh'))
    assert both('two') > both('two_hybrid'), acceptance_results
