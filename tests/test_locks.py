"""One writer at a time: two `scholarqa` processes racing on the same output folder, and `--no-wait`.

Each race starts two real processes at once on one folder. Without the writer lock the second to finish would save a
manifest (or an index) read before the first one's work, and that work would be lost; with it, the second waits and builds on
the first. The tests check the outcome against what one process alone would have made, and that the race really happened
(some round saw one process wait for the other), so a test that raced nothing cannot pass.
"""
import json, os, signal, subprocess, sys, time
from pathlib import Path

import pytest

from scholarqa.datasets import demo_dir
from scholarqa.ingest import Corpus, load_manifest

ROOT = Path(__file__).resolve().parents[1]
CLI = [sys.executable, '-c', 'from scholarqa.cli import cli_main; cli_main()']
WAITED = 'waiting for it to finish'
RACE_ROUNDS = int(os.environ.get('SCHOLARQA_RACE_ROUNDS', '1'))   # index races (two PyTorch processes a round): one in CI


def _start(*args):
    return subprocess.Popen(CLI + [str(a) for a in args], cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def _finish(proc, timeout=600):
    out, err = proc.communicate(timeout=timeout)
    return proc.returncode, out, err


def _holder(target: Path):
    "A process that holds `target`'s writer lock until it is killed; returns once it holds it."
    code = f'import time\nfrom scholarqa.files import writer_lock\nwith writer_lock({str(target)!r}):\n    print("held", flush=True); time.sleep(600)\n'
    p = subprocess.Popen([sys.executable, '-c', code], cwd=ROOT, stdout=subprocess.PIPE, text=True)
    assert p.stdout.readline().strip() == 'held'
    return p


def test_ingest_race_20_rounds(tmp_path, variant_papers, tally):
    "Two ingests of different new papers into one corpus at once, 20 rounds: both succeed and every paper of both is kept."
    out, want, waited = tmp_path / 'corpus', set(), 0
    for r in range(20):
        a = {str(f.resolve()) for f in variant_papers(tmp_path / f'a{r}', 25, f'a{r}_')}
        b = {str(f.resolve()) for f in variant_papers(tmp_path / f'b{r}', 25, f'b{r}_')}
        pa = _start('ingest', tmp_path / f'a{r}', '--out', out, '--json')
        pb = _start('ingest', tmp_path / f'b{r}', '--out', out, '--json')
        (ca, oa, ea), (cb, ob, eb) = _finish(pa), _finish(pb)
        assert (ca, cb) == (0, 0), (ea[-2000:], eb[-2000:])
        assert json.loads(oa.splitlines()[-1])['added'] == 25 and json.loads(ob.splitlines()[-1])['added'] == 25
        waited += (WAITED in ea) or (WAITED in eb)
        want |= a | b
        man = load_manifest(out)
        assert set(man['files']) == want, f'round {r}: {len(want - set(man["files"]))} ingested files lost from the manifest'
        assert all(e['status'] == 'ok' for e in man['files'].values())
    corpus = Corpus.load(out)
    assert len(corpus) == len(want) == 20 * 2 * 25
    assert waited >= 1, 'no round had one ingest wait for the other: the race never happened'
    assert not list(out.glob('**/*.tmp'))
    tally('one writer at a time', f'ingest: two processes add 25 new papers each to one corpus, 20 rounds; one waited in {waited}',
          rounds=20, waited=waited)


@pytest.fixture(scope='module')
def demo_corpus(tmp_path_factory):
    out = tmp_path_factory.mktemp('lock_demo') / 'corpus'
    code, _, err = _finish(_start('ingest', demo_dir(), '--out', out, '--json'))
    assert code == 0, err[-2000:]
    return out


def _state(index: Path):
    "What an index folder holds: chunk ids in order, the vector index's ids, meta.json."
    from scholarqa.retrieval.store import IndexStore
    s = IndexStore.load(index)
    return [c.id for c in s.chunks], sorted(s._vindex.ids), s.meta


def test_index_race(demo_corpus, tmp_path, tally):
    "Two `scholarqa index` runs on one new folder at once: one builds, the other waits and finds it up to date; the result equals a solo build."
    code, out, err = _finish(_start('index', demo_corpus, '--out', tmp_path / 'solo', '--json'))
    assert code == 0, err[-2000:]
    solo = json.loads(out.splitlines()[-1])
    solo_ids, solo_vids, solo_meta = _state(tmp_path / 'solo')
    waited = 0
    for r in range(RACE_ROUNDS):
        idx = tmp_path / f'race{r}'
        runs = [_finish(p) for p in [_start('index', demo_corpus, '--out', idx, '--json') for _ in range(2)]]
        assert [c for c, _, _ in runs] == [0, 0], [e[-2000:] for _, _, e in runs]
        reps = sorted((json.loads(o.splitlines()[-1]) for _, o, _ in runs), key=lambda x: -x['added_papers'])
        assert reps[0]['added_papers'] == solo['papers'] and reps[0]['encoded'] == solo['encoded']   # one built it all ...
        assert (reps[1]['added_papers'], reps[1]['unchanged_papers'], reps[1]['encoded']) == (0, solo['papers'], 0)   # ... the other found it done
        waited += any(WAITED in e for _, _, e in runs)
        ids, vids, meta = _state(idx)
        assert (ids, vids) == (solo_ids, solo_vids)
        assert [meta[k] for k in ('counts', 'corpus_hash', 'corpus_dir', 'generation')] == [solo_meta[k] for k in ('counts', 'corpus_hash', 'corpus_dir', 'generation')]
    assert waited >= 1, 'no round had one index run wait for the other: the race never happened'
    tally('one writer at a time', f'index: two processes build one new index folder, {RACE_ROUNDS} rounds; one waited in {waited}',
          rounds=RACE_ROUNDS, waited=waited)


def test_no_wait_and_a_killed_holder(demo_corpus, tmp_path, tally):
    "--no-wait refuses a busy folder with status 3 naming the holder; a holder killed with -9 frees the folder, and a waiting writer goes on."
    out = tmp_path / 'corpus'
    holder = _holder(out)
    try:
        code, _, err = _finish(_start('ingest', demo_dir(), '--out', out, '--no-wait'))
        assert code == 3 and str(holder.pid) in err and 'writing it' in err, err[-2000:]
        assert not (out / 'manifest.json').exists()                       # refused before touching anything
        code, _, err = _finish(_start('index', demo_corpus, '--out', out, '--no-wait'))
        assert code == 3 and str(holder.pid) in err, err[-2000:]
        waiter = _start('ingest', demo_dir(), '--out', out, '--json')     # this one waits ...
        time.sleep(5)                                                     # ... long enough to have started and be waiting
        assert waiter.poll() is None, 'the second writer did not wait for the lock'
    finally:
        os.kill(holder.pid, signal.SIGKILL); holder.wait()
    code, outp, err = _finish(waiter)                                     # ... and goes on once the holder is gone
    assert code == 0 and WAITED in err, err[-2000:]
    assert json.loads(outp.splitlines()[-1])['failed'] == []
    code, outp, err = _finish(_start('ingest', demo_dir(), '--out', out, '--no-wait', '--json'))
    assert code == 0 and json.loads(outp.splitlines()[-1])['added'] == 0, err[-2000:]
    tally('one writer at a time', '--no-wait on a busy folder (ingest, index): exit 3 naming the holder; a holder killed with -9 '
          'frees the folder for a writer that waited')
