#!/usr/bin/env python3
"""Lists functions (and lambdas' enclosing functions) longer than N lines in C++ files: a function is a
top-level brace block (column 0 or namespace level) opened on a line that looks like a signature.
Use: scripts/long_functions.py N FILE..."""
import re
import sys

limit = int(sys.argv[1])
bad = 0
for path in sys.argv[2:]:
    lines = open(path).read().split("\n")
    depth, start, name = 0, None, ""
    for i, line in enumerate(lines):
        code = re.sub(r'"(\\.|[^"\\])*"|//.*', "", line)
        opens, closes = code.count("{"), code.count("}")
        if start is None and opens > closes and re.match(r"^(\S.*\)|\S.*\) (const|override|noexcept).*)\s*(->.*)?\{\s*$", code) \
                and not re.match(r"^(namespace|struct|class|enum|extern)\b", code):
            start, name, depth = i, code.strip(), 0
        if start is not None:
            depth += opens - closes
            if depth == 0:
                n = i - start + 1
                if n > limit:
                    print(f"{path}:{start + 1}: {n} lines: {name[:90]}")
                    bad += 1
                start = None
sys.exit(1 if bad else 0)
