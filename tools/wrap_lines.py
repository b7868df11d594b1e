"""Wrap the code cells of the notebooks at 100 columns, changing nothing a program can see.

Only the lines longer than the limit are touched, so dense short lines stay as they are:

1. a comment that makes its line long is wrapped, and a trailing one moves above its line (except
   in a `def` header, where nbdev's docments read it beside its parameter);
2. a long `if x: y` puts its body on the next line, and a long `a; b` becomes two lines;
3. a long line inside brackets is broken after a comma or before `if`/`else`/`for`/`and`/`or`/`+`,
   the rest aligned under the bracket (the visual indent the notebooks are written in); a long
   value with no brackets of its own (`x = a if c else b`) is put in parentheses first;
4. a statement still long is formatted alone by `ruff format --range` (the well-kept formatter;
   formatting whole files would double the package's line count, because ruff also splits every
   `if x: return y` and puts each element of a split list on its own line);
5. a long one-line docstring becomes a wrapped triple-quoted one;
6. a long string literal inside brackets becomes two literals that Python joins at compile time;
7. what is still long is read for comments and commas once more.

Every cell is checked before it is written: its syntax tree must equal the original's, docstrings
compared with their whitespace collapsed. A cell that does not parse (a shell or magic line) is
left alone and named.

    python tools/wrap_lines.py [NOTEBOOK ...]      # default: every nbs/*.ipynb
"""
from __future__ import annotations

import ast
import io
import json
import shutil
import subprocess
import sys
import tempfile
import textwrap
import tokenize
from pathlib import Path

LIMIT = 100
SHORT = 30
OPERATOR_WORDS = ('if', 'else', 'for', 'and', 'or')
ROOT = Path(__file__).resolve().parents[1]


def ruff_binary() -> str:
    "The `ruff` beside this Python, or the one on PATH."
    here = Path(sys.executable).parent / 'ruff'
    found = str(here) if here.exists() else shutil.which('ruff')
    if not found:
        raise SystemExit('wrap_lines: ruff is not installed (pip install -e ".[dev]")')
    return found


def ruff_statement(text: str, line: int, ruff: str, tmp: Path) -> str:
    "Format the statement that holds 1-based `line` of `text`, and nothing else."
    tmp.write_text(text)
    width = len(text.split('\n')[line - 1]) + 1
    cmd = [ruff, 'format', '--isolated', '-q', f'--line-length={LIMIT}',
           '--config', 'format.quote-style="preserve"', f'--range={line}:1-{line}:{width}', str(tmp)]
    done = subprocess.run(cmd, capture_output=True, text=True)
    return tmp.read_text() if done.returncode == 0 else text


def char_col(line: str, offset: int) -> int:
    "The character column of `ast`'s UTF-8 byte offset on `line`."
    return len(line.encode()[:offset].decode(errors='ignore'))


def long_lines(text: str) -> list[int]:
    return [i for i, l in enumerate(text.split('\n')) if len(l) > LIMIT]


def string_lines(text: str) -> set[int]:
    "0-based lines that lie inside a string spanning several lines (a SPARQL query, a Turtle file)."
    return {row for tok in tokenize.generate_tokens(io.StringIO(text).readline)
            if tok.type == tokenize.STRING and tok.end[0] > tok.start[0]
            for row in range(tok.start[0], tok.end[0])}


def format_statements(text: str, ruff: str, tmp: Path) -> str:
    "Step 4: each long statement, when no comma could break it,, from the bottom up so earlier line numbers stay valid."
    tried: set[str] = set()
    while True:
        lines = text.split('\n')
        todo = [i for i in long_lines(text) if lines[i] not in tried]
        if not todo:
            return text
        i = todo[-1]
        col = comment_columns(text).get(i)
        if col is not None and len(lines[i][:col].rstrip()) <= LIMIT or i in string_lines(text):
            tried.add(lines[i])   # only its comment is long, or it is text: the formatter cannot help
            continue
        new = ruff_statement(text, i + 1, ruff, tmp)
        if new == text:
            tried.add(lines[i])
        text = new


