"""Run every experiment notebook through papermill with params/<notebook>.<kind>.yaml (kind: ci, full, or a part run).

An experiment notebook is one with a cell tagged `parameters` (the lessons have none: `nbdev-test` runs them). Executed
copies go to outputs/runs/ (git-ignored); the notebooks write their tables, figures and run records to the `out_dir` their
parameter file names. An experiment notebook without a parameter file for this kind is an error, not a silent skip.

--check (what `make test` runs): each notebook writes into a temporary folder instead, and its tables and figures are
compared with the committed `out_dir` by `scholarqa.measure.compare_outputs` (timing columns loosely, every other cell
exactly); any difference fails the run, naming the file, row and column. The committed outputs are not touched.

--jobs N (only with --check): N notebooks at a time. A check ignores timing columns, so sharing the cores changes nothing it
compares; a run that writes outputs measures, and measures alone, one notebook at a time.

Kernels: a CI-size run (written or checked) pins every numeric library to its AVX2 kernels (scholarqa.measure's
PORTABLE_NUMERICS; an OPENBLAS_CORETYPE the environment set is kept), so that its tables are the same on any x86-64 CPU
this project runs on; each run record says what every library chose (machine.numerics).

Threads: a CI-size run (written or checked) gives each notebook one thread (OMP_NUM_THREADS, MKL_NUM_THREADS and
OPENBLAS_NUM_THREADS, unless already set), so that its tables do not depend on the machine's cores; a full-size check with
--jobs N gives each cores/N; a full run uses every core.

Hash seed: every run (any size) gives its kernel PYTHONHASHSEED=0 unless the caller set one, and the run record keeps it. With
Python's default (a random seed per process), the same CI-size notebook on one machine wrote different tables: 05b's
extractive RAPTOR tree had 312 or 313 nodes under seeds 1 and 2 from identical vectors, and 03f's dev threshold 0.6228 or
0.6203. The seed does not settle RAPTOR's tree (05a_raptor): the experiments compare its rows by presence only."""
import argparse, json, os, shutil, subprocess, sys, tempfile, time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

root = Path(__file__).resolve().parents[1]
ap = argparse.ArgumentParser()
ap.add_argument('--params', default='ci',
                help='ci, full, or a part run that few notebooks have, e.g. search (a dev-only search before a full run) or '
                     'llm_triples (05b: one ablation at full size): name its notebooks')
ap.add_argument('--check', action='store_true', help='run into a temporary folder and compare with the committed outputs')
ap.add_argument('--jobs', type=int, default=1, help='notebooks run at once (with --check only)')
ap.add_argument('notebooks', nargs='*', help='notebook stems to run (default: every experiment notebook)')
args = ap.parse_args()
if args.params not in ('ci', 'full') and not args.notebooks: ap.error(f'--params {args.params}: name the notebooks (few have this run)')
if not args.params.replace('_', '').isalnum(): ap.error(f'--params {args.params!r}: a kind is a word, e.g. ci, full, search')
if args.jobs < 1 or (args.jobs > 1 and not args.check): ap.error('--jobs N > 1 needs --check: runs that write outputs measure, and measure alone')

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

# Threads per notebook (OpenMP, MKL, OpenBLAS; a variable the caller set is kept). At CI size, one: a trained model's
# floats depend on how many threads summed them, so one thread gives the same CI tables on a machine of any size, and two
# checks at a time (--jobs 2) do not oversubscribe two cores, where OpenMP's spinning threads waste most of the time.
# Otherwise with --jobs N, each notebook's share of the cores; a lone full run uses them all.
_threads = 1 if args.params == 'ci' else (os.cpu_count() or 1) // args.jobs if args.jobs > 1 else None
share_env = {k: os.environ.get(k, str(max(1, _threads))) for k in ('OMP_NUM_THREADS', 'MKL_NUM_THREADS', 'OPENBLAS_NUM_THREADS')} \
    if _threads else {}

