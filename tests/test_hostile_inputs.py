"""`scholarqa ingest` on 230 hostile files of 18 kinds (tests/hostile_inputs.py): every bad file is reported alone with its
reason, every good paper and every good record is kept, the exit status says something failed, and a second run loses
nothing. Also: a reader caught in a loop is stopped by the per-file time limit, and the peak memory of a large file."""
import json, os, subprocess, sys, time
from collections import Counter
from pathlib import Path

import pytest

from hostile_inputs import kind_of, write_batch
from scholarqa.datasets import demo_dir

ROOT = Path(__file__).resolve().parents[1]
CLI = [sys.executable, '-c', 'from scholarqa.cli import cli_main; cli_main()']


def _ingest(*args):
    r = subprocess.run(CLI + ['ingest', *map(str, args), '--json'], cwd=ROOT, capture_output=True, text=True, timeout=1800)
    assert r.stdout.strip(), r.stderr[-2000:]
    return r.returncode, json.loads(r.stdout.strip().splitlines()[-1])


def test_230_hostile_files(tmp_path, tally):
    want = write_batch(tmp_path / 'batch')
    assert len(want) >= 200
    code, rep = _ingest(tmp_path / 'batch', '--out', tmp_path / 'corpus', '--max-bytes', 10_000_000)
    assert code == 1, 'the exit status must say that something failed'
    failed = {}
    for f in rep['failed']: failed.setdefault(Path(f['path'].split(' [')[0]).name, []).append(f['error'])
    for name, (kind, arg) in sorted(want.items()):
        if kind == 'ok': assert name not in failed, (name, failed.get(name))
        if kind == 'failed':
            assert name in failed, f'{name}: not reported'
            assert any(w in failed[name][0] for w in arg), (name, failed[name][0])
        if kind == 'partial': assert len(failed.get(name, [])) == arg, (name, failed.get(name))
    assert not set(failed) - set(want), 'a file nobody expected to fail failed'
    from scholarqa.ingest import Corpus, load_manifest
    n_ok = sum(k == 'ok' for k, _ in want.values())
    n_records = 4 * sum(k == 'partial' for k, _ in want.values())   # four good records around each bad line
    assert rep['papers'] == len(Corpus.load(tmp_path / 'corpus')) == n_ok + n_records
    assert {Path(s).name for s in rep['skipped']} == {n for n, (k, _) in want.items() if k == 'skipped'}   # claimed by no reader
    assert not {Path(k).name for k in load_manifest(tmp_path / 'corpus')['files']} & {Path(s).name for s in rep['skipped']}
    code, again = _ingest(tmp_path / 'batch', '--out', tmp_path / 'corpus', '--max-bytes', 10_000_000)
    assert code == 1 and again['papers'] == rep['papers'] and again['added'] == 0   # nothing lost, nothing redone
    for kind, n in Counter(kind_of(name) for name in want).items():
        tally('hostile inputs', f'{n} × {kind}', files=n)


def test_a_looping_reader_is_stopped_by_the_time_limit(tmp_path, tally):
    from scholarqa.ingest import READERS, ingest
    from scholarqa.readers.base import register_reader

    @register_reader('loops_forever', suffixes=('.loop',))
    def _loops(path, **_):
        "A reader caught in an endless loop, as a parser can be on a malicious PDF."
        while True: pass
    try:
        (tmp_path / 'in').mkdir()
        (tmp_path / 'in' / 'trap.loop').write_text('x')
        (tmp_path / 'in' / 'fine.md').write_text(sorted(demo_dir().glob('*.md'))[0].read_text(encoding='utf-8'))
        t0 = time.perf_counter()
        rep = ingest([tmp_path / 'in'], tmp_path / 'out', progress=False, time_limit=1.0)
        assert time.perf_counter() - t0 < 30
        assert [Path(f['path']).name for f in rep.failed] == ['trap.loop'] and 'time limit' in rep.failed[0]['error']
        assert rep.papers == 1                                      # the good file of the same batch is kept
        tally('hostile inputs', 'a reader caught in an endless loop (per-file time limit)', files=1)
    finally:
        READERS.pop('loops_forever')


BIG_MB = int(os.environ.get('SCHOLARQA_BIG_FILE_MB', '20'))


def test_peak_memory_of_a_large_markdown_file(tmp_path, tally):
    """A large Markdown paper ($SCHOLARQA_BIG_FILE_MB, default 20 MB; the reliability run uses 200): ingested, with the peak
    memory of the process stated. The whole file is parsed in memory, so the bound is linear in its size, and the ingest limit
    on file size (MAX_FILE_BYTES, --max-bytes) caps it."""
    src = tmp_path / 'big'; src.mkdir()
    head, body = sorted(demo_dir().glob('*.md'))[0].read_text(encoding='utf-8').split('\n## 1 Introduction\n', 1)
    parts, n, i = [head], 0, 0
    while n < BIG_MB * 2**20:
        s = f'\n## Section {i}\n' + body.replace('## ', '### '); parts.append(s); n += len(s); i += 1
    (src / 'big.md').write_text(''.join(parts), encoding='utf-8')
    # the ingest runs under a small parent whose only child it is, so the parent's RUSAGE_CHILDREN is the ingest's own peak
    # (this test process's would be the largest of every child it ever started)
    parent = ('import resource, subprocess, sys\nr = subprocess.run(sys.argv[1:])\n'
              'print("peak_kib", resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss, file=sys.stderr)\nsys.exit(r.returncode)')
    r = subprocess.run([sys.executable, '-c', parent, *CLI, 'ingest', str(src), '--out', str(tmp_path / 'corpus'), '--json'],
                       cwd=ROOT, capture_output=True, text=True, timeout=3600)
    assert r.returncode == 0 and json.loads(r.stdout.strip().splitlines()[-1])['papers'] == 1, r.stderr[-2000:]
    peak_mb = int(r.stderr.split('peak_kib')[-1].split()[0]) / 1024   # Linux: ru_maxrss in KiB
    bound = 300 + 40 * BIG_MB                                       # MB: the interpreter and models, plus 40× the file
    assert peak_mb < bound, f'peak RSS {peak_mb:.0f} MB for a {BIG_MB} MB file (bound {bound} MB)'
    tally('hostile inputs', f'a {BIG_MB} MB Markdown paper: peak resident memory {peak_mb:.0f} MB (bound {bound} MB)',
          files=1, peak_mb=round(peak_mb), size_mb=BIG_MB)
