"""CG-RAG (07_cgrag): the method `lesegr` — its training hook on an index and its answers — through `train_method`/
`open_method` and through `scholarqa train` / `scholarqa ask`, the retriever it trains through `scholarqa search`, and graphs
with the awkward shapes: a chunk with no neighbours, one-chunk papers."""
import json, subprocess, sys
from pathlib import Path

import numpy as np
import pytest

pytest.importorskip('torch_geometric')
from scholarqa.generate.base import ScriptedBackend
from scholarqa.protocol import MethodOptionError, ask, open_method, train_method
from scholarqa.kg.chunk_graph import build_chunk_graph
from scholarqa.methods.cgrag import candidate_subgraph, fusion_scores, new_lesegr, query_delta, with_self_loops
from scholarqa.retrieval.base import Chunk

SQ = str(Path(sys.executable).parent / 'scholarqa')


def run(*args):
    r = subprocess.run([SQ, *map(str, args)], capture_output=True, text=True)
    return r.returncode, r.stdout, r.stderr


def _generic_cli() -> bool:
    "Whether the command line has the generic `scholarqa train NAME FOLDER` (10_cli)."
    from scholarqa.cli import build_parser
    return 'train' in build_parser()._subparsers._group_actions[0].choices

needs_cli = pytest.mark.skipif(not _generic_cli(), reason='waits for the generic `scholarqa train` / `ask --method` of 10_cli')


@pytest.fixture(scope='module')
def index(tmp_path_factory, demo_cli_copy):
    return demo_cli_copy(tmp_path_factory.mktemp('cgrag'))[0]       # `scholarqa ingest` + `index` on the demo (tests/conftest.py)


def _check_record(rec: dict, index_dir: Path, out: Path) -> None:
    from scholarqa.retrieval.store import IndexStore
    chunks = IndexStore.load(index_dir).chunks
    assert rec['graph']['chunks'] == len(chunks) and rec['trained_on'] > 0 and rec['out'] == str(out)
    assert rec['graph']['adjacent'] > 0 and rec['graph']['papers_known'] is True     # the index remembers its corpus
    assert rec['epochs'] == 1 and rec['skipped_lines'] == [] and (out / 'lesegr.json').is_file()


def _check_search(index_dir: Path) -> None:
    "`search --retriever lesegr --json` serves INDEX/lesegr."
    from scholarqa.retrieval.store import IndexStore
    chunks = {c.id: c for c in IndexStore.load(index_dir).chunks}
    code, out, err = run('search', index_dir, 'how are citation graphs used in retrieval', '--retriever', 'lesegr', '-k', 5, '--json')
    assert code == 0, err[-2000:]
    hits = json.loads(out)
    assert len(hits) == 5 and all(h['retriever'] == 'lesegr' and h['chunk_id'] in chunks for h in hits)
    assert [h['score'] for h in hits] == sorted((h['score'] for h in hits), reverse=True)
    assert all(h['paper_id'] == chunks[h['chunk_id']].paper_id for h in hits)


def _questions_file(index_dir: Path, path: Path) -> Path:
    "Four lines: two usable, one not JSON (line 2), one whose gold is not in the index (line 4)."
    from scholarqa.retrieval.store import IndexStore
    chunks = IndexStore.load(index_dir).chunks
    path.write_text('\n'.join([json.dumps({'question': 'What does the retriever fuse?', 'gold_papers': [chunks[0].paper_id]}),
                               '{not json',
                               json.dumps({'question': 'Which chunk?', 'gold_chunks': [chunks[3].id]}),
                               json.dumps({'question': 'Unknown gold', 'gold_chunks': ['no-such-chunk']})]) + '\n', encoding='utf-8')
    return path


def test_train_then_search_and_ask(index):
    "No model: a refusal naming the command; the `train` hook with pseudo-queries writes INDEX/lesegr; search and ask serve it."
    code, _, err = run('search', index / 'index', 'citation graphs', '--retriever', 'lesegr')
    assert code == 2 and 'train lesegr' in err and 'Traceback' not in err
    with pytest.raises(FileNotFoundError, match='holds no LeSeGR model'): open_method('lesegr', index / 'index')
    rec = train_method('lesegr', index / 'index', pseudo=40, epochs=1)
    _check_record(rec, index / 'index', index / 'index' / 'lesegr')
    _check_search(index / 'index')
    m = open_method('lesegr', index / 'index')
    a = ask(m, 'how are citation graphs used in retrieval', 3, ScriptedBackend(always='Graphs link chunks.'))
    assert a.method == 'lesegr' and len(a.evidence) == 3 and {e.kind for e in a.evidence} == {'passage'}
    assert [e.label for e in a.evidence] == [e.label for e in ask(m, 'how are citation graphs used in retrieval', 3,
                                                                  ScriptedBackend(always='x')).evidence]   # one ranking


