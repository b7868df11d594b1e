"""The `scholarqa` command as a user meets it: every subcommand listed whatever is installed, a missing extra named in one
line, registries behind `--method`/`--retriever`, and a real install without any extra (slow: builds a fresh venv)."""
import json, os, subprocess, sys, venv
from pathlib import Path
import pytest

from cli_run import ROOT, DEMO, ENTRY, cli, run_blocked

def test_help_lists_every_subcommand_without_optional_packages():
    r = run_blocked(['--help'], blocked={'rdflib', 'faiss', 'torch', 'sentence_transformers', 'llama_cpp', 'scipy', 'spacy'})
    assert r.returncode == 0, r.stderr
    for cmd in ('ingest', 'kg', 'index', 'search', 'adapt', 'ask'): assert cmd in r.stdout

def test_a_missing_extra_is_named(tmp_path):
    assert run_blocked(['ingest', DEMO, '--out', tmp_path / 'c', '--json'], blocked={'rdflib'}).returncode == 0
    r = run_blocked(['kg', 'build', tmp_path / 'c', '--out', tmp_path / 'g.trig'], blocked={'rdflib'})
    assert r.returncode == 2 and "pip install 'scholarqa[kg]'" in r.stderr and 'rdflib' in r.stderr, r.stderr
    r = run_blocked(['search', tmp_path / 'nothing', 'q'], blocked={'scipy'})
    assert r.returncode == 2 and 'scipy' in r.stderr and "pip install 'scholarqa[index,embed]'" in r.stderr, r.stderr

def test_ingest_works_without_any_extra(tmp_path):
    r = run_blocked(['ingest', DEMO, '--out', tmp_path / 'c', '--json'],
                    blocked={'rdflib', 'faiss', 'torch', 'sentence_transformers', 'transformers', 'llama_cpp', 'scipy', 'spacy', 'fitz', 'sklearn'})
    assert r.returncode == 0, r.stderr
    assert json.loads(r.stdout)['papers'] == 16

def test_unknown_method_and_retriever_are_usage_errors(tmp_path):
    r = cli('ask', tmp_path, 'q', '--method', 'nope')
    assert r.returncode == 2 and "invalid choice: 'nope'" in r.stderr and 'structrag' in r.stderr, r.stderr
    r = cli('search', tmp_path, 'q', '--retriever', 'nope')
    assert r.returncode == 2 and 'hybrid+splade' in r.stderr, r.stderr

def test_a_registered_method_is_offered_without_touching_the_cli():
    from scholarqa.cli import build_parser
    from scholarqa.commands.options import method_choices
    from scholarqa.protocol import METHODS, register_method
    @register_method('toy-test-method', 'registered by a test')
    def _toy(store, **options): raise NotImplementedError
    try:
        assert 'toy-test-method' in method_choices()
        assert build_parser().parse_args(['ask', 'idx', 'q', '--method', 'toy-test-method']).method == 'toy-test-method'
    finally: del METHODS['toy-test-method']

def test_generator_is_an_alias_of_backend():
    from scholarqa.cli import build_parser
    p = build_parser()
    assert p.parse_args(['ask', 'i', 'q', '--generator', 'extractive']).backend == 'extractive'
    assert p.parse_args(['ask', 'i', 'q', '--backend', 'openai']).backend == 'openai'

def test_a_reader_that_stops_early_gets_no_traceback(tmp_path):
    "`scholarqa … | head -c 10`: when the reader has closed the pipe, the command ends quietly with 141 (128 + SIGPIPE)."
    r_fd, w_fd = os.pipe()
    os.close(r_fd)                                     # the reader is gone before the command writes anything
    p = subprocess.Popen([sys.executable, '-c', ENTRY, 'ingest', str(DEMO),
                          '--out', str(tmp_path / 'c'), '--json'], stdout=w_fd, stderr=subprocess.PIPE, text=True, cwd=ROOT)
    os.close(w_fd)
    _, err = p.communicate(timeout=300)
    assert p.returncode == 141 and 'Traceback' not in err, err
    assert (tmp_path / 'c' / 'manifest.json').exists()   # the work itself was done and kept

@pytest.mark.slow
def test_pip_install_without_extras_in_a_fresh_venv(tmp_path):
    "`pip install .` (no extras) into an empty virtual environment: --help, ingest, and kg build naming its extra."
    env_dir = tmp_path / 'venv'
    venv.EnvBuilder(with_pip=True).create(env_dir)
    py, exe = env_dir / 'bin' / 'python', env_dir / 'bin' / 'scholarqa'
    env = {k: v for k, v in os.environ.items() if k not in ('PYTHONPATH', 'VIRTUAL_ENV')}
    r = subprocess.run([str(py), '-m', 'pip', 'install', '-q', str(ROOT)], capture_output=True, text=True, timeout=900, env=env)
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-3000:]
    r = subprocess.run([str(py), '-c', 'import rdflib'], capture_output=True, text=True, env=env)
    assert r.returncode != 0, 'the fresh venv must not have the kg extra'
    r = subprocess.run([str(exe), '--help'], capture_output=True, text=True, env=env, cwd=tmp_path)
    assert r.returncode == 0 and 'ingest' in r.stdout, r.stderr
    r = subprocess.run([str(exe), 'ingest', str(DEMO), '--out', str(tmp_path / 'corpus'), '--json'], capture_output=True, text=True,
                       env=env, cwd=tmp_path, timeout=300)
    assert r.returncode == 0 and json.loads(r.stdout)['papers'] == 16, r.stderr[-3000:]
    r = subprocess.run([str(exe), 'kg', 'build', str(tmp_path / 'corpus'), '--out', str(tmp_path / 'g.trig')], capture_output=True,
                       text=True, env=env, cwd=tmp_path)
    assert r.returncode == 2 and "pip install 'scholarqa[kg]'" in r.stderr, r.stderr
