"""The robot model and its parameters: `robot` (RobotModel: URDF -> Pinocchio with the
identified joints, the named standard parameter layout, regressor and efforts),
`pin_batch` (its Pinocchio calls over many samples), `base` (numerical base parameters),
`description` (robot_description text handling) and `actuation` (motor current -> joint
effort). Core: imports only `errors`, `util` and third-party libraries."""