def open_brackets(text: str) -> dict[int, list[tuple[int, int, int, int]]]:
    """For each 0-based line, where it may break inside brackets: (column of the break, column the
    rest aligns to, depth, 0 after a comma, 1 before `if`, `else`, `for`, `and`, `or`, `+`, 2 before
    the `.` of a method chain). A bracket that ends its line (hanging indent) aligns the
    rest with the line's own indent. Not breakable: a comma of a comprehension's `for a, b`, and
    one inside brackets shorter than `SHORT` (`d.get(k, [])` stays whole)."""
    out: dict[int, list[tuple[int, int, int, int]]] = {}
    stack: list[list] = []   # [row, column, hanging, a `for` seen at this depth, its commas]
    lines = text.split('\n')
    prev = None
    for tok in tokenize.generate_tokens(io.StringIO(text).readline):
        if prev is not None and stack and stack[-1][2] is None:
            stack[-1][2] = tok.type in (tokenize.NL, tokenize.NEWLINE, tokenize.COMMENT)
        prev = None
        if tok.type == tokenize.NAME and tok.string == 'for' and stack:
            stack[-1][3] = True
        word = tok.type == tokenize.NAME and tok.string in OPERATOR_WORDS
        if stack and (word or tok.type == tokenize.OP and tok.string in ('+', '.')):
            _, col, hanging, _, commas = stack[-1]
            line = lines[tok.start[0] - 1]
            align = len(line) - len(line.lstrip()) - 1 if hanging else col
            kind = 2 if tok.string == '.' else 1
            commas.append((tok.start[0] - 1, (tok.start[1], align, len(stack), kind)))
        if tok.type != tokenize.OP:
            continue
        if tok.string in '([{':
            stack.append([tok.start[0], tok.start[1], None, False, []])
            prev = tok.start[0]
        elif tok.string in ')]}':
            row, col, _, _, commas = stack.pop()
            if row == tok.start[0] and tok.start[1] - col < SHORT:
                continue
            for line_no, item in commas:
                out.setdefault(line_no, []).append(item)
        elif tok.string == ',' and stack and not stack[-1][3]:
            _, col, hanging, _, commas = stack[-1]
            line = lines[tok.start[0] - 1]
            indent = len(line) - len(line.lstrip())
            align = indent - 1 if hanging else col
            commas.append((tok.start[0] - 1, (tok.end[1], align, len(stack), 0)))
    return out


def comma_break(line: str, commas: list[tuple[int, int, int, int]]) -> list[str] | None:
    """Break `line` after a comma (or before an operator or a method call), the rest aligned under
    its bracket (the style the notebooks are written in): the outermost brackets first, there
    commas before operators before calls, the rightmost break whose rest fits, else the rightmost
    that makes room."""
    fits, room = [], []
    for end, bracket, depth, kind in commas:
        head, rest = line[:end].rstrip(), line[end:].strip()
        if not rest or rest.startswith('#') or len(head) > LIMIT:
            continue
        tail = ' ' * (bracket + 1) + rest
        if bracket + 1 >= len(head) or len(tail) >= len(line):
            continue
        (fits if len(tail) <= LIMIT else room).append((depth, -kind, end, [head, tail]))
    if not fits and not room:
        return None
    top = min(c[0] for c in fits + room)
    fits, room = [c for c in fits if c[0] == top], [c for c in room if c[0] == top]
    return max(fits or room, key=lambda c: c[1:3])[3]


def split_one_liners(text: str) -> str:
    "Step 2: a long `if x: y` (or `for`, `while`, `with`) puts its body on the next line."
    lines = text.split('\n')
    kinds = (ast.If, ast.For, ast.While, ast.With, ast.FunctionDef)
    nodes = [n for n in ast.walk(ast.parse(text)) if isinstance(n, kinds)
             and n.body[0].lineno == n.lineno and n.end_lineno == n.lineno]
    for node in sorted(nodes, key=lambda n: -n.lineno):
        i = node.lineno - 1
        line = lines[i]
        if len(line) <= LIMIT:
            continue
        col = char_col(line, node.body[0].col_offset)
        indent = line[:len(line) - len(line.lstrip())]
        head, body = line[:col].rstrip(), line[col:]
        if not head.endswith(':'):
            continue
        lines[i:i + 1] = [head, indent + '    ' + body]
    return split_semicolons('\n'.join(lines))


