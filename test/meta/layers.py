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
  - inside a row whose files are listed from the bottom up (the engine's),
    a file calls a function of a file listed after it, or includes its
    header (a file's own header, foo.h beside foo.c, takes foo.c's place;
    a header shared by the row's files, other than its *_internal.h, stands
    below them all);
  - an exported co__ function only calls a static function of its file
    (one function under two names);
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
order_in_row = {}  # a lib/*.c file -> its place among its row's files, bottom up
for line in section.splitlines():
    if not line.startswith('| ') or line.startswith('| ---') or line.startswith('| layer ') \
            or line.startswith('| service '):
        continue
    cells = [c.strip() for c in line.strip('|').split('|')]
    service = len(cells) == 4
    index += 1
    where = (None if service else index, cells[0], service)
    names = re.findall(r'`([\w./]+\.[ch])`', ' '.join(cells[1:3] if service else cells[1:4]))
    row_c = [n for n in names if n.startswith('lib/') and n.endswith('.c')]
    for k, n in enumerate(row_c):
        order_in_row[n] = k
        if n[:-2] + '.h' in names:  # a file's own header takes its place
            order_in_row[n[:-2] + '.h'] = k
    if len(row_c) > 1:
        # a shared header of such a row (no file beside it; not the one for
        # the layers below, *_internal.h) stands below all its files: it
        # includes none of their headers and calls none of their functions
        for n in names:
            if (n.startswith('lib/') and n.endswith('.h') and n not in order_in_row
                    and not n.endswith('_internal.h')):
                order_in_row[n] = -1
    for n in names:
        path = n if n.startswith('lib/') else 'include/coring/' + n
        if not (root / path).exists():
            problems.append(f'design.md names {path} ({cells[0]}), which does not exist')
        add(path, where)

files = sorted(str(p.relative_to(root)) for p in (root / 'lib').glob('*/*.[ch]'))
files += sorted(str(p.relative_to(root)) for p in (root / 'include' / 'coring').glob('*.h'))
for p in (root / 'lib').glob('*.[ch]'):
    problems.append(f'{p.relative_to(root)} is in no folder: lib/ has a folder per layer')
for f in files:
    if f not in row_of:
        problems.append(f'{f} is in no row of design.md\'s layer tables')

# A folder per layer (or per service): a row's files of lib/ share one
# folder, which no other row uses.
folder_rows = {}
for f, where in row_of.items():
    if f.startswith('lib/'):
        folder_rows.setdefault(f.split('/')[1], set()).add(where[1])
for folder, rows in sorted(folder_rows.items()):
    layers = sorted(r for r in rows if not any(w[1] == r and w[2] for w in row_of.values()))
    if len(layers) > 1:
        problems.append(f'lib/{folder}/ holds the files of several layers: {", ".join(layers)}')
for where in {w for w in row_of.values() if w[0] is not None}:
    folders = {f.split('/')[1] for f, w in row_of.items() if w == where and f.startswith('lib/')}
    if len(folders) > 1:
        problems.append(f'{where[1]}: its files are in several folders: {", ".join(sorted(folders))}')

# include/coring/meson.build installs every public header, once.
installed = re.findall(r"'(\w+\.h)'", (root / 'include' / 'coring' / 'meson.build').read_text())
public = sorted(p.name for p in (root / 'include' / 'coring').glob('*.h'))
if sorted(installed) != public:
    problems.append(f'include/coring/meson.build installs {sorted(installed)}, the folder has {public}')


def strip_comments(text):
    text = re.sub(r'/\*.*?\*/', lambda m: '\n' * m.group(0).count('\n'), text, flags=re.S)
    return re.sub(r'//[^\n]*', '', text)


def include_path(name, local, f):
    if local:  # beside the file, else from lib/
        here = str(pathlib.PurePosixPath(f).parent / name)
        return here if (root / here).exists() else 'lib/' + name
    return name.replace('coring/', 'include/coring/', 1) if name.startswith('coring/') else None


texts = {f: strip_comments((root / f).read_text(encoding='utf-8')) for f in files}
includes = {}
for f, text in texts.items():
    inc = []
    for m in re.finditer(r'^\s*#\s*include\s*([<"])([\w/.]+)[>"]', text, flags=re.M):
        p = include_path(m.group(2), m.group(1) == '"', f)
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
        if (row_of.get(f) == row_of.get(p) and f in order_in_row and p in order_in_row
                and order_in_row[p] > order_in_row[f]):
            problems.append(f'{f} includes {p}, the header of a file above it in {row_of[f][1]} '
                            '(its row lists its files from the bottom up)')
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
        if d is None or d == f:
            continue
        # inside a row, the files are listed from the bottom up: each may
        # call only the files before it (the engine's order)
        if (row_of.get(f) == row_of.get(d) and f in order_in_row and d in order_in_row
                and order_in_row[d] > order_in_row[f]):
            problems.append(f'{f} calls {name} of {d}, a file above it in {row_of[f][1]} '
                            '(its row lists its files from the bottom up)')
            continue
        if not below(f, d):
            continue
        if row_of[f][2] and (not name.startswith('co__') or d == 'include/coring/co.h'):
            continue  # a service may call the public API, and the core's helpers
        what = 'a layer\'s internal' if row_of[f][2] else 'a layer below it'
        problems.append(f'{f} ({row_of[f][1]}) calls {name} of {d} ({row_of[d][1]}), {what}')

# No renaming wrapper: an exported co__ function of lib/*.c whose whole
# body calls one static function of its file with its own arguments gives
# one thing two names.
inlines = {n for n in defined if n.startswith('co__')} | set(
    n for text in texts.values()
    for n in re.findall(r'^static\s+inline\b[^;{(]*?\b(co__\w+)\s*\(', text, flags=re.M))
for f, text in texts.items():
    if not (f.startswith('lib/') and f.endswith('.c')):
        continue
    statics = set(re.findall(r'^static\b[^;{(=]*?\b(\w+)\s*\(', text, flags=re.M))
    for m in re.finditer(r'^(?!static\b)[A-Za-z_][\w \t*]*?\b(co__\w+)\s*\(([^;{]*?)\)\s*\{'
                         r'\s*(?:return\s+)?(\w+)\s*\(([^;{}]*)\)\s*;\s*\}', text, flags=re.M | re.S):
        params = [re.findall(r'(\w+)\s*(?:\[\])?$', p.strip())[-1] for p in m.group(2).split(',')
                  if p.strip() and p.strip() != 'void']
        args = [a.strip() for a in m.group(4).split(',') if a.strip()]
        # a static function of its file, or a static inline one of a header
        if (m.group(3) in statics or m.group(3) in inlines) and args == params:
            problems.append(f'{f}: {m.group(1)} only calls {m.group(3)} with its own arguments: '
                            'one function, two names')

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
