"""One suite, three graph stores: every SPARQL helper of 01_kg (and SKETCH's edge query of 05_sketch) gives the same answer
on rdflib's in-memory store, an embedded Oxigraph folder, and Oxigraph's SPARQL server over HTTP (`oxigraph serve`, started
on a free 127.0.0.1 port for this module). The graph is the demo corpus with its entities, SKETCH's triples and the
Author/Paper/Venue graph; the in-memory store is the reference the other two must equal (its own hostile-input and
removal tests are in test_kg_rdf.py)."""
import json, subprocess, sys
from pathlib import Path
from types import SimpleNamespace as NS

import pytest

from scholarqa.datasets import load_dataset
from scholarqa.kg.patterns import PatternExtractor
from scholarqa.kg.entities import entity_key, extract_entities
from scholarqa.kg.graphs import from_rdf, graph_statistics, scholarly_graph, to_rdf
from scholarqa.kg.vocab import SCHOLARLY_GRAPH
from scholarqa.kg.server import OxigraphServer
from scholarqa.kg.rdf import add_graph_to_dataset, corpus_counts, corpus_to_dataset, is_remote, load_into, open_store, paper_graphs, quad_count, remove_paper, save_dataset, triples_naming, type_counts, with_values
from scholarqa.kg.queries import add_entities
from scholarqa.kg.queries import cited_by, citations_of, entity_neighbourhood, find_entities, find_entity_info, paper_outline, paragraphs_mentioning
from scholarqa.methods.sketch import TripleGraph, edges_of, extract_triples, triples_to_rdf
from scholarqa.retrieval.chunk import chunk_corpus, default_tokenizer

from hostile_strings import HOSTILE

ROOT = Path(__file__).resolve().parents[1]
CLI = [sys.executable, '-c', 'from scholarqa.cli import cli_main; cli_main()']


def _server_or_skip():
    try: OxigraphServer.binary()
    except FileNotFoundError as e: pytest.skip(f'{e} — the SPARQL-server backend is not tested')


@pytest.fixture(scope='module')
def world():
    papers = load_dataset('demo').papers
    ents, mentions = extract_entities(papers, [PatternExtractor().fit(papers)])
    small = chunk_corpus(papers, 'recursive', tokenizer=default_tokenizer(), size=100, overlap=16)
    triples, _ = extract_triples(small)
    return NS(papers=papers, ents=ents, mentions=mentions, tg=TripleGraph(triples), sg=to_rdf(scholarly_graph(papers)))


def _fill(ds, w):
    corpus_to_dataset(w.papers, ds)
    add_entities(ds, w.ents, w.mentions)
    triples_to_rdf(w.tg, ds)
    add_graph_to_dataset(ds, w.sg)
    return ds


@pytest.fixture(scope='module')
def reference(world):
    return _fill(open_store('memory'), world)


@pytest.fixture(scope='module', params=['oxigraph', 'server'])     # the third store, memory, is the reference
def store(request, world, tmp_path_factory):
    tmp = tmp_path_factory.mktemp(request.param)
    if request.param == 'oxigraph':
        ds = _fill(open_store(f'oxigraph:{tmp}/ox'), world)
        yield ds
        ds.close()
    else:
        _server_or_skip()
        with OxigraphServer(tmp / 'srv') as server:
            ds = _fill(open_store(server.spec), world)
            assert is_remote(ds)
            yield ds


def _entity_labels(world, n=8):
    "Labels of the entities mentioned most often (a spread of types), plus one alias written in another case."
    by = {}
    for m in world.mentions: by[m.entity_id] = by.get(m.entity_id, 0) + 1
    top = sorted(world.ents, key=lambda e: (-by.get(e.id, 0), e.id))[:n]
    return [e.label for e in top] + [top[0].label.upper()]


def test_counts_and_graphs(store, reference, world):
    assert type_counts(store) == type_counts(reference) == corpus_counts(world.papers)
    assert paper_graphs(store) == paper_graphs(reference)
    assert quad_count(store) == quad_count(reference) > 20000


def test_document_helpers(store, reference, world):
    for p in world.papers:
        assert paper_outline(store, p.id) == paper_outline(reference, p.id)
        assert citations_of(store, p.id) == citations_of(reference, p.id)
        assert cited_by(store, p.id) == cited_by(reference, p.id)
    assert any(citations_of(reference, p.id) for p in world.papers) and any(cited_by(reference, p.id) for p in world.papers)


