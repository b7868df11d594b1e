"""Replies that are not answers are named, not printed as answers: the echo / repetition detector on the SmolLM2 replies
recorded in data/llm_cache (the replay caches the experiment companions use)."""
import json, re
from pathlib import Path

from scholarqa.generate.answer import answer_status

CACHE = Path(__file__).resolve().parents[1] / 'data' / 'llm_cache'
# recorded SmolLM2 replies, read by hand: each repeats its prompt (passage headers with their text, then "Question: …")
ECHOES = ['03_generate/llama_cpp/11/11f35defa44a2849977db1daeb550549', '03_generate/llama_cpp/90/90b1d16abd924a9f01543b0aebc70747',
          '03_generate/llama_cpp/da/dae15a311e4e463ebc1d6b9877605e45', '04_structrag/llama_cpp/5c/5c6be061f7fc897b8495646be8f9bad0',
          '04_structrag/llama_cpp/63/63c0bb4a5a77add11d1baeaa91d080c4', '04_structrag/llama_cpp/ae/ae1aa2ecd3bc40b2b6a66fc43383ae9e']
# … and each loops on one phrase ("The answer is: The answer is: …")
LOOPS = ['03_generate/llama_cpp/0e/0e8039cb246e1bf7ae2b54017da73a72', '03_generate/llama_cpp/cd/cd22a4d8a2c06342a924613562bdc3f9',
         '04_structrag/llama_cpp/b8/b82134c85906344ce47e375ed234162d', '04_structrag/llama_cpp/ca/ca135e65feedb089dcbe57061c08190a']


def shares_run(a: str, b: str, n: int) -> bool:
    "True when `a` and `b` share a run of `n` consecutive words."
    wa, wb = re.findall(r'\w+', a.lower()), re.findall(r'\w+', b.lower())
    grams = {tuple(wb[i:i + n]) for i in range(len(wb) - n + 1)}
    return any(tuple(wa[i:i + n]) in grams for i in range(len(wa) - n + 1))


def reply(key: str) -> dict:
    return json.loads((CACHE / f'{key}.json').read_text())


def test_recorded_echoes_and_loops_are_named():
    for key in ECHOES:
        d = reply(key)
        assert answer_status(d['completion']['text'], citations=['cited'])[0] == 'echo', key
        assert shares_run(d['completion']['text'], d['request']['prompt'][-1]['content'], 5), key   # it really copies the prompt
    for key in LOOPS:
        assert answer_status(reply(key)['completion']['text'], citations=['cited'])[0] == 'repetitive', key


def test_every_flag_is_backed_by_the_reply_itself():
    # the cache grows with every full run, so no count is asserted: each flagged reply must show, by an independent test,
    # what it is flagged for (an echo copies a run of its prompt; a loop says one three-word phrase three times or more —
    # a short reply can loop three times only, e.g. a title repeated), and most replies pass
    replies = [json.loads(f.read_text()) for f in CACHE.glob('*/llama_cpp/*/*.json')]
    replies = [d for d in replies if d['request'].get('kind') != 'json']
    flagged = 0
    for d in replies:
        text, prompt = d['completion']['text'], d['request']['prompt'][-1]['content']
        status = answer_status(text, citations=['cited'])[0]
        if status == 'echo': assert shares_run(text, prompt, 5), text[:200]
        if status == 'repetitive':
            w = re.findall(r'\w+', text.lower()); grams = [tuple(w[i:i + 3]) for i in range(len(w) - 2)]
            assert max(grams.count(g) for g in set(grams)) >= 3, text[:200]
        flagged += status in ('echo', 'repetitive', 'empty')
    assert len(replies) > 300 and flagged < 0.2 * len(replies), (flagged, len(replies))
