"""Integration tests of 05_sketch: `scholarqa ask --method sketch|kg` on an ingested and indexed demo corpus — the JSON
contract (hits name real paragraphs, graph hits carry the facts that chose them), the derived cache inside the index
folder built once, and a hostile question. How SKETCH ranks against its baselines is a measurement, not a test."""
import json, subprocess, sys
from pathlib import Path

import pytest
from scholarqa.ingest import Corpus
from scholarqa.doc import iter_paragraphs

ROOT = Path(__file__).resolve().parents[1]
Q = 'Which first-stage retriever does CGAR rerank, and on which test set?'


def _cli(*args, timeout=900):
    exe = Path(sys.executable).parent / 'scholarqa'
    r = subprocess.run([str(exe) if exe.exists() else 'scholarqa', *map(str, args)], capture_output=True, text=True, timeout=timeout, cwd=ROOT)
    assert r.returncode == 0, r.stderr[-2000:]
    return r


@pytest.fixture(scope='module')
def demo_index(tmp_path_factory, demo_cli_copy):
    return demo_cli_copy(tmp_path_factory.mktemp('sketch_cli'), corpus='C', index='I')[0]   # `scholarqa ingest` + `index`


def test_ask_sketch_json_then_kg_from_the_same_cache(demo_index):
    r = _cli('ask', demo_index / 'I', Q, '--method', 'sketch', '--generator', 'extractive', '-k', '3', '--json')
    out = json.loads(r.stdout)
    assert out['method'] == 'sketch' and 1 <= len(out['hits']) <= 6
    corpus = Corpus.load(demo_index / 'C')
    paras = {(p.id, s.path, para.index): para.text for p in corpus for s, para in iter_paragraphs(p)}
    for h in out['hits']:
        assert h['source_id'] and h['paper_id'] in corpus.papers
        key = (h['paper_id'], h['section']['path'], h['paragraph'])
        assert key in paras, key                                          # section + paragraph name a real paragraph
        assert h['text'].split('\n\n')[0][:60] in paras[key]              # the chunk starts inside it
    graph = [h for h in out['hits'] if h['retriever'] == 'kg']
    assert graph and all(h['triples'] for h in graph)                     # the graph side's hits come with their facts
    for h in graph:
        for s, rel, o, para in h['triples']:
            assert para == h['paragraph'] and s and rel and o
    assert any('CGAR' in (s, o) for h in graph for s, _, o, _ in h['triples'])    # a fact about the entity the question names
    assert [h['retriever'] for h in out['hits']][:len(graph)] == ['kg'] * len(graph)   # merged: the graph's context first
    meta = json.loads((demo_index / 'I' / 'sketch' / 'meta.json').read_text())
    assert meta['triples'] > meta['small_chunks'] > meta['semantic_chunks'] and meta['papers'] == len(corpus.papers)

    hostile = 'What does "x\\" } UNION { ?s ?p ?o } #" say about CGAR?'          # quotes and SPARQL syntax: only a value
    qfile = demo_index / 'questions.jsonl'
    qfile.write_text(json.dumps({'id': 'q', 'question': Q}) + '\n' + json.dumps({'id': 'hostile', 'question': hostile}) + '\n')
    lines = _cli('ask', demo_index / 'I', '--questions', qfile, '--method', 'kg', '--generator', 'extractive', '-k', '3', '--json').stdout
    got = {o['id']: o for o in map(json.loads, lines.splitlines())}
    assert [h['chunk_id'] for h in got['q']['hits']] == [h['chunk_id'] for h in graph]   # the KG-only baseline is the graph side
    assert got['hostile']['hits'] and all(h['triples'] for h in got['hostile']['hits'])
    assert json.loads((demo_index / 'I' / 'sketch' / 'meta.json').read_text())['built'] == meta['built']   # not rebuilt
