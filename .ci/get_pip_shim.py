"""Stand-in for the pip bootstrap script ansible-test downloads from a host this machine cannot reach.

ansible-test runs it inside a fresh venv with get-pip style arguments; ensurepip provides a pip,
which then installs the requested pip version from the package index. ansible-test filters the
environment, so a CA bundle for the index (if the machine needs one) is written into the venv's
own pip.conf; .ci/sanity.sh fills in its path.
"""

import ensurepip
import os
import subprocess
import sys

CA_BUNDLE = "@PIP_CERT@"

if CA_BUNDLE and not CA_BUNDLE.startswith("@"):
    with open(os.path.join(sys.prefix, "pip.conf"), "w") as conf:
        conf.write(f"[global]\ncert = {CA_BUNDLE}\n")
ensurepip.bootstrap(upgrade=False)
# ensurepip points PIP_CONFIG_FILE at /dev/null for itself; the real install must see pip.conf.
env = {k: v for k, v in os.environ.items() if k != "PIP_CONFIG_FILE"}
args = [a for a in sys.argv[1:] if a not in ("--no-setuptools", "--no-wheel")]
sys.exit(subprocess.call([sys.executable, "-m", "pip", "install", *args], env=env))
