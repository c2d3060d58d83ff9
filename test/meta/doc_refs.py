#!/usr/bin/env python3
# Every test a document cites exists: in docs/*.md and README.md, a
# reference is `test_PROGRAM` followed by case names ("`test_io` pipe_ops,
# file_ops"); each PROGRAM must be test/*/test_PROGRAM.c (or a test meson
# registers by that name) and each case a cmocka case in it; a lone
# `test_CASE` must be a case of some program; a `compile_fail_NAME` must be
# test/core/compile_fail/<NAME>.c and in test/core/meson.build's list of them;
# a path test/... or bench/... named anywhere exists. A promise
# in the docs that points at a test nobody runs fails here.
# The other way round, what the code and the docs say about the docs: a
# `docs/NAME.md` named in a source file exists; a section cited after it in
# quotes (`docs/sync.md ("Waking across contexts")`, `benchmarks.md,
# "Tracing"`) and a link's `#anchor` are headings of that page; "invariant N"
# is one of design.md's numbered rules.
import pathlib
import re
import sys

root = pathlib.Path(sys.argv[1])
cases = {}
for src in (root / 'test').rglob('test_*.c'):
    text = src.read_text(encoding='utf-8')
    cases[src.stem] = set(re.findall(r'cmocka_unit_test(?:_\w+)?\(\s*test_(\w+)\s*[,)]', text))
# every meson.build of the tests and the benchmarks, as one text
meson = ''.join(f.read_text(encoding='utf-8') for d in ('test', 'bench')
                for f in sorted((root / d).rglob('meson.build')))

ref = re.compile(r'`(test_\w+)`((?:,? (?:and )?[a-z0-9]+(?:_[a-z0-9]+)+)*)')
bad = 0
docs = sorted((root / 'docs').glob('*.md')) + [root / 'README.md']
for doc in docs:
    # a reference may wrap: match on the text with line breaks as spaces
    text = re.sub(r'\s*\n\s*', ' ', doc.read_text(encoding='utf-8'))
    for line in [text]:
        for m in ref.finditer(line):
            where = m.group(0)[:60]
            prog, tail = m.group(1), m.group(2)
            names = re.findall(r'[a-z0-9]+(?:_[a-z0-9]+)+', tail)
            if prog not in cases:
                case = prog.removeprefix('test_')
                if any(case in c for c in cases.values()) or case in meson:
                    continue
                print(f'{doc.name}: no test program {prog} ({where})')
                bad += 1
                continue
            for name in names:
                if name not in cases[prog]:
                    print(f'{doc.name}: {prog} has no case {name} ({where})')
                    bad += 1
compile_fail = re.compile(r'`compile_fail_([a-z0-9_]+)`')
for doc in docs:
    for name in compile_fail.findall(doc.read_text(encoding='utf-8')):
        if not (root / 'test' / 'core' / 'compile_fail' / (name + '.c')).exists() or f"'{name}'" not in meson:
            print(f'{doc.name}: no compile-fail test {name}')
            bad += 1

def slug(heading):
    h = re.sub(r'[^\w\- ]', '', heading.strip().lower())
    return h.replace(' ', '-')


headings = {}
for doc in sorted((root / 'docs').glob('*.md')) + [root / 'README.md']:
    heads = re.findall(r'^#+\s+(.*?)\s*$', doc.read_text(encoding='utf-8'), flags=re.M)
    headings[doc.name] = {h.strip('`') for h in heads} | {slug(h) for h in heads}
design = (root / 'docs' / 'design.md').read_text(encoding='utf-8')
rules = design[design.index('## The rules'):]
rules = rules[:rules.index('\n## ')] if '\n## ' in rules else rules
invariants = set(int(n) for n in re.findall(r'^(\d+)\. \*\*', rules, flags=re.M))

sources = []
for d in ('lib', 'include', 'bench', 'test', 'tools', 'docs/examples'):
    for ext in ('*.c', '*.h', '*.cpp', '*.py', '*.sh', '*.go', 'meson.build'):
        sources += sorted((root / d).rglob(ext))
for src in sources:
    rel = src.relative_to(root)
    text = re.sub(r'\s*\n\s*(?:\*\s*|#\s*|//\s*)?', ' ', src.read_text(encoding='utf-8', errors='replace'))
    for m in re.finditer(r'(?:docs/)?\b([a-z_]+\.md)\b(#[\w-]+)?(?:,? \(?((?:"[^"]+",? ?)+))?', text):
        name, anchor, quoted = m.groups()
        if m.group(0).startswith('docs/') and not (root / 'docs' / name).exists():
            print(f'{rel}: no docs/{name}')
            bad += 1
            continue
        if name not in headings:
            continue
        cited = re.findall(r'"([^"]+)"', quoted or '')
        if anchor:
            cited.append(anchor[1:])
        for sec in cited:
            if sec not in headings[name]:
                print(f'{rel}: {name} has no section "{sec}"')
                bad += 1
    for n in re.findall(r'\binvariants? (\d+)', text):
        if int(n) not in invariants:
            print(f'{rel}: design.md has no invariant {n}')
            bad += 1
for doc in sorted((root / 'docs').glob('*.md')) + [root / 'README.md']:
    text = doc.read_text(encoding='utf-8')
    for target, anchor in re.findall(r'\]\((?:docs/)?([a-z_]*\.md)?#([\w-]+)\)', text):
        page = target or doc.name
        if page in headings and anchor not in headings[page]:
            print(f'{doc.name}: link to {page}#{anchor}, no such section')
            bad += 1
    for n in re.findall(r'\binvariants? (\d+)', text):
        if int(n) not in invariants:
            print(f'{doc.name}: design.md has no invariant {n}')
            bad += 1
