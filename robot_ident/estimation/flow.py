"""The one identification pipeline: read -> synchronise -> convert -> filter (into
processed-sample files, data/processing.py) -> check -> hold out -> accumulate ->
estimate -> validate, chunk by chunk, for every input: rosbag2 folders, tables, the
node's streams in memory, several at once. Memory does not grow with the recordings'
length for ols, wls and physical (the compressed problem, estimation/compressed.py);
the estimators that need every row (robust, rls, sobol-ga, sobol-ls) get the
identification rows read back from the same files, up to `MAX_ROWS_IN_MEMORY`.

Used by ``robot-ident identify`` and ``validate``, the Python API and the identification node.
Runs with one BLAS thread: its factorisations are many small ones (see util.blas).
"""
from __future__ import annotations

from dataclasses import dataclass, field, replace
from functools import partial

import numpy as np

from ..data.holdout import Holdout, holdout_flags, runs_of
from ..data.processing import Processed, input_fingerprint, input_label, process_input
from ..data.signals import concatenate
from ..errors import ConfigError, IdentificationError, SignalError
from ..model.robot import RobotModel
from ..util.blas import single_threaded_blas
from ..util.parallel import ForkedCall
from ..util.progress import Progress
from . import IdentificationResult
from .compressed import CHUNK_SAMPLES, PLOT_POINTS, accumulate, decimated, run_rows, validate_runs
from .retrace import retraced_inputs
from .validation import ValidationReport, not_validated_lines

COMPRESSED_METHODS = ("ols", "wls", "physical")
# Regressor rows the row-based estimators may hold: the standard and base regressors of
# 400 k rows of a 6-joint arm (84 + ~50 columns) take about 430 MB.
MAX_ROWS_IN_MEMORY = 400_000
LONG_GUARD_S = 0.5       # a reversal guard this long (cutoff <= 2 Hz) can mask a joint's every sample


@dataclass
class FlowOutcome:
    model: RobotModel
    result: IdentificationResult
    validation: ValidationReport | None
    summary: str                       # synchronisation, skipped segments, hold-out, cutoff
    plot_data: object                  # ProcessedData for the plots (identification samples, decimated)
    record: dict                       # result.yaml's source and input checks
    valid_data: object = None          # the validation samples, decimated (samples.npz), or None
    warnings: list = field(default_factory=list)   # 'warning: ...' lines (also in result.yaml)
    settings: object = None            # the IdentificationSettings used (cutoff, velocity decided)


def identify_sources(sources, cfg, icfg, model, *, holdout: Holdout | None = None, validate_sources=(),
                     progress: Progress | None = None, auto_cutoff: bool = False, force: bool = False,
                     warn=None, plots: bool = True, source: dict | None = None) -> FlowOutcome:
    """Identify `model` from `sources` (bag / table paths, `data.processing.StreamsInput`)
    with the parsed config `cfg` and identification config `icfg`; validate on the
    `holdout` (default: `icfg`'s fraction, nothing when `validate_sources` are given) and
    on whole `validate_sources`. `auto_cutoff`: the filter cutoff is cross-validated on
    the identification samples (estimation/auto_cutoff.py) from one read through every
    candidate's filter; when the data cannot decide, `icfg`'s with a note. The input checks
    run while reading; their ``warning:`` lines and the model-quality ones go to `warn`;
    an implausible input is refused (`plausibility.PlausibilityError`) unless `force`."""
    if not sources:
        raise SignalError("no recording to identify from")
    if holdout is None:
        holdout = Holdout() if validate_sources else Holdout(fraction=icfg.holdout)
    with single_threaded_blas():
        return _identify(list(sources), cfg, icfg, model, holdout, list(validate_sources),
                         progress or Progress(quiet=True), auto_cutoff, force, warn or (lambda _line: None), plots,
                         source or {})


def read_checked(sources, cfg, model, settings, progress, filters_for_rate=None, predict=None,
                 decide_velocity: bool = True):
    """(`Processed` of `sources`, its `InputChecks`, the settings) -- the sources read once
    through the checks' observers, and (`decide_velocity`) once more with the positions
    differentiated when the measured velocity lags dq/dt and its use is 'auto'
    (`input_checks.velocity_settings`)."""
    from .input_checks import InputChecks, velocity_settings
    while True:
        checks = InputChecks(model, settings.method, cfg.effort_field, velocity=settings.measured_velocity,
                             predict=predict)
        rule = filters_for_rate(settings) if filters_for_rate else (lambda _rate, s=settings: [s.filter])
        processed = None
        try:
            for src in sources:
                processed = process_input(src, cfg, rule, into=processed, joints=model.joint_names,
                                          observer=checks.observer(input_label(src)),
                                          progress=progress.counter("msg"), unwrap=_continuous(model))
        except BaseException:
            if processed is not None:
                processed.close()
            raise
        new = velocity_settings(settings, checks.velocity_lagging()) if decide_velocity else settings
        if new is settings:
            return processed, checks, settings
        processed.close()
        settings = new


