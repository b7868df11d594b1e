"""The sealed question set stays sealed: its hash is frozen, its records are well formed and disjoint from the other unArXive
question files, and nothing but the final comparison (09c_final_experiment) names it or reaches it through a file pattern."""
import fnmatch, hashlib, json, os, re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
SEALED = ROOT / 'data' / 'eval' / 'unarxive_sealed.jsonl'


def records(path):
    return [json.loads(l) for l in path.read_text(encoding='utf-8').splitlines() if l.strip()]


def test_hash_is_frozen():
    frozen, name = (ROOT / 'data' / 'eval' / 'SEALED.sha256').read_text().split()
    assert name == 'data/eval/unarxive_sealed.jsonl'
    assert hashlib.sha256(SEALED.read_bytes()).hexdigest() == frozen, 'the sealed set changed: a new set needs a new hash and a note'


def test_records_are_well_formed():
    rs = records(SEALED)
    assert len({r['id'] for r in rs}) == len(rs)
    assert {r['split'] for r in rs} == {'sealed'}
    kinds = [r['kind'] for r in rs]
    assert (kinds.count('single'), kinds.count('two_paper')) == (21, 4)      # as ABOUT_unarxive_sealed.txt says
    for r in rs:
        assert set(r) == {'id', 'kind', 'question', 'answer', 'gold', 'overlap', 'overlap_prefix5', 'split'}, r['id']
        assert len(r['gold']) == (1 if r['kind'] == 'single' else 2), r['id']
        if r['kind'] == 'two_paper': assert r['gold'][0]['paper_id'] != r['gold'][1]['paper_id'], r['id']
        for g in r['gold']:
            assert g['label'] == f"Paper-{g['paper_id']}-Section-{g['section_path']}-Paragraph-{g['paragraph_index']}", r['id']
        assert r['overlap'] <= 0.8, r['id']                                    # not pasted from the paragraph


def test_disjoint_from_the_other_question_files():
    mine = records(SEALED)
    for other in ('unarxive_questions.jsonl', 'unarxive_questions_fresh.jsonl'):
        theirs = records(ROOT / 'data' / 'eval' / other)
        assert not {g['label'] for r in mine for g in r['gold'] if r['kind'] == 'single'} & \
                   {g['label'] for r in theirs for g in r['gold'] if r['kind'] == 'single'}, other
        assert not {r['question'] for r in mine} & {r['question'] for r in theirs}, other
    two_dev = records(ROOT / 'data' / 'eval' / 'unarxive_two_paper_dev.jsonl')   # written after it: no paragraph of it at all
    assert not {g['label'] for r in mine for g in r['gold']} & {g['label'] for r in two_dev for g in r['gold']}
    assert not {r['question'] for r in mine} & {r['question'] for r in two_dev}


# the final comparison and its full-size parameters are the only places that may name the file (and this test)
FINAL = {'nbs/09c_final_experiment.ipynb', 'params/09c_final_experiment.full.yaml', 'tests/test_sealed_set.py'}


def sources() -> dict[str, str]:
    "{path: text} of every notebook (its cells' source), module, tool, test, parameter file and the Makefile."
    files = [*ROOT.glob('nbs/*.ipynb'), *ROOT.glob('scholarqa/**/*.py'), *ROOT.glob('tools/*.py'), *ROOT.glob('tests/*.py'),
             *ROOT.glob('params/*.yaml'), ROOT / 'Makefile', ROOT / '.ci' / 'run']
    out = {}
    for f in files:
        if not f.is_file(): continue
        text = f.read_text(encoding='utf-8')
        if f.suffix == '.ipynb': text = '\n'.join(''.join(c['source']) for c in json.loads(text)['cells'])
        out[f.relative_to(ROOT).as_posix()] = text
    return out


def test_only_the_final_comparison_names_it():
    named = sorted(p for p, text in sources().items() if 'unarxive_sealed' in text and p not in FINAL)
    assert not named, f'only the final comparison may name the sealed set: {named}'
    ci = (ROOT / 'params' / '09c_final_experiment.ci.yaml').read_text()
    assert 'sealed_file: null' in ci                                      # the CI run of the final comparison does not open it either


# a file pattern handed to glob, rglob, iglob or fnmatch: its first string argument ({...} of an f-string read as *)
PATTERN = re.compile(r"""\b(?:r?glob|iglob|fnmatch|filter)\(\s*(?:[\w.]+\s*,\s*)?[rf]?(['"])(.+?)\1""")


def test_no_pattern_reaches_it():
    reach = []
    for p, text in sources().items():
        if p in FINAL: continue
        for m in PATTERN.finditer(text):
            pat = re.sub(r'\{[^}]*\}', '*', m.group(2))
            names_family = any(w in pat for w in ('unarxive', 'sealed', 'eval'))   # '*' over another folder cannot reach data/eval
            if names_family and (fnmatch.fnmatch('unarxive_sealed.jsonl', pat.rsplit('/', 1)[-1])
                                 or fnmatch.fnmatch('data/eval/unarxive_sealed.jsonl', pat)):
                reach.append(f'{p}: {m.group(0)}')
    assert not reach, f'a file pattern reaches the sealed set: {reach}'
    # the test itself sees such a pattern
    assert PATTERN.search("for f in sorted(ev.glob('unarxive_*.jsonl')): pass")


def _data_dir():
    for d in (os.environ.get('SCHOLARQA_DATA'), ROOT.parent / 'shared' / 'data', Path('/work/shared/data')):
        if d and (Path(d) / 'unarxive_sample').is_dir(): return Path(d)
    return None


@pytest.mark.skipif(_data_dir() is None, reason='the unArXive sample (../shared/data/unarxive_sample) is not available')
def test_gold_paragraphs_exist_and_hold_text():
    from scholarqa.datasets import load_dataset
    from scholarqa.doc import iter_paragraphs
    ux = load_dataset('unarxive', data_dir=_data_dir())
    paras = {q.label: (p.id, q.text) for p in ux.papers for _, q in iter_paragraphs(p)}
    for r in records(SEALED):
        for g in r['gold']:
            assert g['label'] in paras, (r['id'], g['label'])
            assert paras[g['label']][0] == g['paper_id'] and len(paras[g['label']][1]) > 100, r['id']


def test_loading_it_needs_the_sealed_flag():
    from scholarqa.eval.questions import load_eval_questions
    with pytest.raises(ValueError, match='sealed question set'): load_eval_questions(SEALED)
    assert len(load_eval_questions(SEALED, sealed=True)) == 25


def test_every_reader_refuses_the_sealed_set(tmp_path):
    """Reading the sealed set is the final comparison's alone: the harness's reader, the retrieval reader and the command
    line's readers (`eval`, `ask --questions`) refuse it with a message that names the file, unless told `sealed=True`."""
    from cli_run import cli
    from scholarqa.eval.harness import read_question_file
    from scholarqa.eval.questions import SealedQuestionSet, load_eval_questions
    for read in (read_question_file, load_eval_questions):
        with pytest.raises(SealedQuestionSet, match='unarxive_sealed.jsonl is a sealed question set'): read(SEALED)
    assert len(read_question_file(SEALED, sealed=True)[0]) == len(records(SEALED))
    for argv in (('eval', '--questions', SEALED, '--method', 'retrieve', '--index', tmp_path),
                 ('ask', tmp_path, '--questions', SEALED)):
        r = cli(*argv)
        assert r.returncode == 2 and 'is a sealed question set' in r.stderr and 'Traceback' not in r.stderr, (argv, r.stderr[-500:])
