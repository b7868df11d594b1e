"""Hostile strings shared by the tests that feed names, titles, questions and ids to SPARQL builders, file paths and the CLI.

Each one breaks a naive builder somewhere: quotes and triple quotes end a SPARQL or Python string, braces and `#` end a
group or start a comment, `UNION`/`SELECT` text tries to add a query, `<…>` looks like an IRI, `?x`/`$x` like variables,
`../` and `%2F` like paths, NUL and control characters and right-to-left marks confuse terminals and serialisers, and the very
long one finds fixed-size buffers and file-name limits.
"""
HOSTILE = [
    '"} ; DROP ALL ; SELECT * WHERE {"', "'\"'\"", '"""', "'''", '{}}}{', '} ; #', '# just a comment', 'a\nb\r\nc',
    'back\\slash\\', 'ünï©ødé ✓ 数据', '") } UNION { ?s ?p ?o } #', 'x UNION SELECT * WHERE { ?s ?p ?o }',
    '<https://w3id.org/scholarqa/entity/x>', '<>', 'x" || true || "', 'SELECT * WHERE { ?s ?p ?o }', '\x00\x1f', 'nul\u0000byte',
    '%2F..%2F', '../../../outside', '/etc/passwd', '?s', '$x', '\u202eright-to-left\u202c mark', '\u200f\u200e\u2066isolate\u2069',
    'x' * 10_000,
]
