"""Small helpers every layer may use: BLAS thread pinning (`blas`), command-line
progress lines (`progress`) and locating the package's installed data files
(`resources`). May import only `robot_ident.errors` and third-party libraries."""
