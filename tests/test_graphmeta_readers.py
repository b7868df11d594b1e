"Integration tests on the real staged data: PubMedQA, PQA-A, CiteSeer, OpenAlex, AAN, CoRA (skip when the data is absent)."
import json, time
from collections import Counter
from functools import lru_cache
import pytest
from scholarqa.datasets import load_dataset, DatasetUnavailable, papers_from, find_data_dir
from scholarqa.files import RecordError
from scholarqa.doc import iter_paragraphs
from scholarqa.readers.base import detect_format
from scholarqa.ingest import Corpus


@lru_cache(maxsize=None)
def _timed(name):
    t = time.time()
    ds = load_dataset(name)
    return ds, time.time() - t

def _load(name):
    try: return _timed(name)[0]
    except DatasetUnavailable as e: pytest.skip(str(e))

def _by(ds, kind): return {p.source_ids[kind]: p for p in ds.papers}

def _data_file(rel):
    root = find_data_dir()
    if root is None or not (root / rel).exists(): pytest.skip(f'{rel} is not in the data folder')
    return root / rel


# --- PubMedQA ---------------------------------------------------------------------------------------------------------
def test_pubmedqa_papers_and_labels():
    ds = _load('pubmedqa')
    assert (len(ds.papers), len(ds.questions), ds.errors) == (1000, 1000, [])
    assert Counter(q.label for q in ds.questions) == {'yes': 552, 'no': 338, 'maybe': 110}
    assert sum(q.metadata['split'] == 'test' for q in ds.questions) == 500 == len(ds.metadata['test_pmids'])
    assert len({p.id for p in ds.papers}) == 1000
    q = ds.questions[0]
    assert q.kind == 'yesno' and q.paper_ids == [ds.papers[0].id] and q.answers == [ds.papers[0].metadata['long_answer']]

def test_pubmedqa_paragraph_index_is_contexts_position():
    ds = _load('pubmedqa')
    raw = json.loads(_data_file('pubmedqa/ori_pqal.json').read_text())
    for p in ds.papers:
        rec = raw[p.source_ids['pmid']]
        paras = [para for _, para in iter_paragraphs(p)]
        assert [x.index for x in paras] == list(range(len(rec['CONTEXTS'])))
        assert [x.text for x in paras] == [' '.join(c.split()) for c in rec['CONTEXTS']]
        assert [s.title for s in p.sections for _ in s.paragraphs] == rec['LABELS']
        assert rec['LONG_ANSWER'] not in ' '.join(x.text for x in paras)      # the answer is not in the text
    p = _by(ds, 'pmid')['21645374']
    assert (p.title, p.year, [s.title for s in p.sections]) == ('PMID 21645374', 2011, ['BACKGROUND', 'RESULTS'])
    assert 'Alismataceae' in p.keywords

def test_pubmedqa_artificial():
    ds = _load('pubmedqa_artificial')
    assert (len(ds.papers), len(ds.questions)) == (500, 500)
    assert Counter(q.label for q in ds.questions) == {'yes': 463, 'no': 37}
    assert sum(len(p.sections[0].paragraphs) for p in ds.papers) == 1515
    assert ds.papers[0].sections[0].paragraphs[0].text.startswith('Catharanthus roseus L (C. roseus)')

def test_pubmedqa_missing_contexts_is_a_record_error(tmp_path):
    f = tmp_path / 'pqal.json'
    f.write_text(json.dumps({'100': {'QUESTION': 'Q?', 'CONTEXTS': ['Some text.'], 'LABELS': ['BACKGROUND']},
                             '200': {'QUESTION': 'Q2?', 'LABELS': ['BACKGROUND']},
                             '300': {'QUESTION': 'Q3?', 'CONTEXTS': ['More text.'], 'LABELS': ['RESULTS']}}))
    assert detect_format(f) == 'pubmedqa'
    papers, errors = papers_from(f, 'pubmedqa')
    assert [p.source_ids['pmid'] for p in papers] == ['100', '300']
    assert len(errors) == 1 and isinstance(errors[0], RecordError)
    assert errors[0].record == 'record 200' and '200' in errors[0].reason


# --- CiteSeer ---------------------------------------------------------------------------------------------------------
def test_citeseer_counts_and_edges():
    ds = _load('citeseer')
    m = ds.metadata
    # every record is a paper (they are the benchmark's nodes); 52 records repeat another's exact text and are only reported
    assert (m['records'], m['duplicate_records'], len(ds.papers)) == (3186, 0, 3186)
    assert sum(len(g) - 1 for g in m['same_text']) == 52
    assert (m['cites_lines'], m['lines_both_with_text'], m['self_citations'], m['ids_without_text']) == (4732, 4397, 120, 141)
    assert len(ds.edges) == len(set(ds.edges)) == 4397 - 120
    assert all(a != b for a, b in ds.edges)
    pids = {p.id for p in ds.papers}
    assert all(a in pids and b in pids for a, b in ds.edges)
    assert sum(m['title_split'].values()) == 3186

