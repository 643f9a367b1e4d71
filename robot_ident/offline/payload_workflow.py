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
                         progress: Progress | None = None) -> PayloadOutcome:
    from ..io.config import load_config
    from ..io.payload_folder import PAYLOAD_KIND
    from ..io.staging import check_output_folder

    progress = progress or Progress(quiet=True)
    check_output_folder(output, PAYLOAD_KIND)          # before any work
    cfg = load_config(config_path)
    icfg = identification_config(cfg.section("identification"))
    with progress.stage("arm model"):
        arm = known_arm(cfg, icfg, result_dir or cfg.section("payload").get("known_arm"), urdf)
        section = dict(cfg.section("payload"), **({"frame": frame} if frame else {}))
        PayloadModel(arm.model, payload_config(section, arm.model).frame)     # bad input fails before the bag is read
    from ..data.processing import process_one, segments_in_memory
    with progress.stage("read bag"):
        processed = process_one(bag, cfg, icfg.settings.filter, progress=progress.counter("msg"))
    try:
        parts, summary = segments_in_memory(processed), processed.summary
    finally:
        processed.close()
    with progress.stage("identify payload"):
        return payload_from_parts(parts, summary, cfg, icfg, arm, output, frame, holdout, refit_friction,
                                  source={"bag": str(bag), "config": str(config_path)})
