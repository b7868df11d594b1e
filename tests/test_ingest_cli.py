"""Integration tests of `scholarqa ingest`: the command line, incremental re-runs, malformed batches, and kill -9 recovery."""
import gzip, json, os, random, shutil, signal, subprocess, sys, time
from pathlib import Path

import pytest

from scholarqa.ingest import Corpus, load_manifest
from scholarqa.doc import iter_paragraphs
from scholarqa.datasets import demo_dir, find_data_dir

ROOT = Path(__file__).resolve().parents[1]
CLI = [sys.executable, '-c', 'from scholarqa.cli import cli_main; cli_main()']


def scholarqa(*args, timeout=600):
    return subprocess.run(CLI + [str(a) for a in args], capture_output=True, text=True, timeout=timeout, cwd=ROOT)


def ingest_json(*args):
    r = scholarqa('ingest', *args, '--json')
    assert r.stdout.strip(), f'no JSON on stdout; stderr: {r.stderr[-2000:]}'
    return r.returncode, json.loads(r.stdout.strip().splitlines()[-1])


def test_demo_ingest_then_nothing_to_do(tmp_path):
    demo = demo_dir()
    n_md = len(list(demo.glob('*.md')))
    code, first = ingest_json(demo, '--out', tmp_path / 'c')
    assert code == 0, first
    n_pdf = len(list((demo / 'pdf').glob('*.pdf'))) if (demo / 'pdf').exists() else 0
    assert first['added'] == n_md + n_pdf and first['failed'] == []
    code, second = ingest_json(demo, '--out', tmp_path / 'c')
    assert code == 0
    assert (second['added'], second['changed'], second['unchanged']) == (0, 0, n_md + n_pdf)
    corpus = Corpus.load(tmp_path / 'c')
    # a PDF whose text equals its Markdown source is the same paper (same content id): kept once
    keys = {p.source_ids['key'] for p in corpus}
    assert keys == {f.stem for f in demo.glob('*.md')}
    assert len(corpus) + corpus.duplicates == n_md + n_pdf
    in_corpus_refs = [r for p in corpus for r in p.references if r.key in keys]
    assert in_corpus_refs and all(r.resolved for r in in_corpus_refs)


def test_unarxive_sample_via_cli(tmp_path):
    data = find_data_dir()
    src = data / 'unarxive_sample' / 'arXiv_src_2212_086.jsonl.gz' if data else None
    if not src or not src.exists(): pytest.skip(f'unarXive sample not found (looked in {data}); set SCHOLARQA_DATA')
    code, rep = ingest_json(src, '--out', tmp_path / 'u')
    assert code == 0 and rep['added'] == 1 and rep['papers'] == 49
    body = [json.loads(l) for l in gzip.open(src, 'rt', encoding='utf-8')]
    corpus = Corpus.load(tmp_path / 'u')
    for rec in body:
        paper = corpus.by_source_id('arxiv', rec['paper_id'])
        idx = [p.index for s, p in iter_paragraphs(paper) if s.path != '0']
        assert idx == list(range(len(rec['body_text']))), rec['paper_id']


