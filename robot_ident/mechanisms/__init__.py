"""Mechanisms beyond a serial arm: `closed_chain` (spanning tree + loop closures,
virtual-work regressor of the actuated joints, tied limbs; source A) and
`floating_base` (momentum-conservation identification of a free-floating base and a
grasped payload; source C). Core: imports `model`, `errors`, `io` and `util`, never
`online`, `nodes`, `offline`, `demos` or `cli`."""
