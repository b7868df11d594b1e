"""Integration tests of 04_structrag: diversity optimality and `scholarqa ask --method structrag` on an indexed demo corpus.
How StructRAG ranks on the unArXive questions (held-out and unseen) is a measurement, not a test: 04b_structrag_experiment's
full run reports it (outputs/04_structrag/retrieval.md, unseen_questions.md)."""
import json, subprocess, sys
from pathlib import Path

import numpy as np
import pytest
from scholarqa.ingest import Corpus
from scholarqa.doc import iter_paragraphs
from scholarqa.retrieval.base import Chunk, Hit
from scholarqa.methods.structrag import source_diverse_rerank, source_mmr_rerank, max_distinct_sources, distinct_sources, hit_source

ROOT = Path(__file__).resolve().parents[1]


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
def demo_index(tmp_path_factory, demo_cli_copy):
    return demo_cli_copy(tmp_path_factory.mktemp('structrag_cli'), corpus='C', index='I')[0]   # `scholarqa ingest` + `index`


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
    out = json.loads(_cli('ask', str(demo_index / 'I'), q, '--method', 'structrag', '-o', 'sparse_weight=1', '--generator', 'extractive', '--json'))
    assert out['options'] == {'sparse_weight': 1} and 1 <= len(out['hits']) <= 5
    assert any((demo_index / 'I' / 'splade').glob('*/shards.json'))           # the channel's vectors are cached in the index
    plain = json.loads(_cli('ask', str(demo_index / 'I'), q, '--method', 'structrag', '--generator', 'extractive', '--json'))
    assert plain['options'] == {}                                               # the method's default: no sparse channel
    for bad in (['--method', 'vanilla', '-o', 'sparse_weight=1'], ['--method', 'structrag', '-o', 'sparse_weight=-1']):
        exe = Path(sys.executable).parent / 'scholarqa'
        r = subprocess.run([str(exe) if exe.exists() else 'scholarqa', 'ask', str(demo_index / 'I'), q, *bad, '--generator', 'extractive'],
                           capture_output=True, text=True, timeout=600, cwd=ROOT)
        assert r.returncode == 2 and '--sparse-weight' in r.stderr
