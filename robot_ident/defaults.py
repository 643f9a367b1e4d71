"""The defaults the user sees in `--help` and the docs, defined once: the parsers of the
config sections and the command line read them from here (test/test_cli_reference.py
checks the help quotes them). Plain values only: the command line imports this module
before any engine.
"""
# identification: (estimation/pipeline.py)
METHOD = "physical"
HOLDOUT = 0.2                 # the last fraction of all samples kept for validation

# excitation: (excitation/config.py)
OPTIMIZER = "slsqp"
CRITERION = "cond"
FAMILY = "modified_fourier"   # starts and ends at rest: the excitation node runs it on a real arm
MAX_TIME_S = 30.0             # optimiser wall-time budget
SEED = 0

# identify --payload (estimation/payload.py)
PAYLOAD_FRAME = "tool0"       # the link the payload is fixed to

# simulate (offline/bag_workflow.py) and every bag written
STORAGE = "sqlite3"
BAG_VERSION = 8               # rosbag2 metadata version: 8 plays on Humble and later, 9 only on Jazzy
REPETITIONS = 1

# monitor (monitor/observer.py)
MONITOR_GAIN = 200.0          # 1/s: a 3x-band step crosses 2.5x after 16 ms (bench/monitor.py)
MONITOR_THRESHOLD = 2.5       # multiples of each joint's band
MONITOR_CALIBRATION_S = 5.0   # s of data at the start that learn the observer's own noise

# demo (demos/serial_arm.py)
DEMO_OUTPUT = "robot_ident_demo"
DEMO_NOISE = 0.01             # effort noise std, fraction of each joint's effort RMS
DEMO_PERIODS = 2              # 10 s excitation periods identified on
DEMO_SEED = 7
