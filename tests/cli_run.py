"""The `scholarqa` command as the tests run it: in a fresh interpreter, from the repository root, output captured as text.

`cli(*argv)` runs it as installed; `run_blocked(argv, blocked)` runs it where the named top-level packages cannot be
imported, as on a machine without that extra."""
import subprocess, sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
DEMO = ROOT / 'data' / 'demo'
ENTRY = 'from scholarqa.cli import cli_main; cli_main()'

BLOCKED = """
import sys, importlib.abc
class _Block(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path=None, target=None):
        if name.split('.')[0] in {blocked!r}: raise ModuleNotFoundError(f"No module named {{name!r}}", name=name)
sys.meta_path.insert(0, _Block())
from scholarqa.cli import main
sys.exit(main({argv!r}))
"""


def cli(*argv, timeout=900) -> subprocess.CompletedProcess:
    "`scholarqa ARGV…`; paths and numbers are passed as strings."
    return subprocess.run([sys.executable, '-c', ENTRY, *map(str, argv)], capture_output=True, text=True, timeout=timeout, cwd=ROOT)


def run_blocked(argv, blocked=(), timeout=300) -> subprocess.CompletedProcess:
    "`scholarqa ARGV…` with the packages in `blocked` made unimportable."
    code = BLOCKED.format(blocked=set(blocked), argv=[str(a) for a in argv])
    return subprocess.run([sys.executable, '-c', code], capture_output=True, text=True, timeout=timeout, cwd=ROOT)
