"""The ROS-free logic of the ROS 2 nodes, testable without ROS: the excitation state
machine with its safety checks (`excitation_run`), the identification node's recording
window (`identification_window`), current -> effort per message (`torque_stream`) and
building outgoing messages (`msg_build`). May import the core packages; never rclpy,
ROS message packages, `nodes`, `offline`, `demos` or `cli`."""
