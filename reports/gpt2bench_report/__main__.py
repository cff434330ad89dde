"""python -m gpt2bench_report RUN_DIR... --out DIR (what `gpt2bench report` runs)."""

from __future__ import annotations

import argparse
import shutil
import sys
import tempfile
from pathlib import Path

from .findings import findings
from .load import ReportError, Run, load_run
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
        out, runs = _report(a.runs, Path(a.out), prices)
    except ReportError as e:
        print(f"gpt2bench report: error: {e}", file=sys.stderr)
        return 1
    for run in runs:  # the answer where the command was typed; the report holds the rest
        print(f"{run.label}\n" + "\n".join("  - " + line.replace("**", "") for line in findings(run)))
    print(f"report: {out / 'report.html'}\n        {out / 'report.md'}")
    return 0


def _report(run_dirs: list[str], out: Path, prices: dict) -> tuple[Path, list[Run]]:
    """The report of `run_dirs` into `out`, written whole or not at all: it is made in a folder beside `out` and
    moved in when done. Bad input of any kind is a ReportError, one line."""
    seen = {}
    for p in run_dirs:
        if (key := Path(p).resolve()) in seen:
            raise ReportError(f"{p}: given twice (as {seen[key]}): each run once")
        seen[key] = p
    if out.exists() and not out.is_dir():
        raise ReportError(f"--out {out}: a file, not a directory")
    runs = [load_run(p) for p in run_dirs]
    try:
        out.parent.mkdir(parents=True, exist_ok=True)
        work = Path(tempfile.mkdtemp(prefix=f".{out.name}.", dir=out.parent))
    except OSError as e:
        raise ReportError(f"--out {out}: cannot write there ({e.strerror or e})") from e
    try:
        write_report(runs, work, prices)
        out.mkdir(exist_ok=True)
        for f in work.iterdir():
            f.replace(out / f.name)
    except ReportError:
        raise
    except OSError as e:
        raise ReportError(f"--out {out}: cannot write there ({e.strerror or e})") from e
    except Exception as e:  # a run's file of a layout the loader let through: one line, never a traceback
        raise ReportError(f"cannot render {', '.join(run_dirs)}: {type(e).__name__}: {e} (a malformed or foreign "
                          "run file?)") from e
    finally:
        shutil.rmtree(work, ignore_errors=True)
    return out, runs


if __name__ == "__main__":
    sys.exit(main())
