"""ldptel aggregator: shard workers, window state, estimates and reports."""