def read_rows_checked(source, cfg, model, settings, progress: Progress | None = None, predict=None,
                      force: bool = False, warn=None) -> tuple[list, str, list, object]:
    """One input read with every input check -- the gains against `predict` (default the
    model's CAD efforts) -- and refused when implausible unless `force`; its processed
    segments in memory, for small problems (a payload): (segments, summary, warning lines,
    settings with the velocity's use decided)."""
    from ..data.processing import segments_in_memory
    from .plausibility import enforce

    progress = progress or Progress(quiet=True)
    with single_threaded_blas():
        processed, checks, settings = read_checked([source], cfg, model, settings, progress, predict=predict)
        try:
            _feed(checks.gains, processed.store, 0, processed.n_samples)
            findings = checks.findings(processed, cfg.joint_states_topic, cfg.current_topic)
            lines = [f.line() for f in findings]
            for line in lines:
                (warn or (lambda _line: None))(line)
            enforce(findings, force)
            return segments_in_memory(processed), processed.summary, lines, settings
        finally:
            processed.close()


def _identify(sources, cfg, icfg, model, holdout, validate_sources, progress, auto, force, warn, plots, source):
    from .auto_cutoff import CANDIDATES_HZ, cross_validate_cutoff, decimated_rate, default_cutoff_note
    from .conditioning import quality_warnings
    from .pipeline import base_parameters
    from .plausibility import enforce

    settings = icfg.settings
    prints = {input_label(s): input_fingerprint(s, cfg) for s in sources}
    for v in validate_sources:          # a copy of an identification input validates nothing
        fp = input_fingerprint(v, cfg)
        same = [k for k, p in prints.items() if fp is not None and p == fp]
        if same:
            raise ConfigError(f"validation recording {input_label(v)} holds the same data as identification input "
                              f"{same[0]} (a copy?): its ratios would be 1.000 by construction; validate on another "
                              "recording (or a hold-out of this one)")
    base = base_parameters(model, settings)

    def filters_for_rate(s):
        def rule(rate):
            if not auto:
                return [s.filter]
            top = 0.4 * decimated_rate(rate, s.filter)
            cands = [c for c in CANDIDATES_HZ if c < top]
            opts = [replace(s.filter, cutoff_hz=c) for c in cands]
            usable = s.filter.cutoff_hz < top          # the default, for when the data cannot decide
            return opts + ([] if s.filter.cutoff_hz in cands or not usable else [s.filter])
        return rule

    with progress.stage("read"):
        processed, checks, settings = read_checked(sources, cfg, model, settings, progress, filters_for_rate)
    # the candidates every input's rate carries (a slower input drops the others: data/processing.py)
    cands = [f.cutoff_hz for f in processed.filters if f.cutoff_hz in CANDIDATES_HZ]
    try:
        held = np.concatenate(holdout_flags(_segment_times(processed), holdout))
        note = f"filter cutoff {settings.filter.cutoff_hz:g} Hz (set)"
        chosen = False
        if auto:
            try:
                if not cands:
                    raise SignalError(f"no cutoff candidate below 0.4 x the sample rate "
                                      f"({decimated_rate(processed.inputs[0].report.rate_hz, settings.filter):.4g} Hz)")
                with progress.stage("choose cutoff"):
                    choice = cross_validate_cutoff(model, processed.stores[:len(cands)], tuple(cands), settings, base,
                                                   ~held, progress=progress.counter("samples"))
            except SignalError as exc:
                if settings.filter.cutoff_hz in [f.cutoff_hz for f in processed.filters]:
                    note = default_cutoff_note(settings, exc)
                elif cands:         # the default is above what this rate carries: the highest candidate
                    default = settings.filter.cutoff_hz
                    settings = replace(settings, filter=replace(settings.filter, cutoff_hz=cands[-1]))
                    note = (f"filter cutoff {cands[-1]:g} Hz (the highest candidate; the default {default:g} Hz is "
                            f"above 0.4 x the sample rate): it could not be chosen from the data: {exc}")
                else:
                    raise SignalError(f"no filter cutoff fits the recording: {exc}") from None
            else:
                settings = replace(settings, filter=replace(settings.filter, cutoff_hz=choice.cutoff_hz))
                note, chosen = choice.summary(), True
            processed.keep_only([f.cutoff_hz for f in processed.filters].index(settings.filter.cutoff_hz))
        store, N = processed.store, processed.n_samples
        ident_runs, valid_runs = _runs(store, processed.segment_rows(), held)
        thr, guard = settings.moving_threshold, settings.guard_s
        points = PLOT_POINTS if plots else 16

        def judged_inputs() -> list:
            checks.gains.take(gains.result())
            findings = checks.findings(processed, cfg.joint_states_topic, cfg.current_topic)
            for line in (lines := [f.line() for f in findings]):
                warn(line)
            enforce(findings, force)
            return lines

        # the gain check on every processed sample, beside the estimate (a forked process when one
        # may be): an implausible input is refused before anything is written or the estimate's error
        gains = ForkedCall(partial(_feed, checks.gains, store, 0, N), "checking the efforts' gains")
        try:
            with progress.stage("identify"):
                result, plot_data = estimate(model, base, settings, ident_runs, points, progress)
        except Exception:
            judged_inputs()          # an implausible input's refusal comes before the estimate's error
            raise
        except BaseException:        # Ctrl-C: the check's process ends too
            gains.close()
            raise
        warnings = judged_inputs()
        if len(processed.inputs) > 1 and result.quality is not None:
            _inputs_disagree(result, model, base, settings, processed, store, thr, guard)
        for line in quality_warnings(result.quality) if result.quality is not None else []:
            warn(line)
            warnings.append(line)

        vprocessed = None
        validation = valid_data = None
        try:
            other = []
            if validate_sources:
                with progress.stage("read validation"):
                    vprocessed = None
                    for src in validate_sources:
                        vprocessed = process_input(src, cfg, lambda _r: [settings.filter], into=vprocessed,
                                                   joints=model.joint_names, progress=progress.counter("msg"),
                                                   unwrap=_continuous(model))
                other = _other_recordings(model, result, vprocessed) + retraced_inputs(model, ident_runs, vprocessed,
                                                                                       thr, guard)
                valid_runs += [(vprocessed.store, a, b) for a, b in vprocessed.segment_rows()]
            if valid_runs:
                with progress.stage("validate"):
                    validation = validate_runs(result, model, valid_runs, thr, guard, plot_points=points,
                                               progress=progress.counter("samples"))
                valid_data = decimated(valid_runs, model, thr, guard)[0]
        finally:
            if vprocessed is not None:
                vprocessed.close()
        for line in not_validated_lines(validation) + other:
            warn(line)
            warnings.append(line)
        reads = [("identify", x) for x in processed.inputs]
        reads += [("validate", x) for x in (vprocessed.inputs if vprocessed is not None else [])]
        summary = (processed.summary if len(reads) == 1 else
                   "\n".join(f"{role} {x.label}: " + x.summary.replace("\n", "\n  ") for role, x in reads))
    finally:
        processed.close()
    lines = [summary]
    if len(sources) > 1 or validate_sources or holdout.window is not None or holdout.every:
        lines.append(f"held out: {holdout.describe()}" + (
            f" + {len(validate_sources)} validation recording(s)" if validate_sources else ""))
    if auto:
        lines.append(note)
    src = {"inputs": [input_label(s) for s in sources],
           "validation_inputs": [input_label(s) for s in validate_sources],
           "config": None, "holdout": holdout.describe(), "holdout_fraction": holdout.fraction,
           "synchronisation": summary, "filter_cutoff_hz": float(settings.filter.cutoff_hz),
           "filter_cutoff_chosen_from_data": chosen, "filter_cutoff_note": note,
           "use_measured_velocity": bool(settings.filter.use_measured_velocity),
           "fingerprints": {k: p for k, p in prints.items() if p is not None}}
    if len(sources) == 1 and not validate_sources:
        src["bag"] = input_label(sources[0])
    src.update(source)
    record = {"source": src, "input_checks": {"warnings": list(warnings), "forced": bool(force)}}
    return FlowOutcome(model, result, validation, "\n".join(lines), plot_data, record, valid_data, warnings, settings)


