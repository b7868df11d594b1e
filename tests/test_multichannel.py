"""The multi-channel retriever (06_multichannel): a leak-free split on the real CiteSeer graph, counted bad input, and the
method `multichannel` — its training hook's record and refusals, its `Answer` of ranked papers — on a model trained in
seconds on the demo corpus, through `train_method`/`open_method` and through `scholarqa train` / `scholarqa ask`."""
import json, os, subprocess, sys
from pathlib import Path

import pytest

from scholarqa.datasets import Dataset, DatasetUnavailable, find_data_dir, load_dataset
from scholarqa.doc import Paper, Section, Paragraph, paper_id
from scholarqa.protocol import MethodOptionError, ask, open_method, train_method
from scholarqa.methods.multichannel import CHANNELS, NotAModelFolder
from scholarqa.aqa.task import aqa_from_citation_graph, check_leak_free, load_aqa_task, save_split, write_oag_aqa_fixture

DATA = find_data_dir()
needs_citeseer = pytest.mark.skipif(DATA is None or not (DATA / 'citeseer_tag').exists(),
                                    reason='needs ../shared/data/citeseer_tag (set SCHOLARQA_DATA to the shared data folder)')
SQ = str(Path(sys.executable).parent / 'scholarqa')
TINY = dict(ge_epochs=2, max_seq_length=32)          # a model in seconds
METRICS = {'map', 'map@20', 'recall@20', 'ndcg@20', 'n_queries'}


def _generic_cli() -> bool:
    "Whether the command line has the generic `scholarqa train NAME FOLDER` (10_cli)."
    from scholarqa.cli import build_parser
    return 'train' in build_parser()._subparsers._group_actions[0].choices

needs_cli = pytest.mark.skipif(not _generic_cli(), reason='waits for the generic `scholarqa train` / `ask --method` of 10_cli')


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


def test_oag_aqa_folder_through_the_loader(tmp_path):
    task = load_aqa_task(str(write_oag_aqa_fixture(tmp_path / 'oag')), seed=0)
    assert task.name == 'oag_aqa' and task.stats['bad_lines'] == 2 and task.stats['unknown_pids'] == 1
    assert sum(len(v) for v in task.queries.values()) == 3


# ---- the method, from Python: what the command line calls ----

@pytest.fixture(scope='module')
def demo_model(tmp_path_factory):
    "(model folder, training record) of `train_method('multichannel', …)` on the demo dataset."
    out = tmp_path_factory.mktemp('mc') / 'model'
    return out, train_method('multichannel', out, dataset='demo', progress=False, **TINY)


def _check_record(rec: dict, out) -> None:
    assert rec['dataset'] == 'demo' and rec['kind'] == 'scholarqa.multichannel' and rec['out'] == str(out)
    assert 'curve' not in rec['ge'] and rec['ge']['epochs'] == 2 and rec['config']['max_seq_length'] == 32
    res = rec['test']                                                    # what `multichannel eval --split test` printed
    assert list(res) == list(CHANNELS) == ['bm25', 'minilm', 'minilm-ft', 'gcn', 'rrf(ne+ge)', 'rrf(all)']
    assert all(set(v) == METRICS and 0 <= v['map@20'] <= v['recall@20'] + 1e-9 <= 1 + 1e-9 for v in res.values())
    assert {v['n_queries'] for v in res.values()} == {rec['queries']['test']} and rec['queries']['test'] > 0


def test_train_record_carries_every_channels_test_scores(demo_model):
    out, rec = demo_model
    _check_record(rec, out)
    assert json.loads(json.dumps(rec)) == rec                            # the record is JSON as it stands
    assert json.loads((out / 'multichannel.json').read_text())['ge']['curve']   # the GE curve stays in the folder


def _check_answer(j: dict, k: int) -> None:
    "`Answer.to_json()` of the method: ranked papers as evidence, their ids as values, no backend."
    assert (j['status'], j['method'], j['backend']) == ('ok', 'multichannel', 'none')
    ev = j['evidence']
    assert len(ev) == k and all(e['kind'] == 'paper' for e in ev)
    assert j['values'] == [e['label'] for e in ev] == [e['source']['paper_id'] for e in ev]
    assert all(set(e['source']['ranks']) == set(CHANNELS) for e in ev)
    assert [e['score'] for e in ev] == sorted((e['score'] for e in ev), reverse=True)
    assert all(e['source']['ranks']['rrf(ne+ge)'] == i for i, e in enumerate(ev, 1))   # the list is the fused ranking
    assert all(f"[{e['label']}]" in j['answer'] for e in ev)               # the numbered list names every paper


def test_ask_returns_the_ranked_papers(demo_model):
    out, _ = demo_model
    a = ask(open_method('multichannel', out), 'Dense retrieval of scientific passages dual encoders', 4)
    _check_answer(json.loads(json.dumps(a.to_json())), 4)
    assert a.question.startswith('Dense retrieval') and set(a.timings) >= {'retrieve_s', 'answer_s'}