def test_entity_helpers(store, reference, world):
    labels = _entity_labels(world)
    assert find_entities(reference, labels[-1])                         # the upper-cased label is found: the test can fail
    for i, label in enumerate(labels):
        assert find_entities(store, label) == find_entities(reference, label)
        assert paragraphs_mentioning(store, label) == paragraphs_mentioning(reference, label)
        hops = 2 if i < 2 else 1                                        # two hops: a query per neighbour, so only for two
        assert entity_neighbourhood(store, label, hops=hops) == entity_neighbourhood(reference, label, hops=hops)
    for e in world.ents[:10]:
        iri = find_entities(reference, e.label)[0]['entity']
        assert find_entity_info(store, iri) == find_entity_info(reference, iri)


def test_sketch_edges_and_scholarly_graph(store, reference, world):
    keys = sorted(world.tg.keys, key=lambda k: -len(world.tg.adj[k]))[:15]
    def rows(ds, k): return sorted(tuple(sorted(r.items())) for r in edges_of(ds, k))
    assert rows(reference, keys[0])                                     # the busiest node has edges
    for k in keys: assert rows(store, k) == rows(reference, k)
    assert graph_statistics(from_rdf(store.graph(SCHOLARLY_GRAPH))) == graph_statistics(from_rdf(reference.graph(SCHOLARLY_GRAPH)))


def test_hostile_strings_are_data(store, reference, world):
    size = quad_count(store)
    for h in HOSTILE:
        assert find_entities(store, h) == [] and paragraphs_mentioning(store, h) == []
        assert paper_outline(store, h) == [] and cited_by(store, h) == [] and edges_of(store, entity_key(h) or h) == []
    assert quad_count(store) == size and type_counts(store) == type_counts(reference)


def test_remove_paper_leaves_no_trace(store, reference, world):   # last: it changes the module's store
    p = max(world.papers, key=lambda p: len(cited_by(reference, p.id)))
    remove_paper(store, p.id)
    assert triples_naming(store, p.id) == [] and p.id not in paper_graphs(store)
    assert type_counts(store)['Paper'] == len(world.papers) - 1


def test_with_values_prebinds_inside_where():
    from rdflib import Literal, URIRef
    q = with_values('SELECT ?x WHERE { ?x ?p ?q FILTER(STR(?q) = "a") } ORDER BY ?x', {'q': Literal('say "hi"\n\\'), 'p': URIRef('http://e/p')})
    assert q.startswith('SELECT ?x WHERE { VALUES (?q ?p) { ("say \\"hi\\"\\n\\\\" <http://e/p>) }') and q.endswith('ORDER BY ?x')
    with pytest.raises(ValueError, match='not an IRI'): with_values('SELECT * WHERE { ?s ?p ?o }', {'s': URIRef('http://e/> } DROP ALL')})


def test_bulk_load_through_the_graph_store_protocol(reference, tmp_path):
    _server_or_skip()
    save_dataset(reference, tmp_path / 'kg.nq')
    with OxigraphServer() as server:
        ds = load_into(open_store(server.spec), tmp_path / 'kg.nq')
        assert quad_count(ds) == quad_count(reference) and type_counts(ds) == type_counts(reference)
    with pytest.raises(OSError, match='refused the bulk load'):
        load_into(open_store('sparql:http://127.0.0.1:9'), tmp_path / 'kg.nq')


def _cli(*args):
    return subprocess.run(CLI + [str(a) for a in args], capture_output=True, text=True, timeout=600, cwd=ROOT)


def test_cli_build_and_query_on_a_server(tmp_path):
    _server_or_skip()
    from scholarqa.datasets import demo_dir
    corpus = tmp_path / 'C'
    assert _cli('ingest', demo_dir(), '--out', corpus, '--json').returncode == 0
    q = 'PREFIX doco: <http://purl.org/spar/doco/> SELECT (COUNT(DISTINCT ?p) AS ?n) WHERE { ?p a doco:Paragraph }'
    with OxigraphServer() as server:
        r = _cli('kg', 'build', corpus, '--store', server.spec, '--json')
        assert r.returncode == 0, r.stderr
        assert json.loads(r.stdout.strip().splitlines()[-1])['added'] == 16
        r = _cli('kg', 'build', corpus, '--store', server.spec, '--json')            # incremental on the server too
        assert json.loads(r.stdout.strip().splitlines()[-1])['unchanged'] == 16
        r = _cli('kg', 'query', server.spec, q, '--json')
        assert r.returncode == 0, r.stderr
        from scholarqa.ingest import Corpus
        assert json.loads(r.stdout) == [{'n': str(corpus_counts(Corpus.load(corpus))['Paragraph'])}]
    r = _cli('kg', 'query', 'sparql:not-a-url', q)
    assert r.returncode == 2 and 'server address' in r.stderr
