"""Files: the ROS 2 parameter file (`config`), the result folder (`results`,
`result_folder`), identified URDF export (`urdf_export`) and atomic writes (`atomic`).
Core: imports `model`, `data`, `estimation`, `report` and `errors`, never `online`,
`nodes`, `offline`, `demos` or `cli`."""
