"""Human-readable output of a result folder: effort plots and the HTML report
(`html`). Imports the core only."""
