#!/usr/bin/env python3
# Prints the cmocka cases of a test source, one per line: the names in its
# cmocka_unit_test(...) entries (and its _setup, _teardown, _setup_teardown,
# _prestate... forms), in order. meson registers each as a test.
import re
import sys

src = open(sys.argv[1], encoding='utf-8').read()
for name in re.findall(r'cmocka_unit_test(?:_\w+)?\(\s*(\w+)\s*[,)]', src):
    print(name)
