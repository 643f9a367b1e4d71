"""`identify` in bounded memory: the bag is read, synchronised and processed in chunks
into a temporary file (`data.bag_processed`), then the identification rows are
accumulated into the compressed problem (`estimation.compressed`) and the held-out
rows validated chunk by chunk. Same numbers as the in-memory path (same rules, same
hold-out cut, same dead band), memory independent of the recording's length.

Estimators that need every row (robust, rls, sobol-ga, sobol-ls) get the processed
rows of the identification part in memory, as on the in-memory path, up to
`MAX_ROWS_IN_MEMORY` regressor rows (samples x joints); beyond that they are refused
with the numbers and what to do instead.
"""
from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from ..data.bag_processed import process_bag
from ..errors import IdentificationError
from ..model.robot import RobotModel
from ..util.blas import single_threaded_blas
from ..util.progress import Progress
from . import ESTIMATORS, IdentificationResult
from .compressed import PLOT_POINTS, accumulate, validate_store
from .pipeline import base_parameters, identify, validate_result
from .store_hac import StoreRowSource
from .validation import ValidationReport

COMPRESSED_METHODS = ("ols", "wls", "physical")
# Regressor rows the row-based estimators may hold: the standard and base regressors of
# 400 k rows of a 6-joint arm (84 + ~50 columns) take about 430 MB.
MAX_ROWS_IN_MEMORY = 400_000


@dataclass
class StreamedOutcome:
    model: RobotModel
    result: IdentificationResult
    validation: ValidationReport | None
    sync_summary: str
    plot_data: object                  # ProcessedData of the plots (a decimated part of the identification data)
    record: dict                       # result.yaml's source and input checks
    valid_data: object = None          # the held-out samples, decimated (samples.npz), or None
    warnings: list = field(default_factory=list)   # 'warning: ...' lines (also in result.yaml)


def identify_streamed(bag, cfg, icfg, model, progress: Progress | None = None, config_path=None,
                      plots: bool = True, source: dict | None = None, force: bool = False,
                      warnings: list | None = None, warn=None, auto_cutoff: bool = False) -> StreamedOutcome:
    """Identify a bag with the parsed config `cfg` (io.config), identification config
    `icfg` (its hold-out fraction and settings) and `model`; the outcome holds what the
    result folder is written from (`io.result_folder.write_result_folder`, by the caller).
    Used by ``robot-ident identify`` and the identification node.
    `auto_cutoff`: the filter cutoff is chosen from the data as `auto_cutoff.choose_cutoff`
    chooses it, on the same read of the bag (estimation/stream_cutoff.py), or, when the
    data cannot decide, ``icfg``'s (the default) with a note; result.yaml's source records
    the cutoff, whether it was chosen and the note, as the in-memory path does.
    The input plausibility checks (estimation/recording_checks.py, the same code as in
    memory) run while the bag is read; their ``warning:`` lines and the model-quality
    ones go to `warn` and follow `warnings` (lines given by the caller) in result.yaml;
    an implausible input is refused (`plausibility.PlausibilityError`) unless `force`.
    Runs with one BLAS thread: its factorisations are many small ones (see util.blas),
    10-100x faster so on a busy machine."""
    with single_threaded_blas():
        return _identify_streamed(bag, cfg, icfg, model, progress or Progress(quiet=True), config_path,
                                  plots, source, force, list(warnings or []), warn or (lambda _line: None),
                                  auto_cutoff)


