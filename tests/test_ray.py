"""`scholarqa index --engine ray` as a user runs it: a local Ray cluster of two CPUs writes the index the plain command
writes (same chunk ids, vectors with cosine >= 0.9999), an unchanged corpus sends nothing to Ray, and a machine without
Ray gets a one-line message naming the extra (02l_ray)."""
import json, subprocess, sys
from pathlib import Path
import numpy as np
import pytest

ROOT = Path(__file__).resolve().parents[1]
DEMO = ROOT / 'data' / 'demo'
pytest.importorskip('ray', reason="Ray is not installed: pip install 'scholarqa[ray]'")
from test_cli import run_blocked


def cli(*argv, timeout=900):
    r = subprocess.run([sys.executable, '-c', 'from scholarqa.cli import cli_main; cli_main()', *map(str, argv)],
                       capture_output=True, text=True, timeout=timeout, cwd=ROOT)
    return r


@pytest.fixture(scope='module')
def corpus(tmp_path_factory):
    out = tmp_path_factory.mktemp('ray') / 'corpus'
    r = cli('ingest', DEMO, '--out', out, '--json')
    assert r.returncode == 0, r.stderr
    return out


def test_ray_index_equals_the_plain_index(corpus, tmp_path):
    from scholarqa.retrieval.store import IndexStore
    from scholarqa.retrieval.dense import chunk_int_id
    r = cli('index', corpus, '--out', tmp_path / 'ray', '--engine', 'ray', '--actors', '2', '--json')
    assert r.returncode == 0, r.stderr
    rep = json.loads(r.stdout.strip().splitlines()[-1])
    assert rep['papers'] == 16 and rep['encoded'] == rep['chunks'] > 0 and rep['cached'] == 0
    r = cli('index', corpus, '--out', tmp_path / 'plain', '--json')
    assert r.returncode == 0, r.stderr
    ray_idx, plain_idx = IndexStore.load(tmp_path / 'ray'), IndexStore.load(tmp_path / 'plain')
    assert [c.id for c in ray_idx.chunks] == [c.id for c in plain_idx.chunks]
    ids = [chunk_int_id(c.id) for c in plain_idx.chunks]
    cos = (ray_idx._vindex.vectors(ids) * plain_idx._vindex.vectors(ids)).sum(1)
    assert cos.min() >= 0.9999, cos.min()
    again = cli('index', corpus, '--out', tmp_path / 'ray', '--engine', 'ray', '--actors', '2', '--json')
    assert again.returncode == 0, again.stderr
    rep = json.loads(again.stdout.strip().splitlines()[-1])
    assert (rep['added_papers'], rep['encoded'], rep['unchanged_papers']) == (0, 0, 16)


def test_ray_options_need_the_ray_engine(corpus, tmp_path):
    r = cli('index', corpus, '--out', tmp_path / 'x', '--actors', '2')
    assert r.returncode == 2 and '--engine ray' in r.stderr, r.stderr
    assert not (tmp_path / 'x').exists()


def test_a_missing_ray_is_named(corpus, tmp_path):
    r = run_blocked(['index', corpus, '--out', tmp_path / 'x', '--engine', 'ray'], blocked={'ray'})
    assert r.returncode == 2 and "pip install 'scholarqa[" in r.stderr and 'ray' in r.stderr, r.stderr
