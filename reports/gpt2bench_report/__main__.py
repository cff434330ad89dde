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
    ap.add_argument("--price", action="append", default=[], metavar="NAME=USD",
                    help="$ per device-hour for a run directory's name or a device's name (repeatable), for the "
                         "Generations section's cost per million tokens; no prices are built in")
    a = ap.parse_args(argv)
    prices = {}
    for p in a.price:
        name, sep, usd = p.rpartition("=")
        try:
            prices[name] = float(usd)
            if not sep or not name or prices[name] < 0:
                raise ValueError
        except ValueError:
            print(f"gpt2bench report: error: --price '{p}': expected NAME=USD (a run directory's or a device's "
                  "name, a non-negative $ per device-hour)", file=sys.stderr)
            return 2
    try:
        runs = [load_run(p) for p in a.runs]
        out = write_report(runs, a.out, prices)
    except ReportError as e:
        print(f"gpt2bench report: error: {e}", file=sys.stderr)
        return 1
    print(f"report: {out / 'report.html'}\n        {out / 'report.md'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
