"""Run every experiment notebook through papermill with params/<notebook>.<kind>.yaml (kind: ci or full).

An experiment notebook is one with a cell tagged `parameters` (the lessons have none: `nbdev-test` runs them). Executed
copies go to outputs/runs/ (git-ignored); the notebooks write their tables, figures and run records to the `out_dir` their
parameter file names. An experiment notebook without a parameter file for this kind is an error, not a silent skip.

--check (what `make test` runs): each notebook writes into a temporary folder instead, and its tables and figures are
compared with the committed `out_dir` by `scholarqa.measure.compare_outputs` (timing columns loosely, every other cell
exactly); any difference fails the run, naming the file, row and column. The committed outputs are not touched."""
import argparse, json, os, subprocess, sys, tempfile, time
from pathlib import Path

root = Path(__file__).resolve().parents[1]
ap = argparse.ArgumentParser()
ap.add_argument('--params', choices=['ci', 'full'], default='ci')
ap.add_argument('--check', action='store_true', help='run into a temporary folder and compare with the committed outputs')
ap.add_argument('notebooks', nargs='*', help='notebook stems to run (default: every experiment notebook)')
args = ap.parse_args()

def has_parameters(nb: Path) -> bool:
    return any('parameters' in c.get('metadata', {}).get('tags', []) for c in json.loads(nb.read_text(encoding='utf-8'))['cells'])

def out_dir_of(params: Path) -> Path:
    "The out_dir a parameter file names (relative to nbs/, where papermill runs)."
    import yaml
    return (root / 'nbs' / yaml.safe_load(params.read_text())['out_dir']).resolve()

nbs = sorted(p for p in (root / 'nbs').glob('[0-9][0-9]*.ipynb') if has_parameters(p) and (not args.notebooks or p.stem in args.notebooks))
if args.notebooks and len(nbs) != len(set(args.notebooks)): sys.exit(f'not experiment notebooks: {sorted(set(args.notebooks) - {p.stem for p in nbs})}')
runs = root / 'outputs' / 'runs'
runs.mkdir(parents=True, exist_ok=True)
failed, stale = [], []
for nb in nbs:
    params = root / 'params' / f'{nb.stem}.{args.params}.yaml'
    if not params.exists():
        print(f'{nb.name}: missing {params.relative_to(root)}', file=sys.stderr); failed.append(nb.name); continue
    t0 = time.time()
    cmd = [str(Path(sys.executable).parent / 'papermill'), str(nb), str(runs / f'{nb.stem}.{args.params}.ipynb'),
           '-f', str(params), '--cwd', str(root / 'nbs'), '-k', 'python3', '--no-progress-bar']
    if args.check:
        fresh = Path(tempfile.mkdtemp(prefix=f'{nb.stem}-'))
        cmd += ['-p', 'out_dir', str(fresh)]
    r = subprocess.run(cmd, env={**os.environ, 'SCHOLARQA_NOTEBOOK': str(nb)})
    print(f'{nb.name} [{args.params}]: {"ok" if r.returncode == 0 else "FAILED"} in {time.time() - t0:.0f}s', flush=True)
    if r.returncode: failed.append(nb.name); continue
    if args.check:
        from scholarqa.measure import compare_outputs
        committed = out_dir_of(params)
        diffs = compare_outputs(committed, fresh)
        for d in diffs: print(f'  {committed.relative_to(root)}/{d}', flush=True)
        if diffs: stale.append(nb.name)
        else: print(f'  {committed.relative_to(root)}: every table and figure matches the fresh run', flush=True)
if failed: sys.exit(f'failed: {", ".join(failed)}')
if stale: sys.exit(f'committed outputs differ from what the code computes: {", ".join(stale)} '
                   f'(regenerate them with `make reproduce` and commit, or fix the code)')
print(f'{len(nbs)} notebooks ran; ' + ('committed outputs are current' if args.check else 'outputs in outputs/'))
