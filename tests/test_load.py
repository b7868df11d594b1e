"""Many searches in one process: memory does not grow with the number of calls (no cache that keeps every query).

CI size: the demo index and $SCHOLARQA_LOAD_CALLS calls per retriever (default 1,000; the reliability notebook, 10b, runs
10,000, and times searches on a 10k-chunk store itself; timings are not asserted here, because a test shares the machine).
"""
import os, random, time
from pathlib import Path

import pytest

CALLS = int(os.environ.get('SCHOLARQA_LOAD_CALLS', '1000'))
GROWTH_MB = 1.5 + CALLS * 0.5 / 1024   # the stated bound after the warm-up: 1.5 MB of slack + 0.5 KB a call, less than
                                       # one stored query vector (384 floats) a call would take


def _rss_mb() -> float:
    "Resident memory of this process now (Linux: /proc/self/statm)."
    pages = int(Path('/proc/self/statm').read_text().split()[1])
    return pages * os.sysconf('SC_PAGE_SIZE') / 2**20


@pytest.mark.skipif(not Path('/proc/self/statm').exists(), reason='reads resident memory from /proc (Linux)')
@pytest.mark.parametrize('retriever', ['bm25', 'hybrid'])
def test_many_searches_do_not_grow_memory(retriever, tmp_path_factory, tally):
    from scholarqa.datasets import load_dataset
    from scholarqa.retrieval.dense import Encoder
    from scholarqa.retrieval.store import build_index, IndexStore
    root = tmp_path_factory.getbasetemp() / 'load_index'
    if not (root / 'meta.json').exists():
        build_index(load_dataset('demo').papers, root, encoder=Encoder(progress=False, cache_dir=root / 'embeddings'))
    ret = IndexStore.load(root).retriever(retriever)
    words = [w for c in IndexStore.load(root).chunks[:200] for w in c.text.split() if w.isalpha() and len(w) > 3]
    rng = random.Random(0)
    ask = lambda: ret.retrieve(' '.join(rng.sample(words, 6)) + f' {rng.randrange(10**9)}', 10)   # every query a new one
    for _ in range(300): ask()                                  # warm-up: models, indexes and allocator pools settle
    before, t0 = _rss_mb(), time.perf_counter()
    lat = []
    for _ in range(CALLS):
        t = time.perf_counter(); hits = ask(); lat.append(time.perf_counter() - t)
        assert 0 < len(hits) <= 10            # BM25 lists only chunks that share a word with the query
    grown = _rss_mb() - before
    lat.sort()
    print(f'{retriever}: {CALLS} calls, RSS +{grown:.1f} MB, p50 {1e3 * lat[len(lat) // 2]:.2f} ms, '
          f'p99 {1e3 * lat[int(len(lat) * 0.99)]:.2f} ms (shared machine: not a benchmark)')
    assert grown < GROWTH_MB, f'{retriever}: resident memory grew {grown:.1f} MB over {CALLS} calls'
    tally('load', f'{CALLS:,} {retriever} searches in one process, every query new: memory grew {grown:.1f} MB (bound {GROWTH_MB:.1f} MB)',
          calls=CALLS, grown_mb=round(grown, 1))