# Kernels per notebook at CI size: the AVX2 path of every library that has a switch (00h_measure), whatever this CPU offers
from scholarqa.measure import portable_numerics_env
kernel_env = portable_numerics_env() if args.params == 'ci' else {}

# Python's string hashing: a fixed seed, so that no iteration order of a set of strings moves a table between runs
hash_env = {'PYTHONHASHSEED': os.environ.get('PYTHONHASHSEED', '0')}

def run_one(nb: Path):
    "Run one notebook; returns (notebook, log lines to print, failed?, stale?). Nothing is printed here, so parallel logs do not interleave."
    params = root / 'params' / f'{nb.stem}.{args.params}.yaml'
    if not params.exists(): return nb, [f'{nb.name}: missing {params.relative_to(root)}'], True, False
    t0 = time.time()
    cmd = [str(Path(sys.executable).parent / 'papermill'), str(nb), str(runs / f'{nb.stem}.{args.params}.ipynb'),
           '-f', str(params), '--cwd', str(root / 'nbs'), '-k', 'python3', '--no-progress-bar']
    # the notebook's scratch: its kernel's temporary folders (TMPDIR) and, with --check, its fresh outputs. Removed when the
    # run is done, unless a check found differences (kept, and named, to look at)
    scratch = Path(tempfile.mkdtemp(prefix=f'{nb.stem}-'))
    (scratch / 'tmp').mkdir()
    fresh, kept = scratch / 'out', False
    if args.check: cmd += ['-p', 'out_dir', str(fresh)]
    env = {**os.environ, **share_env, **kernel_env, **hash_env, 'SCHOLARQA_NOTEBOOK': str(nb), 'TMPDIR': str(scratch / 'tmp')}
    try:
        r = subprocess.run(cmd, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        log = [f'{nb.name} [{args.params}]: {"ok" if r.returncode == 0 else "FAILED"} in {time.time() - t0:.0f}s']
        if r.returncode: return nb, [r.stdout[-6000:]] + log, True, False
        if not args.check: return nb, log, False, False
        from scholarqa.measure import compare_outputs
        committed = out_dir_of(params)
        diffs = compare_outputs(committed, fresh)
        kept = bool(diffs)
        log += [f'  {committed.relative_to(root)}/{d}' for d in diffs] + ([f'  the fresh run is kept in {fresh}'] if diffs else []) or \
               [f'  {committed.relative_to(root)}: every table and figure matches the fresh run']
        return nb, log, False, bool(diffs)
    finally:
        shutil.rmtree(scratch / 'tmp', ignore_errors=True)
        if not kept: shutil.rmtree(scratch, ignore_errors=True)

def last_wall_time(nb: Path) -> float:
    "Seconds the committed run records of this notebook (at this size) took: the order in which --jobs starts them."
    params = root / 'params' / f'{nb.stem}.{args.params}.yaml'
    if not params.exists(): return 0.0
    recs = (json.loads(f.read_text(encoding='utf-8')) for f in out_dir_of(params).glob('run_record*.json'))
    return sum(r.get('wall_time_s') or 0 for r in recs if r.get('source', {}).get('path') == f'nbs/{nb.name}')

# the slowest first, so that with --jobs 2 a long notebook does not start last and run on alone
slow_first = sorted(nbs, key=last_wall_time, reverse=True)
with ThreadPoolExecutor(args.jobs) as pool:
    for nb, log, bad, differs in pool.map(run_one, slow_first if args.jobs > 1 else nbs):
        print('\n'.join(log), flush=True)
        if bad: failed.append(nb.name)
        if differs: stale.append(nb.name)
if failed: sys.exit(f'failed: {", ".join(failed)}')
if stale: sys.exit(f'committed outputs differ from what the code computes: {", ".join(stale)} '
                   f'(regenerate them with `make reproduce` and commit, or fix the code)')
print(f'{len(nbs)} notebooks ran; ' + ('committed outputs are current' if args.check else 'outputs in outputs/'))