def test_bad_options_and_foreign_folders_are_refused(demo_model, tmp_path):
    out, _ = demo_model
    mine = tmp_path / 'notes'; mine.mkdir(); (mine / 'keep.txt').write_text('mine')
    with pytest.raises(NotAModelFolder, match='not a multichannel model folder'):
        train_method('multichannel', mine, dataset='demo', ge_epochs=1, max_seq_length=32, progress=False)
    assert (mine / 'keep.txt').read_text() == 'mine'
    with pytest.raises(NotAModelFolder, match='is not a multichannel model folder'): open_method('multichannel', mine)
    with pytest.raises(DatasetUnavailable, match='neither a dataset name'):
        train_method('multichannel', tmp_path / 'm', dataset=str(tmp_path / 'nothing-here'), progress=False)
    with pytest.raises(MethodOptionError, match="trained on 'demo', not 'cora'"): open_method('multichannel', out, dataset='cora')
    for bad, msg in (({}, 'needs a dataset'), ({'epochs': 0}, '--epochs and --ge-epochs must be at least 1'),
                     ({'ge_epochs': 'many'}, "--ge-epochs must be a whole number, not 'many'"),
                     ({'no_holdout': 'yes'}, '--no-holdout must be true or false'), ({'out': 'x'}, 'does not take --out')):
        with pytest.raises(MethodOptionError, match=msg):
            train_method('multichannel', tmp_path / 'm', **({'dataset': 'demo'} if bad else {}), **bad)
    assert not (tmp_path / 'm').exists()                                   # refused before anything was written


def test_serving_an_index_as_a_registered_retriever(tmp_path, demo_cli_copy):
    "ingest → index → train with nothing held out into INDEX/multichannel → `search --retriever multichannel`."
    demo_cli_copy(tmp_path)                                          # `scholarqa ingest` + `index` on the demo (tests/conftest.py)
    r = subprocess.run([SQ, 'search', str(tmp_path / 'index'), 'dense retrieval', '--retriever', 'multichannel'], capture_output=True, text=True)
    assert r.returncode == 2 and 'has no multichannel model' in r.stderr and 'train multichannel' in r.stderr   # a clear refusal
    if _generic_cli():
        code, out, err = _run('train', 'multichannel', tmp_path / 'index' / 'multichannel', '-o', f'dataset={tmp_path / "corpus"}',
                              '-o', 'no_holdout=true', *_opts(TINY), '--json')
        assert code == 0, err
        rec = json.loads(out)
    else: rec = train_method('multichannel', tmp_path / 'index' / 'multichannel', dataset=str(tmp_path / 'corpus'), no_holdout=True,
                             progress=False, **TINY)
    assert rec['test'] is None and rec['queries']['test'] == 0             # nothing held out: nothing to measure
    r = subprocess.run([SQ, 'search', str(tmp_path / 'index'), 'dense retrieval of scientific passages', '--retriever', 'multichannel',
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
    assert type(open_method('multichannel', tmp_path / 'index')).__name__ == 'MultiChannelMethod'   # the index's model, as a method


# ---- the same through the command line ----

def _run(*args):
    r = subprocess.run([SQ, *map(str, args)], capture_output=True, text=True,
                       env={**os.environ, 'HF_HUB_OFFLINE': '1', 'TRANSFORMERS_OFFLINE': '1'})
    return r.returncode, r.stdout, r.stderr


def _opts(d: dict) -> list:
    return [x for k, v in d.items() for x in ('-o', f'{k}={json.dumps(v)}')]


@needs_cli
def test_cli_train_then_ask_json(tmp_path):
    out = tmp_path / 'model'
    code, stdout, err = _run('train', 'multichannel', out, '-o', 'dataset=demo', *_opts(TINY), '--json')
    assert code == 0, err
    _check_record(json.loads(stdout), out)
    assert 'NE fine-tuning' in err                                         # progress is shown (on stderr)
    code, stdout, err = _run('ask', out, 'Dense retrieval of scientific passages dual encoders', '--method', 'multichannel', '-k', 4, '--json')
    assert code == 0, err
    _check_answer(json.loads(stdout), 4)


@needs_cli
def test_cli_refusals_name_what_is_wrong(demo_model, tmp_path):
    model, _ = demo_model
    mine = tmp_path / 'notes'; mine.mkdir(); (mine / 'keep.txt').write_text('mine')
    code, _, err = _run('train', 'multichannel', mine, '-o', 'dataset=demo', *_opts({**TINY, 'ge_epochs': 1}))
    assert code == 2 and 'not a multichannel model folder' in err and (mine / 'keep.txt').read_text() == 'mine'
    code, _, err = _run('ask', mine, 'graph retrieval', '--method', 'multichannel')
    assert code == 2 and 'is not a multichannel model folder' in err
    code, _, err = _run('train', 'multichannel', tmp_path / 'm', '-o', f'dataset={tmp_path / "nothing-here"}')
    assert code == 2 and 'neither a dataset name' in err
    code, _, err = _run('train', 'multichannel', tmp_path / 'm', '-o', 'dataset=demo', '-o', 'epochs=0')
    assert code == 2 and '--epochs and --ge-epochs must be at least 1' in err
    code, _, err = _run('ask', model, 'graph retrieval', '--method', 'multichannel', '-o', 'dataset=cora')
    assert code == 2 and "trained on 'demo', not 'cora'" in err
    assert 'Traceback' not in err