def _identify_streamed(bag, cfg, icfg, model, progress, config_path, plots, source, force, warnings, warn,
                       auto_cutoff):
    from .conditioning import quality_warnings
    from .input_checks import InputChecks
    from .plausibility import enforce

    settings = icfg.settings
    checks = InputChecks(model, settings.method, cfg.effort_field, velocity=settings.measured_velocity)
    base = base_parameters(model, settings)
    cutoff = {"filter_cutoff_chosen_from_data": False,
              "filter_cutoff_note": f"filter cutoff {settings.filter.cutoff_hz:g} Hz (set)"}
    if auto_cutoff:
        from .stream_cutoff import process_choosing_cutoff
        pb, settings, note, choice = process_choosing_cutoff(bag, cfg, settings, icfg.holdout, model, base,
                                                             progress, observer=checks)
        cutoff = {"filter_cutoff_chosen_from_data": choice is not None, "filter_cutoff_note": note}
    else:
        with progress.stage("read bag"):
            pb = process_bag(bag, cfg, settings.filter, progress=progress.counter("msg"), observer=checks,
                             joints=model.joint_names)
    thr, guard = settings.moving_threshold, settings.guard_s
    try:
        lagging = checks.recordings.velocity_lagging()
        if settings.measured_velocity == "auto" and lagging and settings.filter.use_measured_velocity:
            from ..data.stream_sync import NeedsWholeRecording
            raise NeedsWholeRecording(f"the measured velocity of {', '.join(map(repr, lagging))} lags dq/dt: the "
                                      "positions are differentiated instead, decided before processing")
        findings = checks.findings(pb.report, cfg.joint_states_topic, cfg.current_topic)
        for line in (f.line() for f in findings):
            warn(line)
            warnings.append(line)
        enforce(findings, force)
        store = pb.store
        N = store.n_samples
        cut = int(round((1.0 - icfg.holdout) * N)) if icfg.holdout > 0 else N
        validation = valid_data = None
        points = PLOT_POINTS if plots else 16      # samples kept for the plots
        if settings.method in COMPRESSED_METHODS:
            with progress.stage("identify"):
                acc, plot_data = accumulate(store, 0, cut, model, base, thr, guard, plot_points=points,
                                            progress=progress.counter("samples"))
                problem = acc.problem()
                # the HAC covariance re-reads the rows' residual series from the store
                problem.rows = StoreRowSource(store, 0, cut, model, base, thr, guard)
                options = {"bounds": settings.physical} if settings.method == "physical" else {}
                result = ESTIMATORS[settings.method](problem, **options)
                from .conditioning import assess_quality
                # RMS over the true rows: the R factors' column sums of squares equal the rows'
                n_rows = max(problem.n_rows, 1)
                result.quality = assess_quality(result, np.sqrt(np.sum(problem.W ** 2, axis=0) / n_rows),
                                                float(np.sqrt(np.sum(problem.y ** 2) / n_rows)))
                raw = acc.raw_residual_rms(result.values)
                result.extra["raw_residual_rms"] = {j: float(v) for j, v in zip(model.joint_names, raw)}
                result.extra.update({"moving_threshold": thr, "reversal_guard_s": guard,
                                     "rows_kept_fraction": problem.n_rows / (cut * model.n)})
            if cut < N:
                with progress.stage("validate"):
                    validation = validate_store(result, model, store, cut, N, thr, guard, plot_points=points,
                                                progress=progress.counter("samples"))
        else:
            if cut * model.n > MAX_ROWS_IN_MEMORY:
                raise IdentificationError(
                    f"method {settings.method!r} needs every regressor row in memory: {cut} samples x "
                    f"{model.n} joints = {cut * model.n} rows exceed the limit of {MAX_ROWS_IN_MEMORY}; use "
                    "ols, wls or physical (compressed, any length), or read at once (--in-memory), or lower "
                    "identification.filter.target_rate_hz, or identify a shorter recording")
            ident_data = store.read(0, cut)
            with progress.stage("identify"):
                result = identify(model, ident_data, settings, base)
            plot_data = ident_data
            if cut < N:
                with progress.stage("validate"):
                    validation = validate_result(result, model, store.read(cut, N), settings)
        if cut < N:           # the held-out samples for samples.npz, as the in-memory path keeps them
            valid_data = _decimated(store, cut, N, model, thr, guard)[0]
        from .validation import not_validated_lines
        for line in not_validated_lines(validation):
            warn(line)
            warnings.append(line)
        if result.quality is not None:
            for line in quality_warnings(result.quality):
                warn(line)
                warnings.append(line)
        summary = pb.summary
    finally:
        pb.close()
    printed = summary + (f"\n{cutoff['filter_cutoff_note']}" if auto_cutoff else "")
    src = {"bag": str(bag), "config": str(config_path), "holdout_fraction": icfg.holdout,
           "synchronisation": summary, "read": "streaming",
           "filter_cutoff_hz": float(settings.filter.cutoff_hz), **cutoff,    # validate filters alike
           "use_measured_velocity": bool(settings.filter.use_measured_velocity)}
    src.update(source or {})
    record = {"source": src, "input_checks": {"warnings": list(warnings), "forced": bool(force)}}
    return StreamedOutcome(model, result, validation, printed, plot_data, record, valid_data, warnings)


