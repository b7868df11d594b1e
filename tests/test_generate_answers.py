"""Integration tests of scholarqa.generate.answer: citation checks, the extractive backend, `scholarqa ask`, metrics and the judge."""
import importlib.util, json, math, subprocess, sys
from pathlib import Path
from types import SimpleNamespace

import pytest

from scholarqa.generate.answer import INSUFFICIENT_CONTEXT, ExtractiveGenerator, Generator, LexicalEncoder, check_citations, load_minilm
from scholarqa.generate.base import Backend, BackendError, Completion, ScriptedBackend
from scholarqa.generate.backends import BACKENDS, make_backend
from scholarqa.eval.metrics import distinct_n, parse_yesno, rouge_l, semantic_similarity, token_f1
from scholarqa.eval.judges import judge
from scholarqa.doc import iter_paragraphs, section_trail
from scholarqa.datasets import demo_dir, load_dataset

ROOT = Path(__file__).resolve().parents[1]
CLI = [sys.executable, '-c', 'from scholarqa.cli import cli_main; cli_main()']
HAS_INDEX = importlib.util.find_spec('scholarqa.retrieval.store') is not None


def scholarqa(*args, timeout=900):
    return subprocess.run(CLI + [str(a) for a in args], capture_output=True, text=True, timeout=timeout, cwd=ROOT)


def hit(text, pid, section, para, titles=('Results',), source_id=''):
    "A retrieved passage with the fields of scholarqa.retrieval.base.Chunk/Hit that generation reads."
    label = f'Paper-{pid}-Section-{section}-Paragraph-{para}'
    chunk = SimpleNamespace(id=label, text=text, paper_id=pid, section_path=section, section_titles=list(titles),
                            paragraph_start=para, paragraph_end=para, source_id=source_id, label=label)
    return SimpleNamespace(chunk=chunk, score=1.0, retriever='test')


HITS = [hit('Statin therapy reduced the rate of major cardiac events by 24% over five years. The effect was larger in diabetic '
            'patients.', 'a1b2', '2', 3, source_id='pmid:1'),
        hit('Adverse events were rare; muscle pain was reported by 4% of patients in both arms.', 'c3d4', '3.1', 0,
            titles=('Results', 'Safety'), source_id='pmid:2')]


@pytest.fixture(scope='module')
def minilm():
    return load_minilm()


def test_invented_label_is_flagged_and_never_cited():
    text = ('Statins reduced major cardiac events by 24% [Paper-a1b2-Section-2-Paragraph-3]. '
            'Muscle pain affected 4% of patients [Paper-c3d4-Section-3.1-Paragraph-7].')
    cits, uns, inv = check_citations(text, HITS)
    assert inv == ['Paper-c3d4-Section-3.1-Paragraph-7']
    assert cits == [{'label': 'Paper-a1b2-Section-2-Paragraph-3', 'paper_id': 'a1b2', 'source_id': 'pmid:1',
                     'section': {'path': '2', 'titles': ['Results']}, 'paragraph': 3}]


def test_unsupported_sentence_is_flagged_with_minilm(minilm):
    text = ('Statin therapy lowered major cardiac events by about a quarter [Paper-a1b2-Section-2-Paragraph-3]. '
            'The trial was funded by a volcano observatory in Iceland [Paper-c3d4-Section-3.1-Paragraph-0].')
    cits, uns, inv = check_citations(text, HITS, encoder=minilm)
    assert inv == [] and len(cits) == 2
    assert [u['sentence'] for u in uns] == ['The trial was funded by a volcano observatory in Iceland.']
    assert uns[0]['score'] < 0.5


def test_abstention_is_not_unsupported(minilm):
    assert check_citations(INSUFFICIENT_CONTEXT, HITS, encoder=minilm) == ([], [], [])


def demo_hits():
    ds = load_dataset('demo')
    out = []
    for p in ds.papers:
        for sec, para in iter_paragraphs(p):
            out.append(hit(para.text, p.id, sec.path, para.index, titles=section_trail(p, sec)))
    return out


