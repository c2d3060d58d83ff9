#!/usr/bin/env python3
"""docs/design.md's layers against the code (the `layers` test).

The tables of design.md's "Layers" section name, for each layer and each
service, its public headers, its private headers and its files. This check
fails when:
  - a file of lib/ or a header of include/coring/ is in no row, or in two;
  - a row names a file that does not exist;
  - a file includes a header of a layer below its own (a row further down
    the table), or a service includes a layer's private header;
  - a file calls a function defined by a layer below its own, or a service
    calls a layer's internal (co__) function;
  - the headers of lib/ and include/coring/ include each other in a cycle.
Usage: layers.py SOURCE_ROOT
"""
import pathlib
import re
import sys

root = pathlib.Path(sys.argv[1])
design = (root / 'docs' / 'design.md').read_text(encoding='utf-8')
section = design[design.index('## Layers\n'):design.index('## One operation, end to end')]

# path (relative to root) -> (index, name, is_service); layers count down
# the table, services are 'shared'
row_of = {}
problems = []


def add(path, where):
    if path in row_of:
        problems.append(f'{path} is in two rows ({row_of[path][1]}, {where[1]})')
    row_of[path] = where


index = 0
for line in section.splitlines():
    if not line.startswith('| ') or line.startswith('| ---') or line.startswith('| layer ') \
            or line.startswith('| service '):
        continue
    cells = [c.strip() for c in line.strip('|').split('|')]
    service = len(cells) == 4
    index += 1
    where = (None if service else index, cells[0], service)
    names = re.findall(r'`([\w./]+\.[ch])`', ' '.join(cells[1:3] if service else cells[1:4]))
    for n in names:
        path = n if n.startswith('lib/') else 'include/coring/' + n
        if not (root / path).exists():
            problems.append(f'design.md names {path} ({cells[0]}), which does not exist')
        add(path, where)

files = sorted(str(p.relative_to(root)) for p in (root / 'lib').glob('*.[ch]'))
files += sorted(str(p.relative_to(root)) for p in (root / 'include' / 'coring').glob('*.h'))
for f in files:
    if f not in row_of:
        problems.append(f'{f} is in no row of design.md\'s layer tables')


def strip_comments(text):
    text = re.sub(r'/\*.*?\*/', lambda m: '\n' * m.group(0).count('\n'), text, flags=re.S)
    return re.sub(r'//[^\n]*', '', text)


def include_path(name, local):
    if local:
        return 'lib/' + name
    return name.replace('coring/', 'include/coring/', 1) if name.startswith('coring/') else None


texts = {f: strip_comments((root / f).read_text(encoding='utf-8')) for f in files}
includes = {}
for f, text in texts.items():
    inc = []
    for m in re.finditer(r'^\s*#\s*include\s*([<"])([\w/.]+)[>"]', text, flags=re.M):
        p = include_path(m.group(2), m.group(1) == '"')
        if p and (root / p).exists():
            inc.append(p)
    includes[f] = inc


def below(caller, callee):
    """callee's row is further down the table than caller's (a layer)."""
    rc, re_ = row_of.get(caller), row_of.get(callee)
    if rc is None or re_ is None or re_[2]:
        return False  # unknown (reported above), or a service: anyone may use it
    if rc[2]:
        return True   # a service uses a layer
    return re_[0] > rc[0]


for f, inc in includes.items():
    for p in inc:
        if not below(f, p):
            continue
        if row_of[f][2] and p.startswith('include/'):
            continue  # a service may name a public header's types
        what = 'a layer\'s private header' if row_of[f][2] else 'a layer below it'
        problems.append(f'{f} ({row_of[f][1]}) includes {p} ({row_of[p][1]}), {what}')

# Definitions: functions defined (not static) in lib/*.c, inline functions
# of headers, CO_API declarations of public headers.
defined = {}
for f, text in texts.items():
    if f.endswith('.c'):
        for m in re.finditer(r'^(?!static\b)[A-Za-z_][\w \t*]*?\b(co_\w+)\s*\([^;]*?\)\s*\{',
                             text, flags=re.M | re.S):
            defined.setdefault(m.group(1), f)
    for m in re.finditer(r'^static\s+inline\b[^;{(]*?\b(co_\w+)\s*\(', text, flags=re.M):
        defined.setdefault(m.group(1), f)
    for m in re.finditer(r'\bCO_API\b[^;(]*?\b(co_\w+)\s*\(', text):
        defined.setdefault(m.group(1), f)

for f, text in texts.items():
    if not f.startswith('lib/'):
        continue
    for name in sorted(set(re.findall(r'\b(co_\w+)\s*\(', text))):
        d = defined.get(name)
        if d is None or d == f or not below(f, d):
            continue
        if row_of[f][2] and not name.startswith('co__'):
            continue  # a service may call the public API
        what = 'a layer\'s internal' if row_of[f][2] else 'a layer below it'
        problems.append(f'{f} ({row_of[f][1]}) calls {name} of {d} ({row_of[d][1]}), {what}')

# No include cycle.
state = {}


def visit(f, stack):
    state[f] = 1
    for p in includes.get(f, []):
        if state.get(p) == 1:
            problems.append('include cycle: ' + ' -> '.join(stack[stack.index(p):] + [p]))
        elif p not in state:
            visit(p, stack + [p])
    state[f] = 2


for f in files:
    if f not in state:
        visit(f, [f])

for p in problems:
    print('layers:', p)
print(f'layers: {len(files)} files in {index} rows, {len(problems)} problem(s)')
sys.exit(1 if problems else 0)
