"""The operator's client certificate for the node agents, re-issued before it expires.

Agents accept a controller whose certificate the agents' CA signed and whose name they allow. An expired
client certificate would cut the operator off every node at once. When the operator holds that CA (site
variable `kubenest_agent_ca_path`, also used for nodes coming back from a virtual cluster), it issues itself a
new pair with the same name once the configured one, or its last re-issue, is inside its renewal window, and
gives runs that pair instead. Without the CA it says, at every run, that the certificate is due.

Runs with a re-issued pair also ask every agent they reach to refuse its predecessor (the configured pair, or the
re-issue before) and everything for the name issued earlier, so a copy of an old key stops working node by node
as runs reach them. Not at once: runs that started with the predecessor may still be going (an agent would cut
them off halfway through a promotion), so only once a run's whole timeout has passed since the re-issue. The
predecessor is inside its renewal window by then, never past its end. Another replica's re-issue is never older
than the predecessor named, so replicas that took over from each other do not lock each other out.
"""

from __future__ import annotations

import logging
import os
import time
from pathlib import Path
from typing import Any

from ansible_collections.kosmos.kubenest.plugins.module_utils import pki
from cryptography.x509.oid import NameOID

from .extravars import renew_before_days

CERT_VAR, KEY_VAR, CA_VAR = "kubenest_agent_cert_file", "kubenest_agent_key_file", "kubenest_agent_ca_path"
CA_FILE_VAR = "kubenest_agent_ca_file"  # the agents' CA certificate, which signs the client pair too
SUPERSEDED_VAR = "kubenest_agent_superseded_cert_file"  # the connection plugin's superseded_cert_file


def _load(path: str | Path):
    return pki.load_certificate_pem(Path(path).read_bytes())


def _write(path: Path, data: bytes) -> None:
    tmp = path.with_name(path.name + ".tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "wb") as fh:
        fh.write(data)
    os.replace(tmp, path)


class AgentClientIdentity:
    """Re-issued pairs live in `directory` (private to the operator, next to the runs directory so that no
    run artifact ever holds the key), the newest one in client.crt/.key."""

    def __init__(self, directory: Path, retire_after: float = 3600.0):
        self.directory = directory
        self.retire_after = retire_after  # seconds after a re-issue before runs retire its predecessor

    def _private(self) -> bool:
        """The directory is ours alone: nobody else could have put a pair there."""
        try:
            info = self.directory.stat()
        except OSError:
            return False
        return info.st_uid == os.getuid() and not info.st_mode & 0o077

    def _renewed(self, configured, ca_file: str | None) -> tuple[Path, Path] | None:
        cert, key = self.directory / "client.crt", self.directory / "client.key"
        if not self._private():
            return None
        try:
            current = _load(cert)
            if ca_file and not pki.signed_by(current, _load(ca_file)):
                return None
        except (OSError, ValueError):
            return None
        # Only a re-issue of the configured identity counts, and only while it is the newer one: a new pair
        # installed by hand replaces it. Newer by issue time (notBefore), as the agents judge it when a re-issue
        # supersedes its predecessor: a pair made before the re-issue would be refused by them.
        same = current.subject == configured.subject and current.issuer == configured.issuer
        newer = pki.certificate_not_before(current) > pki.certificate_not_before(configured)
        if not (same and newer):
            return None
        try:
            matches = pki.key_matches(current, pki.load_private_key_pem(key.read_bytes()))
        except (OSError, ValueError):
            return None
        return (cert, key) if matches else None

    def site_vars(self, site_vars: dict[str, Any], logger: logging.Logger) -> dict[str, Any]:
        """`site_vars` with the client pair a run should use."""
        cert_file, key_file = site_vars.get(CERT_VAR), site_vars.get(KEY_VAR)
        if not cert_file or not key_file:
            return site_vars
        try:
            configured = _load(cert_file)
        except (OSError, ValueError) as exc:
            logger.warning(f"{CERT_VAR} {cert_file}: {exc}")
            return site_vars
        renewed = self._renewed(configured, site_vars.get(CA_FILE_VAR))
        current = _load(renewed[0]) if renewed else configured
        chosen = dict(site_vars, **(self._use(renewed) if renewed else {}))
        remaining = pki.renewal_due(current, renew_before_days(site_vars))
        if remaining is None:
            return chosen
        ca_path = site_vars.get(CA_VAR)
        if not ca_path:
            logger.warning(f"the agent client certificate expires in {remaining}; without {CA_VAR} the operator "
                           "cannot re-issue it: install a new pair")
            return chosen
        try:
            ca = pki.CertAndKey(_load(f"{ca_path}.crt"),
                                pki.load_private_key_pem(Path(f"{ca_path}.key").read_bytes()))
        except (OSError, ValueError) as exc:
            logger.warning(f"the agent client certificate expires in {remaining}; {CA_VAR}: {exc}")
            return chosen
        if not pki.signed_by(configured, ca.cert):
            logger.warning(f"the agent client certificate expires in {remaining}; it is not signed by {ca_path}.crt")
            return chosen
        spec = pki.certificate_spec(current)
        lifetime = pki.certificate_not_after(current) - pki.certificate_not_before(current) - pki.CLOCK_SKEW
        pair = pki.issue_certificate(ca, current.subject.get_attributes_for_oid(NameOID.COMMON_NAME)[0].value,
                                     organizations=spec["organizations"], client=True,
                                     validity_days=max(lifetime.total_seconds() / 86400, 1 / 24))
        self.directory.mkdir(mode=0o700, parents=True, exist_ok=True)
        if not self._private():
            logger.warning(f"the agent client certificate expires in {remaining}; {self.directory} is not private "
                           "to the operator: not writing a key there")
            return chosen
        cert, key = self.directory / "client.crt", self.directory / "client.key"
        # The certificate this one replaces (the configured one or the last re-issue) is the one runs retire; its
        # key is not kept.
        _write(self.directory / "previous.crt", pki.certificate_pem(current))
        _write(key, pki.private_key_pem(pair.key))  # key first: a pair that does not match is never chosen
        _write(cert, pki.certificate_pem(pair.cert))
        logger.info(f"re-issued the agent client certificate (it expired in {remaining}); "
                    f"the new one ends {pki.certificate_not_after(pair.cert).isoformat()}")
        return dict(site_vars, **self._use((cert, key)))

    def _use(self, pair: tuple[Path, Path]) -> dict[str, str]:
        """Run variables for a re-issued pair: the pair, and, once no run can still be using it, the certificate
        it replaced (kept as previous.crt when it was issued)."""
        chosen = {CERT_VAR: str(pair[0]), KEY_VAR: str(pair[1])}
        previous = self.directory / "previous.crt"
        try:
            replaced_at = previous.stat().st_mtime
            same = _load(previous).subject == _load(pair[0]).subject
        except (OSError, ValueError):
            return chosen  # nothing is known of what it replaced: nothing is retired
        if same and time.time() - replaced_at >= self.retire_after:
            chosen[SUPERSEDED_VAR] = str(previous)
        return chosen
