"""Estimators behind one interface: estimator(problem, **options) -> IdentificationResult.

| name      | what                                                      | parameters   |
|-----------|-----------------------------------------------------------|--------------|
| ols       | ordinary least squares                                    | base         |
| wls       | weighted least squares, per-joint noise (default)         | base         |
| robust    | IRLS with a Cauchy loss, for outliers and stick-slip      | base         |
| rls       | recursive least squares (online), WLS noise levels        | base         |
| physical  | log-Cholesky, every body physically consistent, CAD prior | standard     |
| sobol-ga  | source A: Sobol classes, GA on high-sensitivity + friction| standard     |
| sobol-ls  | the same classes and objective solved exactly (bounded LS)| standard     |
"""
from functools import partial, wraps

from ..util.blas import single_threaded_blas
from .least_squares import ols, wls
from .physical import physically_consistent
from .problem import IdentificationProblem, build_problem
from .recursive import RecursiveLeastSquares, recursive_estimate, recursive_weighted
from .result import IdentificationResult
from .robust import irls
from .sensitivity_ga import sensitivity_ga


def _small_matrix_loop(fn):
    """Run an iterative estimator with one BLAS thread (see robot_ident.util.blas)."""
    @wraps(fn)
    def run(problem, **kwargs):
        with single_threaded_blas():
            return fn(problem, **kwargs)
    return run


ESTIMATORS = {
    "ols": ols,
    "wls": wls,
    "robust": irls,
    "rls": _small_matrix_loop(recursive_weighted),
    "physical": _small_matrix_loop(physically_consistent),
    "sobol-ga": _small_matrix_loop(sensitivity_ga),
    "sobol-ls": partial(sensitivity_ga, solver="ls"),
}

__all__ = ["ESTIMATORS", "IdentificationProblem", "IdentificationResult", "RecursiveLeastSquares",
           "build_problem", "irls", "ols", "physically_consistent", "recursive_estimate", "sensitivity_ga", "wls"]
