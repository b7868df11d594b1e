"""Write README.md from nbs/index.ipynb (nbdev-readme needs Quarto, which cannot be installed offline).

Markdown cells are copied as they are; code cells become ```python blocks; cells marked `#| hide` are left out. A cell
marked `#| output: asis` (Quarto's option: its printed output is Markdown) is run, from nbs/ as the notebook runs, with
this Python, and what it prints takes its place: README's results section is written that way, from outputs/."""
import json, subprocess, sys
from pathlib import Path

root = Path(__file__).resolve().parents[1]
nb = json.loads((root / 'nbs' / 'index.ipynb').read_text(encoding='utf-8'))

def directives(lines) -> set:
    "The cell's `#| key: value` options, as 'key:value' strings without spaces."
    return {l.strip()[2:].replace(' ', '') for l in lines if l.strip().startswith('#|')}

def printed(src: str) -> str:
    "What an `output: asis` cell prints, run from nbs/; a failure stops the README from being written."
    r = subprocess.run([sys.executable, '-c', src], cwd=root / 'nbs', capture_output=True, text=True, timeout=600)
    if r.returncode: sys.exit(f'nbs/index.ipynb: an `output: asis` cell failed:\n{src}\n{r.stderr[-3000:]}')
    return r.stdout.strip()

parts = ['<!-- Generated from nbs/index.ipynb by tools/make_readme.py: edit the notebook, not this file. -->']
for cell in nb['cells']:
    src = ''.join(cell['source']).strip()
    if not src: continue
    lines = src.splitlines()
    opts = directives(lines)
    if 'hide' in opts or any(o.startswith('default_exp') for o in opts): continue
    if cell['cell_type'] == 'markdown': parts.append(src)
    elif cell['cell_type'] == 'code' and 'output:asis' in opts: parts.append(printed(src))
    elif cell['cell_type'] == 'code':
        parts.append('```python\n' + '\n'.join(l for l in lines if not l.startswith('#|')) + '\n```')
text = '\n\n'.join(parts) + '\n'
out = root / 'README.md'
if not out.exists() or out.read_text(encoding='utf-8') != text: out.write_text(text, encoding='utf-8')
