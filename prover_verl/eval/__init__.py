"""Evaluation: the paper-style result tables from logged validation episodes."""