def split_semicolons(text: str) -> str:
    "A long line of `a; b` becomes a line per statement."
    lines = text.split('\n')
    on_line: dict[int, list[ast.stmt]] = {}
    for node in ast.walk(ast.parse(text)):
        if isinstance(node, ast.stmt) and node.lineno == node.end_lineno:
            on_line.setdefault(node.lineno - 1, []).append(node)
    for i in sorted(on_line, reverse=True):
        nodes = sorted(on_line[i], key=lambda n: n.col_offset)
        line = lines[i]
        cols = [char_col(line, n.col_offset) for n in nodes]
        compound = any(hasattr(n, 'body') for n in nodes)
        if compound or len(nodes) < 2 or len(line) <= LIMIT or line[:cols[0]].strip():
            continue
        indent = line[:cols[0]]
        cuts = cols + [len(line)]
        parts = [line[a:b].rstrip().rstrip(';').rstrip() for a, b in zip(cuts, cuts[1:])]
        lines[i:i + 1] = [indent + part for part in parts]
    return '\n'.join(lines)


def add_parens(text: str) -> str:
    """A long `x = a if c else b` (or `and`/`or`/`+`, a tuple; a `return`, an `if` or `while` test)
    gets parentheses around its value, and a long `from m import a, b` around its names (on a line
    of their own: nbdev-export shortens `from scholarqa.x` to `from .x`), so that the next step can
    break them inside."""
    lines = text.split('\n')
    found = []
    for node in ast.walk(ast.parse(text)):
        value = (getattr(node, 'value', None) if isinstance(node, (ast.Assign, ast.AnnAssign,
                                                                    ast.AugAssign, ast.Return))
                 else node.test if isinstance(node, (ast.If, ast.While)) else None)
        if (isinstance(value, (ast.IfExp, ast.BoolOp, ast.BinOp, ast.Tuple))
                and value.lineno == value.end_lineno
                and len(lines[value.lineno - 1]) > LIMIT):
            found.append(value)
    for node in ast.walk(ast.parse(text)):
        line = lines[node.lineno - 1] if isinstance(node, ast.ImportFrom) else ''
        if len(line) > LIMIT and node.end_lineno == node.lineno and '(' not in line \
                and ' import ' in line and '#' not in line:
            at = line.index(' import ') + len(' import ')
            indent = line[:len(line) - len(line.lstrip())]
            lines[node.lineno - 1] = f'{line[:at]}(\n{indent}    {line[at:].rstrip()})'
    for value in sorted(found, key=lambda v: (-v.lineno, -v.col_offset)):
        i = value.lineno - 1
        line = lines[i]
        a, b = char_col(line, value.col_offset), char_col(line, value.end_col_offset)
        if line[a - 1:a] == '(' and line[b:b + 1] == ')':
            continue
        lines[i] = line[:a] + '(' + line[a:b] + ')' + line[b:]
    return '\n'.join(lines)


def bottom_up(text: str, fix) -> str:
    """Give each long line, from the bottom up, to `fix(text, i)`, which returns the lines that
    replace line `i` or None; the lines above keep their numbers."""
    done: set[int] = set()
    while True:
        lines = text.split('\n')
        todo = [i for i in long_lines(text) if i not in done]
        if not todo:
            return text
        i = todo[-1]
        new = fix(text, i)
        done.add(i)
        if new is None:
            continue
        lines[i:i + 1] = new
        done = {j + (len(new) - 1 if j > i else 0) for j in done}
        text = '\n'.join(lines)


def break_at_commas(text: str) -> str:
    "Step 3: a long line inside brackets is broken after a comma, from the bottom line up."
    return bottom_up(text, lambda t, i: comma_break(t.split('\n')[i], open_brackets(t).get(i, [])))


