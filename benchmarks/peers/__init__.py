"""Peer comparison benchmark: runner, client worker, Java tool, report, PNG chart."""
