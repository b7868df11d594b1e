"Scholarly Author/Paper/Venue graphs of scholarqa.kg: building, name cleaning, RDF and PyG round trips."
import pytest
from rdflib import Graph

from scholarqa.doc import Author, Paper, Reference
from scholarqa.datasets import load_dataset, DatasetUnavailable
from scholarqa.kg.graphs import ScholarlyGraph, scholarly_graph, to_rdf, from_rdf, to_pyg, citation_data, graph_statistics
from scholarqa.kg.names import normalise_venue, venue_series, author_key, initials_merges, merge_duplicate_works
from scholarqa.kg.vocab import person_id, venue_id, org_id
from scholarqa.kg.rdf import paper_triples, new_dataset, add_graph_to_dataset


def _real(name):
    try: return load_dataset(name)
    except DatasetUnavailable as e: pytest.skip(f'real data for {name!r} not available: {e}')


@pytest.fixture(scope='module')
def demo(): return load_dataset('demo')


@pytest.fixture(scope='module')
def demo_graph(demo): return scholarly_graph(demo)


def test_demo_graph_nodes_and_edges(demo, demo_graph):
    g = demo_graph
    assert set(g.nodes['Paper']) == {p.id for p in demo.papers} and len(g.nodes['Paper']) == 16
    assert set(g.nodes['Author']) == {person_id(a) for p in demo.papers for a in p.authors}
    assert set(g.nodes['Institution']) == {org_id(x) for p in demo.papers for a in p.authors for x in a.affiliations}
    assert len(g.nodes['Venue']) == 5 and set(g.nodes['Venue']) == {venue_id(p.venue) for p in demo.papers}
    assert set(g.relation('cites')) == {(p.id, r.resolved) for p in demo.papers for r in p.references if r.resolved}
    assert set(g.relation('cites')) == set(demo.edges)
    assert len(g.relation('writes')) == sum(len(p.authors) for p in demo.papers)
    for p in demo.papers:
        for i, a in enumerate(p.authors):
            assert g.relation('writes')[(person_id(a), p.id)] == {'position': i + 1}
            for x in a.affiliations: assert p.year in g.relation('affiliated_with')[(person_id(a), org_id(x))]['years']
        assert (p.id, venue_id(p.venue)) in g.relation('published_in')


def test_venue_normalisation_examples():
    for s in ['EMNLP', 'Conference On Empirical Methods In Natural Language Processing',
              'SIGDAT Conference On Empirical Methods In Natural Language Processing']:
        assert normalise_venue(s) == 'EMNLP'
    assert normalise_venue('Proceedings of the ACL 2010 Conference Short Papers') == 'ACL'
    assert normalise_venue('HLT-NAACL, Companion Volume: Short Papers') == 'NAACL'
    assert normalise_venue('American Journal Of Computational Linguistics') == 'CL' and venue_series('CL')[2] == 'journal'
    assert normalise_venue('COLING-ACL') == 'COLING-ACL' != normalise_venue('COLING')
    ws = normalise_venue('Coling 2008: Proceedings of the workshop on Grammar Engineering Across Frameworks')
    assert ws == normalise_venue('Proceedings of the 2009 Workshop on Grammar Engineering Across Frameworks (GEAF 2009)') != 'COLING'
    assert normalise_venue('Journal of Retrieval Science (JRS)') == 'Journal of Retrieval Science (JRS)'   # nothing to clean
    assert normalise_venue('') == ''


def test_aan_venue_normalisation_on_real_strings():
    ds = _real('aan')
    raw = {p.venue for p in ds.papers}
    emnlp = {'EMNLP', 'Conference On Empirical Methods In Natural Language Processing',
             'SIGDAT Conference On Empirical Methods In Natural Language Processing',
             'Joint SIGDAT Conference On Empirical Methods In Natural Language Processing And Very Large Corpora'}
    acl = {'ACL', 'Annual Meeting Of The Association For Computational Linguistics',
           'Annual Meeting Of The Association For Compuational Linguistics - Student Research Workshop',
           '45th Annual Meeting of the Association of Computational Linguistics', 'Tutorial Abstracts of ACL 2011'}
    assert emnlp <= raw and acl <= raw            # the variants really occur in AAN
    assert {normalise_venue(v) for v in emnlp} == {'EMNLP'} and {normalise_venue(v) for v in acl} == {'ACL'}
    g = scholarly_graph(ds)
    rep = g.metadata['report']
    assert rep['venue_strings'] == len(raw - {''}) and rep['venue_nodes'] < 0.7 * rep['venue_strings']
    assert emnlp <= set(g.metadata['venue_variants']['EMNLP'])
    assert rep['coauthor_pairs_matched'] > 0.95 * rep['coauthor_pairs_in']   # 'Rush, Alexander M.' meets 'Alexander M. Rush'
    assert 'cites' not in {k[1] for k in g.edges}


def test_author_keys_and_initials():
    assert author_key('Rush, Alexander M.') == author_key('Alexander M. Rush') == 'alexander m rush'
    assert author_key('Milica Gašić') == author_key('Milica Gasic')
    assert author_key('Daumé III, Hal') == author_key('Hal Daumé III')
    assert initials_merges(['alexander m rush', 'a rush', 'j smith', 'john smith', 'jane smith']) == {'a rush': 'alexander m rush'}
    papers = [Paper('One paper title', authors=[Author('Rush, Alexander M.'), Author('Jane Doe')], id='p1'),
              Paper('Another paper title', authors=[Author('A. Rush'), Author('Jané Doe')], id='p2')]
    g = scholarly_graph(papers)
    assert len(g.nodes['Author']) == 2
    assert {a['name'] for a in g.nodes['Author'].values()} == {'Alexander M. Rush', 'Jane Doe'}   # display: the full spelling
    assert g.metadata['report']['initials_merged'] == 1 and g.metadata['report']['author_spellings_merged'] == 1


