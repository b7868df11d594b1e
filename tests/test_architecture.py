"""The package's floors, checked on its source: no import cycle, no module importing a floor above its own, no
foundation importing a method, no method importing another (a method's parts, `methods.x_part`, count as the method),
every module importable on its own, none over ~800 lines."""
import ast, json, re, subprocess, sys
from pathlib import Path
import pytest

PKG = Path(__file__).resolve().parents[1] / 'scholarqa'

# bottom to top; a module may import its own floor or any floor below (DESIGN.md, "Architecture")
FLOORS = [('doc', 'files', 'sentences', 'measure'), ('readers',), ('ingest', 'datasets'), ('kg', 'retrieval'), ('generate',), ('protocol',), ('eval',),
          ('methods', 'agent', 'aqa'),
          ('commands', 'cli')]
FOUNDATION_TOP = 6          # floors 0-6 are the foundations (00-03 notebooks)

def module_name(path: Path) -> str:
    rel = path.relative_to(PKG).with_suffix('')        # '' is the package itself
    parts = rel.parts[:-1] if rel.name == '__init__' else rel.parts
    return '.'.join(parts)

def modules() -> dict:
    return {module_name(p): p for p in sorted(PKG.rglob('*.py')) if p.name != '_modidx.py'}

ROOT_PACKAGES = {'', 'readers', 'kg', 'retrieval', 'generate', 'methods', 'commands', 'agent', 'aqa', 'eval'}   # folder markers: a docstring, no imports

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
    assert not [(a, b) for a, d in g.items() for b in d
                if a.startswith('methods.') and '_' not in a and b.startswith('methods.') and '_' in b]

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
    assert g['commands.options'].get('protocol') == 'lazy'   # imported inside a handler's helper
    assert 'retrieval.base' in g['retrieval.store']               # nbdev writes `from .base import …`

def test_no_module_over_800_lines():
    long = {n: len(p.read_text().splitlines()) for n, p in modules().items()}
    assert max(long.values()) <= 800, sorted(long.items(), key=lambda x: -x[1])[:3]

@pytest.mark.parametrize('name', sorted(n for n in modules() if n))
def test_module_imports_on_its_own(name):
    r = subprocess.run([sys.executable, '-c', f'import scholarqa.{name}'], capture_output=True, text=True)
    assert r.returncode == 0, r.stderr[-2000:]

# ---- one method shape (03d_method): the command line reads the registry, and a hit's extra fields are its method's own

def _string_constants(path: Path) -> list[str]:
    return [n.value for n in ast.walk(ast.parse(path.read_text(encoding='utf-8'))) if isinstance(n, ast.Constant) and isinstance(n.value, str)]

# registered names that are also ordinary words or a subcommand of their own ('kg build' is the knowledge-graph command)
_GENERIC_NAMES = {'retrieve', 'kg', 'semantic', 'naive'}

def test_cli_names_no_method():
    "No string in cli.py names a registered method: options, folders and training belong to the methods (03d_method)."
    from scholarqa.protocol import METHODS, load_methods
    load_methods()
    names = sorted(set(METHODS) - _GENERIC_NAMES)
    assert {'structrag', 'sketch', 'agentic', 'multichannel', 'lesegr', 'raptor', 'vanilla'} <= set(names)
    found = {(n, s[:60]) for s in _string_constants(PKG / 'cli.py') for n in names if re.search(rf'(?<![\w-]){re.escape(n)}(?![\w-])', s)}
    assert not found, f'cli.py names methods: {sorted(found)}'