def _malformed_batch(root: Path) -> tuple[list[Path], list[Path]]:
    """≥ 50 malformed files of every kind, mixed with good ones. Returns (bad files, good files)."""
    bad, good = [], []
    d = root / 'batch'; d.mkdir()
    demo = demo_dir()
    for i, f in enumerate(sorted(demo.glob('*.md'))[:6]):
        g = d / f'good_{i}.md'; g.write_text(f.read_text(encoding='utf-8'), encoding='utf-8'); good.append(g)
    rng = random.Random(0)
    sample_md = sorted(demo.glob('*.md'))[0].read_text(encoding='utf-8')
    pdfs = sorted((demo / 'pdf').glob('*.pdf')) if (demo / 'pdf').exists() else []
    for i in range(6):
        p = d / f'empty_{i}{[".md", ".json", ".jsonl", ".pdf", ".md", ".jsonl"][i]}'; p.write_bytes(b''); bad.append(p)
    for i in range(8):   # invalid UTF-8 at a random place
        raw = bytearray(sample_md.encode('utf-8')); pos = rng.randrange(20, len(raw) - 1); raw[pos:pos] = b'\xff\xfe\xfa'
        p = d / f'latin_{i}.md'; p.write_bytes(bytes(raw)); bad.append(p)
    for i in range(8):   # truncated JSON with a recognisable schema
        rec = {'paper_id': f'2212.{i:05d}', '_pdf_hash': None, 'metadata': {'title': 'T'}, 'abstract': {'text': 'a'},
               'body_text': [{'section': 'Intro', 'text': 'x' * 50}], 'bib_entries': {}, 'ref_entries': {}}
        txt = json.dumps(rec); p = d / f'trunc_{i}.jsonl'; p.write_text(txt[: len(txt) // 2 + i]); bad.append(p)
    for i in range(8):   # valid JSON of no known schema
        p = d / f'schema_{i}.json'; p.write_text(json.dumps({'unexpected': i, 'rows': list(range(i))})); bad.append(p)
    for i in range(6):   # corrupt PDFs: random bytes, a cut-off real PDF
        p = d / f'corrupt_{i}.pdf'
        if pdfs and i % 2: p.write_bytes(pdfs[0].read_bytes()[: 300 + 50 * i])
        else: p.write_bytes(b'%PDF-1.4\n' + bytes(rng.randrange(256) for _ in range(400)))
        bad.append(p)
    try:
        from pypdf import PdfWriter
        for i in range(3):
            w = PdfWriter(); w.add_blank_page(200, 200); w.encrypt(f'secret{i}')
            p = d / f'encrypted_{i}.pdf'
            with open(p, 'wb') as fh: w.write(fh)
            bad.append(p)
    except ImportError: pass
    for i in range(6):   # Markdown without a title heading
        p = d / f'notitle_{i}.md'; p.write_text(f'Just text {i}, no heading.\n\nMore text.\n'); bad.append(p)
    for i in range(4):   # corrupt gzip
        p = d / f'broken_{i}.jsonl.gz'; p.write_bytes(gzip.compress(b'{"a": 1}\n' * 50)[: 30 + i]); bad.append(p)
    for i in range(3):   # too big for --max-bytes 200000
        p = d / f'huge_{i}.md'; p.write_text('# Huge\n\n' + ('word ' * 50_000)); bad.append(p)
    for i in range(3):   # whitespace only
        p = d / f'blank_{i}.md'; p.write_text('\n \n\t\n'); bad.append(p)
    return bad, good


def test_malformed_batch(tmp_path):
    bad, good = _malformed_batch(tmp_path)
    assert len(bad) >= 50
    code, rep = ingest_json(tmp_path / 'batch', '--out', tmp_path / 'c', '--max-bytes', '200000')
    assert code == 1, 'exit status must say that a failure happened'
    failed_paths = {Path(f['path'].split(' [')[0]).name for f in rep['failed']}
    assert {b.name for b in bad} <= failed_paths, sorted({b.name for b in bad} - failed_paths)
    assert not failed_paths & {g.name for g in good}
    assert rep['added'] == len(good) and rep['papers'] == len(good)
    assert all(f['error'] and f['error'] != 'None' for f in rep['failed'])
    reasons = {Path(f['path']).name.split('_')[0]: f['error'] for f in rep['failed']}
    assert 'empty' in reasons['empty'] and 'utf-8' in reasons['latin'] and 'over the limit' in reasons['huge']
    if any(b.name.startswith('encrypted') for b in bad): assert 'encrypted' in reasons['encrypted']
    # nothing ingested before is lost: a second run with the bad files still there keeps the good papers
    code, rep2 = ingest_json(tmp_path / 'batch', '--out', tmp_path / 'c', '--max-bytes', '200000')
    assert rep2['unchanged'] == len(good) and rep2['papers'] == len(good)


def _shard_ids(out: Path) -> list[str]:
    ids = []
    for s in (out / 'papers').glob('*.jsonl'):
        ids += [json.loads(l)['id'] for l in s.read_text(encoding='utf-8').splitlines() if l.strip()]
    return ids


def test_kill_9_at_any_point_then_repair(tmp_path, variant_papers, tally):
    """Kill the ingest with SIGKILL at random moments over several rounds (sources edited between rounds, so every round
    has work to do), then finish: the corpus equals a clean ingest of the final sources, with no duplicate and no loss."""
    src, out = tmp_path / 'src', tmp_path / 'crashy'
    n = len(variant_papers(src, 400))
    t0 = time.time(); code, _ = ingest_json(src, '--out', tmp_path / 'timing'); full = time.time() - t0
    assert code == 0
    rng = random.Random(1234)
    kills = 0
    rounds = int(os.environ.get('SCHOLARQA_KILL_ROUNDS', '6'))
    for attempt in range(rounds):
        for f in rng.sample(sorted(src.glob('*.md')), 150):   # new work for this round
            f.write_text(f.read_text(encoding='utf-8').replace('## Abstract\n', f'## Abstract\nEdit {attempt}.\n', 1), encoding='utf-8')
        proc = subprocess.Popen(CLI + ['ingest', str(src), '--out', str(out), '--json'], cwd=ROOT,
                                stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        time.sleep(rng.uniform(0.1, 0.9) * full)
        if proc.poll() is None:
            os.kill(proc.pid, signal.SIGKILL); kills += 1
        proc.wait()
        if (out / 'manifest.json').exists(): load_manifest(out)   # never half-written
    assert kills >= rounds // 2, f'the runs finished too fast ({full:.1f}s) for the crash test to mean anything'
    code, final = ingest_json(src, '--out', out)
    assert code == 0 and final['failed'] == [] and final['papers'] == n
    code, ref = ingest_json(src, '--out', tmp_path / 'reference')
    ids = _shard_ids(out)
    assert len(ids) == len(set(ids)) == n, 'duplicates or losses after crash recovery'
    assert set(ids) == set(_shard_ids(tmp_path / 'reference'))
    man = load_manifest(out)
    live = [e for e in man['files'].values() if e['status'] != 'removed']
    assert len(live) == n and all(e['status'] == 'ok' for e in live)
    assert not list(out.glob('**/*.tmp'))
    code, again = ingest_json(src, '--out', out)
    assert (again['added'], again['changed'], again['unchanged']) == (0, 0, n)
    tally('kill -9 anywhere', f'ingest of {n} papers, 150 edited a round: {rounds} rounds, {kills} killed; then repaired by a re-run',
          rounds=rounds, kills=kills)
