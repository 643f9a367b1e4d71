"""The defaults the user sees in `--help` and the docs, defined once: the parsers of the
config sections and the command line read them from here (test/test_cli_reference.py
checks the help quotes them). Plain values only: the command line imports this module
before any engine.
"""
# identification: (estimation/pipeline.py)
METHOD = "physical"
HOLDOUT = 0.2                 # fraction of the recording's end kept for validation

# excitation: (excitation/config.py)
OPTIMIZER = "slsqp"
CRITERION = "cond"
FAMILY = "fourier"
MAX_TIME_S = 30.0             # optimiser wall-time budget
SEED = 0

# simulate (offline/bag_workflow.py)
STORAGE = "sqlite3"
REPETITIONS = 1
