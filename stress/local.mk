# Stress suite (issue 3): multi-threaded invariant checkers.
