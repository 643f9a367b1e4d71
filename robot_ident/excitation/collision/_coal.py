"""coal (Pinocchio 4) or hpp-fcl (Pinocchio 3), whichever the installed Pinocchio uses."""
try:
    import coal
except ImportError:                 # pragma: no cover - Pinocchio 3
    import hppfcl as coal

__all__ = ["coal"]
