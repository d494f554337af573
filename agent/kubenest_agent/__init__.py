"""kosmos.kubenest node agent and its controller-side client."""

__version__ = "1.0.0"
