#!/usr/bin/env python3
"""Lists functions and methods longer than N lines, and classes longer than C lines, in C++ and Python files.
C++: a scanner that strips comments and strings and matches braces; a block is a function where the text before
its `{` (since the last `;`, `{` or `}`, so a signature may span lines) ends in `)` with qualifiers, and is not a
control statement or a lambda; it counts from that text's first line. Lambdas count in the function around them.
Python: `ast`, every def (nested and methods included) and class, from its first decorator to its last line.
Also files longer than F lines. Prints the longest function and the largest class it saw.
Use: scripts/long_functions.py N C F [--allow NAME]... FILE...  (--allow: a block known to be over, named as listed)"""
import ast
import re
import sys

CONTROL = re.compile(r"^(if|for|while|switch|catch|do|else|return|try)\b")
CLASS = re.compile(r"^(template\s*<.*>\s*)?(class|struct|union)\s+\w")
FUNCTION = re.compile(r"\)\s*(const|override|noexcept|final|mutable|->\s*[\w:<>,\s*&]+|\s)*$")


def strip(text: str) -> str:
    """The code with comments, strings and character literals blanked (newlines kept)."""
    pattern = r'//[^\n]*|/\*.*?\*/|R"(\w*)\(.*?\)\1"|"(\\.|[^"\\\n])*"|\'(\\.|[^\'\\\n])*\''
    return re.sub(pattern, lambda m: re.sub(r"[^\n]", " ", m.group(0)), text, flags=re.S)


def cpp_blocks(path: str):
    """(kind, name, first line, last line) of each function and class block not inside a function."""
    code = strip(open(path).read())
    stack, head_start, out = [], 0, []  # stack: (kind, name, first line)
    line = 1
    for i, ch in enumerate(code):
        if ch == "\n":
            line += 1
        elif ch in ";{}":
            head = code[head_start:i]
            if ch == "{":
                text = " ".join(head.split())
                first = line - code[head_start + len(head) - len(head.lstrip()):i].count("\n")
                in_function = any(k == "function" for k, _, _ in stack)
                if in_function:
                    kind = "inner"
                elif CLASS.match(text) and "(" not in text.split("{")[0].split(":")[0]:
                    kind = "class"
                elif FUNCTION.search(text) and not CONTROL.match(text) and "](" not in text and not text.startswith("="):
                    kind = "function"
                else:
                    kind = "other"
                stack.append((kind, text[:90], first))
            elif ch == "}" and stack:
                kind, name, first = stack.pop()
                if kind in ("function", "class"):
                    out.append((kind, name, first, line))
            head_start = i + 1
    return out


def py_blocks(path: str):
    tree = ast.parse(open(path).read(), path)
    for node in ast.walk(tree):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            first = min([node.lineno] + [d.lineno for d in node.decorator_list])
            kind = "class" if isinstance(node, ast.ClassDef) else "function"
            yield kind, f"{'class' if kind == 'class' else 'def'} {node.name}", first, node.end_lineno


def main() -> int:
    limit, class_limit, file_limit, bad = int(sys.argv[1]), int(sys.argv[2]), int(sys.argv[3]), 0
    args, allowed = sys.argv[4:], set()
    while args and args[0] == "--allow":
        allowed.add(args[1])
        args = args[2:]
    longest = {"function": (0, ""), "class": (0, "")}
    for path in args:
        if (lines := len(open(path).read().splitlines())) > file_limit:
            print(f"{path}: {lines} lines (at most {file_limit} a file)")
            bad += 1
        blocks = py_blocks(path) if path.endswith(".py") else cpp_blocks(path)
        for kind, name, first, last in blocks:
            n = last - first + 1
            if kind in longest and n > longest[kind][0]:
                longest[kind] = (n, f"{name} in {path}")
            if n > (limit if kind == "function" else class_limit) and name not in allowed:
                print(f"{path}:{first}: {n} lines: {name}")
                bad += 1
    print(f"{len(args)} files; the longest function {longest['function'][0]} lines ({longest['function'][1]}); "
          f"the largest class {longest['class'][0]} lines ({longest['class'][1]})")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
