"""Questions across two papers (02p_two_paper): the decomposer on coordinated and non-coordinated questions, the per-paper
budget on the demo index, and `scholarqa ask -o decompose=true` returning passages from both papers and an answer citing
both."""
import json, os, subprocess, sys
from pathlib import Path

import pytest

from scholarqa.retrieval.decompose import PaperThenPassage, budget_split, decompose

ROOT = Path(__file__).parents[1]
BIN = Path(sys.executable).parent / 'scholarqa'
# a question about the demo corpus's dense dual-encoder paper (whitford2019scide) and its source-diversity paper (pryce2022diversity)
DEMO_TWO = ('How much memory does compressing stored vectors save in the dense dual encoder paper, and how is the spread of '
            'the top passages over sources measured in the source-diversity paper?')


def _run(*args):
    return subprocess.run([str(BIN), *map(str, args)], capture_output=True, text=True, env={**os.environ})


@pytest.mark.parametrize('question,parts', [
    ('Which data sets are used by the protein folding study and by the ESG rating paper?',
     ['the protein folding study', 'the ESG rating paper']),
    ('What do the graph reranker paper and the chunking paper both report about latency?',
     ['the graph reranker paper', 'the chunking paper']),
    ('How is noise handled in the lattice simulation and in the spin-wave measurements?',
     ['the lattice simulation', 'the spin-wave measurements']),
    ('How much data and compute does training the citation-graph attention reranker need?', None),
    ('Which kinds of questions lean on the keyword ranking and the dense ranking in the fusion weights?', None),
    ('What are the precision and the recall of the detector?', None),
])
def test_decomposer_on_hand_cases(question, parts):
    d = decompose(question)
    assert (d.parts if d else None) == parts
    if d:
        assert len(d.sub_questions) == len(parts) and d.ask.count('…') >= 1
        for part, sub in zip(parts, d.sub_questions):                # each sub-question names its paper and not the other one
            assert part in sub and all(o not in sub for o in parts if o != part)


def test_budget_is_shared_between_the_papers(demo_cli_copy, tmp_path):
    from scholarqa.retrieval.store import IndexStore
    demo_cli_copy(tmp_path)
    store = IndexStore.load(tmp_path / 'index')
    ptp = PaperThenPassage(store.retriever())
    for k in (2, 5, 6):
        hits = ptp.retrieve(DEMO_TWO, k)
        per = [[h for h in hits if h.chunk.paper_id == p] for p in ptp.last_papers]
        assert len(hits) == k and len(ptp.last_papers) == 2 and len(set(ptp.last_papers)) == 2
        assert [len(x) for x in per] == budget_split(k, 2)             # 1+1, 3+2, 3+3: each paper its share
        assert {hits[0].chunk.paper_id, hits[1].chunk.paper_id} == set(ptp.last_papers)   # each paper's best passage first


def test_cli_ask_decompose_cites_both_papers(demo_cli_copy, tmp_path):
    demo_cli_copy(tmp_path)
    r = _run('ask', tmp_path / 'index', DEMO_TWO, '-o', 'decompose=true', '--json', '--min-answerability', 0)
    assert r.returncode == 0, r.stderr
    res = json.loads(r.stdout)
    dec = res['plan']['decomposition']
    assert len(dec['parts']) == 2 and len(set(dec['papers'])) == 2
    assert {h['paper_id'] for h in res['hits']} == set(dec['papers'])
    assert {c['paper_id'] for c in res['citations']} == set(dec['papers']), res['citations']   # the answer cites both papers
    assert all(part in res['answer'] for part in dec['parts'])
    r = _run('ask', tmp_path / 'index', 'How much memory does compressing the stored passage vectors save?', '-o', 'decompose=true',
             '--json', '--min-answerability', 0)
    assert r.returncode == 0 and json.loads(r.stdout)['plan'] is None      # one paper: passed through
    r = _run('ask', tmp_path / 'index', DEMO_TWO, '-o', 'decompose=false', '--json', '--min-answerability', 0)
    assert r.returncode == 0 and json.loads(r.stdout)['plan'] is None      # switched off
    r = _run('ask', tmp_path / 'index', DEMO_TWO, '-o', 'decompose="yes"', '--json')
    assert r.returncode == 2 and 'decompose is true, false or an object' in r.stderr

