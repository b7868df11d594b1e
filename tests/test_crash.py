"""kill -9 anywhere in `scholarqa index`, `kg build` and a model save (`adapt`): after every kill the folder is the old state
or the new one and opens; running the command again repairs it, and the result equals one uninterrupted run (same papers,
chunk ids and vectors; isomorphic graphs; the same training losses and embeddings). `ingest` has its own in test_ingest_cli.py.

Rounds: $SCHOLARQA_KILL_ROUNDS (default 2, and 1 for the model save, to keep CI short; the reliability notebook uses 20).
Between rounds some sources are edited and re-ingested (or the training seed changes), so every round has work to do, and the
kill can land in chunking, encoding, training or writing.
"""
import json, os, random, signal, subprocess, sys, time
from pathlib import Path

import numpy as np
import pytest

ROOT = Path(__file__).resolve().parents[1]
CLI = [sys.executable, '-c', 'from scholarqa.cli import cli_main; cli_main()']
ROUNDS = int(os.environ.get('SCHOLARQA_KILL_ROUNDS', '2'))
MODEL_ROUNDS = int(os.environ.get('SCHOLARQA_KILL_ROUNDS', '1'))   # a model round trains and saves MiniLM in a new process: fewer in CI


def _run(*args, timeout=900):
    r = subprocess.run(CLI + [str(a) for a in args], cwd=ROOT, capture_output=True, text=True, timeout=timeout)
    assert r.returncode in (0, 1), r.stderr[-2000:]
    return r


def _open(index: Path):
    from scholarqa.retrieval.store import IndexStore
    return IndexStore.load(index)


def _consistent(s) -> None:
    "Chunks, vectors and meta.json of one store agree with each other."
    from scholarqa.retrieval.dense import chunk_int_id
    assert s._vindex.ids == {chunk_int_id(c.id) for c in s.chunks}, 'vectors and chunks disagree'
    assert {c.paper_id for c in s.chunks} <= set(s.meta['papers'])
    assert s.meta['counts']['chunks'] == len(s.chunks) and s.meta['counts']['papers'] == len(s.meta['papers'])


