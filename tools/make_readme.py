"""Write README.md from nbs/index.ipynb (nbdev-readme needs Quarto, which cannot be installed offline).

Markdown cells are copied as they are; code cells become ```python blocks; cells marked `#| hide` are left out."""
import json
from pathlib import Path

root = Path(__file__).resolve().parents[1]
nb = json.loads((root / 'nbs' / 'index.ipynb').read_text(encoding='utf-8'))
parts = ['<!-- Generated from nbs/index.ipynb by tools/make_readme.py: edit the notebook, not this file. -->']
for cell in nb['cells']:
    src = ''.join(cell['source']).strip()
    if not src: continue
    lines = src.splitlines()
    if any(l.strip().replace(' ', '') in ('#|hide', '#|default_exp') or l.strip().startswith('#| default_exp') for l in lines): continue
    if cell['cell_type'] == 'markdown': parts.append(src)
    elif cell['cell_type'] == 'code':
        parts.append('```python\n' + '\n'.join(l for l in lines if not l.startswith('#|')) + '\n```')
text = '\n\n'.join(parts) + '\n'
out = root / 'README.md'
if not out.exists() or out.read_text(encoding='utf-8') != text: out.write_text(text, encoding='utf-8')
