"""`make bench`: runs every bench/bench_*.py, each in its own process, and prints its ratios."""
import pathlib
import subprocess
import sys

here = pathlib.Path(__file__).parent
only = sys.argv[1:]
status = 0
for path in sorted(here.glob("bench_*.py")):
    if only and not any(o in path.stem for o in only):
        continue
    print(f"\n== {path.stem}", flush=True)
    status |= subprocess.call([sys.executable, str(path)], cwd=here.parent)
sys.exit(status)
