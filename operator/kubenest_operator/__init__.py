"""kosmos.kubenest operator: turns VirtualCluster and GlobalNode events into ansible-runner runs."""

__version__ = "1.0.0"
