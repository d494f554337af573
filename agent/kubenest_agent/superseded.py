"""Client certificates a newer one for the same name has replaced, refused from then on.

A controller's client certificate is re-issued long before it expires, and the old key may have been copied
somewhere while it was in use. The CA keeps vouching for it until it expires, so the agent keeps, per client
name, a mark set by the `supersede` operation: certificates for that name issued (notBefore) before the mark are
refused at the websocket handshake. A client sets the mark with its own certificate and never past that
certificate's own notBefore, so an old key cannot lock out its successor; the mark only moves forward.

The marks live in the state directory (JSON, written atomically), so a restart keeps them.
"""

from __future__ import annotations

import json
import logging
import os
import ssl
from dataclasses import dataclass
from pathlib import Path

log = logging.getLogger(__name__)
FILE_NAME = "superseded-clients.json"


@dataclass(frozen=True)
class ClientCertificate:
    """What the agent knows of a verified client certificate."""

    name: str
    not_before: int  # seconds since the epoch, as certificates carry it (whole seconds)

    @classmethod
    def of(cls, ssl_object, name: str | None) -> ClientCertificate | None:
        if ssl_object is None or not name:
            return None
        info = ssl_object.getpeercert()
        if not info or "notBefore" not in info:
            return None
        return cls(name, int(ssl.cert_time_to_seconds(info["notBefore"])))


class SupersededClients:
    def __init__(self, state_dir: str | os.PathLike):
        self.path = Path(state_dir) / FILE_NAME
        self.before: dict[str, int] = self._load()

    def _load(self) -> dict[str, int]:
        try:
            data = json.loads(self.path.read_text())
        except FileNotFoundError:
            return {}
        except (OSError, ValueError) as exc:
            # Refusing every client would cut the node off its controller; the file is only ever written whole,
            # so a damaged one was damaged by hand. Say so loudly and start without marks.
            log.error("ignoring %s: %s", self.path, exc)
            return {}
        clients = data.get("issued_before") if isinstance(data, dict) else None
        return {name: before for name, before in (clients if isinstance(clients, dict) else {}).items()
                if isinstance(before, int) and not isinstance(before, bool)}

    def refuses(self, cert: ClientCertificate | None) -> bool:
        return cert is not None and cert.not_before < self.before.get(cert.name, 0)

    def supersede(self, cert: ClientCertificate, before: int) -> tuple[bool, int]:
        """Refuse from now on certificates for `cert`'s name issued before `before`, which may be no later than
        `cert` itself: a holder can retire its predecessors, never its successors. Returns whether the mark
        moved, and the mark."""
        wanted = min(before, cert.not_before)
        current = self.before.get(cert.name, 0)
        if wanted <= current:
            return False, current
        self._save(dict(self.before, **{cert.name: wanted}))  # on disk first: a failed write changes nothing
        self.before[cert.name] = wanted
        return True, wanted

    def _save(self, marks: dict[str, int]) -> None:
        tmp = self.path.with_name(self.path.name + ".tmp")
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        with os.fdopen(fd, "w") as fh:
            json.dump({"issued_before": marks}, fh, sort_keys=True)
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp, self.path)
