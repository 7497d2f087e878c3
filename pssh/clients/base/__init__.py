"""The parts of the clients that do not depend on the SSH library (parallel-ssh's layout)."""
