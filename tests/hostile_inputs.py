"""A batch of hostile input files, shared by the tests that feed them to `scholarqa ingest`.

`write_batch(folder)` writes every kind below and returns, per file name, what a correct ingest does with it:
('ok', None) kept, ('partial', n) kept with n bad records reported, ('failed', words) reported with an error holding one of
the words, ('skipped', None) listed as claimed by no reader. Everything is generated from a fixed seed.
"""
import gzip, json, os, random
from pathlib import Path

from scholarqa.datasets import demo_dir


def _unarxive(i: int, tag: str) -> dict:
    "A small record in the unarXive schema that the unarXive reader accepts."
    return {'paper_id': f'2401.{i:05d}', '_pdf_hash': None, '_source_hash': f'{i:040x}', '_source_name': f'hostile_{tag}_{i}.tar.gz', 'metadata': {'title': f'Hostile batch paper {tag} {i}',
            'authors': 'A. Author', 'categories': 'cs.IR'}, 'abstract': {'text': f'Abstract {tag} {i} on retrieval.'},
            'body_text': [{'section': 'Introduction', 'sec_number': '1', 'text': f'Body text {tag} {i}. ' * 20,
                           'cite_spans': [], 'ref_spans': []}],
            'bib_entries': {}, 'ref_entries': {}}


def write_batch(root: Path, seed: int = 0) -> dict:
    root.mkdir(parents=True, exist_ok=True)
    rng = random.Random(seed)
    want = {}
    md = sorted(demo_dir().glob('*.md'))
    pdfs = sorted((demo_dir() / 'pdf').glob('*.pdf'))
    good_md = lambda i: md[i % len(md)].read_text(encoding='utf-8').replace('## Abstract\n', f'## Abstract\nHostile batch copy {i}.\n', 1)

    def put(name, data, outcome):
        p = root / name
        p.write_bytes(data if isinstance(data, bytes) else data.encode('utf-8'))
        want[name] = outcome

    for i in range(20): put(f'good_{i:02d}.md', good_md(i), ('ok', None))
    for i in range(5):                                          # the same paper under two names: kept once, both files ok
        put(f'twin_{i}_a.md', good_md(100 + i), ('ok', None)); put(f'twin_{i}_b.md', good_md(100 + i), ('ok', None))
    for i in range(20): put(f'random_{i:02d}.pdf', b'%PDF-1.4\n' + rng.randbytes(300 + 40 * i), ('failed', ('pdf', 'PDF', 'read')))
    for i in range(20):
        src = pdfs[i % len(pdfs)].read_bytes()
        put(f'truncated_{i:02d}.pdf', src[: 200 + (len(src) // 40) * i], ('failed', ('pdf', 'PDF', 'read', 'text')))
    from pypdf import PdfWriter
    import io
    for i in range(10):
        w = PdfWriter(); w.add_blank_page(200, 200); w.encrypt(f'secret{i}'); b = io.BytesIO(); w.write(b)
        put(f'encrypted_{i:02d}.pdf', b.getvalue(), ('failed', ('encrypted',)))
    for i in range(10):
        w = PdfWriter(); b = io.BytesIO(); w.write(b)
        put(f'zero_pages_{i:02d}.pdf', b.getvalue(), ('failed', ('page', 'no text', 'no papers', 'empty')))
    sample = md[0].read_text(encoding='utf-8')
    for i in range(20):
        raw = bytearray(sample.encode('utf-8')); pos = rng.randrange(20, len(raw) - 1); raw[pos:pos] = b'\xff\xfe\xc3'
        put(f'bad_utf8_{i:02d}.md', bytes(raw), ('failed', ('utf-8', 'UTF-8')))
    for i in range(10):                                         # one part UTF-8, one part Latin-1
        put(f'mixed_encoding_{i:02d}.md', sample.encode('utf-8') + f'\n\nCaf\u00e9 na\u00efve r\u00e9sum\u00e9 {i}\n'.encode('latin-1'),
            ('failed', ('utf-8', 'UTF-8')))
    for i, sfx in enumerate(['.md', '.json', '.jsonl', '.pdf', '.md', '.jsonl', '.json', '.pdf', '.md', '.jsonl']):
        put(f'empty_{i:02d}{sfx}', b'', ('failed', ('empty',)))
    for i in range(10): put(f'blank_{i:02d}.md', ' \n\t\n' * (i + 1), ('failed', ('white space',)))
    for i in range(5):
        depth = 10_000 * (i + 1)
        put(f'nested_{i}.json', '[' * depth + ']' * depth, ('failed', ('schema', 'recognis', 'JSON', 'deep', 'recursion')))
    for i in range(20):
        txt = json.dumps(_unarxive(i, 'cut'))
        put(f'truncated_{i:02d}.jsonl', txt[: len(txt) // 2 + i], ('failed', ('JSON', 'json', 'record', 'schema')))
    for i in range(10):                                         # one bad line in the middle: the others are kept
        lines = [json.dumps(_unarxive(1000 + 10 * i + j, f'jl{i}')) for j in range(4)]
        lines.insert(2, '{"paper_id": "broken", "metadata": ')
        put(f'one_bad_line_{i:02d}.jsonl', '\n'.join(lines) + '\n', ('partial', 1))
    for i in range(20): put(f'unknown_schema_{i:02d}.json', json.dumps({'unexpected': i, 'rows': list(range(i))}),
                            ('failed', ('schema', 'recognis', 'format')))
    for i in range(10): put(f'corrupt_{i:02d}.jsonl.gz', gzip.compress(b'{"a": 1}\n' * 50)[: 20 + i], ('failed', ('gzip',)))
    for i in range(10): put(f'unknown_{i:02d}.xyz', rng.randbytes(64), ('skipped', None))
    for i in range(5):                                          # symlink loops and symlinks to nowhere
        a, b = root / f'loop_{i}_a.md', root / f'loop_{i}_b.md'
        os.symlink(b.name, a); os.symlink(a.name, b)
        want[a.name] = want[b.name] = ('failed', ('symlink',))
        os.symlink(f'missing_{i}.md', root / f'dangling_{i}.md'); want[f'dangling_{i}.md'] = ('failed', ('symlink',))
    return want


KINDS = [   # file-name prefix (and ending) -> the kind of hostile input, in the order write_batch writes them
    ('good_', '', 'good Markdown papers (kept)'), ('twin_', '', 'one paper under two names'),
    ('random_', '.pdf', 'random-byte PDF'), ('truncated_', '.pdf', 'truncated PDF'), ('encrypted_', '', 'encrypted PDF'),
    ('zero_pages_', '', 'PDF with no page'), ('bad_utf8_', '', 'invalid UTF-8'), ('mixed_encoding_', '', 'UTF-8 and Latin-1 mixed'),
    ('empty_', '', 'empty file'), ('blank_', '', 'white space only'), ('nested_', '', 'JSON nested 10,000-50,000 deep'),
    ('truncated_', '.jsonl', 'truncated JSON record'), ('one_bad_line_', '', 'JSONL with one bad line among four good'),
    ('unknown_schema_', '', 'JSON of an unknown schema'), ('corrupt_', '', 'corrupt gzip'), ('unknown_', '', 'unknown file ending'),
    ('loop_', '', 'symlink loop'), ('dangling_', '', 'dangling symlink'),
]


def kind_of(name: str) -> str:
    "The kind of hostile input a file of `write_batch` is, from its name."
    return next(k for pre, end, k in KINDS if name.startswith(pre) and name.endswith(end))