class _BaseValues:
    """`predict` of given base parameter values (a loaded result)."""

    def __init__(self, base, values):
        self.base, self.values = base, values

    def predict(self, model, q, qd, qdd):
        return (self.base.regressor(model.regressor(q, qd, qdd)) @ self.values).reshape(-1, model.n)


def validate_streamed(bag, cfg, filter_options, model, base, values, threshold: float, guard_s: float,
                      noise_std=None, progress: Progress | None = None,
                      keep_samples: bool = False, judge=None) -> tuple[ValidationReport, int, list, tuple | None]:
    """Validation of base parameter `values` on a whole bag in bounded memory (the
    ``validate`` command): (report, processed samples, findings). The recording checks run
    while reading (spikes only warn, as for the robust method) with the joints moving
    outside the model, and `judge` (joint -> (slope, partial correlation) of the bag's
    efforts on the values' prediction -> findings: e.g. another robot's bag) before the
    RMS; an error finding is refused (`plausibility.PlausibilityError`). With
    `keep_samples`, the fourth item is a decimated copy of the samples (at most 3000:
    data, predicted efforts, moving mask) for the report's validation_samples.npz, else None."""
    from .input_checks import InputChecks
    from .plausibility import check_unidentified_motion, enforce

    progress = progress or Progress(quiet=True)
    values_model = _BaseValues(base, values)
    checks = InputChecks(model, "robust", cfg.effort_field,
                                 predict=lambda d: values_model.predict(model, d.q, d.qd, d.qdd))
    with single_threaded_blas():
        with progress.stage("read bag"):
            pb = process_bag(bag, cfg, filter_options, progress=progress.counter("msg"), observer=checks,
                             joints=model.joint_names)
        try:
            findings = checks.recordings.findings()
            findings += check_unidentified_motion(model, pb.report.other_joints, cfg.joint_states_topic)
            if judge is not None:
                findings += judge(checks.gains.slopes())
            enforce(findings)
            N = pb.store.n_samples
            with progress.stage("validate"):
                report = validate_store(values_model, model, pb.store, 0, N, threshold, guard_s,
                                        plot_points=16,
                                        noise_std=noise_std, progress=progress.counter("samples"))
            kept = None
            if keep_samples and N > 0:
                data, moving = _decimated(pb.store, 0, N, model, threshold, guard_s)
                kept = (data, values_model.predict(model, data.q, data.qd, data.qdd), moving)
        finally:
            pb.store.close()
    return report, N, findings, kept


def _decimated(store, a, b, model, threshold, guard_s, max_samples: int = 3000, block: int = 50_000) -> tuple:
    """(data, moving) of every s-th sample of the store's rows a..b, block by block (the dead
    band judged at full rate within each block)."""
    from ..data.signals import concatenate, decimation_stride
    from ..model.transmission import dead_band_rows

    s = decimation_stride(b - a, max_samples)
    kept, masks = [], []
    for c in range(a, b, block):
        d = store.read(c, min(b, c + block))
        first = (a - c) % s                    # row a + k s of the store
        idx = np.arange(first, d.n_samples, s)
        if idx.size:
            kept.append(d.subset(idx))
            masks.append(np.asarray(dead_band_rows(model, d, threshold, guard_s))[idx])
    return concatenate(kept), np.concatenate(masks)
