"""python -m robot_ident.cli"""
import sys

from . import run

sys.exit(run())
