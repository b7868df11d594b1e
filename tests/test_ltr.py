"""The learned second stage (02n_ltr): folds by paper on the real unArXive dev questions keep every paper on one side, the
ranker's training groups rows by question, and `scholarqa rerank learn` → `search/ask --rerank` works end to end on the
demo corpus, refusing a model whose recorded dev gain is not positive unless --force."""
import json, os, subprocess, sys
from pathlib import Path

import pandas as pd
import pytest

from scholarqa.eval.harness import demo_questions, read_question_file
from scholarqa.datasets import load_dataset
from scholarqa.retrieval.ltr import (DEV_CHOICE, LTR_MODEL, LTR_RECORD, dev_gain_of, dev_rule, fit_ranker, gold_paper, ltr_feature_names, ltr_rows, paper_folds,
                                     paper_sizes, shipped_ranker, store_channels)

ROOT = Path(__file__).parents[1]
BIN = Path(sys.executable).parent / 'scholarqa'


def _run(*args, env=None):
    return subprocess.run([str(BIN), *map(str, args)], capture_output=True, text=True, env={**os.environ, **(env or {})})


def test_paper_folds_on_the_unarxive_dev_questions():
    qs, bad = read_question_file(ROOT / 'data/eval/unarxive_questions.jsonl')
    assert not bad
    dev = [q for q in qs if q['split'] == 'dev']
    folds = paper_folds(dev, n_folds=5, seed=0)
    assert set(folds) == {q['id'] for q in dev} and set(folds.values()) == set(range(5))
    papers_in = {}
    for q in dev:
        for g in q['gold']: papers_in.setdefault(gold_paper(g), set()).add(folds[q['id']])
    assert all(len(f) == 1 for f in papers_in.values())                # no paper's questions on both sides of any split
    two = [q for q in dev if len({gold_paper(g) for g in q['gold']}) == 2]
    assert two                                                         # two-paper questions join their two papers' groups



def test_training_groups_rows_by_question(tmp_path):
    from scholarqa.retrieval.store import build_index
    papers = list(load_dataset('demo').papers)
    store = build_index(papers, tmp_path / 'index')
    qs = [q for q in demo_questions(papers) if q['answerable']]
    rows = ltr_rows(qs, store_channels(store), n=15, sizes=paper_sizes(store.chunks))
    feats = [f for f in ltr_feature_names() if rows[f].notna().any()]
    shuffled = rows.sample(frac=1.0, random_state=0)                   # rows of one question scattered through the table
    model = fit_ranker(shuffled, feats, params=dict(n_estimators=5, min_child_samples=3))
    again = fit_ranker(rows, feats, params=dict(n_estimators=5, min_child_samples=3))
    # the fit sorts rows by question first: the same model whatever order the rows come in
    assert (model.predict(rows[feats]) == again.predict(rows[feats])).all()
    assert model.booster_.num_trees() == 5 and rows.groupby('qid').size().max() <= 15


def test_cli_rerank_learn_search_ask(tmp_path, demo_cli_copy):
    demo_cli_copy(tmp_path)
    papers = list(load_dataset('demo').papers)
    qfile = tmp_path / 'dev.jsonl'
    qs = [q for q in demo_questions(papers) if q['answerable']]
    held = {**qs[0], 'id': 'held', 'split': 'heldout'}
    qfile.write_text(''.join(json.dumps(q) + '\n' for q in qs + [held]) + 'not json\n', encoding='utf-8')
    model = tmp_path / 'ltr'
    r = _run('rerank', 'learn', tmp_path / 'index', '--questions', qfile, '--out', model, '--folds', 3, '--candidates', 20, '--json')
    assert r.returncode == 0, r.stderr
    assert 'skipped 1 questions whose split is not dev' in r.stderr and 'line ' in r.stderr     # the held-out line and the bad one
    rec = json.loads(r.stdout)
    assert rec['dev']['questions'] == len(qs) and rec['dev']['split'] == 'by paper'
    assert json.loads((model / LTR_RECORD).read_text()) == rec
    q = qs[0]['question']
    first = json.loads(_run('search', tmp_path / 'index', q, '-k', 30, '--json').stdout)
    gain, (lo, hi) = rec['dev']['gain'], rec['dev']['gain_ci']
    r = _run('search', tmp_path / 'index', q, '-k', 5, '--rerank', model, '--json')
    if gain > 0 and lo > 0: assert r.returncode == 0, r.stderr                     # 02o's rule: the interval above 0
    else: assert r.returncode == 2 and f'{gain:+.4f}' in r.stderr and f'[{lo:.3f}, {hi:.3f}]' in r.stderr
    # a record whose gain is not positive is refused, with the number, unless --force
    rec['dev']['gain'] = -0.0125
    (model / LTR_RECORD).write_text(json.dumps(rec), encoding='utf-8')
    r = _run('search', tmp_path / 'index', q, '-k', 5, '--rerank', model, '--json')
    assert r.returncode == 2 and '-0.0125' in r.stderr and '--force' in r.stderr
    r = _run('search', tmp_path / 'index', q, '-k', 5, '--rerank', model, '--force', '--json')
    assert r.returncode == 0, r.stderr
    hits = json.loads(r.stdout)
    assert len(hits) == 5 and all(h['retriever'].endswith('+ltr') for h in hits)
    # reordered from the first stage's top 20: the depth the model was fit with (--candidates 20), not the cross-encoder's 30
    assert {h['chunk_id'] for h in hits} <= {h['chunk_id'] for h in first[:20]}
    for method in ('retrieve', 'structrag'):
        r = _run('ask', tmp_path / 'index', q, '--method', method, '--rerank', model, '--force', '--json', '--min-answerability', 0)
        assert r.returncode == 0, r.stderr
        res = json.loads(r.stdout)
        assert res['rerank'] == 'ltr:ltr' and len(res['hits']) == 5 and all(h['retriever'].endswith('+ltr') for h in res['hits'])
    r = _run('rerank', 'learn', tmp_path / 'index', '--questions', qfile, '--folds', 1)
    assert r.returncode == 2 and '--folds at least 2' in r.stderr


