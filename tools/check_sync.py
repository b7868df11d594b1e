"""CI check: notebooks are clean, modules match their notebooks, README matches nbs/index.ipynb, the packaged ontology
matches the one defined in nbs/01f_vocabulary.ipynb (module scholarqa.kg.vocab).

Runs nbdev-clean, nbdev-export, tools/make_readme.py and writes scholarqa/ontology.ttl, and fails (listing the files) if any of them changed a file.
The files are left in their regenerated state, so a developer only has to review and commit them."""
import hashlib, subprocess, sys
from pathlib import Path

root = Path(__file__).resolve().parents[1]
bin_dir = Path(sys.executable).parent

def snapshot():
    files = (list((root / 'nbs').glob('*.ipynb')) + list((root / 'scholarqa').rglob('*.py')) + list((root / 'scholarqa').glob('*.ttl'))
             + [root / 'README.md'])
    return {f.relative_to(root).as_posix(): hashlib.blake2b(f.read_bytes()).hexdigest() for f in files if f.exists()}

before = snapshot()
write_onto = "from scholarqa.kg.vocab import write_ontology; write_ontology('scholarqa/ontology.ttl')"
for cmd in ([str(bin_dir / 'nbdev-clean')], [str(bin_dir / 'nbdev-export')], [sys.executable, str(root / 'tools' / 'make_readme.py')],
            [sys.executable, '-c', write_onto]):
    r = subprocess.run(cmd, cwd=root, capture_output=True, text=True)
    if r.returncode: sys.exit(f'{" ".join(cmd)} failed:\n{r.stdout}\n{r.stderr}')
after = snapshot()
changed = sorted(k for k in set(before) | set(after) if before.get(k) != after.get(k))
if changed:
    print('Out of sync (regenerated now; review and commit):', *changed, sep='\n  ')
    sys.exit(1)
print(f'notebooks clean, {sum(k.startswith("scholarqa/") for k in after)} modules in sync, README in sync')
