"Fixtures shared by several test modules."
import pytest


@pytest.fixture(scope='session')
def unarxive_index(tmp_path_factory):
    "The unArXive sample indexed as `scholarqa index` does it (paragraph chunks with headers, MiniLM, flat FAISS), built once."
    from scholarqa.datasets import load_dataset, DatasetUnavailable
    from scholarqa.retrieval.dense import Encoder
    from scholarqa.retrieval.store import build_index
    try: ux = load_dataset('unarxive')
    except DatasetUnavailable as e: pytest.skip(str(e))
    root = tmp_path_factory.mktemp('unarxive_index')
    store = build_index(ux.papers, root / 'index', encoder=Encoder(progress=False, cache_dir=root / 'index' / 'embeddings'))
    return store, ux
