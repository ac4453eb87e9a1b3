"""The ``perfci`` command: one module per subcommand, each a thin shell over ``perfci.usecases``."""