def test_extractive_cites_only_retrieved_labels(minilm):
    hits = [h for h in demo_hits() if 'chunk' in h.chunk.text.lower()][:5]
    assert len(hits) == 5
    gen = ExtractiveGenerator(minilm, k=5, n_sentences=3)
    a = gen.answer('How does discourse-aware chunking place passage boundaries?', hits)
    labels = {h.chunk.label for h in hits}
    assert a.invented == [] and a.citations and {c['label'] for c in a.citations} <= labels
    sentences = [s for s in a.text.split('] ') if s]
    assert len(sentences) == 3 and all('[Paper-' in s for s in sentences)
    assert gen.answer('How does discourse-aware chunking place passage boundaries?', hits).text == a.text   # deterministic
    assert 'extractive' in BACKENDS


def test_generator_with_extractive_backend(minilm):
    hits = demo_hits()[:5]
    a = Generator(make_backend('extractive', encoder=minilm), k=5, encoder=minilm).answer('What does the paper propose?', hits)
    assert a.backend == 'extractive' and a.invented == [] and a.citations
    assert {c['label'] for c in a.citations} <= {h.chunk.label for h in hits}


def FixedBackend(replies):
    "A judge with scripted replies (03's ScriptedBackend)."
    return ScriptedBackend(replies, model_id='fixed-judge-v1')


def test_judge_mean_sd_and_model_named():
    replies = ['{"Relevance": 5, "Accuracy": 4, "Completeness": 3, "Readability": 2}',
               '{"Relevance": 3, "Accuracy": 4, "Completeness": 3, "Readability": 4}']
    df = judge('Do statins help?', 'Yes.', 'They reduce events.', FixedBackend(replies), n=2).set_index('criterion')
    assert list(df.index) == ['Relevance', 'Accuracy', 'Completeness', 'Readability']
    assert df.loc['Relevance', 'mean'] == 4.0 and math.isclose(df.loc['Relevance', 'sd'], math.sqrt(2), abs_tol=1e-4)
    assert df.loc['Readability', 'mean'] == 3.0 and df.loc['Accuracy', 'sd'] == 0.0
    assert (df.judge_model == 'fixed-judge-v1').all() and (df.n_missing == 0).all()


def test_malformed_judgement_is_missing_not_nan():
    df = judge('q', 'a', None, FixedBackend(['I think it is good', 'really good', '{"Relevance": 4}', '{"Relevance": 4}']),
               n=2, retries=1).set_index('criterion')
    assert (df.n_missing == 2).all() and (df.n_scored == 0).all()
    assert (df.mean_sd == 'missing').all()
    assert all(r.startswith('run 0: JSONOutputError') and 'run 1: JSONOutputError' in r for r in df.missing_reason)
    assert df.judge_model.iloc[0] == 'fixed-judge-v1'


def test_judge_that_cannot_serve_raises_not_missing():
    class Down(ScriptedBackend):
        def _call(self, kind, prompt, params, schema=None): raise BackendError('fixed backend: server down; fix the URL')
    with pytest.raises(BackendError, match='server down'):
        judge('q', 'a', None, Down(), n=2)


def test_metrics_hand_cases(minilm):
    assert math.isclose(token_f1('The cat sat on the mat', 'a cat sat'), 2 / 3)
    assert token_f1('', '') == 1.0 and token_f1('x', '') == 0.0
    assert rouge_l('police kill the gunman', 'police killed the gunman') == 0.75
    assert distinct_n('the cat the cat', 1) == 0.5 and math.isclose(distinct_n(['the cat', 'the cat'], 2), 0.5)
    same = semantic_similarity('Statins reduce heart attacks.', 'Statins lower the risk of myocardial infarction.', minilm)
    other = semantic_similarity('Statins reduce heart attacks.', 'The lace plant forms holes in its leaves.', minilm)
    assert same > 0.5 > other
    assert math.isclose(semantic_similarity('a b c', 'a b c', LexicalEncoder()), 1.0, rel_tol=1e-5)


