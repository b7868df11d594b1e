"""Grounded refusal (03e_refuse): the answerability decision every text method gets through `ask`, its question sets, and
the command line's behaviour on a question the demo papers cannot answer and on one they can."""
import hashlib, json, re
from pathlib import Path

import pytest

from cli_run import ROOT, cli

pytest.importorskip('sentence_transformers', reason='the answerability decision reads MiniLM sentence vectors (extra: embed)')

DATA = ROOT.parent / 'shared' / 'data'
OFFTOPIC = ROOT / 'data' / 'eval' / 'offtopic_questions.jsonl'
MARS = 'What is the boiling point of water on Mars?'
MEMORY = 'How much memory does compressing the stored passage vectors save?'


@pytest.fixture(scope='module')
def demo(tmp_path_factory, demo_cli_copy):
    "(index folder, demo papers): a private copy of the demo index as `scholarqa ingest` + `scholarqa index` build it."
    from scholarqa.datasets import load_dataset
    d, _ = demo_cli_copy(tmp_path_factory.mktemp('refusal'))
    return d / 'index', list(load_dataset('demo').papers)


def _ask(index, question, *flags):
    r = cli('ask', index, question, '--json', *flags)
    return r.returncode, (json.loads(r.stdout) if r.stdout.strip() else None), r.stderr


def test_cli_refuses_mars_and_answers_a_demo_question(demo):
    "The Mars question is refused with the closest passages listed; a question the demo papers answer keeps its answer."
    from scholarqa.eval.harness import demo_questions
    from scholarqa.generate.refuse import REFUSAL_TEXT
    index, papers = demo
    code, j, err = _ask(index, MARS)
    assert code == 0, err[-2000:]
    assert j['status'] == 'unanswerable' and j['answer'].startswith(REFUSAL_TEXT)
    assert j['citations'] == [] and j['evidence'] and all(e['source']['closest_not_answer'] for e in j['evidence'])
    a = j['answerability']
    assert a['score'] < a['threshold'] and not a['answerable'] and set(a['features']) >= {'sent_max', 'coverage'}
    code, _, _ = _ask(index, MARS, '--strict')
    assert code == 3                                                    # a refusal is not an answer
    r = cli('ask', index, MARS)                                         # the plain print says what the index holds instead
    assert r.returncode == 0 and 'closest, not an answer:' in r.stdout and 'status unanswerable' in r.stdout

    gold = next(q['gold'] for q in demo_questions(papers) if q['question'] == MEMORY)
    code, j, err = _ask(index, MEMORY, '--strict')
    assert code == 0, err[-2000:]
    assert j['status'] == 'ok' and j['answerability']['answerable'] and j['answerability']['score'] >= j['answerability']['threshold']
    assert set(gold) & {c['label'] for c in j['citations']}            # it cites the paragraph that answers it


def test_threshold_flag_moves_the_decision_and_never_the_passages(demo):
    index, _ = demo
    _, refused, _ = _ask(index, MARS)
    code, kept, err = _ask(index, MARS, '--min-answerability', '0')
    assert code == 0 and kept['status'] == 'ok' and kept['answerability'] is None, err[-2000:]
    assert [e['label'] for e in kept['evidence']] == [e['label'] for e in refused['evidence']]
    _, strict, _ = _ask(index, MEMORY, '--min-answerability', '0.999')  # a threshold above any score refuses everything
    assert strict['status'] == 'unanswerable' and strict['answerability']['threshold'] == 0.999
    code, _, err = _ask(index, MARS, '--min-answerability', '1.5')
    assert code == 2 and 'between 0 and 1' in err and 'Traceback' not in err


def test_backend_refusal_is_unanswerable_in_its_own_words(demo):
    "A generative backend that itself says the passages do not answer: status unanswerable, its reply kept."
    from scholarqa.generate.answer import INSUFFICIENT_CONTEXT
    from scholarqa.generate.base import ScriptedBackend
    from scholarqa.protocol import ask, load_methods, open_method
    load_methods()
    index, _ = demo
    a = ask(open_method('retrieve', index), MEMORY, 5, ScriptedBackend(always=INSUFFICIENT_CONTEXT), min_answerability=0)
    assert a.status == 'unanswerable' and a.text == INSUFFICIENT_CONTEXT and 'backend says' in a.status_reason


