"""Estimators of base parameters behind one interface: f(problem) -> IdentificationResult."""
from .least_squares import ESTIMATORS, ols, wls
from .problem import IdentificationProblem, build_problem
from .result import IdentificationResult

__all__ = ["ESTIMATORS", "IdentificationProblem", "IdentificationResult", "build_problem", "ols", "wls"]
