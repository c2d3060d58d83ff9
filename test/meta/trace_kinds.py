#!/usr/bin/env python3
# The awaiter kinds a WAIT event carries (lib/common/awaiter.h) are named
# everywhere a trace is read: tools/coring_trace.py has a name for each,
# and docs/tracing.md's WAIT row lists each number. A kind added to the
# library without them fails here.
import ast
import pathlib
import re
import sys

root = pathlib.Path(sys.argv[1])
enum = (root / 'lib' / 'common' / 'awaiter.h').read_text(encoding='utf-8')
body = re.search(r'enum\s*\{(.*?)CO__AW_KINDS', enum, re.S).group(1)
kinds = re.findall(r'\b(CO__AW_\w+)\s*(?:=\s*0\s*)?,', body)
bad = 0

tool = (root / 'tools' / 'coring_trace.py').read_text(encoding='utf-8')
m = re.search(r'^AWAITERS = (\{.*?\})$', tool, re.S | re.M)
names = ast.literal_eval(m.group(1)) if m else {}
for k, kind in enumerate(kinds):
    if not names.get(k):
        print(f'tools/coring_trace.py: AWAITERS has no name for {k} ({kind})')
        bad += 1
for k in names:
    if k >= len(kinds):
        print(f'tools/coring_trace.py: AWAITERS names {k}, which lib/common/awaiter.h has not')
        bad += 1

doc = (root / 'docs' / 'tracing.md').read_text(encoding='utf-8')
row = re.search(r'^\| `WAIT` \(5\) .*$', doc, re.M)
listed = re.search(r"sub: the awaiter's kind \(([^)]*)\)", row.group(0)) if row else None
numbers = [int(n) for n in re.findall(r'(?:^|, )(\d+) ', listed.group(1))] if listed else []
if numbers != list(range(len(kinds))):
    print(f"docs/tracing.md: the WAIT row lists kinds {numbers}, lib/common/awaiter.h has 0..{len(kinds) - 1}")
    bad += 1
for k in range(len(kinds)):
    if names.get(k) and f'`{names[k]}`' not in row.group(0):
        print(f'docs/tracing.md: the WAIT row does not give the tool\'s name `{names[k]}`')
        bad += 1
sys.exit(1 if bad else 0)
