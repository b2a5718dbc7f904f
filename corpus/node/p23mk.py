import sys, yaml, pathlib
root = pathlib.Path('/work/wt/p23-request/corpus')
def case(layer, slug, text, source, engine, wrapper, notes, top, line, redactions=()):
    d = root / layer
    (d / f'{slug}.log').write_text(text, encoding='utf-8')
    exp = {'source': source, 'origin': 'real', 'engine': engine, 'wrapper': wrapper, 'notes': notes,
           'redactions': list(redactions), 'tags': ['pack-p23-request'], 'expect': {'top': top, 'line': line}}
    (d / f'{slug}.expected.yaml').write_text(yaml.safe_dump(exp, sort_keys=False, width=100, allow_unicode=True), encoding='utf-8')
    lines = text.splitlines()
    print(slug, len(lines), '->', lines[line-1][:110])
