"""The identification node's payload service, without ROS: a recorded window (joint
states and currents) -> the payload folder, exactly as `robot-ident identify --payload`."""
from __future__ import annotations

from ..data.joint_stream import JointStream


def identify_payload_recorded(rec, cfg, urdf, output, result_dir: str | None = None, source: dict | None = None):
    """`identify_payload_streams` of a closed window, read from its bag when it was
    recorded to one (the node's default)."""
    if rec.bag is None:
        return identify_payload_streams(rec.states, rec.currents, cfg, urdf, output, result_dir, source)
    return _payload(str(rec.bag), cfg, urdf, output, result_dir, dict(source or {}, recording=str(rec.bag)))


def identify_payload_streams(states: JointStream, currents: JointStream, cfg, urdf, output,
                             result_dir: str | None = None, source: dict | None = None):
    """Payload on the config's payload.frame with the arm known from `result_dir` (else the
    config's payload.known_arm, else the URDF's CAD values). Returns io.payload_folder.PayloadOutcome."""
    from ..data.processing import StreamsInput
    return _payload(StreamsInput(states, currents, "robot_ident identification_node (payload)"), cfg, urdf, output,
                    result_dir, source)


def _payload(input_, cfg, urdf, output, result_dir, source):
    """The payload folder, after the recording's input checks (an implausible one is refused)."""
    from ..estimation.flow import read_rows_checked
    from ..estimation.pipeline import identification_config
    from ..io.payload_folder import known_arm, payload_from_parts

    icfg = identification_config(cfg.section("identification"))
    arm = known_arm(cfg, icfg, result_dir or cfg.section("payload").get("known_arm"), urdf)
    parts, summary, warnings, _ = read_rows_checked(input_, cfg, arm.model, icfg.settings)
    return payload_from_parts(parts, summary, cfg, icfg, arm, output, source=source,
                              input_checks={"warnings": warnings, "forced": False})
