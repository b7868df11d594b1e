"""An index built with `--index ivfpq` (02d_dense): its FAISS lists live in a memory-mapped file inside the generation
folder; the store loads it that way, answers as the store that wrote it, and an update writes a new generation with a
new lists file while the old generation is dropped whole."""
import json
import pytest

pytest.importorskip('faiss', reason="FAISS is not installed: pip install 'scholarqa[index]'")
from cli_run import cli


def test_ivfpq_index_from_the_command_line(tmp_path, demo_cli_copy):
    from scholarqa.retrieval.store import IndexStore, state_dir
    from scholarqa.retrieval.vector_index import _on_disk_lists
    demo_cli_copy(tmp_path, corpus='c')                                  # the demo corpus as `scholarqa ingest` writes it
    r = cli('index', tmp_path / 'c', '--out', tmp_path / 'ix', '--index', 'ivfpq', '--json')
    assert r.returncode == 0, r.stderr
    store = IndexStore.load(tmp_path / 'ix')
    gen = state_dir(tmp_path / 'ix', store.meta)
    lists = list(gen.glob('faiss-*.ivfdata'))
    assert len(lists) == 1 and store.meta['index']['kind'] == 'ivfpq'
    assert _on_disk_lists(store._vindex.index) is not None                  # memory-mapped, not read into memory
    q = 'how do citation graphs help retrieval?'
    fresh = [h.chunk.id for h in store.retriever('dense').retrieve(q, 5)]
    assert len(fresh) == 5
    # the same folder again, without --index: the kind it has is kept, nothing is encoded, nothing is written
    r = cli('index', tmp_path / 'c', '--out', tmp_path / 'ix', '--json')
    assert r.returncode == 0, r.stderr
    assert json.loads(r.stdout.strip().splitlines()[-1])['encoded'] == 0
    assert IndexStore.load(tmp_path / 'ix').meta['generation'] == store.meta['generation']
    # another kind for that folder is refused, naming both
    r = cli('index', tmp_path / 'c', '--out', tmp_path / 'ix', '--index', 'flat')
    assert r.returncode == 2 and 'ivfpq' in r.stderr and 'flat' in r.stderr, r.stderr


def test_ivfpq_store_update_writes_a_new_lists_file(tmp_path):
    from scholarqa.datasets import load_dataset
    from scholarqa.retrieval.dense import Encoder
    from scholarqa.retrieval.vector_index import _on_disk_lists
    from scholarqa.retrieval.store import IndexStore, build_index, state_dir
    papers = load_dataset('demo').papers
    enc = Encoder(progress=False)
    store = build_index(papers[:12], tmp_path / 'ix', encoder=enc, index_kind='ivfpq', query_encoder=False)
    old_gen = state_dir(tmp_path / 'ix', store.meta)
    old_lists = next(old_gen.glob('faiss-*.ivfdata'))
    reader = IndexStore.load(tmp_path / 'ix', enc)                         # a reader of the first generation
    q = 'semantic chunking of scientific papers'
    before = [h.chunk.id for h in reader.retriever('dense').retrieve(q, 5)]
    assert before == [h.chunk.id for h in store.retriever('dense').retrieve(q, 5)]
    u = IndexStore.load(tmp_path / 'ix', enc).update(papers)               # four papers more, from a loaded (mmapped) store
    assert u['added_papers'] == len(papers) - 12 and u['removed_papers'] == 0
    now = IndexStore.load(tmp_path / 'ix', enc)
    new_gen = state_dir(tmp_path / 'ix', now.meta)
    assert new_gen != old_gen and not old_gen.exists()
    assert len(list(new_gen.glob('faiss-*.ivfdata'))) == 1 and _on_disk_lists(now._vindex.index) is not None
    assert len(now._vindex) == len(now.chunks) == now.meta['counts']['vectors']
    added = {c.id for c in now.chunks if c.paper_id in {p.id for p in papers[12:]}}
    hits = {h.chunk.id for h in now.retriever('dense').retrieve(next(c.text for c in now.chunks if c.id in added), 3)}
    assert hits & added                                                    # a new paper's own paragraph finds it
