"""The sandbox host cluster: cluster variables for the node machines and the bare-bootstrap playbook run."""
