"""`robot-ident identify --payload`: a rosbag2 recording of a (wrist) excitation with a
new tool on the flange, the arm's model known (a result folder or the URDF), in; the
payload folder (io/payload_folder.py) out."""
from __future__ import annotations

from ..estimation.payload import PayloadModel, payload_config
from ..estimation.pipeline import identification_config
from ..io.payload_folder import PayloadOutcome, format_payload, known_arm, payload_from_parts
from ..util.progress import Progress

__all__ = ["identify_payload_bag", "format_payload", "PayloadOutcome"]


def identify_payload_bag(bag, config_path, output, result_dir=None, urdf=None, frame: str | None = None,
                         holdout: float | None = None, refit_friction: bool = False,
                         progress: Progress | None = None, force: bool = False, warn=None) -> PayloadOutcome:
    """The payload folder from a bag, the arm known; the recording's input checks run first
    (the gains against the CAD model, a tool on the last body allowed for), their ``warning:`` lines go to `warn` and
    payload.yaml, an implausible recording is refused unless `force`."""
    from ..io.config import load_config
    from ..io.payload_folder import PAYLOAD_KIND
    from ..io.staging import check_output_folder, release_output

    progress = progress or Progress(quiet=True)
    check_output_folder(output, PAYLOAD_KIND)          # before any work
    try:                 # the output's lock (taken by the check) is given back however this ends
        cfg = load_config(config_path)
        icfg = identification_config(cfg.section("identification"))
        with progress.stage("arm model"):
            arm = known_arm(cfg, icfg, result_dir or cfg.section("payload").get("known_arm"), urdf)
            section = dict(cfg.section("payload"), **({"frame": frame} if frame else {}))
            PayloadModel(arm.model, payload_config(section, arm.model).frame)   # bad input fails before reading
        from ..estimation.flow import read_rows_checked
        from ..estimation.structure_check import structure_warning
        with progress.stage("read bag"):
            # the gains against the CAD model with a tool on the last body fitted alongside: the
            # payload the URDF lacks is explained there, a wrong torque constant or direction is not
            parts, summary, warnings, _ = read_rows_checked(bag, cfg, arm.model, icfg.settings, progress,
                                                            force=force, warn=warn)
        with progress.stage("identify payload"):
            o = payload_from_parts(parts, summary, cfg, icfg, arm, output, frame, holdout, refit_friction,
                                   source={"bag": str(bag), "config": str(config_path)},
                                   input_checks={"warnings": warnings, "forced": bool(force)})
        line = structure_warning(o.estimate.misses_structure)
        if line and warn is not None:
            warn(line.replace("identified.urdf is NOT a good model", "the payload is NOT trustworthy"))
        return o
    finally:
        release_output(output)