@pytest.mark.slow
def test_index_kill_9_then_repair(tmp_path, variant_papers, tally):
    src, corpus, index = tmp_path / 'src', tmp_path / 'corpus', tmp_path / 'index'
    files = variant_papers(src, 12)
    _run('ingest', src, '--out', corpus)
    _run('index', corpus, '--out', index)                           # the index the rounds start from
    rng = random.Random(20)

    def edit(n: int, tag: str):                                     # n papers change: n added, n removed for the index
        for f in rng.sample(files, n):
            f.write_text(f.read_text(encoding='utf-8').replace('## Abstract\n', f'## Abstract\nEdit {tag}.\n', 1), encoding='utf-8')
        _run('ingest', src, '--out', corpus)

    edit(6, 'timing'); t0 = time.time(); _run('index', corpus, '--out', index); inc = time.time() - t0   # one update, uninterrupted
    kills, states = 0, {'old': 0, 'new': 0}
    for r in range(ROUNDS):
        old = set(_open(index).meta['papers'])
        edit(6, f'round {r}')
        from scholarqa.ingest import Corpus
        new = {p.id for p in Corpus.load(corpus)}
        proc = subprocess.Popen(CLI + ['index', str(corpus), '--out', str(index)], cwd=ROOT,
                                stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        time.sleep(rng.uniform(0.3, 1.0) * inc)
        if proc.poll() is None: os.kill(proc.pid, signal.SIGKILL); kills += 1
        proc.wait()
        s = _open(index)                                            # it opens ...
        _consistent(s)                                              # ... whole ...
        have = set(s.meta['papers'])
        assert have in (old, new), f'round {r}: the index is neither the old one nor the new one'   # ... old or new
        states['old' if have == old else 'new'] += 1
    assert kills >= ROUNDS // 2, f'only {kills} of {ROUNDS} runs were killed: the updates finished too fast ({inc:.1f}s)'

    _run('index', corpus, '--out', index)                           # the repair: the command, run again
    _run('index', corpus, '--out', tmp_path / 'reference')          # one uninterrupted run over the same corpus
    got, ref = _open(index), _open(tmp_path / 'reference')
    _consistent(got)
    assert got.meta['papers'] == ref.meta['papers'] and got.meta['corpus_hash'] == ref.meta['corpus_hash']
    assert sorted(c.id for c in got.chunks) == sorted(c.id for c in ref.chunks)
    assert {c.id: c.text for c in got.chunks} == {c.id: c.text for c in ref.chunks}
    from scholarqa.retrieval.dense import chunk_int_id
    ids = sorted(chunk_int_id(c.id) for c in ref.chunks)
    assert np.allclose(got._vindex.vectors(ids), ref._vindex.vectors(ids), atol=1e-6)
    left = sorted(p.name for p in index.iterdir() if p.name.startswith('state-'))
    assert left == [got.meta['generation']], f'unfinished generations left behind: {left}'
    assert not list(index.rglob('*.tmp'))
    tally('kill -9 anywhere', f'index of {len(files)} papers, 6 edited a round: {ROUNDS} rounds, {kills} killed, the folder old '
          f'{states["old"]} times and new {states["new"]} times; then repaired by a re-run', rounds=ROUNDS, kills=kills, **states)


@pytest.mark.slow
def test_kg_build_kill_9_then_repair(tmp_path, variant_papers, tally):
    "The same for `scholarqa kg build --out FILE.trig`: the file is always a whole old or new dataset; a re-run gives the uninterrupted one."
    from rdflib.compare import isomorphic
    from scholarqa.ingest import Corpus
    from scholarqa.kg.rdf import load_kg, paper_graphs
    src, corpus, trig = tmp_path / 'src', tmp_path / 'corpus', tmp_path / 'kg.trig'
    files = variant_papers(src, 30)
    _run('ingest', src, '--out', corpus)
    t0 = time.time(); _run('kg', 'build', corpus, '--out', trig); full = time.time() - t0
    rng = random.Random(21)
    kills, states = 0, {'old': 0, 'new': 0}
    for r in range(ROUNDS):
        old = set(paper_graphs(load_kg(trig)))
        for f in rng.sample(files, 5):
            f.write_text(f.read_text(encoding='utf-8').replace('## Abstract\n', f'## Abstract\nEdit {r}.\n', 1), encoding='utf-8')
        _run('ingest', src, '--out', corpus)
        new = {p.id for p in Corpus.load(corpus)}
        proc = subprocess.Popen(CLI + ['kg', 'build', str(corpus), '--out', str(trig)], cwd=ROOT,
                                stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        time.sleep(rng.uniform(0.3, 1.0) * full)
        if proc.poll() is None: os.kill(proc.pid, signal.SIGKILL); kills += 1
        proc.wait()
        have = set(paper_graphs(load_kg(trig)))
        assert have in (old, new), f'round {r}: the dataset is neither the old one nor the new one'
        states['old' if have == old else 'new'] += 1
    assert kills >= ROUNDS // 2, f'only {kills} of {ROUNDS} runs were killed ({full:.1f}s a run)'
    _run('kg', 'build', corpus, '--out', trig)
    _run('kg', 'build', corpus, '--out', tmp_path / 'reference.trig')
    got, ref = load_kg(trig), load_kg(tmp_path / 'reference.trig')
    assert set(paper_graphs(got)) == set(paper_graphs(ref)) == {p.id for p in Corpus.load(corpus)}
    names = lambda ds: {str(g.identifier) for g in ds.graphs() if len(g)}
    assert names(got) == names(ref)
    for g in ref.graphs():
        if len(g): assert isomorphic(g, got.graph(g.identifier)), f'graph {g.identifier} differs from an uninterrupted build'
    tally('kill -9 anywhere', f'kg build (TriG file) of 30 papers, 5 edited a round: {ROUNDS} rounds, {kills} killed, the file old '
          f'{states["old"]} times and new {states["new"]} times; then repaired by a re-run', rounds=ROUNDS, kills=kills, **states)


@pytest.mark.slow
def test_model_save_kill_9_then_repair(tmp_path, variant_papers, tally):
    """The same for a model folder (`scholarqa adapt`, which trains and saves with `replace_dir`): after every kill the folder
    opens as the old model or the new one, nothing needs deleting by hand, and a re-run equals an uninterrupted training."""
    from scholarqa.files import aside_path, settled
    from scholarqa.retrieval.adapt import ICT_RECORD
    from scholarqa.retrieval.dense import Encoder
    src, corpus, model = tmp_path / 'src', tmp_path / 'corpus', tmp_path / 'model'
    variant_papers(src, 12)
    _run('ingest', src, '--out', corpus)
    train = lambda seed, out=model: ['adapt', str(corpus), '--out', str(out), '--examples', '8', '--epochs', '1', '--seed', str(seed)]
    t0 = time.time(); _run(*train(0)); full = time.time() - t0
    seed_of = lambda: json.loads((settled(model) / ICT_RECORD).read_text(encoding='utf-8'))['seed']
    rng = random.Random(22)
    kills, seed, states, r = 0, 0, {'old': 0, 'new': 0}, 0
    need = max(1, MODEL_ROUNDS // 2)      # at least one run cut off, or nothing was tested (one round in CI)
    while r < MODEL_ROUNDS or (kills < need and r < MODEL_ROUNDS + 2):   # a run that ended before its kill: another round
        r += 1; new = r
        proc = subprocess.Popen(CLI + train(new), cwd=ROOT, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        time.sleep(rng.uniform(0.5, 1.05) * full)                      # late in the run: training ends, the save begins
        if proc.poll() is None: os.kill(proc.pid, signal.SIGKILL); kills += 1
        proc.wait()
        have = seed_of()                                                # it opens (settled puts a cut-off swap right) ...
        assert have in (seed, new), f'round {r}: the model folder holds seed {have}, neither the old {seed} nor the new {new}'
        Encoder(model, progress=False).encode(['a sentence'])           # ... and loads as a model
        states['old' if have == seed else 'new'] += 1
        seed = have
    assert kills >= need, f'only {kills} of {r} runs were killed ({full:.1f}s a run)'
    _run(*train(r))                                                           # the repair: the last command, run again
    _run(*train(r, tmp_path / 'reference'))                                   # one uninterrupted run with the same settings
    got, ref = (json.loads((p / ICT_RECORD).read_text(encoding='utf-8')) for p in (model, tmp_path / 'reference'))
    assert got['losses'] == ref['losses'] and got['examples_hash'] == ref['examples_hash']
    texts = ['graph retrieval over citations', 'a sentence about question answering']
    assert np.allclose(Encoder(model, progress=False).encode(texts), Encoder(tmp_path / 'reference', progress=False).encode(texts), atol=1e-6)
    assert not aside_path(model).exists() and not list(tmp_path.glob('.model.tmp-*')), 'a cut-off save left a folder behind'
    tally('kill -9 anywhere', f'model training and save (adapt): {r} rounds, {kills} killed, the folder old {states["old"]} '
          f'times and new {states["new"]} times; then repaired by a re-run', rounds=r, kills=kills, **states)
