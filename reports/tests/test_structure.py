"""scripts/long_functions.py, the size checker ctest Structure runs: it must see what it claims to see."""

import subprocess
import sys
from pathlib import Path

SCRIPT = Path(__file__).resolve().parents[2] / "scripts" / "long_functions.py"


def check(tmp_path, name: str, text: str, limits=("5", "8", "40")):
    path = tmp_path / name
    path.write_text(text)
    r = subprocess.run([sys.executable, SCRIPT, *limits, str(path)], capture_output=True, text=True)
    return r.returncode, r.stdout


def test_cpp_functions_with_long_signatures_methods_and_classes_are_measured(tmp_path):
    body = "".join(f"  x += {i};  // {{ a brace in a comment\n" for i in range(5))
    text = ("int f(int a,\n      int b) {\n  int x = 0;\n" + body + "  return x;\n}\n"
            "struct S {\n  int m() const {\n" + body + "    return 1;\n  }\n};\n"
            "int g() {\n  auto l = [] { return 1; };\n  return l();\n}\n")
    rc, out = check(tmp_path, "a.cpp", text)
    assert rc == 1
    assert "a.cpp:1: 10 lines: int f(int a, int b)" in out  # from the signature's first line
    assert "a.cpp:12: 8 lines: int m() const" in out and "a.cpp:11: 10 lines: struct S" in out  # a method, its class
    assert "int g()" not in out  # 4 lines, its lambda inside it


def test_python_defs_classes_and_long_files_are_measured(tmp_path):
    text = "def short():\n    return 1\n\n\nclass C:\n    def long(self):\n" + "        x = 1\n" * 6 + "        return x\n"
    rc, out = check(tmp_path, "m.py", text, ("5", "8", "10"))
    assert rc == 1
    assert "m.py:6: 8 lines: def long" in out and "m.py:5: 9 lines: class C" in out and "def short" not in out
    assert "m.py: 13 lines (at most 10 a file)" in out
    assert check(tmp_path, "ok.py", "def f():\n    return 1\n")[0] == 0


def test_the_readme_figures_are_checked(tmp_path):
    """check_structure.sh fails, saying the true figures, where the README's Layout gives others."""
    root = SCRIPT.parents[1]
    for part in ["bench", "config", "model", "variants", "kernels", "common", "reference", "scripts",
                 "reports/gpt2bench_report"]:
        (tmp_path / part).parent.mkdir(parents=True, exist_ok=True)
        subprocess.run(["cp", "-r", str(root / part), str(tmp_path / part)], check=True)
    readme = (root / "README.md").read_text()
    script = tmp_path / "scripts" / "check_structure.sh"
    (tmp_path / "README.md").write_text(readme)
    ok = subprocess.run(["bash", str(script)], capture_output=True, text=True)
    assert ok.returncode == 0, ok.stdout
    (tmp_path / "README.md").write_text(readme.replace("the longest function 60 lines", "the longest function 59 lines"))
    stale = subprocess.run(["bash", str(script)], capture_output=True, text=True)
    assert stale.returncode == 1
    assert "the README's Layout should say: " in stale.stdout and "the longest function 60 lines" in stale.stdout
