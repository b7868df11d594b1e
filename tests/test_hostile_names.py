"""Hostile strings through the command line: as paper titles and section headings (ingest → kg build → index) and as
questions (search, ask). Every command succeeds, what was read is what the graph holds after a round trip through the
TriG file, every question gets its answer line, and nothing is written outside the folders the commands were given.
"""
import json, subprocess, sys
from pathlib import Path

from hostile_strings import HOSTILE
from scholarqa.datasets import demo_dir
from scholarqa.doc import iter_sections

ROOT = Path(__file__).resolve().parents[1]
CLI = [sys.executable, '-c', 'from scholarqa.cli import cli_main; cli_main()']


def _run(*args, timeout=900):
    return subprocess.run(CLI + [str(a) for a in args], cwd=ROOT, capture_output=True, text=True, timeout=timeout)


def _files(root: Path) -> set:
    return {p for p in root.rglob('*') if p.is_file()}


def test_hostile_titles_headings_and_questions(tmp_path, tally):
    from scholarqa.ingest import Corpus
    from scholarqa.kg.rdf import load_kg
    from scholarqa.kg.queries import paper_outline
    src, work = tmp_path / 'src', tmp_path / 'work'
    src.mkdir(); work.mkdir()
    template = sorted(demo_dir().glob('*.md'))[0].read_text(encoding='utf-8')
    body = template.split('\n## 1 Introduction\n', 1)[1]
    for i, h in enumerate(HOSTILE):
        one_line = h.replace('\r', ' ').replace('\n', ' ')        # a Markdown heading is one line: the one thing a title cannot hold
        (src / f'hostile_{i:02d}.md').write_text(f'# Paper {i}: {one_line}\n\n## Abstract\nAbstract {i} about {one_line}.\n\n'
                                                 f'## {one_line}\n{body}', encoding='utf-8')
    before = _files(tmp_path)
    corpus, trig, index = work / 'corpus', work / 'kg.trig', work / 'index'
    r = _run('ingest', src, '--out', corpus, '--json')
    assert r.returncode == 0, r.stderr[-2000:]
    assert json.loads(r.stdout.splitlines()[-1])['added'] == len(HOSTILE)
    r = _run('kg', 'build', corpus, '--out', trig)
    assert r.returncode == 0, r.stderr[-2000:]
    r = _run('index', corpus, '--out', index)
    assert r.returncode == 0, r.stderr[-2000:]

    papers = list(Corpus.load(corpus))
    kg = load_kg(trig)                                            # what was read is what the graph holds, after a round trip
    assert len(papers) == len(HOSTILE)
    for p in papers:
        titles = [o['title'] for o in paper_outline(kg, p.id)]
        assert p.sections[1].title in titles and set(titles) <= {s.title for s in iter_sections(p)}, repr(p.title[:60])
    from rdflib.namespace import DCTERMS
    titles = {str(o) for o in kg.objects(None, DCTERMS.title)}
    assert {p.title for p in papers} <= titles

    qs = work / 'questions.jsonl'
    qs.write_text(''.join(json.dumps({'id': f'q{i}', 'question': h}) + '\n' for i, h in enumerate(HOSTILE)), encoding='utf-8')
    for cmd in (['search', index, '--questions', qs, '-k', '3', '--json'],
                ['ask', index, '--questions', qs, '-k', '3', '--backend', 'extractive', '--json']):
        r = _run(*cmd)
        assert r.returncode in (0, 1), r.stderr[-2000:]
        lines = [json.loads(l) for l in r.stdout.splitlines() if l.strip()]
        assert [l['id'] for l in lines] == [f'q{i}' for i in range(len(HOSTILE))], cmd[0]
        assert not [l for l in lines if l.get('error')], [l['error'] for l in lines if l.get('error')][:3]

    written = _files(tmp_path) - before
    outside = sorted(str(p) for p in written if work not in p.parents)
    assert not outside, f'written outside the folders given: {outside[:5]}'
    tally('injection and path safety', f'{len(HOSTILE)} hostile strings as paper titles, section headings and questions through '
          'ingest, kg build, index, search and ask', strings=len(HOSTILE))
