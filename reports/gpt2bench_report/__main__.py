"""python -m gpt2bench_report RUN_DIR... --out DIR (what `gpt2bench report` runs)."""

from __future__ import annotations

import argparse
import sys

from .load import ReportError, load_run
from .render import write_report


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="gpt2bench report",
                                 description="Tables and charts from gpt2bench run directories; several runs "
                                             "(e.g. different GPUs) side by side.")
    ap.add_argument("runs", nargs="+", help="run directories (each with results.json and rungs.json)")
    ap.add_argument("--out", required=True, help="output directory for report.md, report.html and the charts")
    a = ap.parse_args(argv)
    try:
        runs = [load_run(p) for p in a.runs]
        out = write_report(runs, a.out)
    except ReportError as e:
        print(f"gpt2bench report: error: {e}", file=sys.stderr)
        return 1
    print(f"report: {out / 'report.html'}\n        {out / 'report.md'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
