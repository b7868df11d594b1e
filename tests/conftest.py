"Fixtures shared by several test modules."
import json, os

import pytest


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
def unarxive_index(tmp_path_factory, request):
    """The unArXive sample indexed as `scholarqa index` does it (paragraph chunks with headers, MiniLM, flat FAISS), built once.
    Under pytest-xdist (`make test` runs two workers) the folder is shared by the workers: `build_index` holds the folder's
    writer lock through its check-then-build, so the first worker builds and the second finds it current (a no-op update)."""
    from scholarqa.datasets import load_dataset, DatasetUnavailable
    from scholarqa.retrieval.dense import Encoder
    from scholarqa.retrieval.store import build_index
    try: ux = load_dataset('unarxive')
    except DatasetUnavailable as e: pytest.skip(str(e))
    worker = getattr(request.config, 'workerinput', None)          # set on xdist workers only
    if worker is None: root = tmp_path_factory.mktemp('unarxive_index')
    else: root = tmp_path_factory.getbasetemp().parent / 'unarxive_index'   # the run's base folder, shared by its workers
    store = build_index(ux.papers, root / 'index', encoder=Encoder(progress=False, cache_dir=root / 'index' / 'embeddings'))
    return store, ux


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
