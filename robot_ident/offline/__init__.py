"""The offline command path: simulated arm -> rosbag2, rosbag2 -> result folder, and
validation of a result on another recording (`bag_workflow`). Called by `cli`; imports
the core and `report`, never `online`, `nodes` or `demos`."""
