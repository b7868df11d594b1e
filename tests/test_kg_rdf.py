"""Integration tests of scholarqa.kg's RDF side: building, TriG/N-Quads round trips, counts, deletion leaving no trace,
manifest sync, SPARQL helpers with hostile input, the Oxigraph store, and the `scholarqa kg` command line."""
import copy, json, shutil, subprocess, sys
from pathlib import Path
from types import SimpleNamespace as NS

import pytest
from rdflib import Graph, URIRef

from scholarqa.ingest import Corpus, ingest
from scholarqa.doc import iter_paragraphs, iter_sections
from scholarqa.datasets import load_dataset, demo_dir, DatasetUnavailable
from scholarqa.kg.vocab import CITO, SQA, entity_iri, graph_iri, load_ontology, paper_iri, write_ontology, ONTOLOGY_TTL, pid_of_graph
from scholarqa.kg.queries import add_entities
from scholarqa.kg.rdf import corpus_counts, corpus_to_dataset, graphs_isomorphic, load_kg, open_store, paper_graphs, remove_paper, replace_paper, save_dataset, sync_with_manifest, triples_naming, type_counts
from scholarqa.kg.queries import cited_by, citations_of, entity_neighbourhood, find_entities, paper_outline, paragraphs_mentioning
from rdflib.namespace import RDF

ROOT = Path(__file__).resolve().parents[1]
CLI = [sys.executable, '-c', 'from scholarqa.cli import cli_main; cli_main()']

from hostile_strings import HOSTILE   # shared with the CLI-level test (tests/test_hostile_names.py)


@pytest.fixture(scope='module')
def demo():
    return load_dataset('demo')


@pytest.fixture(scope='module')
def unarxive():
    try: return load_dataset('unarxive')
    except DatasetUnavailable as e: pytest.skip(f'unarXive sample not available: {e}')


def _key(papers, key): return next(p for p in papers if p.source_ids.get('key') == key)


def _round_trip(kg, counts, path):
    back = load_kg(save_dataset(kg, path))
    assert graphs_isomorphic(kg, back), path.name
    assert type_counts(back) == counts
    assert not list(path.parent.glob('.*.tmp'))          # atomic write left no temporary file


def test_round_trip_and_counts_demo(demo, tmp_path):
    kg = corpus_to_dataset(demo.papers)
    counts = corpus_counts(demo.papers)
    assert type_counts(kg) == counts and counts['Paper'] == len(demo.papers) and counts['Sentence'] > counts['Paragraph'] > 0
    for suffix in ('trig', 'nq'): _round_trip(kg, counts, tmp_path / f'kg.{suffix}')
    with pytest.raises(ValueError): save_dataset(kg, tmp_path / 'kg.ttl')


def test_round_trip_and_counts_unarxive(unarxive, tmp_path):
    """All 49 papers (~190k triples) through N-Quads; TriG (rdflib's pretty-printer is slow) on the first 8."""
    kg = corpus_to_dataset(unarxive.papers)
    counts = corpus_counts(unarxive.papers)
    assert type_counts(kg) == counts and counts['Paper'] == 49 and counts['Sentence'] > counts['Paragraph'] > 1000
    _round_trip(kg, counts, tmp_path / 'kg.nq')
    few = Corpus(copy.deepcopy(unarxive.papers[:8]))
    _round_trip(corpus_to_dataset(few), corpus_counts(few), tmp_path / 'kg.trig')


def test_isomorphism_check_sees_a_difference(demo):
    a, b = corpus_to_dataset(demo.papers), corpus_to_dataset(demo.papers)
    assert graphs_isomorphic(a, b)
    g = b.graph(graph_iri(demo.papers[0].id))
    g.remove(next(iter(g.triples((None, SQA.label, None)))))
    assert not graphs_isomorphic(a, b)


