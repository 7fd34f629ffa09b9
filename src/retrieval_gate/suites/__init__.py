"""Suites: the ground truth a team keeps, one module per suite kind."""
