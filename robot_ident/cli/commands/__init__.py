"""One module per `robot-ident` sub-command (see robot_ident/cli/__init__.py)."""