def test_merge_duplicate_works_and_citation_redirect():
    a = Paper('Biodiversity Futures', authors=[Author('Walter R. Erdelen')], year=2005, source_ids={'doi': '10.2307/3868449'}, id='a')
    b = Paper('Biodiversity futures', authors=[Author('Walter R. Erdelen')], year=2005, source_ids={'doi': '10.1890/x'}, id='b',
              references=[Reference('r1')], venue='Frontiers in Ecology')
    c = Paper('Biodiversity futures', authors=[Author('Someone Else')], year=2005, id='c')
    d = Paper('Same DOI, other title', source_ids={'doi': 'https://doi.org/10.2307/3868449'}, id='d')
    citing = Paper('Citing paper title', references=[Reference('x', resolved='a')], id='e', venue='Other Venue')
    kept, alias = merge_duplicate_works([a, b, c, d, citing])
    assert [p.id for p in kept] == ['b', 'c', 'e'] and alias == {'a': 'b', 'd': 'b'}
    g = scholarly_graph([a, b, c, d, citing])
    assert set(g.relation('cites')) == {('e', 'b')}
    assert len(g.nodes['Paper']['b']['duplicates']) == 2


def test_openalex_duplicates_and_institutions():
    ds = _real('openalex')
    g = scholarly_graph(ds)
    rep = g.metadata['report']
    assert rep['works_merged'] >= 5 and len(g.nodes['Paper']) == len(ds.papers) - rep['works_merged']
    assert rep['orcid_with_several_openalex_ids'] == 0
    with_oa = [i for i in g.nodes['Institution'].values() if i.get('openalex', '').startswith('I')]
    assert len(with_oa) > 0.9 * len(g.nodes['Institution'])
    assert len(g.relation('cites')) > 0


def test_cora_and_citeseer_citation_graphs():
    cora = _real('cora')
    g = scholarly_graph(cora)
    assert len(g.nodes['Paper']) == len(cora.papers) and len(g.relation('cites')) == len(set(cora.edges))
    data = citation_data(g)
    assert data.num_nodes == len(cora.papers) and data.edge_index.shape == (2, len(set(cora.edges)))
    assert len(g.nodes['Author']) < len({a.name for p in cora.papers for a in p.authors})   # spellings merged
    cs = _real('citeseer')
    cd = citation_data(scholarly_graph(cs))
    assert cd.num_nodes == len(cs.papers) and cd.edge_index.shape[1] == len(set(cs.edges))


def test_unarxive_external_references():
    ds = _real('unarxive')
    g = scholarly_graph(ds, external=True)
    rep = g.metadata['report']
    ext = [p for p in g.nodes['Paper'].values() if p.get('external')]
    assert rep['references_external'] > 0 and len(ext) + len(ds.papers) == len(g.nodes['Paper'])
    inside = {p.id for p in ds.papers}
    assert all(d in inside or g.nodes['Paper'][d].get('external') for _, d in g.relation('cites'))
    assert len(scholarly_graph(ds).nodes['Paper']) == len(ds.papers)


def test_rdf_round_trip(demo, demo_graph):
    rdf = to_rdf(demo_graph)
    assert isinstance(rdf, Graph)
    back = from_rdf(rdf)
    assert back == demo_graph
    ds = new_dataset(); add_graph_to_dataset(ds, rdf)
    assert from_rdf(ds) == demo_graph            # also from a store's named graph
    assert from_rdf(Graph()) == ScholarlyGraph()
    toy = ScholarlyGraph()
    toy.add_node('Author', 'x', name='X'); toy.add_node('Author', 'y', name='Y'); toy.add_node('Topic', 'graphs', name='graphs')
    toy.add_edge('coauthor', 'y', 'x', papers=2)
    assert from_rdf(to_rdf(toy)) == toy and from_rdf(to_rdf(toy)).relation('coauthor') == {('x', 'y'): {'papers': 2}}
    doc = Graph()
    for p in demo.papers:
        for t in paper_triples(p): doc.add(t)
    from_doc = from_rdf(doc)   # the document graph's scholarly layer
    for rel in ('writes', 'cites', 'published_in', 'affiliated_with'):
        assert from_doc.relation(rel) == demo_graph.relation(rel)


def test_pyg_shapes(demo_graph):
    import numpy as np
    feats = np.random.default_rng(0).normal(size=(16, 384)).astype('float32')
    data = to_pyg(demo_graph, node_features={'Paper': feats})
    for (st, rel, dt), es in demo_graph.edges.items():
        assert tuple(data[st, rel, dt].edge_index.shape) == (2, len(es))
        s, d = data[st, rel, dt].edge_index[:, 0].tolist()
        assert (data.node_ids[st][s], data.node_ids[dt][d]) in es
    for t, ns in demo_graph.nodes.items(): assert data[t].num_nodes == len(ns) and data.node_ids[t] == list(ns)
    assert tuple(data['Paper'].x.shape) == (16, 384)
    cd = citation_data(demo_graph)
    assert cd.paper_ids == list(demo_graph.nodes['Paper'])
    assert {(cd.paper_ids[a], cd.paper_ids[b]) for a, b in cd.edge_index.t().tolist()} == set(demo_graph.relation('cites'))
    with pytest.raises(ValueError): to_pyg(demo_graph, node_features={'Paper': feats[:3]})


def test_graph_statistics(demo_graph):
    st = graph_statistics(demo_graph)
    assert (st['Paper nodes'], st['Venue nodes'], st['cites edges']) == (16, 5, 63)
    assert 1 <= st['citation components'] <= 16 and st['largest component'] <= 16
