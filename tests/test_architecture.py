"""The package's floors, checked on its source: no import cycle, no module importing a floor above its own, no
foundation importing a method, no method importing another (a method's parts, `methods.x_part`, count as the method),
every module importable on its own, none over ~800 lines."""
import ast, subprocess, sys
from pathlib import Path
import pytest

PKG = Path(__file__).resolve().parents[1] / 'scholarqa'

# bottom to top; a module may import its own floor or any floor below (DESIGN.md, "Architecture")
FLOORS = [('doc', 'measure'), ('readers',), ('ingest', 'datasets'), ('kg', 'retrieval'), ('generate',), ('evaluate',), ('methods',), ('cli',)]
FOUNDATION_TOP = 5          # floors 0-5 are the foundations (00-03 notebooks)

def module_name(path: Path) -> str:
    rel = path.relative_to(PKG).with_suffix('')        # '' is the package itself
    parts = rel.parts[:-1] if rel.name == '__init__' else rel.parts
    return '.'.join(parts)

def modules() -> dict:
    return {module_name(p): p for p in sorted(PKG.rglob('*.py')) if p.name != '_modidx.py'}

ROOT_PACKAGES = {'', 'readers', 'kg', 'retrieval', 'generate', 'methods'}   # folder markers: a docstring, no imports

def imports_of(name: str, path: Path) -> dict:
    "{imported scholarqa module: 'top' | 'lazy'} for one module (relative imports resolved)."
    tree, out = ast.parse(path.read_text(encoding='utf-8')), {}
    pkg = ['scholarqa'] + (name.split('.') if path.name == '__init__.py' else name.split('.')[:-1])
    top = set(map(id, tree.body))
    known = modules()
    for node in ast.walk(tree):
        targets = []
        if isinstance(node, ast.Import): targets = [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ''
            if node.level:
                base = '.'.join(pkg[:len(pkg) - node.level + 1] + ([base] if base else []))
            targets = [base] + [f'{base}.{a.name}' for a in node.names]
        for t in targets:
            if not t.startswith('scholarqa'): continue
            t = t[len('scholarqa.'):] if t != 'scholarqa' else ''
            if t not in known: continue               # a name imported from a module, not a module
            if t and t != name: out[t] = 'top' if id(node) in top or out.get(t) == 'top' else 'lazy'
    return out

def floor(name: str) -> int:
    head = name.split('.')[0]
    return next(i for i, f in enumerate(FLOORS) if head in f)

def graph() -> dict:
    return {n: imports_of(n, p) for n, p in modules().items() if n not in ROOT_PACKAGES}

def test_every_module_has_a_floor():
    for n in graph(): floor(n)

def test_no_module_imports_a_floor_above_it():
    bad = [(a, b) for a, deps in graph().items() for b in deps if floor(b) > floor(a)]
    assert not bad, f'imports that go up a floor: {bad}'

def method_of(name: str) -> str:
    "The method a module belongs to: `methods.agentic` and its parts `methods.agentic_<part>` are one method."
    return name.split('.')[1].split('_')[0]

def test_method_of():
    assert method_of('methods.agentic_questions') == method_of('methods.agentic') != method_of('methods.cgrag')

def test_no_foundation_imports_a_method_and_no_method_another():
    g = graph()
    assert not [(a, b) for a, d in g.items() for b in d if floor(a) <= FOUNDATION_TOP and b.startswith('methods')]
    assert not [(a, b) for a, d in g.items() for b in d
                if a.startswith('methods.') and b.startswith('methods.') and method_of(a) != method_of(b)]

def test_a_method_part_is_not_imported_by_its_method():
    "A part (`methods.x_part`) may import its method `methods.x`, never the other way: the method stands alone."
    g = graph()
    assert not [(a, b) for a, d in g.items() for b in d if a.startswith('methods.') and '_' not in a and '_' in b]

def find_cycle(g: dict):
    "One import cycle as a list of modules, or None."
    state, stack = {}, []
    def visit(n):
        state[n] = 1; stack.append(n)
        for m in g.get(n, ()):
            if state.get(m) == 1: return stack[stack.index(m):] + [m]
            if m not in state and (c := visit(m)): return c
        state[n] = 2; stack.pop()
    for n in g:
        if n not in state and (c := visit(n)): return c

def test_find_cycle_finds_one():
    assert find_cycle({'a': {'b': 'top'}, 'b': {'c': 'lazy'}, 'c': {'a': 'top'}}) == ['a', 'b', 'c', 'a']
    assert find_cycle({'a': {'b': 'top'}, 'b': {}}) is None

def test_no_import_cycle():
    assert find_cycle(graph()) is None, find_cycle(graph())

def test_the_checker_sees_relative_and_lazy_imports():
    g = graph()
    assert g['cli'].get('generate.answer') == 'lazy'            # imported inside the ask handler
    assert 'retrieval.base' in g['retrieval.store']               # nbdev writes `from .base import …`

def test_no_module_over_800_lines():
    long = {n: len(p.read_text().splitlines()) for n, p in modules().items()}
    assert max(long.values()) <= 800, sorted(long.items(), key=lambda x: -x[1])[:3]

@pytest.mark.parametrize('name', sorted(n for n in modules() if n))
def test_module_imports_on_its_own(name):
    r = subprocess.run([sys.executable, '-c', f'import scholarqa.{name}'], capture_output=True, text=True)
    assert r.returncode == 0, r.stderr[-2000:]
