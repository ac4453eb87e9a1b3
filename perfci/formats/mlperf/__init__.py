"""MLPerf logging: the ``:::MLLOG`` event lines of MLPerf training runs."""
