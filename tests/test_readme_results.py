"""README's results section is the last full run's: written from outputs/09_evaluate by `scholarqa.eval.harness.readme_results`
(through nbs/index.ipynb and `make readme`), never typed, and that run was of a clean tree and read the sealed set once."""
import json
from pathlib import Path

import pandas as pd

ROOT = Path(__file__).resolve().parents[1]
FOLDER = ROOT / 'outputs' / '09_evaluate'


def test_readme_results_match_outputs():
    from scholarqa.eval.harness import readme_results
    section = readme_results(FOLDER)
    readme = (ROOT / 'README.md').read_text(encoding='utf-8')
    assert section in readme, "README's results differ from outputs/09_evaluate: run `make readme` and commit README.md"
    for name in ('sealed.png', 'reproduction.md', 'run_records.md', 'sealed_paired.md'):   # what it links to is committed
        assert (FOLDER / name).exists() and f'outputs/09_evaluate/{name}' in section, name


def test_the_results_come_from_a_clean_full_run_that_read_the_sealed_set_once():
    rec = json.loads((FOLDER / 'run_record_09_final.json').read_text(encoding='utf-8'))
    assert rec['git']['dirty'] is False and rec['git']['commit'], rec['git']
    assert rec['params']['sealed_file'], 'the committed results must be the full run, not the CI stand-in'
    prov = pd.read_csv(FOLDER / 'sealed_provenance.csv').iloc[0]
    frozen = (ROOT / 'data' / 'eval' / 'SEALED.sha256').read_text().split()[0]
    assert prov['sha256'] == frozen                 # the frozen hash, which tests/test_sealed_set.py holds the file to
    assert bool(prov['first_reading']) and prov['questions'] == 25
    answers = pd.read_csv(FOLDER / 'sealed_answers.csv')
    assert answers.groupby('method')['id'].nunique().eq(25).all()        # every method asked every sealed question
    sealed = pd.read_csv(FOLDER / 'sealed.csv')
    assert set(sealed['method']) == set(answers['method']) and (sealed['questions_from'] == 'sealed set').all()


def test_every_seed_has_rows_in_the_reproduction_table():
    rep = pd.read_csv(FOLDER / 'reproduction.csv', dtype={'seed': str})
    assert set(rep['seed']) == {'000', '001', '002', '003', '004'}
    seeds = pd.read_csv(ROOT / 'data' / 'seeds' / 'published_results.csv', dtype={'seed': str})
    assert set(zip(seeds.seed, seeds.table)) <= set(zip(rep.seed, rep.table))   # every seed table is there
    mine = rep[rep['ours'].notna()]
    assert len(mine) and mine['nearest'].str.contains(r'\.md: ').all() and mine['run'].str.len().gt(0).all()   # each says where from
    off = rep[rep['data'].str.contains('not on these machines', na=False)]
    assert {'OAG-AQA', 'DBLP', 'Italian Cuisine'} <= {w for d in off['data'] for w in ('OAG-AQA', 'DBLP', 'Italian Cuisine') if w in d}
