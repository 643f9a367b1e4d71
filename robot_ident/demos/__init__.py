"""Self-contained demonstrations on simulated robots: the serial demo arm
(`serial_arm`, `robot-ident demo`), source A's hybrid machining robot (`hybrid`,
`--robot hybrid5`) and the free-floating space robot (`space`, `--robot space`).
Called by `cli`; import the core and `report`, never `online`, `nodes` or `offline`."""
