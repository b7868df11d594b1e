"""Integration tests of 05_sketch: `scholarqa ask --method sketch|kg` on an ingested and indexed demo corpus — the JSON
contract (hits name real paragraphs, graph hits carry the facts that chose them), the derived cache inside the index
folder built once, and a hostile question. How SKETCH ranks against its baselines is a measurement, not a test."""
import json, subprocess, sys
from pathlib import Path

import pytest
from scholarqa.ingest import Corpus
from scholarqa.doc import iter_paragraphs
from scholarqa.methods.sketch import SKETCH_TEXT, SKETCH_TEXT_PER_K
from scholarqa.retrieval.base import read_chunks

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
    assert out['method'] == 'sketch' and 1 <= len(out['hits']) <= 3 + 3 * SKETCH_TEXT_PER_K
    assert len([h for h in out['hits'] if h['retriever'] != 'kg']) <= 3 * SKETCH_TEXT_PER_K   # the text side's pieces per unit of k
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
    assert meta['triples'] > meta['small_chunks'] and meta['papers'] == len(corpus.papers)
    assert meta['text'] == SKETCH_TEXT                                    # built with the default text side, recorded
    sem = read_chunks(demo_index / 'I' / 'sketch' / 'semantic_chunks.jsonl')
    assert len(sem) == meta['semantic_chunks'] >= len(corpus.papers)
    if SKETCH_TEXT['resplit']: assert max(c.n_tokens for c in sem) <= SKETCH_TEXT['resplit'][0]   # the seed's re-split

    hostile = 'What does "x\\" } UNION { ?s ?p ?o } #" say about CGAR?'          # quotes and SPARQL syntax: only a value
    qfile = demo_index / 'questions.jsonl'
    qfile.write_text(json.dumps({'id': 'q', 'question': Q}) + '\n' + json.dumps({'id': 'hostile', 'question': hostile}) + '\n')
    lines = _cli('ask', demo_index / 'I', '--questions', qfile, '--method', 'kg', '--generator', 'extractive', '-k', '3', '--json').stdout
    got = {o['id']: o for o in map(json.loads, lines.splitlines())}
    assert [h['chunk_id'] for h in got['q']['hits']] == [h['chunk_id'] for h in graph]   # the KG-only baseline is the graph side
    assert got['hostile']['hits'] and all(h['triples'] for h in got['hostile']['hits'])
    assert json.loads((demo_index / 'I' / 'sketch' / 'meta.json').read_text())['built'] == meta['built']   # not rebuilt
    one = json.loads(_cli('ask', demo_index / 'I', Q, '--method', 'sketch', '--generator', 'extractive', '-k', '3', '-o', 'text_per_k=1', '--json').stdout)
    ids = [h['chunk_id'] for h in out['hits']]
    assert [h['chunk_id'] for h in one['hits']] == ids[:len(one['hits'])] and len(one['hits']) <= 6   # fewer pieces, same order
    assert (len(one['hits']) < len(ids)) == (SKETCH_TEXT_PER_K > 1)


def test_ask_raptor_json_and_its_tree(demo_index):
    """`ask --method raptor` builds the forest inside the index on first use (extractive summaries here: the SmolLM2 ones
    are the lesson's and the experiment's), and its hits are the tree's nodes: leaves name real paragraphs, summaries
    their children and the span of paragraphs under them."""
    from scholarqa.methods.sketch_raptor import _rp_read, check_tree
    r = _cli('ask', demo_index / 'I', 'What do the papers contribute overall?', '--method', 'raptor', '-o', 'summariser=extractive',
             '-o', 'budget=600', '--generator', 'extractive', '-k', '8', '--json')
    out = json.loads(r.stdout)
    tree = _rp_read(demo_index / 'I' / 'raptor-extractive')
    assert check_tree(tree) == [] and tree.report['failed'] == {}
    assert len(tree.roots()) == len(Corpus.load(demo_index / 'C').papers)          # one root per paper
    nodes = {c.id: (c, l) for c, l in zip(tree.nodes, tree.layers)}
    assert out['method'] == 'raptor' and 1 <= len(out['hits']) <= 8
    assert sum(nodes[h['chunk_id']][0].n_tokens for h in out['hits']) <= 600           # the token budget holds
    for h in out['hits']:
        c, layer = nodes[h['chunk_id']]
        assert h['layer'] == layer and h['paper_id'] == c.paper_id and h['text'] == c.text
        if layer:
            assert h['children'] and all(nodes[k][1] == layer - 1 for k in h['children'])
            kids = [nodes[k][0] for k in h['children']]
            lo, hi = min(k.paragraph_start for k in kids), max(k.paragraph_end for k in kids)
            assert (h['paragraph'], h['paragraph_end']) == (lo, hi) and h.get('paragraphs', [lo, lo]) == [lo, hi]
        else: assert 'children' not in h
    bad = subprocess.run([str(Path(sys.executable).parent / 'scholarqa'), 'ask', str(demo_index / 'I'), 'q?', '--method', 'raptor',
                          '-o', 'summariser', '--generator', 'extractive'], capture_output=True, text=True, cwd=ROOT)
    assert bad.returncode == 2 and 'KEY=VALUE' in bad.stderr


def _cli_fails(*args, timeout=300) -> str:
    exe = Path(sys.executable).parent / 'scholarqa'
    r = subprocess.run([str(exe) if exe.exists() else 'scholarqa', *map(str, args)], capture_output=True, text=True, timeout=timeout, cwd=ROOT)
    assert r.returncode != 0, r.stdout[-500:]
    return r.stderr


def test_llm_extractor_options_are_checked_before_any_work(demo_index):
    """`-o extractor=llm` picks the LLM triple extractor (the seed's way); a wrong extractor, an LLM setting without it, or a
    model file that does not exist is a one-line error naming the option — not a traceback, and nothing written."""
    base = ('ask', demo_index / 'I', Q, '--generator', 'extractive', '-k', '3', '--json')
    assert "extractor must be 'spacy' or 'llm'" in _cli_fails(*base, '--method', 'kg', '-o', 'extractor=gpt')
    assert 'only go with extractor=llm' in _cli_fails(*base, '--method', 'sketch', '-o', 'llm_model=x.gguf')
    err = _cli_fails(*base, '--method', 'kg', '-o', 'extractor=llm', '-o', 'llm_model=/nonexistent/model.gguf')
    assert '/nonexistent/model.gguf' in err and 'Traceback' not in err
    assert not (demo_index / 'I' / 'sketch-llm' / 'triples.jsonl').exists()