def test_method_sites_read_from_source_match_the_registry():
    """The command line imports only the method it runs: `method_sites` reads each method's name, module and marker file from
    the sources (03d_method). Read that way, they are what importing every module registers; and opening one method imports
    only its module."""
    code = """
import sys
from scholarqa.protocol import METHODS, method_sites, load_method, load_methods
sites = method_sites()
load_method('agentic')
mods = sorted(m for m in sys.modules if m.startswith('scholarqa.methods.'))
assert mods == ['scholarqa.methods.agentic'], mods
load_methods()
registered = {n: (f.__module__.rsplit('.', 1)[-1], f.marker) for n, f in METHODS.items() if f.__module__.startswith('scholarqa.methods.')}
assert registered == sites, (registered, sites)
print(len(sites))
"""
    r = subprocess.run([sys.executable, '-c', code], capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr[-3000:]
    assert int(r.stdout) >= 10

def _hit_subclass_fields() -> dict:
    "{method module: fields its Hit subclasses add} found in the source."
    out = {}
    for name, path in modules().items():
        if not name.startswith('methods.'): continue
        for node in ast.walk(ast.parse(path.read_text(encoding='utf-8'))):
            if isinstance(node, ast.ClassDef) and any(getattr(b, 'id', getattr(b, 'attr', None)) == 'Hit' for b in node.bases):
                out.setdefault(name, set()).update(t.target.id for t in node.body if isinstance(t, ast.AnnAssign) and isinstance(t.target, ast.Name))
    return out

def test_no_module_knows_another_methods_hit_fields():
    """A field a method's hit adds (SKETCH's triples, RAPTOR's layer) is named by that method only, never by the floors that handle
    hits (retrieval, generate, evaluate, compare). The kg floor and `kg build` count RDF triples: a word, not SKETCH's field."""
    fields = _hit_subclass_fields()
    assert fields, 'no method defines its own hit: the check would pass vacuously'
    own = {f: m for m, fs in fields.items() for f in fs}
    bad = [(name, f, own[f]) for name, path in modules().items() if name.split('.')[0] in ('retrieval', 'generate', 'eval')
           for f in set(_string_constants(path)) & set(own)]
    assert not bad, f'modules naming another method\'s hit fields: {bad}'

@pytest.fixture(scope='module')
def demo_folders(tmp_path_factory, demo_cli_copy):
    "The demo corpus as every method reads it: an index (with a tiny LeSeGR inside), a graph folder, a multi-channel model."
    from scholarqa.kg.academic import build_graph_folder
    from scholarqa.protocol import load_methods, train_method
    load_methods()
    from scholarqa.ingest import Corpus
    d = demo_cli_copy(tmp_path_factory.mktemp('shape'))[0]                # `scholarqa ingest` + `index` (tests/conftest.py)
    papers = list(Corpus.load(d / 'corpus'))
    build_graph_folder(d / 'graph', demo=True)
    train_method('lesegr', d / 'index', pseudo=32, epochs=1)
    train_method('multichannel', d / 'mc', dataset='demo', ge_epochs=2, epochs=1, max_seq_length=64, progress=False)
    return {'index': d / 'index', 'graph': d / 'graph', 'mc': d / 'mc', 'papers': papers}

QUESTIONS = {'graph': 'Who are the co-authors of Samuel Achebe?', 'mc': 'Dense retrieval of scientific passages',
             'index': 'How are citation graphs used for retrieval?'}

def test_every_registered_method_returns_the_one_result_type(demo_folders):
    "Each method, opened on the folder it reads by name through the registry, answers with one `Answer` and labelled evidence."
    from scholarqa.protocol import METHODS, ask, default_method, open_method
    from scholarqa.generate.answer import Answer, Evidence, EvidenceItem, RESULT_STATUSES, ExtractiveBackend, LexicalEncoder
    folder_of = {n: 'graph' if default_method(demo_folders['graph']) == n else 'mc' if default_method(demo_folders['mc']) == n else 'index'
                 for n in METHODS}
    assert folder_of['agentic'] == 'graph' and folder_of['multichannel'] == 'mc'
    backend = ExtractiveBackend(encoder=LexicalEncoder())
    kinds = {}
    for name in sorted(METHODS):
        where = folder_of[name]
        opts = {'papers': demo_folders['papers']} if where == 'index' and name not in ('retrieve', 'lesegr') else {}
        if name == 'raptor': opts['summariser'] = 'extractive'
        m = open_method(name, demo_folders[where], **opts)
        ev = m.retrieve(QUESTIONS[where], 3)
        assert type(ev) is Evidence and ev.question == QUESTIONS[where], (name, type(ev))   # the one evidence type
        a = ask(m, QUESTIONS[where], 3, backend)
        assert type(a) is Answer and a.status in RESULT_STATUSES and a.method and a.question == QUESTIONS[where], name
        assert a.evidence and all(isinstance(e, EvidenceItem) and e.label for e in a.evidence), name
        assert {'retrieve_s', 'answer_s'} <= set(a.timings), name
        json.dumps(a.to_json())                                          # the result is plain JSON all the way down
        kinds[name] = {e.kind for e in a.evidence}
    assert kinds['agentic'] == {'fact'} and kinds['multichannel'] == {'paper'} and kinds['structrag'] == {'passage'}

def test_one_fixed_chunk_baseline(demo_folders):
    "StructRAG's VanillaRAG and SKETCH's Naive RAG read the index's one fixed-chunk folder and rank its windows alike."
    from scholarqa.protocol import open_method
    idx = demo_folders['index']
    q = 'Which evaluation metrics are used to compare retrieval methods?'
    ranked = {n: [h.chunk.id for h in open_method(n, idx, papers=demo_folders['papers']).retrieve(q, 4)] for n in ('vanilla', 'naive')}
    assert ranked['vanilla'] == ranked['naive'] and len(ranked['vanilla']) == 4
    assert all('-Cfixed-' in c for c in ranked['vanilla'])
    assert (idx / 'fixed-1000' / 'vectors.npy').exists()
    assert not any(p.name.startswith(('vanilla', 'naive')) for p in idx.rglob('*')), 'a second copy of the baseline was written'


SECOND = {'graph': 'What did John Doe write?', 'mc': 'Citation graphs for question answering',
          'index': ('How much memory does compressing stored vectors save in the dense dual encoder paper, and how is the '
                    'spread of the top passages over sources measured in the source-diversity paper?')}

def test_no_method_keeps_evidence_between_its_steps(demo_folders):
    """Two questions retrieved one after the other on one method object, then answered in the other order, get the answers
    each gets alone: `answer` reads the evidence it is given, nothing kept on the object (the second text question is
    split over two papers, so the decomposition's trace is exercised)."""
    from scholarqa.protocol import METHODS, default_method, open_method
    from scholarqa.generate.answer import ExtractiveBackend, LexicalEncoder
    backend = ExtractiveBackend(encoder=LexicalEncoder())
    def seen(a): return (a.status, a.text, list(a.values), [e.label for e in a.evidence])
    for name in sorted(METHODS):
        where = next((w for w in ('graph', 'mc') if default_method(demo_folders[w]) == name), 'index')
        opts = {'papers': demo_folders['papers']} if where == 'index' and name not in ('retrieve', 'lesegr') else {}
        if name == 'raptor': opts['summariser'] = 'extractive'
        m = open_method(name, demo_folders[where], **opts)
        q1, q2 = QUESTIONS[where], SECOND[where]
        alone = [seen(m.answer(q, m.retrieve(q, 3), backend)) for q in (q1, q2)]
        e1, e2 = m.retrieve(q1, 3), m.retrieve(q2, 3)
        assert [seen(m.answer(q2, e2, backend)), seen(m.answer(q1, e1, backend))] == alone[::-1], name

def _classes_with(method_name: str) -> list:
    "(module, class) of every class in the package that defines `method_name`, in its body or by fastcore's `@patch`."
    out = []
    for name, path in modules().items():
        for node in ast.walk(ast.parse(path.read_text(encoding='utf-8'))):
            if isinstance(node, ast.ClassDef) and any(isinstance(f, ast.FunctionDef) and f.name == method_name for f in node.body):
                out.append((name, node.name))
            patched = isinstance(node, ast.FunctionDef) and any(getattr(d, 'id', None) == 'patch' for d in node.decorator_list)
            if patched and node.name == method_name and node.args.args and isinstance(node.args.args[0].annotation, ast.Name):
                out.append((name, node.args.args[0].annotation.id))
    return out

def test_a_method_has_one_entry_point():
    "A class with the protocol's `retrieve` and `answer` keeps no second way in (`run`) and no `_last`/`last` of a question."
    both = set(_classes_with('retrieve')) & set(_classes_with('answer'))
    assert {'AgenticGraphRAG', 'DecomposedMethod', 'FactRAG', 'RerankedMethod'} <= {c for _, c in both}, both
    assert not both & set(_classes_with('run')), both & set(_classes_with('run'))
    retrievers = {n for n, _ in _classes_with('retrieve')}          # the modules of every retriever and method
    assert {'retrieval.decompose', 'protocol', 'methods.agentic'} <= retrievers
    kept = [(n, a.attr) for n, p in modules().items() if n in retrievers for a in ast.walk(ast.parse(p.read_text(encoding='utf-8')))
            if isinstance(a, ast.Attribute) and a.attr in ('_last', 'last', 'last_papers') and isinstance(a.ctx, ast.Store)]
    assert not kept, kept

def _functions(pattern: str) -> dict:
    "{(module, function name): its AST} of every top-level function of the package whose name matches `pattern`."
    return {(n, f.name): f for n, p in modules().items() for f in ast.parse(p.read_text(encoding='utf-8')).body
            if isinstance(f, ast.FunctionDef) and re.fullmatch(pattern, f.name)}

def _opens_a_file(f: ast.FunctionDef) -> bool:
    calls = [c.func for c in ast.walk(f) if isinstance(c, ast.Call)]
    return any(isinstance(c, ast.Attribute) and c.attr in ('read_text', 'read_bytes', 'open') or
               isinstance(c, ast.Name) and c.id in ('open', 'read_text', 'iter_jsonl') for c in calls)

def _calls(f: ast.FunctionDef, name: str) -> bool:
    return any(isinstance(c, ast.Call) and getattr(c.func, 'id', getattr(c.func, 'attr', None)) == name for c in ast.walk(f))

def test_one_reader_opens_question_files():
    """`question_lines` (03b) opens every question file and asks the sealed rule; the readers that interpret lines (the
    command line's, the retrieval files', the harness's) and the corpora's loader reach files only through it."""
    readers = _functions(r'question_lines|read_questions|load_eval_questions|read_question_file|corpus_questions')
    assert {f for _, f in readers} == {'question_lines', 'read_questions', 'load_eval_questions', 'read_question_file',
                                       'corpus_questions'}, sorted(readers)
    opens = {key for key, f in readers.items() if _opens_a_file(f)}
    assert opens == {('eval.questions', 'question_lines')}, opens
    assert _calls(readers[('eval.questions', 'question_lines')], 'refuse_sealed')
    for key, f in readers.items():
        if key[1] in ('read_questions', 'load_eval_questions', 'read_question_file'): assert _calls(f, 'question_lines'), key
    assert _calls(readers[('eval.harness', 'corpus_questions')], 'read_question_file')

def test_one_score_answer():
    "One scorer of an answer against its question line (09_evaluate), and one of answers that are sets of values (03b)."
    assert set(_functions('score_answer')) == {('eval.harness', 'score_answer')}
    assert set(_functions('value_scores')) == {('eval.metrics', 'value_scores')}
    assert _calls(_functions('score_answer')[('eval.harness', 'score_answer')], 'value_scores')

def test_package_lines_fit_100_columns():
    "At most 3 % of the package's lines are over 100 characters (nbdev's generated index aside)."
    lines = [l for n, p in modules().items() for l in p.read_text(encoding='utf-8').splitlines()]
    long = [l for l in lines if len(l) > 100]
    assert len(long) <= 0.03 * len(lines), f'{len(long)} of {len(lines)} lines over 100 characters'