def docstring_nodes(tree: ast.AST):
    for node in ast.walk(tree):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef, ast.Module)):
            body = node.body
            if body and isinstance(body[0], ast.Expr) and isinstance(body[0].value, ast.Constant) \
                    and isinstance(body[0].value.value, str):
                yield body[0]


def wrap_docstrings(text: str) -> str:
    "Step 5: a long one-line docstring becomes a wrapped triple-quoted one."
    lines = text.split('\n')
    for node in sorted(docstring_nodes(ast.parse(text)), key=lambda n: -n.lineno):
        i = node.lineno - 1
        if node.end_lineno != node.lineno or len(lines[i]) <= LIMIT:
            continue
        line = lines[i]
        col, end = char_col(line, node.col_offset), char_col(line, node.end_col_offset)
        seg, rest = line[col:end], line[end:]
        if rest.strip() or seg[:1] not in '"\'' or seg.startswith(('"""', "'''")):
            continue
        body = seg[1:-1]
        if '"""' in body or body.endswith(('"', '\\')):
            continue
        indent = line[:col]
        out = textwrap.wrap(body, width=LIMIT - 3, initial_indent=indent + '"""',
                            subsequent_indent=indent, break_long_words=False,
                            break_on_hyphens=False)
        out[-1] += '"""'
        lines[i:i + 1] = out
    return '\n'.join(lines)


def brace_depths(body: str) -> list[int]:
    "The f-string replacement-field depth before each character of `body` (`{{` is a literal)."
    depths, depth, j = [], 0, 0
    while j < len(body):
        two = body[j:j + 2]
        if depth == 0 and two in ('{{', '}}'):
            depths += [0, 0]
            j += 2
            continue
        depths.append(depth)
        depth += body[j] == '{'
        depth -= body[j] == '}' and depth > 0
        j += 1
    return depths


def literal_cut(line: str, col: int, prefix: str, body: str) -> int | None:
    """Where to cut the literal `prefix'body'` that starts at `col` so that its first piece ends by
    the limit: after the last space outside an f-string's replacement fields, or None."""
    is_f = 'f' in prefix.lower()
    depths = brace_depths(body) if is_f else [0] * len(body)
    room = LIMIT - col - len(prefix) - 2
    cuts = [j + 1 for j in range(1, min(len(body) - 1, room))
            if body[j] == ' ' and depths[j] == 0 and body[j - 1] != '\\']
    return cuts[-1] if cuts else None


def split_string(text: str, i: int) -> list[str] | None:
    """Line `i`'s string literal that crosses the limit, inside brackets, cut in two literals that
    Python joins at compile time, the second aligned under the first; None when none can be."""
    found, depth = None, 0
    for tok in tokenize.generate_tokens(io.StringIO(text).readline):
        if tok.type == tokenize.OP and tok.string in '([{':
            depth += 1
        elif tok.type == tokenize.OP and tok.string in ')]}':
            depth -= 1
        elif (tok.type == tokenize.STRING and depth > 0 and tok.start[0] == tok.end[0] == i + 1
              and tok.start[1] < LIMIT - 12 < tok.end[1]):
            found = tok
    if found is None:
        return None
    s, col, end = found.string, found.start[1], found.end[1]
    k = len(s) - len(s.lstrip('rRbBfFuU'))
    prefix, quote, body = s[:k], s[k], s[k + 1:-1]
    if s[k:k + 3] in ('"""', "\'\'\'"):
        return None
    line = text.split('\n')[i]
    cut = literal_cut(line, col, prefix, body)
    if cut is None:
        return None

    def literal(part: str) -> str:
        keep = prefix
        if 'f' in prefix.lower() and '{' not in part and '}' not in part:
            keep = prefix.replace('f', '').replace('F', '')
        return f'{keep}{quote}{part}{quote}'

    rest = ' ' * col + literal(body[cut:]) + line[end:]
    if len(rest) > LIMIT and col > LIMIT // 2:
        return None
    return [line[:col] + literal(body[:cut]), rest]


def split_strings(text: str) -> str:
    "Step 6: long string literals inside brackets, cut where they cross the limit."
    return bottom_up(text, split_string)


