"""The multi-channel retriever (06_multichannel): a leak-free split on the real CiteSeer graph, counted bad input, and the
`scholarqa multichannel` command's JSON on a model trained in seconds on the demo corpus."""
import json, os, subprocess, sys
from pathlib import Path

import pytest

from scholarqa.datasets import Dataset, find_data_dir, load_dataset
from scholarqa.doc import Paper, Section, Paragraph, paper_id
from scholarqa.methods.multichannel import (CHANNELS, aqa_from_citation_graph, check_leak_free, load_aqa_task, save_split,
                                            write_oag_aqa_fixture)

DATA = find_data_dir()
needs_citeseer = pytest.mark.skipif(DATA is None or not (DATA / 'citeseer_tag').exists(),
                                    reason='needs ../shared/data/citeseer_tag (set SCHOLARQA_DATA to the shared data folder)')
CLI = [str(Path(sys.executable).parent / 'scholarqa'), 'multichannel']


@needs_citeseer
def test_citeseer_split_is_leak_free_and_reproducible(tmp_path):
    ds = load_dataset('citeseer', DATA)
    task = aqa_from_citation_graph(ds, seed=0)
    check_leak_free(task)
    held = {q.id for s in ('dev', 'test') for q in task.queries[s]}
    cited_by = {}
    for a, b in ds.edges: cited_by.setdefault(a, set()).add(b)
    for q in task.queries['test']:
        assert set(q.pids) <= cited_by[q.id] & set(task.papers)           # answers: what it cites, among the candidates
    assert not held & {x for e in task.edges for x in e}                  # no held-out paper in the graph, either end
    assert len(task.edges) < len(ds.edges)                                # their edges really were removed
    assert len(task.queries['test']) > 300                                # most test queries keep a cited paper with text
    split = json.loads(save_split(task, tmp_path / 'split.json').read_text())
    assert split['candidates'] == list(task.papers)
    assert [q['id'] for q in split['queries']['test']] == [q.id for q in task.queries['test']]
    again, other = aqa_from_citation_graph(ds, seed=0), aqa_from_citation_graph(ds, seed=1)
    assert [q.id for q in again.queries['test']] == [q.id for q in task.queries['test']]
    assert [q.id for q in other.queries['test']] != [q.id for q in task.queries['test']]


def _paper(key: str, text: str) -> Paper:
    p = Paper(title=key.upper() if text else '', sections=[Section('Abstract', None, 1, [Paragraph(text, 0)])] if text else [],
              source_ids={'key': key})
    p.id = paper_id(p)
    return p


def test_bad_graph_input_is_counted_not_fatal():
    papers = [_paper(k, f'a paper about topic {k} with enough words to count') for k in 'abcdef'] + [_paper('z', '')]
    ids = {p.source_ids['key']: p.id for p in papers}
    edges = [(ids['a'], ids['b']), (ids['a'], ids['b']), (ids['c'], ids['c']), (ids['d'], ids['z']), (ids['d'], 'unknown'),
             (ids['e'], ids['f']), (ids['f'], ids['a'])]
    task = aqa_from_citation_graph(Dataset('toy', papers, edges=edges), seed=0, fractions=(1.0, 0.0, 0.0))
    assert task.stats['duplicate_edges'] == 1 and task.stats['self_citations'] == 1
    assert task.stats['edges_to_papers_without_text'] == 2 and task.stats['papers_without_text'] == 1
    assert sorted(len(q.pids) for q in task.queries['train']) == [1, 1, 1]
    with pytest.raises(ValueError, match='no citation edge between papers with text'):
        aqa_from_citation_graph(Dataset('empty', papers[:3], edges=[]))


def _run(*args, cwd=None):
    r = subprocess.run([*CLI, *map(str, args)], capture_output=True, text=True, cwd=cwd,
                       env={**os.environ, 'HF_HUB_OFFLINE': '1', 'TRANSFORMERS_OFFLINE': '1'})
    return r.returncode, r.stdout, r.stderr


@pytest.fixture(scope='module')
def demo_model(tmp_path_factory):
    out = tmp_path_factory.mktemp('mc') / 'model'
    code, stdout, err = _run('train', '--dataset', 'demo', '--out', out, '--ge-epochs', 2, '--max-seq-length', 32, '--json')
    assert code == 0, err
    rec = json.loads(stdout)
    assert rec['dataset'] == 'demo' and rec['kind'] == 'scholarqa.multichannel'
    assert 'NE fine-tuning' in err                                         # progress is shown (on stderr)
    return out


