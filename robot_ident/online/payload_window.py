"""The identification node's payload service, without ROS: a recorded window (joint
states and currents) -> the payload folder, exactly as `robot-ident identify --payload`."""
from __future__ import annotations

from ..data.joint_stream import JointStream


def identify_payload_recorded(rec, cfg, urdf, output, result_dir: str | None = None, source: dict | None = None):
    """`identify_payload_streams` of a closed window, read back from its bag when it was
    recorded to one (the node's default)."""
    if rec.bag is None:
        return identify_payload_streams(rec.states, rec.currents, cfg, urdf, output, result_dir, source)
    from ..data.bag import read_streams
    from .identification_window import _window_topics
    streams = read_streams(rec.bag, _window_topics(cfg))
    return identify_payload_streams(streams[cfg.joint_states_topic], streams[cfg.current_topic], cfg, urdf, output,
                                    result_dir, dict(source or {}, recording=str(rec.bag)))


def identify_payload_streams(states: JointStream, currents: JointStream, cfg, urdf, output,
                             result_dir: str | None = None, source: dict | None = None):
    """Payload on the config's payload.frame with the arm known from `result_dir` (else the
    config's payload.known_arm, else the URDF's CAD values). Returns io.payload_folder.PayloadOutcome."""
    from ..data.sync import SyncResult, synchronise
    from ..estimation.pipeline import identification_config, process_segments
    from ..io.payload_folder import known_arm, payload_from_parts

    icfg = identification_config(cfg.section("identification"))
    arm = known_arm(cfg, icfg, result_dir or cfg.section("payload").get("known_arm"), urdf)
    sync = synchronise(states, currents, cfg.joints, options=cfg.sync, effort_field=cfg.effort_field,
                       meta={"source": "robot_ident identification_node (payload)"})
    acts = cfg.drive.for_joints(cfg.joints)       # actuators, then any coupled transmission
    sync = SyncResult([acts.apply(seg) for seg in sync.segments], sync.report)
    parts, summary = process_segments(sync, cfg.joints, icfg.settings)
    return payload_from_parts(parts, summary, cfg, icfg, arm, output, source=source)
