"""Remount this machine's read-only cgroup v1 controllers read-write (run by kubenest-cgroup-rw.service).

systemd-nspawn mounts the controllers read-only; containerd, runc and the kubelet must create cgroups below them.
With a cgroup namespace each mount shows only the machine's own subtree, so this does not open the host's.
"""

import subprocess
import sys


def main() -> int:
    status = 0
    with open("/proc/self/mountinfo") as fh:
        for line in fh:
            pre, _sep, post = line.partition(" - ")
            fields = pre.split()
            if post.split()[0] == "cgroup" and "ro" in fields[5].split(","):
                status |= subprocess.call(["mount", "-o", "remount,bind,rw", fields[4]])
    return status


if __name__ == "__main__":
    sys.exit(main())
