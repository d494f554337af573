"""A host cluster the collection did not build: upstream kubeadm on the sandbox's bare machines."""
