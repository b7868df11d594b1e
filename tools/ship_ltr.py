"""Copy the learned rankers 02o_ltr_experiment fit on the project's dev questions into the package (scholarqa/data/ltr/),
where `--rerank` without a folder finds them (02n_ltr's `shipped_ranker`), each with the run's verdict on it under the
rule of 02o (dev_choice.json, from the run's ltr_dev_choice.csv: gain, its interval, whether it passes). Run after a full
run of 02o; tests/test_ltr.py checks that the package's copies are the committed run's files byte for byte and that each
verdict is its row of the table.

    python tools/ship_ltr.py
"""
import csv, json, shutil, sys, tempfile
from pathlib import Path

from scholarqa.retrieval.ltr import DEV_CHOICE, LTR_MODEL, LTR_RECORD

ROOT = Path(__file__).resolve().parents[1]
SOURCE = ROOT / 'outputs' / '02_index'
TARGET = ROOT / 'scholarqa' / 'data' / 'ltr'
FIRST_STAGES = ('retrieve', 'structrag')
FILES = (LTR_RECORD, LTR_MODEL)

def dev_choice(first_stage: str) -> dict:
    "The run's verdict on one first stage's ranker: its row of ltr_dev_choice.csv, numbers parsed."
    rows = {r['first_stage']: r for r in csv.DictReader((SOURCE / 'ltr_dev_choice.csv').open(encoding='utf-8'))}
    r = rows[first_stage]
    lo, hi = (float(x) for x in r['gain 95% CI'].strip('[]').split(','))
    return {'gain': float(r['gain']), 'gain_ci': [lo, hi], 'questions': int(r['dev questions']),
            'passes': r['passes the rule'] == 'True', 'source': 'outputs/02_index/ltr_dev_choice.csv'}

def main() -> int:
    TARGET.mkdir(parents=True, exist_ok=True)
    for name in FIRST_STAGES:
        src = SOURCE / f'ltr_model_{name}'
        missing = [f for f in FILES if not (src / f).exists()]
        if missing: print(f'{src}: {", ".join(missing)} missing: run 02o_ltr_experiment with --params full first', file=sys.stderr); return 2
        tmp = Path(tempfile.mkdtemp(prefix=f'.{name}.tmp-', dir=TARGET))
        tmp.chmod(0o755)                       # mkdtemp makes it private; an installed package is read by every user
        for f in FILES: shutil.copyfile(src / f, tmp / f)
        (tmp / DEV_CHOICE).write_text(json.dumps(dev_choice(name), indent=1) + '\n', encoding='utf-8')
        old = TARGET / name
        if old.exists(): shutil.rmtree(old)
        tmp.rename(old)
        print(f'{src.relative_to(ROOT)} -> {old.relative_to(ROOT)}')
    return 0

if __name__ == '__main__': sys.exit(main())
