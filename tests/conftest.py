"Fixtures shared by several test modules."
import json, os

import pytest

# `make test` runs pytest on two workers, a whole file each at a time (`-n 2 --dist loadfile`), in the order files are
# collected. A long file collected last would run alone at the end while the other core idles, so the longest files (from
# a CI log's `--durations` list) are collected first and the short ones fill the end. Only the order changes, never what runs.
LONGEST_FIRST = ('test_crash.py', 'test_sketch.py', 'test_index_dense.py', 'test_ray.py', 'test_readme.py', 'test_ict.py',
                 'test_rerank.py', 'test_locks.py', 'test_structrag.py', 'test_ragas.py', 'test_kg_stores.py')


def pytest_collection_modifyitems(config, items):
    rank = {name: i for i, name in enumerate(LONGEST_FIRST)}
    items.sort(key=lambda item: rank.get(item.path.name, len(LONGEST_FIRST)))   # a stable sort: the rest keep their order


@pytest.fixture
def tally(request):
    """tally(guarantee, tried, **counts): what a reliability test tried, appended as one JSON line to $SCHOLARQA_TALLY when it
    is set. The reliability notebook (10b) runs these tests with the full counts and builds its table from the lines and
    pytest's own pass/fail report; without the variable nothing is written."""
    def add(guarantee: str, tried: str, **counts):
        path = os.environ.get('SCHOLARQA_TALLY')
        if not path: return
        with open(path, 'a', encoding='utf-8') as f:
            f.write(json.dumps({'test': request.node.nodeid, 'guarantee': guarantee, 'tried': tried, **counts}) + '\n')
    return add


@pytest.fixture(scope='session')
def variant_papers():
    "write(folder, n, tag): n Markdown papers made from the demo papers, each a paper of its own by one added sentence; returns their paths."
    from scholarqa.datasets import demo_dir
    def write(d, n: int, tag: str = 'p') -> list:
        d.mkdir(parents=True)
        md = sorted(demo_dir().glob('*.md'))
        paths = []
        for i in range(n):
            txt = md[i % len(md)].read_text(encoding='utf-8')
            txt = txt.replace('## Abstract\n', f'## Abstract\nVariant {tag}{i} of this paper, written for a test.\n', 1)
            paths.append(d / f'{tag}{i:03d}.md'); paths[-1].write_text(txt, encoding='utf-8')
        return paths
    return write


@pytest.fixture(scope='session')
def demo_cli_copy(tmp_path_factory, request):
    """copy(dest, corpus='corpus', index='index') -> (dest, report): a private copy of the demo corpus as `scholarqa ingest`
    writes it and its index as `scholarqa index --json` builds it (report: that command's JSON). The two commands run once
    per test run; under pytest-xdist the workers share the build (a file lock: the first builds, the others wait and copy).
    Each caller gets its own copy, with the index pointing at the copied corpus, so a test may write into it freely."""
    import shutil, subprocess, sys
    from pathlib import Path
    from filelock import FileLock
    from scholarqa.datasets import demo_dir
    worker = getattr(request.config, 'workerinput', None)
    root = tmp_path_factory.mktemp('demo_cli') if worker is None else tmp_path_factory.getbasetemp().parent / 'demo_cli'
    root.mkdir(parents=True, exist_ok=True)
    exe = Path(sys.executable).parent / 'scholarqa'
    with FileLock(str(root) + '.lock'):
        if not (root / 'index_report.json').exists():
            for cmd in (['ingest', demo_dir(), '--out', root / 'corpus', '--json'], ['index', root / 'corpus', '--out', root / 'index', '--json']):
                r = subprocess.run([str(exe), *map(str, cmd)], capture_output=True, text=True, timeout=1800)
                assert r.returncode == 0, r.stderr[-2000:]
            (root / 'index_report.tmp').write_text(r.stdout.strip().splitlines()[-1], encoding='utf-8')
            (root / 'index_report.tmp').replace(root / 'index_report.json')
    report = json.loads((root / 'index_report.json').read_text(encoding='utf-8'))

    def copy(dest, corpus: str = 'corpus', index: str = 'index'):
        dest = Path(dest)
        shutil.copytree(root / 'corpus', dest / corpus)
        shutil.copytree(root / 'index', dest / index)
        meta = json.loads((dest / index / 'meta.json').read_text(encoding='utf-8'))
        meta['corpus_dir'] = str((dest / corpus).resolve())
        (dest / index / 'meta.json').write_text(json.dumps(meta, ensure_ascii=False), encoding='utf-8')
        return dest, report
    return copy