def test_cli_eval_json_contract(demo_model):
    code, out, err = _run('eval', demo_model, '--split', 'test', '--json')
    assert code == 0, err
    res = json.loads(out)
    assert list(res) == list(CHANNELS) == ['bm25', 'minilm', 'minilm-ft', 'gcn', 'rrf(ne+ge)', 'rrf(all)']
    assert all(set(v) == {'map', 'map@20', 'recall@20'} and 0 <= v['map@20'] <= v['recall@20'] + 1e-9 <= 1 + 1e-9 for v in res.values())
    code, _, err = _run('eval', demo_model, '--dataset', 'cora')
    assert code == 2 and "trained on 'demo', not 'cora'" in err


def test_cli_query_json_contract(demo_model):
    code, out, err = _run('query', demo_model, 'Dense retrieval of scientific passages', '--body', 'dual encoders', '-k', 4, '--json')
    assert code == 0, err
    rows = json.loads(out)
    assert len(rows) == 4
    assert all(set(r) == {'paper_id', 'title', 'score', 'ranks'} and set(r['ranks']) == set(CHANNELS) for r in rows)
    assert [r['score'] for r in rows] == sorted((r['score'] for r in rows), reverse=True)
    assert all(r['ranks']['rrf(ne+ge)'] == i for i, r in enumerate(rows, 1))   # the list is the fused ranking


def test_cli_refuses_foreign_folders(tmp_path):
    mine = tmp_path / 'notes'; mine.mkdir(); (mine / 'keep.txt').write_text('mine')
    code, _, err = _run('train', '--dataset', 'demo', '--out', mine, '--ge-epochs', 1, '--max-seq-length', 32)
    assert code == 2 and 'not a multichannel model folder' in err and (mine / 'keep.txt').read_text() == 'mine'
    code, _, err = _run('eval', mine)
    assert code == 2 and 'is not a multichannel model folder' in err
    code, _, err = _run('train', '--dataset', tmp_path / 'nothing-here', '--out', tmp_path / 'm')
    assert code == 2 and 'neither a dataset name' in err


def test_oag_aqa_folder_through_the_loader(tmp_path):
    task = load_aqa_task(str(write_oag_aqa_fixture(tmp_path / 'oag')), seed=0)
    assert task.name == 'oag_aqa' and task.stats['bad_lines'] == 2 and task.stats['unknown_pids'] == 1
    assert sum(len(v) for v in task.queries.values()) == 3


def test_serving_an_index_as_a_registered_retriever(tmp_path, demo_cli_copy):
    "ingest → index → train with nothing held out into INDEX/multichannel → `search --retriever multichannel`."
    sq = str(Path(sys.executable).parent / 'scholarqa')
    demo_cli_copy(tmp_path)                                          # `scholarqa ingest` + `index` on the demo (tests/conftest.py)
    r = subprocess.run([sq, 'search', str(tmp_path / 'index'), 'dense retrieval', '--retriever', 'multichannel'], capture_output=True, text=True)
    assert r.returncode == 2 and 'has no multichannel model' in r.stderr    # no model yet: a clear refusal, not a traceback
    code, _, err = _run('train', '--dataset', tmp_path / 'corpus', '--out', tmp_path / 'index' / 'multichannel', '--no-holdout',
                        '--ge-epochs', 2, '--max-seq-length', 32)
    assert code == 0, err
    code, _, err = _run('eval', tmp_path / 'index' / 'multichannel')
    assert code == 2 and 'no test questions' in err
    r = subprocess.run([sq, 'search', str(tmp_path / 'index'), 'dense retrieval of scientific passages', '--retriever', 'multichannel',
                        '-k', '5', '--json'], capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    hits = json.loads(r.stdout)
    from scholarqa.retrieval.store import IndexStore
    chunks = [{'id': c.id, 'paper_id': c.paper_id, 'paragraph_start': c.paragraph_start} for c in IndexStore.load(tmp_path / 'index').chunks]
    first = {}
    for c in chunks: first.setdefault(c['paper_id'], min((x for x in chunks if x['paper_id'] == c['paper_id']),
                                                          key=lambda x: (x['paragraph_start'], x['id']))['id'])
    assert len(hits) == 5 and len({h['paper_id'] for h in hits}) == 5         # five different papers
    assert all(h['chunk_id'] == first[h['paper_id']] and h['retriever'] == 'multichannel' for h in hits)