def comment_columns(text: str) -> dict[int, int]:
    "0-based line -> column of its comment (a `#` inside a string is not one)."
    return {tok.start[0] - 1: tok.start[1]
            for tok in tokenize.generate_tokens(io.StringIO(text).readline)
            if tok.type == tokenize.COMMENT}


def header_lines(tree: ast.AST) -> set[int]:
    "0-based lines of `def` headers (their comments are nbdev docments)."
    out = set()
    for node in ast.walk(tree):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            out.update(range(node.lineno - 1, node.body[0].lineno - 1))
    return out


def wrap_comments(text: str) -> str:
    "Steps 1 and 7: long comments wrapped; a trailing one that does not fit goes above its line."
    lines, headers = text.split('\n'), header_lines(ast.parse(text))
    comments = comment_columns(text)
    for i in reversed(range(len(lines))):
        line = lines[i]
        if len(line) <= LIMIT or line.lstrip().startswith('#|'):
            continue
        col = comments.get(i)
        if col is None:
            continue
        code, note = line[:col].rstrip(), line[col:].lstrip('#').strip()
        if code and len(f'{code}  # {note}') <= LIMIT:
            lines[i] = f'{code}  # {note}'
            continue
        if code and i in headers:
            continue
        indent = line[:len(line) - len(line.lstrip())]
        wrapped = textwrap.wrap(note, width=LIMIT, initial_indent=indent + '# ',
                                subsequent_indent=indent + '# ', break_long_words=False,
                                break_on_hyphens=False)
        lines[i:i + 1] = wrapped + ([code] if code else [])
    return '\n'.join(lines)


def shape(text: str) -> str:
    "The syntax tree with docstrings' whitespace collapsed: what the wrap must not change."
    tree = ast.parse(text)
    for node in docstring_nodes(tree):
        node.value.value = ' '.join(node.value.value.split())
    return ast.dump(tree)


def wrap_cell(src: str, ruff: str, tmp: Path) -> str:
    if not long_lines(src):
        return src
    new = src
    steps = (wrap_comments, split_one_liners, add_parens, break_at_commas, split_strings,
             break_at_commas,
             lambda text: format_statements(text, ruff, tmp),
             wrap_docstrings, split_strings, wrap_comments, break_at_commas)
    for step in steps:
        try:
            new = step(new)
            ast.parse(new)
        except SyntaxError as e:
            raise ValueError(f'a step broke the cell ({e})') from e
    if new.endswith('\n') and not src.endswith('\n'):
        new = new[:-1]
    if shape(new) != shape(src):
        raise ValueError('the wrapped cell would change the program')
    return new


def wrap_notebook(path: Path, ruff: str, tmp: Path) -> tuple[int, int]:
    nb = json.loads(path.read_text())
    before = after = 0
    for n, cell in enumerate(nb['cells']):
        if cell['cell_type'] != 'code':
            continue
        src = ''.join(cell['source'])
        try:
            ast.parse(src)
        except SyntaxError:
            if long_lines(src):
                print(f'{path.name} cell {n}: not Python (magic or shell), left as it is')
            continue
        before += len(long_lines(src))
        try:
            new = wrap_cell(src, ruff, tmp)
        except ValueError as e:
            print(f'{path.name} cell {n}: {e}; left as it is')
            new = src
        after += len(long_lines(new))
        cell['source'] = new.splitlines(keepends=True)
    out = path.with_suffix('.tmp')
    out.write_text(json.dumps(nb, indent=1, ensure_ascii=False) + '\n')
    out.replace(path)
    return before, after


def main(paths: list[str]) -> None:
    ruff = ruff_binary()
    notebooks = [Path(p) for p in paths] or sorted((ROOT / 'nbs').glob('*.ipynb'))
    with tempfile.TemporaryDirectory() as d:
        tmp = Path(d) / 'cell.py'
        for path in notebooks:
            before, after = wrap_notebook(path, ruff, tmp)
            if before:
                print(f'{path.name}: {before} long lines -> {after}')


if __name__ == '__main__':
    main(sys.argv[1:])