def test_shipped_rankers_are_the_experiments_and_serve_bare_rerank(tmp_path, demo_cli_copy):
    for name in ('retrieve', 'structrag'):
        folder, run = shipped_ranker(name), ROOT / 'outputs' / '02_index' / f'ltr_model_{name}'
        assert folder is not None, f'the package ships no learned ranker for {name}: run tools/ship_ltr.py'
        for f in (LTR_RECORD, LTR_MODEL):          # byte for byte the files of the committed 02o run (tools/ship_ltr.py copies them)
            assert (folder / f).read_bytes() == (run / f).read_bytes(), f'{folder / f} differs from {run / f}: run tools/ship_ltr.py'
        rec = json.loads((folder / LTR_RECORD).read_text())
        assert rec['first_stage'] == name and rec['dev']['split'] == 'by paper' and dev_gain_of(rec) is not None
        row = pd.read_csv(ROOT / 'outputs' / '02_index' / 'ltr_dev_choice.csv').set_index('first_stage').loc[name]
        verdict = json.loads((folder / DEV_CHOICE).read_text())      # the run's verdict under 02o's rule, shipped beside it
        assert (verdict['gain'], f"[{verdict['gain_ci'][0]:.3f}, {verdict['gain_ci'][1]:.3f}]", verdict['passes']) == \
               (row['gain'], row['gain 95% CI'], bool(row['passes the rule'])), name
        assert dev_rule(rec, folder)['passes'] == verdict['passes']
    env = {'SCHOLARQA_CACHE': str(tmp_path / 'cache')}                 # nothing trained on this machine
    demo_cli_copy(tmp_path)
    q = 'How are citation graphs used for retrieval?'
    for argv in (('search', tmp_path / 'index', q, '-k', 5), ('ask', tmp_path / 'index', q)):    # behind the hybrid: it failed
        r = _run(*argv, '--rerank', '--json', env=env)
        assert r.returncode == 2 and '+0.0225' in r.stderr and '[0.000, 0.046]' in r.stderr and '--force' in r.stderr, r.stderr
    r = _run('search', tmp_path / 'index', q, '-k', 5, '--rerank', '--force', '--json', env=env)
    assert r.returncode == 0, r.stderr
    hits = json.loads(r.stdout)
    assert len(hits) == 5 and all(h['retriever'].endswith('+ltr') for h in hits)
    r = _run('ask', tmp_path / 'index', q, '--method', 'structrag', '--rerank', '--json', '--min-answerability', 0, env=env)
    assert r.returncode == 0, r.stderr
    res = json.loads(r.stdout)
    assert res['rerank'] == 'ltr:structrag' and len(res['hits']) == 5 and all(h['retriever'].endswith('+ltr') for h in res['hits'])
    r = _run('ask', tmp_path / 'index', q, '--method', 'structrag', '--json', '--min-answerability', 0, env=env)
    assert r.returncode == 0 and json.loads(r.stdout)['rerank'] is None     # no second stage unless asked: the hybrid failed the rule
