"""gpt2bench reports: run directories (results.json + rungs.json [+ profile/]) -> Markdown/HTML with charts."""

from .load import ReportError, Run, load_run
from .render import write_report

__all__ = ["ReportError", "Run", "load_run", "write_report"]
