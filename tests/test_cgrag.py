"CG-RAG (07_cgrag) through the command line and on graphs with the awkward shapes: a chunk with no neighbours, one-chunk papers."
import json, subprocess, sys
from pathlib import Path

import numpy as np
import pytest

pytest.importorskip('torch_geometric')
from scholarqa.methods.cgrag import (build_chunk_graph, candidate_subgraph, fusion_scores, new_lesegr, query_delta,
                                     with_self_loops)
from scholarqa.retrieval.base import Chunk

SQ = str(Path(sys.executable).parent / 'scholarqa')


def run(*args):
    r = subprocess.run([SQ, *map(str, args)], capture_output=True, text=True)
    return r.returncode, r.stdout, r.stderr


@pytest.fixture(scope='module')
def index(tmp_path_factory, demo_cli_copy):
    return demo_cli_copy(tmp_path_factory.mktemp('cgrag'))[0]       # `scholarqa ingest` + `index` on the demo (tests/conftest.py)


def test_train_then_search_json(index):
    "No model: a refusal naming the command; `cgrag train --pseudo` writes INDEX/lesegr; `search --retriever lesegr --json` serves it."
    code, _, err = run('search', index / 'index', 'citation graphs', '--retriever', 'lesegr')
    assert code == 2 and 'cgrag train' in err and 'Traceback' not in err
    code, out, err = run('cgrag', 'train', index / 'index', '--pseudo', 40, '--epochs', 1, '--json')
    assert code == 0, err[-2000:]
    rec = json.loads(out)
    from scholarqa.retrieval.store import IndexStore
    chunks = {c.id: c for c in IndexStore.load(index / 'index').chunks}
    assert rec['graph']['chunks'] == len(chunks) and rec['trained_on'] > 0 and rec['out'] == str(index / 'index' / 'lesegr')
    assert rec['graph']['adjacent'] > 0 and rec['graph']['papers_known'] is True     # the index remembers its corpus
    code, out, err = run('search', index / 'index', 'how are citation graphs used in retrieval', '--retriever', 'lesegr', '-k', 5, '--json')
    assert code == 0, err[-2000:]
    hits = json.loads(out)
    assert len(hits) == 5 and all(h['retriever'] == 'lesegr' and h['chunk_id'] in chunks for h in hits)
    assert [h['score'] for h in hits] == sorted((h['score'] for h in hits), reverse=True)
    assert all(h['paper_id'] == chunks[h['chunk_id']].paper_id for h in hits)


def test_questions_file_with_a_bad_line_and_a_model_elsewhere(index, tmp_path):
    "A bad line is named and skipped while the good ones train (exit 1); --out / --model put the folder anywhere."
    from scholarqa.retrieval.store import IndexStore
    chunks = IndexStore.load(index / 'index').chunks
    qs = tmp_path / 'q.jsonl'
    qs.write_text('\n'.join([json.dumps({'question': 'What does the retriever fuse?', 'gold_papers': [chunks[0].paper_id]}),
                             '{not json',
                             json.dumps({'question': 'Which chunk?', 'gold_chunks': [chunks[3].id]}),
                             json.dumps({'question': 'Unknown gold', 'gold_chunks': ['no-such-chunk']})]) + '\n', encoding='utf-8')
    code, out, err = run('cgrag', 'train', index / 'index', '--questions', qs, '--out', tmp_path / 'm', '--epochs', 1, '--json')
    assert code == 1, err[-2000:]
    rec = json.loads(out)
    assert rec['questions'] == 2 and len(rec['skipped_lines']) == 2
    assert 'line 2' in err and 'line 4' in err and 'is in the index' in err
    code, out, err = run('search', index / 'index', 'fusion of retrievers', '--retriever', 'lesegr', '--model', tmp_path / 'm', '--json')
    assert code == 0 and len(json.loads(out)) == 10, err[-2000:]
    code, _, err = run('search', index / 'index', 'fusion', '--retriever', 'bm25', '--model', tmp_path / 'm')
    assert code == 2 and 'takes no option model' in err
    code, _, err = run('cgrag', 'train', index / 'index', '--questions', tmp_path / 'missing.jsonl')
    assert code == 2 and 'cannot read' in err and 'Traceback' not in err


def _chunk(pid, i, para):
    return Chunk(id=f'{pid}-{i}', text=f'text {pid} {i}', paper_id=pid, section_path='1', section_titles=['One'],
                 paragraph_start=para, paragraph_end=para)


def test_one_chunk_papers_and_a_chunk_without_neighbours():
    """Papers of one chunk have no adjacency; without inter-paper edges such a chunk has no neighbour, its subgraph is itself,
    and LeSeGR scores it by the fusion it reduces to ((1 + δ)^K · q·c): defined, not a division by zero, even with δ at its floor."""
    rng = np.random.default_rng(0)
    chunks = [_chunk('A', 0, 0), _chunk('A', 1, 1), _chunk('B', 0, 0), _chunk('C', 0, 0)]
    vecs = rng.normal(size=(4, 8)).astype(np.float32); vecs /= np.linalg.norm(vecs, axis=1, keepdims=True)
    g = build_chunk_graph([], chunks, vecs, None, inter='none')
    assert list(zip(g.src.tolist(), g.dst.tolist())) == [(0, 1)]                      # A-1 takes in A-0, the chunk before it
    assert not (np.isin(g.src, [2, 3]).any() or np.isin(g.dst, [2, 3]).any())          # B-0 and C-0 touch no edge
    nodes, s, d = candidate_subgraph(g, [3])
    assert nodes.tolist() == [3] and len(s) == len(d) == 0
    import torch
    model = new_lesegr(8, layers=2, heads=2, alpha_hidden=4, seed=0)
    q = vecs[3] + 0.1
    delta = query_delta(np.zeros(4))                                                  # no sparse overlap anywhere
    with torch.no_grad():
        sc = model.scores(torch.from_numpy(q), torch.from_numpy(vecs), torch.from_numpy(delta), with_self_loops(g.src, g.dst, 4)).numpy()
    assert np.isfinite(sc).all()
    np.testing.assert_allclose(sc[2:], fusion_scores(q, vecs, delta, 2)[2:], rtol=1e-5, atol=1e-6)
    # with proxy edges, every paper takes in its nearest papers' chunks: no chunk is left alone
    gp = build_chunk_graph([], chunks, vecs, None, inter='proxy', proxy_k=1)
    assert set(gp.dst.tolist()) == {0, 1, 2, 3}
