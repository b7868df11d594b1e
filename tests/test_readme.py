"""README.md cannot rot: every shell and Python block in it runs, from the root of a fresh copy of the repository.

The copy holds only the files git tracks (what a clone gets) and borrows this checkout's `.venv`, as a newcomer's checkout
would have after `make reproduce` or `make test`. Lines that are `make` commands are left out: `make test` is what CI runs,
and `make reproduce` runs the same experiment notebooks that `make test` re-runs against their committed tables."""
import os, re, shutil, subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
VENV = ROOT / '.venv'


def readme_blocks() -> list[tuple[str, str]]:
    "(language, code) of every fenced block of README.md, in order."
    return re.findall(r'^```(\w+)\n(.*?)^```', (ROOT / 'README.md').read_text(encoding='utf-8'), flags=re.S | re.M)


def test_readme_has_runnable_blocks():
    langs = [lang for lang, _ in readme_blocks()]
    assert 'python' in langs and langs.count('sh') >= 2, langs
    assert any('scholarqa search' in code for lang, code in readme_blocks() if lang == 'sh')


def fresh_copy(dest: Path) -> Path:
    "The tracked files of this checkout copied to `dest`, with this checkout's .venv linked in."
    files = subprocess.run(['git', 'ls-files', '-z'], cwd=ROOT, capture_output=True, text=True, check=True).stdout.split('\0')
    for f in filter(None, files):
        src = ROOT / f
        if src.is_file():
            (dest / f).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(src, dest / f)
    (dest / '.venv').symlink_to(VENV, target_is_directory=True)
    return dest


@pytest.mark.slow
@pytest.mark.skipif(not (VENV / 'bin' / 'scholarqa').exists(), reason='needs the project environment (.venv): run `make setup`')
def test_every_readme_block_runs_from_the_project_root(tmp_path):
    clone = fresh_copy(tmp_path / 'clone')
    before = {p for p in clone.rglob('*') if '.venv' not in p.parts}
    env = {k: v for k, v in os.environ.items() if k not in ('VIRTUAL_ENV', 'PYTHONPATH')}
    env['PATH'] = os.pathsep.join(p for p in env.get('PATH', '').split(os.pathsep) if not p.startswith(str(VENV)))
    env['PYTHONDONTWRITEBYTECODE'] = '1'      # what the examples write is the question here, not Python's compiled files
    ran = 0
    for lang, code in readme_blocks():
        if lang == 'sh':
            script = '\n'.join(l for l in code.splitlines() if not l.strip().startswith('make '))
            if not script.strip(): continue
            r = subprocess.run(['bash', '-euo', 'pipefail', '-c', script], cwd=clone, env=env, capture_output=True, text=True, timeout=1200)
        elif lang == 'python':
            r = subprocess.run([str(clone / '.venv' / 'bin' / 'python'), '-c', code], cwd=clone, env=env, capture_output=True, text=True, timeout=600)
        else: continue
        assert r.returncode == 0, f'README block failed from the project root:\n{code}\n--- stderr ---\n{r.stderr[-3000:]}'
        assert r.stdout.strip(), f'README block printed nothing:\n{code}'
        ran += 1
    assert ran >= 2
    written = {p for p in clone.rglob('*') if '.venv' not in p.parts} - before
    assert not written, f'README examples wrote into the checkout: {sorted(str(p.relative_to(clone)) for p in written)[:10]}'