@pytest.mark.parametrize('name', ['demo', 'unarxive'])
def test_delete_leaves_no_triple_naming_it(name, request):
    papers = request.getfixturevalue(name).papers
    if name == 'unarxive':   # a dozen papers, the cited ones first, keep the test quick
        cited = {r.resolved for p in papers for r in p.references if r.resolved}
        papers = list(Corpus(copy.deepcopy(sorted(papers, key=lambda p: p.id not in cited)[:12])))
    kg = corpus_to_dataset(papers)
    cited = {r.resolved for p in papers for r in p.references if r.resolved}
    victim = next((p for p in papers if p.id in cited), papers[0])
    if name == 'demo': assert len(cited_by(kg, victim.id)) >= 2
    # something outside the paper's graph that points into it (as a scholarly graph or an index might)
    kg.graph(URIRef('https://w3id.org/scholarqa/graph/other')).add((URIRef('urn:x'), SQA.mentions, paper_iri(victim.id)))
    remove_paper(kg, victim.id)
    assert triples_naming(kg, victim.id) == []
    assert victim.id not in paper_graphs(kg) and cited_by(kg, victim.id) == []
    fresh = corpus_to_dataset(Corpus([p for p in papers if p.id != victim.id]))
    kg.remove((URIRef('urn:x'), None, None))
    assert graphs_isomorphic(kg, fresh)


def test_replace_keeps_incoming_citations(demo):
    kg = corpus_to_dataset(demo.papers)
    sciqa = _key(demo.papers, 'lin2019sciqa')
    before = cited_by(kg, sciqa.id)
    replace_paper(kg, sciqa)
    assert cited_by(kg, sciqa.id) == before and graphs_isomorphic(kg, corpus_to_dataset(demo.papers))


def _meta_record(meta: dict, key: str) -> dict:
    return meta['papers'][key]


def _demo_copy(root: Path) -> Path:
    src = root / 'src'; src.mkdir()
    for f in list(demo_dir().glob('*.md')) + [demo_dir() / 'metadata.json']: shutil.copy(f, src / f.name)
    return src


def test_sync_with_manifest(tmp_path):
    src, out = _demo_copy(tmp_path), tmp_path / 'corpus'
    ingest([src], out, progress=False)
    kg = open_store('memory')
    assert sync_with_manifest(kg, out) == {'added': 16, 'rebuilt': 0, 'removed': 0, 'unchanged': 0}
    # metadata-only change: same paper id, new file fingerprint -> rebuilt
    meta = json.loads((src / 'metadata.json').read_text())
    _meta_record(meta, 'vogt2021chunking')['venue'] = 'Journal of Renamed Venues'
    (src / 'metadata.json').write_text(json.dumps(meta))
    ingest([src], out, progress=False)
    rep = sync_with_manifest(kg, out)
    assert rep['rebuilt'] >= 1 and rep['added'] == rep['removed'] == 0, rep
    # content change: a new paper id replaces the old one
    md = src / 'tan2022multihopsci.md'
    old = Corpus.load(out).by_source_id('key', 'tan2022multihopsci').id
    text = md.read_text()
    assert ' the ' in text
    md.write_text(text.replace(' the ', ' this ', 1))      # a body edit changes the content hash, hence the paper id
    ingest([src], out, progress=False)
    rep = sync_with_manifest(kg, out)
    assert (rep['added'], rep['removed']) == (1, 1), rep
    assert triples_naming(kg, old) == []
    assert graphs_isomorphic(kg, corpus_to_dataset(Corpus.load(out)))
    assert type_counts(kg) == corpus_counts(Corpus.load(out))


def _toy_entities(kg, papers):
    ents = [NS(id='bioc', label='BioCiteQA', type='Dataset', aliases=['biociteqa benchmark']),
            NS(id='mrr', label='MRR', type='Metric', aliases=['mean reciprocal rank'])]
    ments = []
    for p in papers:
        for s, q in iter_paragraphs(p):
            for e, word in ((ents[0], 'BioCiteQA'), (ents[1], 'MRR')):
                i = q.text.find(word)
                if i >= 0: ments.append(NS(paper_id=p.id, section_path=s.path, paragraph_index=q.index, sentence_n=None, start=i,
                                           end=i + len(word), text=word, type=e.type, extractor='patterns', entity_id=e.id))
    add_entities(kg, ents, ments)
    return ments