def estimate(model, base, settings, runs, plot_points: int = PLOT_POINTS, progress=None):
    """(result, plot samples) of the row runs: the compressed problem for ols, wls and
    physical, the rows in memory for the others."""
    thr, guard = settings.moving_threshold, settings.guard_s
    n_samples = run_rows(runs)
    try:
        return _estimate(model, base, settings, runs, plot_points, progress, thr, guard, n_samples)
    except IdentificationError as exc:
        if "has no sample" not in str(exc) or settings.reversal_guard_s is not None or guard < LONG_GUARD_S:
            raise
        raise IdentificationError(
            f"{str(exc).split(' (is it moving')[0]}: the filter cutoff {settings.filter.cutoff_hz:g} Hz "
            "is far below the motion's frequencies -- "
            f"the low-pass removes the motion itself and its reversal guard (1 / cutoff = {guard:g} s) masks "
            "nearly every sample; raise the cutoff (5-30 Hz is typical; none set: chosen from the data)") from None


def _estimate(model, base, settings, runs, plot_points, progress, thr, guard, n_samples):
    from .model_error_term import add_model_error
    from .pipeline import finish_result, identify, run_estimator
    from .store_hac import StoreRowSource
    from .structure_check import check_structure

    if settings.method not in COMPRESSED_METHODS:
        if n_samples * model.n > MAX_ROWS_IN_MEMORY:
            raise IdentificationError(
                f"method {settings.method!r} needs every regressor row in memory: {n_samples} samples x "
                f"{model.n} joints = {n_samples * model.n} rows exceed the limit of {MAX_ROWS_IN_MEMORY}; use "
                "ols, wls or physical (compressed, any length), or lower identification.filter.target_rate_hz, "
                "or identify a shorter recording")
        data = concatenate([s.read(a, b) for s, a, b in runs])
        return identify(model, data, settings, base), data
    acc, plot_data = accumulate(runs, model, base, thr, guard, plot_points=plot_points,
                                progress=None if progress is None else progress.counter("samples"))
    problem = acc.problem()
    problem.rows = StoreRowSource(runs, model, base, thr, guard)     # the HAC covariance re-reads the rows
    result = run_estimator(problem, settings)
    add_model_error(result, acc.rows(), {k: a.rows() for k, a in acc.left_out.items()})
    check_structure(result, acc, problem)
    # RMS over the true rows: the R factors' column sums of squares equal the rows'
    n_rows = max(problem.n_rows, 1)
    finish_result(result, model, settings, acc.raw_residual_rms(result.values),
                  np.sqrt(np.sum(problem.W ** 2, axis=0) / n_rows), float(np.sqrt(np.sum(problem.y ** 2) / n_rows)),
                  problem.n_rows, n_samples)
    return result, plot_data


