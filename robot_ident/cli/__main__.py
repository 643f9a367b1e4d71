"""python -m robot_ident.cli"""
import sys

from . import main

sys.exit(main())
