"""The reranker (02j_rerank): the training data never holds a protected question (checked on the real PubMedQA, QASPER and
NarrativeQA files), and `scholarqa rerank train`, `search --rerank` and `ask --rerank` work end to end on the demo corpus (with
--force: a cross-encoder's record carries no dev gain)."""
import json, os, subprocess, sys
from pathlib import Path

import pytest

from scholarqa.datasets import find_data_dir, load_dataset, pubmedqa_split, DatasetUnavailable
from scholarqa.doc import normalise_text
from scholarqa.retrieval.rerank import RERANK_HEAD_LR, RERANK_LR
from scholarqa.retrieval.rerank_data import narrativeqa_items, protected_questions, pubmedqa_items, qasper_items, select_training

DATA = find_data_dir()
needs = lambda *names: pytest.mark.skipif(DATA is None or not all((DATA / n).exists() for n in names),
                                          reason=f'needs {", ".join(names)} in the shared data folder (set SCHOLARQA_DATA)')
BIN = Path(sys.executable).parent / 'scholarqa'


@needs('pubmedqa', 'qasper', 'narrativeqa')
def test_training_items_exclude_every_protected_question():
    pq, pdocs = protected_questions(DATA)
    pqal = load_dataset('pubmedqa', DATA)
    parts = {q.metadata['pmid']: pubmedqa_split(q) for q in pqal.questions}
    assert {'train', 'dev', 'test'} == set(parts.values())
    items = {'pubmedqa': pubmedqa_items(pqal)[0], 'qasper': qasper_items(load_dataset('qasper', DATA))[0],
             'narrativeqa': narrativeqa_items(load_dataset('narrativeqa', DATA))[0]}
    assert all(parts[it['doc']] == 'train' for it in items['pubmedqa'])           # the reader already keeps the train part only
    assert 50 < len(items['pubmedqa']) < 150 and items['qasper'] and len(items['narrativeqa']) > 300
    # a test-part question smuggled into the items is dropped by select_training, and counted
    test_q = next(q for q in pqal.questions if parts[q.metadata['pmid']] == 'test')
    items['pubmedqa'].append({'qid': 'smuggled', 'query': test_q.question, 'positives': [], 'paper_id': 'x', 'doc': 'x'})
    kept, card = select_training(items, pq, pdocs)
    assert card['pubmedqa']['dropped_protected_question'] == 1
    norm = lambda t: normalise_text(t).lower()
    for src, its in kept.items():
        assert not {norm(it['query']) for it in its} & {norm(q) for q in pq}, src
        assert not {str(it['doc']) for it in its} & pdocs, src
    # every unArXive question (dev ones choose settings) is protected
    ev = [json.loads(l)['question'] for l in (Path(__file__).parents[1] / 'data/eval/unarxive_questions.jsonl').read_text().splitlines()]
    assert {norm(q) for q in ev} <= {norm(q) for q in pq}


def _run(*args, env=None):
    return subprocess.run([str(BIN), *map(str, args)], capture_output=True, text=True, env={**os.environ, **(env or {})})


def test_cli_rerank_train_search_ask(tmp_path, demo_cli_copy):
    cache = tmp_path / 'cache'; cache.mkdir()
    env = {'SCHOLARQA_CACHE': str(cache)}
    demo_cli_copy(tmp_path)                                          # `scholarqa ingest` + `index` on the demo (tests/conftest.py)
    q = 'How are citation graphs used for retrieval?'
    # nothing trained yet, and the package ships no model for a BM25 first stage: a clear error
    r = _run('search', tmp_path / 'index', q, '--retriever', 'bm25', '--rerank', env=env)
    assert r.returncode == 2 and 'scholarqa rerank train' in r.stderr
    empty = tmp_path / 'no_data'; empty.mkdir()
    r = _run('rerank', 'train', '--corpus', tmp_path / 'corpus', '--data-dir', empty, '--pseudo', 24, '--max-length', 64, '--json', env=env)
    assert r.returncode == 0, r.stderr
    out = json.loads(r.stdout)
    assert out['record']['examples'] > 0 and set(out['data_card']['sources']) == {'pseudo_queries'} and len(out['data_card']['missing']) == 4
    # the recipe's rates reach the model unless a flag overrides them; the window is the flag's
    assert (out['record']['lr'], out['record']['head_lr'], out['record']['max_length']) == (RERANK_LR, RERANK_HEAD_LR, 64)
    r = _run('rerank', 'train', '--corpus', tmp_path / 'corpus', '--data-dir', empty, '--lr', 0, '--out', tmp_path / 'never', env=env)
    assert r.returncode == 2 and '--lr and --head-lr must be above 0' in r.stderr and not (tmp_path / 'never').exists()
    r = _run('rerank', 'train', '--corpus', tmp_path / 'corpus', '--head-lr', 'fast', '--out', tmp_path / 'never', env=env)
    assert r.returncode == 2 and "expected a learning rate or `same`, not 'fast'" in r.stderr and not (tmp_path / 'never').exists()
    first = json.loads(_run('search', tmp_path / 'index', q, '-k', 30, '--json').stdout)
    # `rerank train` trains, it does not measure: its record carries no dev gain, so --rerank refuses it unless --force
    r = _run('search', tmp_path / 'index', q, '-k', 5, '--rerank', env=env)
    assert r.returncode == 2 and 'carries no dev gain' in r.stderr and '--force' in r.stderr, r.stderr
    r = _run('search', tmp_path / 'index', q, '--force', env=env)
    assert r.returncode == 2 and 'no --rerank was given' in r.stderr
    r = _run('search', tmp_path / 'index', q, '-k', 5, '--rerank', '--rerank-depth', 30, '--force', '--json', env=env)
    assert r.returncode == 0, r.stderr
    hits = json.loads(r.stdout)
    assert len(hits) == 5 and all(h['retriever'].endswith('+rerank') for h in hits)
    assert {h['chunk_id'] for h in hits} <= {h['chunk_id'] for h in first}       # reranked from the first stage's top 30
    for method in ('retrieve', 'structrag'):
        r = _run('ask', tmp_path / 'index', q, '--method', method, '--rerank', cache / 'rerankers' / 'default', '--force', '--json', env=env)
        assert r.returncode == 0, r.stderr
        res = json.loads(r.stdout)
        assert res['rerank'] and len(res['hits']) == 5
    r = _run('search', tmp_path / 'index', q, '--rerank', tmp_path / 'index' / 'meta.json')
    assert r.returncode == 2 and 'not a file' in r.stderr