def test_questions_file_with_a_bad_line_and_a_model_elsewhere(index, tmp_path, capsys):
    "A bad line is named and skipped while the good ones train; `out` / `model` put the folder anywhere; bad options are named."
    qs = _questions_file(index / 'index', tmp_path / 'q.jsonl')
    rec = train_method('lesegr', index / 'index', questions=qs, out=tmp_path / 'm', epochs=1)
    err = capsys.readouterr().err
    assert rec['questions'] == 2 and len(rec['skipped_lines']) == 2 and rec['out'] == str(tmp_path / 'm')
    assert 'line 2' in err and 'line 4' in err and 'is in the index' in err
    code, out, err = run('search', index / 'index', 'fusion of retrievers', '--retriever', 'lesegr', '--model', tmp_path / 'm', '--json')
    assert code == 0 and len(json.loads(out)) == 10, err[-2000:]
    assert len(open_method('lesegr', index / 'index', model=tmp_path / 'm').retrieve('fusion of retrievers', 4)) == 4
    code, _, err = run('search', index / 'index', 'fusion', '--retriever', 'bm25', '--model', tmp_path / 'm')
    assert code == 2 and 'takes no option model' in err
    for bad, msg in (({'questions': tmp_path / 'missing.jsonl'}, 'cannot read'), ({'epochs': 0}, '--epochs must be at least 1'),
                     ({'top_n': 'four'}, "--top-n must be a whole number, not 'four'"), ({'inter': 'all'}, '--inter must be'),
                     ({'questions': qs, 'pseudo': 5}, 'exclude each other'), ({'lr': 0.1}, 'does not take --lr')):
        with pytest.raises(MethodOptionError, match=msg): train_method('lesegr', index / 'index', **bad)
    with pytest.raises(MethodOptionError, match='does not take --sparse-weight'): open_method('lesegr', index / 'index', sparse_weight=1.0)


@needs_cli
def test_cli_train_ask_and_refusals(demo_cli_copy, tmp_path):
    "`scholarqa train lesegr INDEX` and `scholarqa ask INDEX … --method lesegr`, on a private copy of the demo index."
    d, _ = demo_cli_copy(tmp_path / 'copy')
    code, out, err = run('train', 'lesegr', d / 'index', '-o', 'pseudo=40', '-o', 'epochs=1', '--json')
    assert code == 0, err[-2000:]
    _check_record(json.loads(out), d / 'index', d / 'index' / 'lesegr')
    _check_search(d / 'index')
    code, out, err = run('ask', d / 'index', 'how are citation graphs used in retrieval', '--method', 'lesegr', '-k', 3, '--json')
    assert code == 0, err[-2000:]
    j = json.loads(out)
    assert j['method'] == 'lesegr' and len(j['evidence']) == 3 and {e['kind'] for e in j['evidence']} == {'passage'}
    qs = _questions_file(d / 'index', tmp_path / 'q.jsonl')
    code, out, err = run('train', 'lesegr', d / 'index', '-o', f'questions={qs}', '-o', f'out={tmp_path / "m"}', '-o', 'epochs=1', '--json')
    assert code in (0, 1), err[-2000:]                                  # trained; the skipped lines are named
    rec = json.loads(out)
    assert rec['questions'] == 2 and len(rec['skipped_lines']) == 2 and 'line 2' in err and 'line 4' in err
    code, _, err = run('train', 'lesegr', d / 'index', '-o', f'questions={tmp_path / "missing.jsonl"}')
    assert code == 2 and 'cannot read' in err and 'Traceback' not in err
    code, _, err = run('train', 'lesegr', d / 'index', '-o', 'epochs=0')
    assert code == 2 and '--epochs must be at least 1' in err


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
