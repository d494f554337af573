"""kubectl kubenest: the kubectl plugin of kosmos.kubenest."""
