import sys

from ..errors import run_cli
from .cli import main

sys.exit(run_cli(main))
