"""Node machines for the local sandbox: systemd-nspawn containers on a private bridge, each running the agent."""
