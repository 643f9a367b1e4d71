"""Data in: rosbag2 reading and writing (`bag`), message <-> array conversion that reads
attributes by name so rclpy and rosbags messages both work (`msgs`), synchronisation
of separately stamped streams onto one grid (`sync`), and signal processing (`signals`:
Recording, zero-phase filtering, differentiation, decimation, dead band). Core:
imports `model`, `errors`, `util`; never `online`, `nodes`, `offline`, `demos` or `cli`."""
