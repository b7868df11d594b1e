"""`scholarqa index --engine ray` as a user runs it: a local Ray cluster of two CPUs writes the index the plain command
writes (same chunk ids, vectors with cosine >= 0.9999), an unchanged corpus sends nothing to Ray, and a machine without
Ray gets a one-line message naming the extra (02l_ray)."""
import json
import pytest

pytest.importorskip('ray', reason="Ray is not installed: pip install 'scholarqa[ray]'")
from cli_run import DEMO, cli, run_blocked


@pytest.fixture(scope='module')
def demo(tmp_path_factory):
    "Four demo papers as `scholarqa ingest` writes them, and their plain `scholarqa index` (few papers: each Ray actor loads a model)."
    import shutil
    root = tmp_path_factory.mktemp('ray')
    (root / 'src').mkdir()
    for f in sorted(DEMO.glob('*.md'))[:4]: shutil.copy(f, root / 'src' / f.name)
    for argv in (['ingest', root / 'src', '--out', root / 'corpus', '--json'], ['index', root / 'corpus', '--out', root / 'index', '--json']):
        r = cli(*argv)
        assert r.returncode == 0, r.stderr
    return root


@pytest.fixture(scope='module')
def corpus(demo):
    return demo / 'corpus'


def test_ray_index_equals_the_plain_index(corpus, demo, tmp_path):
    from scholarqa.retrieval.store import IndexStore
    from scholarqa.retrieval.dense import chunk_int_id
    r = cli('index', corpus, '--out', tmp_path / 'ray', '--engine', 'ray', '--actors', '2', '--json')
    assert r.returncode == 0, r.stderr
    rep = json.loads(r.stdout.strip().splitlines()[-1])
    assert rep['papers'] == 4 and rep['encoded'] == rep['chunks'] > 0 and rep['cached'] == 0
    ray_idx, plain_idx = IndexStore.load(tmp_path / 'ray'), IndexStore.load(demo / 'index')   # the plain `scholarqa index`
    assert [c.id for c in ray_idx.chunks] == [c.id for c in plain_idx.chunks]
    ids = [chunk_int_id(c.id) for c in plain_idx.chunks]
    cos = (ray_idx._vindex.vectors(ids) * plain_idx._vindex.vectors(ids)).sum(1)
    assert cos.min() >= 0.9999, cos.min()
    again = cli('index', corpus, '--out', tmp_path / 'ray', '--engine', 'ray', '--actors', '2', '--json')
    assert again.returncode == 0, again.stderr
    rep = json.loads(again.stdout.strip().splitlines()[-1])
    assert (rep['added_papers'], rep['encoded'], rep['unchanged_papers']) == (0, 0, 4)


def test_ray_options_need_the_ray_engine(corpus, tmp_path):
    r = cli('index', corpus, '--out', tmp_path / 'x', '--actors', '2')
    assert r.returncode == 2 and '--engine ray' in r.stderr, r.stderr
    assert not (tmp_path / 'x').exists()


def test_a_missing_ray_is_named(corpus, tmp_path):
    r = run_blocked(['index', corpus, '--out', tmp_path / 'x', '--engine', 'ray'], blocked={'ray'})
    assert r.returncode == 2 and "pip install 'scholarqa[" in r.stderr and 'ray' in r.stderr, r.stderr
