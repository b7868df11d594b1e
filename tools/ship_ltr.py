"""Copy the learned rankers 02o_ltr_experiment fit on the project's dev questions into the package (scholarqa/data/ltr/),
where `--rerank` without a folder finds them (02n_ltr's `shipped_ranker`). Run after a full run of 02o; tests/test_ltr.py
checks that the package's copies are the committed run's files byte for byte.

    python tools/ship_ltr.py
"""
import shutil, sys, tempfile
from pathlib import Path

from scholarqa.retrieval.ltr import LTR_MODEL, LTR_RECORD

ROOT = Path(__file__).resolve().parents[1]
SOURCE = ROOT / 'outputs' / '02_index'
TARGET = ROOT / 'scholarqa' / 'data' / 'ltr'
FIRST_STAGES = ('retrieve', 'structrag')
FILES = (LTR_RECORD, LTR_MODEL)

def main() -> int:
    TARGET.mkdir(parents=True, exist_ok=True)
    for name in FIRST_STAGES:
        src = SOURCE / f'ltr_model_{name}'
        missing = [f for f in FILES if not (src / f).exists()]
        if missing: print(f'{src}: {", ".join(missing)} missing: run 02o_ltr_experiment with --params full first', file=sys.stderr); return 2
        tmp = Path(tempfile.mkdtemp(prefix=f'.{name}.tmp-', dir=TARGET))
        tmp.chmod(0o755)                       # mkdtemp makes it private; an installed package is read by every user
        for f in FILES: shutil.copyfile(src / f, tmp / f)
        old = TARGET / name
        if old.exists(): shutil.rmtree(old)
        tmp.rename(old)
        print(f'{src.relative_to(ROOT)} -> {old.relative_to(ROOT)}')
    return 0

if __name__ == '__main__': sys.exit(main())
