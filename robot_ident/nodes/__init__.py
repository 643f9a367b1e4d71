"""ROS 2 nodes: thin rclpy shells around the ROS-free logic modules.

This is the only package that imports rclpy and ROS message packages; nothing imports
it except the console entry points (``ros2 run robot_ident <node>``), so installing
robot_ident with pip and using the ``robot-ident`` command line never needs ROS.
"""
