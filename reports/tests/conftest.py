import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))  # the gpt2bench_report package
FIXTURES = HERE / "fixtures"