def test_helpers_and_hostile_strings(demo, tally):
    kg = corpus_to_dataset(demo.papers)
    ments = _toy_entities(kg, demo.papers)
    paras = {(m.paper_id, m.section_path, m.paragraph_index) for m in ments if m.entity_id == 'bioc'}
    hits = paragraphs_mentioning(kg, 'biocITEqa')
    assert len(hits) == len(paras) > 1 and {h['paper'] for h in hits} == {p for p, _, _ in paras}
    assert paragraphs_mentioning(kg, 'BioCiteQA benchmark') == hits   # alias
    near = entity_neighbourhood(kg, 'BioCiteQA', hops=1)
    both = {(m.paper_id, m.section_path, m.paragraph_index) for m in ments if m.entity_id == 'mrr'} & paras
    assert ([n['label'] for n in near] == ['MRR'] and near[0]['paragraphs'] == len(both)) if both else near == []
    size = len(kg)
    for h in HOSTILE:
        assert paragraphs_mentioning(kg, h) == [] and find_entities(kg, h) == []
        assert paper_outline(kg, h) == [] and citations_of(kg, h) == [] and cited_by(kg, h) == []
        assert entity_neighbourhood(kg, h, hops=2) == []
    assert len(kg) == size
    # hostile text stored as a label is found as exactly that text
    add_entities(kg, [NS(id='odd', label=HOSTILE[0], type='Method', aliases=HOSTILE[1:])], [])
    for h in HOSTILE: assert [e['entity'] for e in find_entities(kg, h)] == [str(entity_iri('odd'))], repr(h[:40])
    # and a hostile string as the entity's id is only ever part of one IRI
    add_entities(kg, [NS(id=h, label=f'entity {i}', type='Dataset', aliases=[]) for i, h in enumerate(HOSTILE)], [])
    for i, h in enumerate(HOSTILE): assert [e['entity'] for e in find_entities(kg, f'entity {i}')] == [str(entity_iri(h))], repr(h[:40])
    assert len(kg) > size
    tally('injection and path safety', f'{len(HOSTILE)} hostile strings as lookup keys of six SPARQL helpers and as entity labels, '
          'aliases and ids', strings=len(HOSTILE))


def test_outline_and_citations_match_the_document_model(unarxive):
    some = Corpus(copy.deepcopy(unarxive.papers[:12]))   # references re-resolved within these 12
    kg = corpus_to_dataset(some)
    for p in some:
        out = paper_outline(kg, p.id)
        assert [o['path'] for o in out] == [s.path for s in iter_sections(p)]
        assert sum(o['paragraphs'] for o in out) == sum(1 for _ in iter_paragraphs(p))
        cites = citations_of(kg, p.id)
        assert {c['pid'] for c in cites if c['in_corpus']} == {r.resolved for r in p.references if r.resolved}


def test_oxigraph_store_matches_memory(demo, tmp_path):
    mem = corpus_to_dataset(demo.papers)
    ox = open_store(f'oxigraph:{tmp_path}/ox')
    corpus_to_dataset(demo.papers, ox)
    _toy_entities(mem, demo.papers); _toy_entities(ox, demo.papers)
    assert type_counts(ox) == type_counts(mem) == corpus_counts(demo.papers)
    p = _key(demo.papers, 'achebe2022cgar'); s = _key(demo.papers, 'lin2019sciqa')
    assert paper_outline(ox, p.id) == paper_outline(mem, p.id)
    assert citations_of(ox, p.id) == citations_of(mem, p.id) and cited_by(ox, s.id) == cited_by(mem, s.id)
    assert paragraphs_mentioning(ox, 'mrr') == paragraphs_mentioning(mem, 'mrr')
    for h in HOSTILE: assert paragraphs_mentioning(ox, h) == [] and paper_outline(ox, h) == []
    remove_paper(ox, s.id)
    assert triples_naming(ox, s.id) == []
    ox.close()
    again = open_store(f'oxigraph:{tmp_path}/ox')          # persistent: the store reopens with its content
    assert type_counts(again)['Paper'] == len(demo.papers) - 1
    again.close()