def test_citeseer_record_structure():
    ds = _load('citeseer')
    p = _by(ds, 'citeseer')['norman00argument']
    assert p.title == 'Argument in Multi-Agent Systems' and p.metadata['label'] == 'Agents' and p.keywords == ['Agents']
    assert p.sections[0].path == '0' and p.sections[0].paragraphs[0].text.startswith('Multi-agent systems research is concerned')

def test_citeseer_reader_keeps_every_record():
    papers, errors = papers_from(_data_file('citeseer_tag/citeseer_texts.txt.gz'), 'citeseer')
    assert (len(papers), errors) == (3186, [])
    assert len(Corpus(papers, resolve=False)) == 3186   # identical text under different record ids stays apart


# --- OpenAlex ---------------------------------------------------------------------------------------------------------
def test_openalex_dedupe_and_edges():
    ds = _load('openalex')
    assert ds.metadata['works'] == 422 and len(ds.papers) == 422
    assert [d['openalex'] for d in ds.metadata['duplicates']] == ['W2741809807']
    assert ds.metadata['same_text'] == [['W4249550477', 'W4252009243']]
    assert len({p.source_ids['openalex'] for p in ds.papers}) == 422
    assert len(ds.edges) == 90 and all(a != b for a, b in ds.edges)
    w = _by(ds, 'openalex')['W2741809807']
    assert w.venue == 'PeerJ' and w.authors[0].name == 'Heather Piwowar'
    assert w.authors[0].ids == {'openalex': 'A5048491430', 'orcid': '0000-0003-1613-5981'}
    assert w.sections[0].paragraphs[0].text.startswith('Despite growing interest in Open Access')
    assert len(w.references) == 45 and w.references[0].ids == {'openalex': 'W1560783210'}
    bert = _by(ds, 'openalex')['W2963341956']
    assert bert.title == '' and bert.metadata['missing_title'] and bert.sections


# --- AAN --------------------------------------------------------------------------------------------------------------
def test_aan_papers_and_repairs():
    ds = _load('aan')
    assert (len(ds.papers), ds.errors) == (18041, [])
    assert len({p.id for p in ds.papers}) == 18041
    assert ds.metadata['encoding_repairs'] == 1650 and ds.metadata['cp1252_records'] == 35
    by = _by(ds, 'acl')
    assert by['D08-1002'].title.startswith('It\u2019s a Contradiction')
    assert by['D08-1002'].metadata['raw']['title'].startswith('It\u00e2\u20ac\u2122s a Contradiction')
    assert [a.name for a in by['P11-2071'].authors] == ['Hal Daum\u00e9 III', 'Jagadeesh Jagarlamudi']
    assert by['W10-4218'].authors[1].name == 'Brian Pl\u00fcss'
    d = by['D10-1001']
    assert (d.title, d.venue, d.year) == ('On Dual Decomposition and Linear Programming Relaxations for Natural Language Processing', 'EMNLP', 2010)
    assert [(a.name, a.ids['aan']) for a in d.authors][0] == ('Alexander M. Rush', 'Rush, Alexander M.')
    pairs = ds.metadata['coauthor_edges']
    assert len(pairs) == 57277 and ds.metadata['coauthor_lines_skipped'] == 251
    assert pairs[0] == ('Rush, Alexander M.', 'Sontag, David')


# --- CoRA -------------------------------------------------------------------------------------------------------------
def test_cora_counts_and_edges():
    ds = _load('cora')
    assert len(ds.papers) == 11881 and len({p.id for p in ds.papers}) == 11881
    assert sum(bool(p.authors) for p in ds.papers) == 11767
    assert (ds.metadata['reference_pairs'], ds.metadata['self_citations']) == (34648, 1934)
    assert len(ds.edges) == len(set(ds.edges)) == 34648 - 1934
    p = _by(ds, 'cora')['1000012']
    assert p.metadata['pseudo_title'] and p.title.startswith('Cora 1000012: ')
    assert p.metadata['label'] == 'Artificial_Intelligence/Machine_Learning/Rule_Learning'
    assert [a.name for a in p.authors] == ['S. Kramer', 'B. Pfahringer', 'C. Helma']


# --- performance ------------------------------------------------------------------------------------------------------
@pytest.mark.parametrize('name', ['citeseer', 'aan', 'cora'])
def test_graph_loads_take_seconds(name):
    _load(name)
    assert _timed(name)[1] < 20, f'{name} took {_timed(name)[1]:.1f}s'