def test_parse_yesno():
    assert [parse_yesno(t) for t in ['Yes', 'no.', 'Answer: maybe', 'I cannot tell', '']] == ['yes', 'no', 'maybe', None, None]


@pytest.fixture(scope='module')
def demo_index(tmp_path_factory, demo_cli_copy):
    if not HAS_INDEX: pytest.skip('scholarqa.retrieval.store is not exported yet')
    return demo_cli_copy(tmp_path_factory.mktemp('ask'))[0] / 'index'     # `scholarqa ingest` + `index` (tests/conftest.py)


def test_ask_extractive_json_on_demo(demo_index):
    q = 'How does discourse-aware semantic chunking decide where to split passages?'
    r = scholarqa('ask', demo_index, q, '--generator', 'extractive', '-k', '4', '--json')
    assert r.returncode == 0, r.stderr[-2000:]
    out = json.loads(r.stdout)
    assert out['backend'] == 'extractive' and out['model'] and out['answer']
    hit_labels = [h['label'] for h in out['hits']]
    assert len(out['hits']) == 4 and out['citations']
    for c in out['citations']:
        assert set(c) == {'label', 'paper_id', 'source_id', 'section', 'paragraph'} and c['label'] in hit_labels
    assert out['invented'] == []
    s = scholarqa('search', demo_index, q, '-k', '4', '--json')
    assert s.returncode == 0, s.stderr[-2000:]
    search_hits = json.loads(s.stdout)
    assert [set(h) for h in out['hits']] == [set(h) for h in search_hits]
    assert [h['label'] for h in search_hits] == hit_labels          # same retriever, same passages


def test_ask_extractive_loads_no_pytorch_and_answers_as_pytorch_would(demo_index, tmp_path):
    """The default `ask` encodes the passages' sentences with the index's exported query encoder: PyTorch is never imported,
    and the answers equal those of the same MiniLM run through PyTorch (`--model` with the bundled folder)."""
    from scholarqa.doc import bundled_minilm_path
    if not (demo_index / 'query_encoder' / 'encoder.json').exists(): pytest.skip('the index has no query encoder (onnx missing)')
    qs = tmp_path / 'qs.jsonl'
    qs.write_text(''.join(json.dumps({'id': f'q{i}', 'question': q}) + '\n' for i, q in enumerate((
        'How does discourse-aware semantic chunking decide where to split passages?',
        'How are citation graphs used for retrieval?', 'Which encoder embeds the chunks?'))), encoding='utf-8')
    probe = ('import sys; from scholarqa.cli import main; code = main(sys.argv[1:]); '
             "print('torch loaded:', 'torch' in sys.modules, file=sys.stderr); sys.exit(code)")
    light = subprocess.run([sys.executable, '-c', probe, 'ask', str(demo_index), '--questions', str(qs)], capture_output=True, text=True, timeout=600)
    assert light.returncode == 0, light.stderr[-2000:]
    assert light.stderr.strip().splitlines()[-1] == 'torch loaded: False', light.stderr[-2000:]
    heavy = scholarqa('ask', demo_index, '--questions', qs, '--model', bundled_minilm_path())
    assert heavy.returncode == 0, heavy.stderr[-2000:]
    a, b = ([json.loads(l) for l in r.stdout.splitlines() if l.strip()] for r in (light, heavy))
    assert len(a) == len(b) == 3 and all(x['answer'] for x in a)
    assert [(x['id'], x['answer'], [c['label'] for c in x['citations']]) for x in a] == \
           [(x['id'], x['answer'], [c['label'] for c in x['citations']]) for x in b]


def test_ask_unreachable_openai_fails_loudly(demo_index):
    r = scholarqa('ask', demo_index, 'What is DASC?', '--generator', 'openai', '--base-url', 'http://127.0.0.1:9', '--model', 'm', '--json', '--min-answerability', '0',
                  timeout=300)
    assert r.returncode != 0
    assert 'http://127.0.0.1:9' in r.stderr
    assert r.stdout.strip() == ''          # no answer from some other backend