def _runs(store, segment_rows, held) -> tuple[list, list]:
    """(identification runs, held-out runs) of the store: runs of rows within one segment (a
    run never spans two segments or two inputs, so each run's dead band is its own)."""
    ident, valid = [], []
    for a, b in segment_rows:
        ident += [(store, a + x, a + y) for x, y in runs_of(~held[a:b])]
        valid += [(store, a + x, a + y) for x, y in runs_of(held[a:b])]
    return ident, valid


def _continuous(model) -> tuple:
    """The joints whose positions are unwrapped on reading (closed chains and others: none)."""
    return tuple(getattr(model, "continuous_joints", ()))


def _feed(gains, store, a: int, b: int) -> tuple:
    """A gain check (`gain_check.GainCheck`) fed with rows a..b of a store, chunk by chunk;
    what it has accumulated (`GainCheck.totals`)."""
    for c in range(a, b, CHUNK_SAMPLES):
        gains.add(store.read(c, min(b, c + CHUNK_SAMPLES)))
    return gains.totals()


def _segment_times(processed: Processed) -> list[np.ndarray]:
    """Per stored segment, its samples' seconds from the start of its input."""
    return [processed.store.times(a, b) + seg.offset_s
            for seg, (a, b) in zip(processed.segments, processed.segment_rows())]


def _inputs_disagree(result, model, base, settings, processed, store, thr: float, guard: float) -> None:
    """Several identification inputs: the fitted model's residual per input and joint; joints
    where they disagree (`structure_check.judge_inputs`) make the model not good. Then each
    input fitted alone (WLS): an input whose own fit explains it far better than the joint
    fit does, or that alone misses structure, is one that model cannot share with the others
    -- a plain and a coupled arm's bags under one config leave both equally wrong with
    the joint fit (ratio about 1 between them), which the first comparison cannot see."""
    from .structure_check import judge_inputs, judge_own_fits
    spans: dict[int, list] = {}
    for seg, (a, b) in zip(processed.segments, processed.segment_rows()):
        spans.setdefault(seg.input, []).append((store, a, b))
    labels = [processed.inputs[k].label for k in spans]
    reports = [validate_runs(result, model, runs, thr, guard, plot_points=2) for runs in spans.values()]
    found = judge_inputs(model.joint_names, labels, [r.rms for r in reports], [r.relative_rms for r in reports])
    own, own_structure = [], []
    alone = replace(settings, method="wls")
    for runs in spans.values():
        try:
            r, _ = estimate(model, base, alone, runs, plot_points=2)
        except (IdentificationError, SignalError):       # too short or too still to be fitted alone
            own.append(None)
            own_structure.append([])
            continue
        own.append(validate_runs(r, model, runs, thr, guard, plot_points=2).rms)
        own_structure.append((r.quality or {}).get("misses_structure") or [])
    named = {f["joint"] for f in found}
    found += [f for f in judge_own_fits(model.joint_names, labels, [r.rms for r in reports],
                                        [r.relative_rms for r in reports], own, own_structure)
              if f["joint"] not in named]
    if found:
        q = result.quality
        q["misses_structure"] = list(q.get("misses_structure") or []) + found
        q["good"] = False


