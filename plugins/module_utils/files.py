# Copyright: kosmos.kubenest maintainers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""File writes for modules that hold credentials: atomic, with the mode set before any byte lands."""

from __future__ import annotations

import os
import tempfile


def is_file_name(key):
    """A Secret key that is safe to use as a file name in a directory."""
    return bool(key) and "/" not in key and key not in (".", "..")


def write_atomic(path, data, mode):
    """Replace `path` with `data`; readers see the old or the new file, never a partial one."""
    directory = os.path.dirname(path) or "."
    fd, tmp = tempfile.mkstemp(dir=directory, prefix=".%s." % os.path.basename(path))
    try:
        os.fchmod(fd, mode)
        with os.fdopen(fd, "wb") as fh:
            fh.write(data)
        os.replace(tmp, path)
    except BaseException:
        if os.path.exists(tmp):
            os.unlink(tmp)
        raise
