"""The identified model at work (issue 33): external torques from a momentum observer,
contact events and model health -- ROS-free, shared by `robot-ident monitor` and the
monitor node (contact.ContactMonitor)."""
