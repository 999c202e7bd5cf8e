"""A node of several workers: the supervisor that runs them, and its HTTP port, which answers for the node from their answers."""