# Pointers into the library: a path lib/DIR/FILE named anywhere must exist,
# and a function named right after it ("lib/engine/engine_wait.c
# spin_poll") must be defined there (a name with an underscore: a word of
# the sentence after a path is not one).
defs = {}


def defined_in(path):
    if path not in defs:
        text = (root / path).read_text(encoding='utf-8')
        defs[path] = set(re.findall(r'^[A-Za-z_][\w \t*]*?\b(\w+)\s*\([^;]*?\)\s*\{', text, flags=re.M))
        defs[path] |= set(re.findall(r'^#\s*define\s+(\w+)', text, flags=re.M))
        defs[path] |= set(re.findall(r'^(?:struct|enum|typedef struct)\s+(\w+)', text, flags=re.M))
    return defs[path]


for src in sources + sorted((root / 'docs').glob('*.md')) + [root / 'README.md']:
    rel = src.relative_to(root)
    text = re.sub(r'\s*\n\s*(?:\*\s*|#\s*|//\s*)?', ' ', src.read_text(encoding='utf-8', errors='replace'))
    for m in re.finditer(r'(?<![\w/.])((?:test|bench|tools)/[\w/.-]+\.(?:c|h|py|sh|go|cpp))(?!\.?\w)', text):
        if not (root / m.group(1)).exists():
            print(f'{rel}: no {m.group(1)}')
            bad += 1
    for m in re.finditer(r'`?\b(lib/[\w/]+\.[ch])\b`?(?:\s+`?([a-z_][a-z0-9]*_[a-z0-9_]*)\b`?)?', text):
        path, name = m.groups()
        if not (root / path).exists():
            print(f'{rel}: no {path}')
            bad += 1
        elif name and name not in defined_in(path):
            print(f'{rel}: {path} defines no {name}')
            bad += 1

# coring.h's list of the layers, in design.md's order of their headers.
table = design[design.index('## Layers\n'):design.index('## One operation, end to end')]
order = []
for line in table.splitlines():
    if line.startswith('| ') and not line.startswith(('| ---', '| layer ', '| service ')):
        cells = [c.strip() for c in line.strip('|').split('|')]
        if len(cells) == 5:  # a layer's row
            order += re.findall(r'`(\w+\.h)`', cells[1])
listed = re.findall(r'^ \*   (\w+\.h)\s', (root / 'include' / 'coring' / 'coring.h').read_text(), flags=re.M)
ranked = [h for h in order if h in listed]
if [h for h in listed if h in order] != ranked:
    print(f'coring.h lists the layers as {listed}; design.md orders them {order}')
    bad += 1
# design.md's words: every name in backticks is declared by the library
# (a public header or lib/), and no retired name is left in include/ or lib/.
words = design[design.index('## Words\n'):design.index('## Layers\n')]
code = ''.join(p.read_text(encoding='utf-8', errors='replace')
               for d in ('include', 'lib') for p in sorted((root / d).rglob('*.[ch]')))
for line in words.splitlines():
    if not line.startswith('| ') or line.startswith(('| ---', '| word ')):
        continue
    cells = [c.strip() for c in line.strip('|').split('|')]
    retired = cells[2] if len(cells) == 3 else ''
    for name in re.findall(r'`((?:co|CO)_\w+|\w+_ns)`', ' '.join(cells[:2])):
        if not re.search(r'\b' + name + r'\b', code):
            print(f'design.md, "Words": the library declares no {name}')
            bad += 1
    for name in re.findall(r'`(\w+)`', retired):
        if re.search(r'\b' + name + r'\b', code):
            print(f'design.md, "Words": {name} is retired, yet include/ or lib/ still has it')
            bad += 1

# Every other name of the code design.md cites in backticks (a function, a
# field, a flag: a word with an underscore) is one the code has: a plan
# that names what was renamed away points nowhere.
retired_names = set(re.findall(r'`(\w+)`', ' '.join(
    line.strip('|').split('|')[2] for line in words.splitlines()
    if line.startswith('| ') and not line.startswith(('| ---', '| word ')) and line.count('|') == 4)))
code_and_tests = code + meson
for name in sorted(set(re.findall(r'`([a-z_][a-z0-9_]*_[a-z0-9_]*[a-z0-9])`', design))):
    if name.startswith('test_') or name in retired_names:
        continue
    if not re.search(r'\b' + name + r'\b', code_and_tests):
        print(f'design.md names {name}, which no file of include/ or lib/ has')
        bad += 1
# README's layout names every public header, and none that is not there.
readme = (root / 'README.md').read_text(encoding='utf-8')
m = re.search(r'^include/coring/(.*?)^lib/', readme, re.S | re.M)
if m is None:
    print('README.md: no layout entry for include/coring/')
    bad += 1
else:
    named = set(re.findall(r'\b(\w+\.h)\b', m.group(1)))
    there = {p.name for p in (root / 'include' / 'coring').glob('*.h')}
    for h in sorted(there - named):
        print(f'README.md, "Layout": include/coring/{h} is not named')
        bad += 1
    for h in sorted(named - there):
        print(f'README.md, "Layout": names {h}, which include/coring/ does not have')
        bad += 1
sys.exit(1 if bad else 0)