def test_remote_store_is_constructed_only():
    ds = open_store('sparql:http://127.0.0.1:9/sparql')             # one endpoint for queries and updates, no bulk load
    assert (ds.store.query_endpoint, ds.store.update_endpoint, ds.store.graph_store_endpoint) == \
        ('http://127.0.0.1:9/sparql', 'http://127.0.0.1:9/sparql', None)
    ds = open_store('sparql+update:http://127.0.0.1:9/q,http://127.0.0.1:9/u')   # the older spelling
    assert (ds.store.query_endpoint, ds.store.update_endpoint) == ('http://127.0.0.1:9/q', 'http://127.0.0.1:9/u')
    with pytest.raises(ValueError): open_store('mongodb://x')


def test_ontology_file(tmp_path):
    g = load_ontology()
    assert len(g) > 50
    back = Graph().parse(write_ontology(tmp_path / 'sqa.ttl'))
    assert len(back) == len(g) and (tmp_path / 'sqa.ttl').read_text() == ONTOLOGY_TTL


def scholarqa(*args, timeout=600):
    return subprocess.run(CLI + [str(a) for a in args], capture_output=True, text=True, timeout=timeout, cwd=ROOT)


def test_cli_build_and_query(tmp_path):
    src, corpus, trig = _demo_copy(tmp_path), tmp_path / 'corpus', tmp_path / 'kg.trig'
    assert scholarqa('ingest', src, '--out', corpus, '--json').returncode == 0
    r = scholarqa('kg', 'build', corpus, '--out', trig, '--json')
    assert r.returncode == 0, r.stderr
    rep = json.loads(r.stdout.strip().splitlines()[-1])
    assert rep['added'] == 16 and rep['papers'] == 16 and trig.exists()
    r = scholarqa('kg', 'build', corpus, '--out', trig, '--json')       # incremental: nothing to do
    assert json.loads(r.stdout.strip().splitlines()[-1])['unchanged'] == 16
    q = ('PREFIX fabio: <http://purl.org/spar/fabio/> PREFIX doco: <http://purl.org/spar/doco/> '
         'SELECT (COUNT(DISTINCT ?p) AS ?n) WHERE { GRAPH ?g { ?p a doco:Paragraph } }')
    r = scholarqa('kg', 'query', trig, q, '--json')
    assert r.returncode == 0, r.stderr
    assert json.loads(r.stdout) == [{'n': str(corpus_counts(Corpus.load(corpus))['Paragraph'])}]
    r = scholarqa('kg', 'query', trig, 'ASK { GRAPH ?g { ?s a <http://purl.org/spar/fabio/ResearchPaper> } }')
    assert r.stdout.strip() == 'true'
    r = scholarqa('kg', 'query', trig, 'CONSTRUCT { ?p a ?t } WHERE { GRAPH ?g { ?p a ?t . FILTER(?t = <http://purl.org/spar/fabio/ResearchPaper>) } }')
    assert len(Graph().parse(data=r.stdout, format='turtle')) == 16
    r = scholarqa('kg', 'query', trig, 'SELECT * WHERE {')          # a broken query is an error, not a crash
    assert r.returncode == 2 and 'scholarqa kg query' in r.stderr
    store = tmp_path / 'ox'
    r = scholarqa('kg', 'build', corpus, '--store', f'oxigraph:{store}', '--json')
    assert r.returncode == 0, r.stderr
    r = scholarqa('kg', 'query', f'oxigraph:{store}', q, '--json')
    assert json.loads(r.stdout)[0]['n'] == str(corpus_counts(Corpus.load(corpus))['Paragraph'])


def test_packaged_ontology_is_the_notebooks_and_parses():
    "scholarqa/ontology.ttl ships in the package, equals ONTOLOGY_TTL (tools/check_sync.py regenerates it) and is OWL."
    import importlib.resources
    from rdflib import OWL
    text = importlib.resources.files('scholarqa').joinpath('ontology.ttl').read_text(encoding='utf-8')
    assert text == ONTOLOGY_TTL
    g = Graph().parse(data=text, format='turtle')
    assert (URIRef('https://w3id.org/scholarqa/ontology'), RDF.type, OWL.Ontology) in g
    assert {SQA.Mention, SQA.coauthor, SQA.Dataset} <= set(g.subjects())