def _other_recordings(model, result, vprocessed) -> list[str]:
    """Validation recordings whose efforts do not follow the identified model (slope of the
    measured on the predicted efforts outside [0.67, 1.5] where it explains them): another
    robot's recording, or another torque constant or direction -- its ratios would measure
    that, not the model."""
    from .gain_check import GainCheck
    from .plausibility import off_prediction
    out = []
    by_input: dict[int, list] = {}
    for seg, (a, b) in zip(vprocessed.segments, vprocessed.segment_rows()):
        by_input.setdefault(seg.input, []).append((a, b))
    for k, spans in by_input.items():
        gains = GainCheck(model, predict=lambda d: result.predict(model, d.q, d.qd, d.qdd))
        for a, b in spans:
            _feed(gains, vprocessed.store, a, b)
        bad = off_prediction(gains.slopes())
        if bad:
            out.append(f"warning: validation recording {vprocessed.inputs[k].label}: its efforts are "
                       + ", ".join(f"{a:.3g} x the identified model's on joint {j!r}" for j, a in bad)
                       + ": another robot's or payload's recording, or another torque constant or direction? Its "
                         "ratios measure that, not the model")
    return out


# ----------------------------------------------------------------------- validate
class BaseValues:
    """`predict` of given base parameter values (a loaded result)."""

    def __init__(self, base, values):
        self.base, self.values = base, values

    def predict(self, model, q, qd, qdd):
        return (self.base.regressor(model.regressor(q, qd, qdd)) @ self.values).reshape(-1, model.n)


def validate_source(source, cfg, filter_options, model, base, values, threshold: float, guard_s: float,
                    noise_std=None, progress: Progress | None = None,
                    judge=None) -> tuple[ValidationReport, int, list, tuple]:
    """Validation of base parameter `values` on a whole recording (the ``validate``
    command): (report, processed samples, findings, kept samples). The recording checks run
    while reading (spikes only warn, as for the robust method) with the joints moving
    outside the model, and `judge` (joint -> (slope, partial correlation) of the
    recording's efforts on the values' prediction -> findings: e.g. another robot's bag)
    before the RMS; an error finding is refused (`plausibility.PlausibilityError`). The
    kept samples (at most 3000: data, predicted efforts, moving mask) are for the
    report's validation_samples.npz."""
    from .pipeline import IdentificationSettings
    from .plausibility import enforce

    progress = progress or Progress(quiet=True)
    values_model = BaseValues(base, values)
    settings = IdentificationSettings(method="robust", filter=filter_options, moving_threshold=threshold,
                                      reversal_guard_s=guard_s)
    with single_threaded_blas():
        with progress.stage("read"):
            processed, checks, _ = read_checked([source], cfg, model, settings, progress, decide_velocity=False,
                                                predict=lambda d: values_model.predict(model, d.q, d.qd, d.qdd))
        try:
            store, N = processed.store, processed.n_samples
            _feed(checks.gains, store, 0, N)
            findings = checks.recording_findings(processed, cfg.joint_states_topic, cfg.current_topic)
            if judge is not None:
                findings += judge(checks.gains.slopes())
            enforce(findings, hint="nothing was validated")
            runs = [(store, a, b) for a, b in processed.segment_rows()]    # each segment's dead band its own
            with progress.stage("validate"):
                report = validate_runs(values_model, model, runs, threshold, guard_s, plot_points=16,
                                       noise_std=noise_std, progress=progress.counter("samples"))
            data, moving = decimated(runs, model, threshold, guard_s)
            kept = (data, values_model.predict(model, data.q, data.qd, data.qdd), moving)
        finally:
            processed.close()
    return report, N, findings, kept
