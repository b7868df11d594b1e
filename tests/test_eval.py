"""`scholarqa eval` as a user meets it: two methods on the demo questions through the command line, the JSON contract, a
malformed question line reported by its number while the rest still run, the same context budget for every method, and a
second run served from its cache."""
import json
import pytest
from cli_run import cli

@pytest.fixture(scope='module')
def demo(tmp_path_factory, demo_cli_copy):
    "An ingested and indexed demo corpus (tests/conftest.py), and its question file with one malformed line (line 4)."
    d = demo_cli_copy(tmp_path_factory.mktemp('eval'))[0]
    from scholarqa.eval.harness import demo_questions
    from scholarqa.ingest import Corpus
    qs = demo_questions(list(Corpus.load(d / 'corpus')))
    lines = [json.dumps(q) for q in qs]
    lines.insert(3, '{"id": "broken", "question": ""}')
    (d / 'q.jsonl').write_text('\n'.join(lines) + '\n')
    return d, qs

def _eval(d, *extra, cache='cache'):
    return cli('eval', '--method', 'retrieve', '--method', 'vanilla', '--questions', d / 'q.jsonl', '--index', d / 'index',
               '--cache', d / cache, '--json', *extra)

def test_two_methods_the_json_contract_and_a_bad_line(demo):
    d, qs = demo
    r = _eval(d, cache='cache-contract')                        # a cache of its own: the tests run in any order
    assert r.returncode == 1, r.stderr                          # one line could not be used: the rest ran, the status says so
    out = json.loads(r.stdout)
    assert 'q.jsonl, line 4' in r.stderr and [p['line'] for p in out['problems']] == [4]
    assert out['questions'] == len(qs) == 15 and set(out['methods']) == {'retrieve', 'vanilla'}
    for name, m in out['methods'].items():
        assert m['questions'] == 15 and m['cached'] == 0
        assert sum(m['statuses'].values()) == 15
        for measure in ('recall@5', 'hit@1', 'mrr', 'all_gold', 'refusal_ok', 'context_tokens'):
            lo, hi = m[measure]['ci']
            assert lo <= m[measure]['mean'] <= hi, (name, measure, m[measure])
        assert m['recall@5']['n'] == 13 and m['refusal_ok']['n'] == 15   # gold on the answerable 13; refusal on all
    assert 0 < out['methods']['retrieve']['recall@5']['mean'] <= 1
    pair = out['paired']['vanilla - retrieve']['mrr']
    assert pair['n'] == 13 and pair['ci'][0] <= pair['mean'] <= pair['ci'][1]

def test_a_second_run_is_served_from_its_cache(demo):
    d, _ = demo
    first, again = json.loads(_eval(d, cache='cache-again').stdout), json.loads(_eval(d, cache='cache-again').stdout)
    for name in ('retrieve', 'vanilla'):
        assert first['methods'][name]['cached'] == 0 and again['methods'][name]['cached'] == 15
        assert again['methods'][name]['mrr'] == first['methods'][name]['mrr']
    other = json.loads(_eval(d, '-o', 'retrieve:max_tokens=64', cache='cache-again').stdout)
    assert other['methods']['retrieve']['cached'] == 0 and other['methods']['vanilla']['cached'] == 15   # one option changed


def test_the_cache_key_is_what_an_answer_depends_on(demo, monkeypatch):
    """The key is the method's identity: its resolved options (a changed default misses), the package version and the
    index's own record. Opening another method first, which builds its own folder inside the index, changes nothing."""
    import scholarqa
    from scholarqa.protocol import METHODS, load_method, method_identity, open_method
    from scholarqa.ingest import Corpus
    d, _ = demo
    index = d / 'index'
    before = {n: method_identity(n, index) for n in ('retrieve', 'vanilla', 'structrag')}
    open_method('vanilla', index, papers=list(Corpus.load(d / 'corpus'))).retrieve('What is BM25?', 1)   # builds fixed-1000/
    assert {n: method_identity(n, index) for n in before} == before
    load_method('structrag')
    factory = METHODS['structrag']
    monkeypatch.setattr(factory, '__defaults__', tuple(128 if v == 256 else v for v in factory.__defaults__))   # max_tokens
    changed = method_identity('structrag', index)
    assert (changed['options']['max_tokens'], before['structrag']['options']['max_tokens']) == (128, 256)
    monkeypatch.setattr(scholarqa, '__version__', scholarqa.__version__ + '.dev1')
    after = method_identity('vanilla', index)
    assert after['package'] != before['vanilla']['package'] and after['inputs'] == before['vanilla']['inputs']

def test_every_method_gets_the_same_budget(demo):
    d, _ = demo
    r = _eval(d, '--budget', '300', '--split', 'dev')
    out = json.loads(r.stdout)
    assert out['budget'] == 300
    assert out['methods']['retrieve']['context_tokens']['mean'] <= 300        # paragraphs fit, several to a budget
    wide = json.loads(_eval(d).stdout)['methods']['vanilla']['context_tokens']['mean']
    assert out['methods']['vanilla']['context_tokens']['mean'] < wide          # a 1,000-token chunk is kept alone

def test_usage_errors_are_named(demo):
    d, _ = demo
    r = cli('eval', '--questions', d / 'q.jsonl', '--index', d / 'index')
    assert r.returncode == 2 and 'at least one --method' in r.stderr, r.stderr
    r = cli('eval', '--method', 'retrieve', '--questions', d / 'missing.jsonl', '--index', d / 'index')
    assert r.returncode == 2 and 'missing.jsonl' in r.stderr, r.stderr
    r = cli('eval', '--method', 'retrieve', '--questions', d / 'q.jsonl', '--index', d / 'index', '-o', 'vanilla:k=1')
    assert r.returncode == 2 and 'vanilla is not one of the --method values' in r.stderr, r.stderr