def test_gold_removed_questions_never_see_their_gold_papers(demo):
    "Through ExcludePapers, every demo question's evidence comes from other papers only, for two methods, k passages each."
    from scholarqa.eval.harness import demo_questions
    from scholarqa.protocol import load_methods, open_method
    from scholarqa.generate.refuse import ExcludePapers, evidence_paper, gold_papers, gold_removed
    load_methods()
    index, papers = demo
    qs = gold_removed([q for q in demo_questions(papers) if q['answerable']])
    assert qs and all(not q['answerable'] and q['set'] == 'gold_removed' for q in qs)
    for name in ('retrieve', 'structrag'):
        m = open_method(name, index, **({} if name == 'retrieve' else {'papers': papers}))
        for q in qs:
            assert set(q['exclude_papers']) == gold_papers(q['gold'])
            ev = ExcludePapers(m, q['exclude_papers']).retrieve(q['question'], 5)
            assert len(ev) == 5 and not {evidence_paper(e) for e in ev} & set(q['exclude_papers']), (name, q['id'])


def test_the_default_model_is_the_full_runs_dev_fit():
    "The package default equals the model 03f's full run fit on dev rows only, and that run read no held-out row to fit it."
    from scholarqa.generate.refuse import DEFAULT_ANSWERABILITY, AnswerabilityModel
    out = ROOT / 'outputs' / '03_generate'
    fitted = AnswerabilityModel.from_json(json.loads((out / 'refusal_model.json').read_text()))
    assert fitted == DEFAULT_ANSWERABILITY
    rec = json.loads((out / 'run_record_03_refuse.json').read_text())
    assert rec['notes']['chosen']['model'] == fitted.to_json() and rec['git']['dirty'] is False
    dev = [l for l in (out / 'refusal_dev.csv').read_text().splitlines()[1:]]
    assert dev and all(',' in l for l in dev)


def test_fit_reads_dev_rows_only():
    from scholarqa.generate.refuse import ANSWERABILITY_FEATURES, fit_answerability
    rows = [{'id': i, 'split': 'dev', 'answerable': i % 2 == 0, **dict.fromkeys(ANSWERABILITY_FEATURES, (i % 2 == 0) * 0.5 + i / 100)}
            for i in range(20)]
    m = fit_answerability(rows, max_false_refusal=0.0)
    assert sum(m.score(r) < m.threshold for r in rows if r['answerable']) == 0
    with pytest.raises(ValueError, match='dev questions only'): fit_answerability(rows + [{**rows[0], 'id': 'h', 'split': 'heldout'}])


def test_offtopic_questions_file_is_what_its_about_says():
    from scholarqa.eval.harness import read_question_file
    qs, bad = read_question_file(OFFTOPIC, require=('answerable',))
    assert bad == [] and len(qs) == 40 and not any(q['answerable'] for q in qs)
    assert sorted(q['split'] for q in qs) == ['dev'] * 20 + ['heldout'] * 20
    about = (OFFTOPIC.parent / 'ABOUT_offtopic_questions.txt').read_text()
    assert hashlib.sha256(OFFTOPIC.read_bytes()).hexdigest() in about


def test_a_malformed_question_file_is_reported_by_line(tmp_path):
    from scholarqa.eval.harness import read_question_file
    f = tmp_path / 'sets.jsonl'
    f.write_text('{"id": "x1", "question": "Where is Lima?", "answerable": false, "split": "dev"}\n'
                 'not json\n'
                 '{"id": "x3", "question": "Who?", "answerable": "no"}\n'
                 '{"id": "x4", "question": "Why?"}\n')
    qs, bad = read_question_file(f, require=('answerable',))
    assert [q['id'] for q in qs] == ['x1']
    assert [b['line'] for b in bad] == [2, 3, 4] and all(b['error'].startswith(f'{f}, line {b["line"]}: ') for b in bad)
    assert "no 'answerable'" in bad[2]['error'] and 'true or false' in bad[1]['error']


@pytest.mark.skipif(not (DATA / 'qasa').exists(), reason=f'QASA is not at {DATA / "qasa"} (see ../shared/data/SOURCES.md)')
def test_qasa_questions_are_out_of_corpus_and_split_by_paper():
    from scholarqa.datasets import load_dataset
    from scholarqa.generate.refuse import qasa_unanswerable
    qs, bad = qasa_unanswerable(DATA)
    assert bad == [] and len(qs) == 244 and not any(q['answerable'] for q in qs)
    raw = json.loads((DATA / 'qasa' / 'testset_unanswerable_244_v1.1.json').read_text())
    side = {}
    for q in qs: side.setdefault(raw[q['id'][len('qasa-'):]]['paper_id'], set()).add(q['split'])
    assert all(len(s) == 1 for s in side.values()) and {'dev', 'heldout'} == set().union(*side.values())
    indexed = {p.source_ids.get('arxiv') for p in load_dataset('unarxive', data_dir=DATA).papers}
    assert not {q['arxiv'] for q in qs} & indexed                      # their papers are not in the unArXive index
