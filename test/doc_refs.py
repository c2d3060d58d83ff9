#!/usr/bin/env python3
# Every test a document cites exists: in docs/*.md and README.md, a
# reference is `test_PROGRAM` followed by case names ("`test_io` pipe_ops,
# file_ops"); each PROGRAM must be test/test_PROGRAM.c (or a test meson
# registers by that name) and each case a cmocka case in it; a lone
# `test_CASE` must be a case of some program; a `compile_fail_NAME` must be
# test/compile_fail/NAME.c and in test/meson.build's list of them. A promise
# in the docs that points at a test nobody runs fails here.
import pathlib
import re
import sys

root = pathlib.Path(sys.argv[1])
cases = {}
for src in (root / 'test').glob('test_*.c'):
    text = src.read_text(encoding='utf-8')
    cases[src.stem] = set(re.findall(r'cmocka_unit_test\(\s*test_(\w+)\s*\)', text))
meson = (root / 'test' / 'meson.build').read_text(encoding='utf-8')
meson += (root / 'bench' / 'meson.build').read_text(encoding='utf-8') \
    if (root / 'bench' / 'meson.build').exists() else ''

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
        if not (root / 'test' / 'compile_fail' / (name + '.c')).exists() or f"'{name}'" not in meson:
            print(f'{doc.name}: no compile-fail test {name}')
            bad += 1
sys.exit(1 if bad else 0)
