"""Our retrieval metrics (scholarqa.eval.metrics) against an established implementation: ir-measures (trec_eval underneath),
per query, on random runs with ties avoided, unjudged documents, duplicates-free rankings and unretrieved relevant ids."""
import random
import pytest

ir_measures = pytest.importorskip('ir_measures', reason='ir-measures (dev extra) is the reference implementation')
from ir_measures import nDCG, RR, AP, R, Success
from scholarqa.eval.metrics import average_precision, hit_at_k, map_at_k, mrr, ndcg_at_k, recall_at_k, evaluate_run

def random_case(seed: int, n_queries: int = 40, n_docs: int = 60):
    "Runs with strictly decreasing scores (trec_eval breaks ties by doc id; our rankings have no ties) and binary qrels."
    rng = random.Random(seed)
    docs = [f'd{i:03d}' for i in range(n_docs)]
    qrels, run, ranked = {}, {}, {}
    for q in range(n_queries):
        qid = f'q{q}'
        rel = set(rng.sample(docs, rng.randint(1, 6)))                   # some will not be retrieved at all
        ranking = rng.sample(docs, rng.randint(1, 30))
        qrels[qid] = {d: 1 for d in rel}
        run[qid] = {d: float(len(ranking) - i) for i, d in enumerate(ranking)}
        ranked[qid] = ranking
    return qrels, run, ranked

def per_query(measures, qrels, run) -> dict:
    return {(m.query_id, str(m.measure)): m.value for m in ir_measures.iter_calc(measures, qrels, run)}

@pytest.mark.parametrize('seed', [0, 1, 2])
def test_metrics_match_trec_eval_per_query(seed):
    qrels, run, ranked = random_case(seed)
    ks = (1, 3, 5, 10)
    ref = per_query([AP, RR, *[nDCG @ k for k in ks], *[R @ k for k in ks], *[Success @ k for k in ks], AP @ 10], qrels, run)
    for qid, ranking in ranked.items():
        rel = set(qrels[qid])
        assert average_precision(ranking, rel) == pytest.approx(ref[(qid, 'AP')], abs=1e-9)
        assert mrr(ranking, rel) == pytest.approx(ref[(qid, 'RR')], abs=1e-9)
        for k in ks:
            assert ndcg_at_k(ranking, rel, k) == pytest.approx(ref[(qid, f'nDCG@{k}')], abs=1e-9)
            assert recall_at_k(ranking, rel, k) == pytest.approx(ref[(qid, f'R@{k}')], abs=1e-9)
            assert hit_at_k(ranking, rel, k) == pytest.approx(ref[(qid, f'Success@{k}')], abs=1e-9)
        # seed 001's MAP@K keeps every relevant id in the denominator, exactly like trec_eval's AP cut at 10
        assert map_at_k(ranking, rel, 10) == pytest.approx(ref[(qid, 'AP@10')], abs=1e-9)

def test_evaluate_run_means_match_the_reference():
    qrels, run, ranked = random_case(7)
    ours = evaluate_run(ranked, {q: set(r) for q, r in qrels.items()}, ks=(5,))
    ref = ir_measures.calc_aggregate([RR, R @ 5, nDCG @ 5], qrels, run)
    assert ours['mrr'] == pytest.approx(ref[RR], abs=1e-9)
    assert ours['recall@5'] == pytest.approx(ref[R @ 5], abs=1e-9)
    assert ours['ndcg@5'] == pytest.approx(ref[nDCG @ 5], abs=1e-9)
