#!/usr/bin/env python3
"""Rewrite lib/coring.map's symbol list from the CO_API declarations of
include/coring/*.h (the packaging test checks that the two agree).
Usage: tools/sync_map.py [SOURCE_ROOT]"""
import pathlib
import re
import sys

root = pathlib.Path(sys.argv[1] if len(sys.argv) > 1 else '.')
names = set()
for h in (root / 'include' / 'coring').glob('*.h'):
    text = h.read_text(encoding='utf-8')
    for m in re.finditer(r'CO_API\s+[^;(]*?\(?\**\s*(co_\w+)\s*\)?\s*\(', text):
        names.add(m.group(1))
mp = root / 'lib' / 'coring.map'
text = mp.read_text(encoding='utf-8')
head, rest = text.split('global:\n', 1)
_, tail = rest.split('\tlocal:', 1)
body = ''.join(f'\t\t{n};\n' for n in sorted(names))
mp.write_text(head + 'global:\n' + body + '\tlocal:' + tail, encoding='utf-8')
print(f'{len(names)} symbols')
