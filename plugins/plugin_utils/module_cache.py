# Copyright: (c) kosmos.kubenest contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

"""A module payload cache that outlives one ansible-playbook run.

ansible-core zips a module with the module_utils it imports the first time a run uses it, and keeps that payload
only in the run's own temporary directory: every run pays again, about 0.25 s per distinct module. Payloads are
kept here in a directory named after what they are built from (cache_key), so a changed module is never served
from an older payload.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import stat

# Directories of a cache key kept besides the one in use: the newest by use.
KEEP = 3
SOURCE_DIRS = ("modules", "module_utils")


class UnsafeCacheDir(Exception):
    """The cache directory could be changed by someone else: its payloads (pickles) would run their code."""


def _walk(root):
    for directory, _dirs, files in os.walk(root, followlinks=True):
        for name in files:
            if name.endswith((".py", ".ps1", ".psm1", ".cs")):
                yield os.path.join(directory, name)


def collection_dirs(collection_paths):
    """Every collection directory on the search path, in a stable order."""
    found = []
    for base in collection_paths:
        collections = os.path.join(base, "ansible_collections")
        if not os.path.isdir(collections):
            continue
        for namespace in sorted(os.listdir(collections)):
            if os.path.isdir(os.path.join(collections, namespace)):
                found.extend(os.path.join(collections, namespace, name)
                             for name in sorted(os.listdir(os.path.join(collections, namespace))))
    return [path for path in found if os.path.isdir(path)]


def _stamp(path):
    info = os.stat(path)
    return f"{info.st_size}\0{info.st_mtime_ns}"


def cache_key(ansible_version, ansible_dir, collection_paths):
    """A digest of what payloads are built from. ansible-core's and checked-out collections' module and
    module_utils files count one by one (any file added, removed or changed gives a new key); an installed
    collection counts by its release manifest, which an install or upgrade rewrites."""
    digest = hashlib.sha256(ansible_version.encode())
    roots = [os.path.join(ansible_dir, name) for name in SOURCE_DIRS]
    for collection in collection_dirs(collection_paths):
        manifest = os.path.join(collection, "MANIFEST.json")
        if os.path.isfile(manifest):
            digest.update(f"\0manifest\0{manifest}\0{_stamp(manifest)}".encode())
        else:
            roots.extend(os.path.join(collection, "plugins", name) for name in SOURCE_DIRS)
    for root in roots:
        if not os.path.isdir(root):
            continue
        digest.update(b"\0root\0" + root.encode())
        for path in sorted(_walk(root)):
            digest.update(f"\0{os.path.relpath(path, root)}\0{_stamp(path)}".encode())
    return digest.hexdigest()[:32]


def check_private(path):
    """`path` is a directory of this user that no one else may write to."""
    info = os.lstat(path)
    if not stat.S_ISDIR(info.st_mode):
        raise UnsafeCacheDir(f"{path} is not a directory")
    if info.st_uid != os.geteuid():
        raise UnsafeCacheDir(f"{path} belongs to another user (uid {info.st_uid})")
    if info.st_mode & (stat.S_IWGRP | stat.S_IWOTH):
        raise UnsafeCacheDir(f"{path} may be written by others (mode {stat.S_IMODE(info.st_mode):o})")


def prepare(cache_dir, key):
    """The directory for payloads of `key` under `cache_dir`, both private; older keys beyond KEEP go."""
    os.makedirs(cache_dir, mode=0o700, exist_ok=True)
    check_private(cache_dir)
    entry = os.path.join(cache_dir, key)
    os.makedirs(entry, mode=0o700, exist_ok=True)
    check_private(entry)
    os.utime(entry)  # in use: the newest
    others = [os.path.join(cache_dir, name) for name in os.listdir(cache_dir) if name != key]
    others = [path for path in others if os.path.isdir(path) and not os.path.islink(path)]
    for stale in sorted(others, key=os.path.getmtime, reverse=True)[KEEP:]:
        shutil.rmtree(stale, ignore_errors=True)
    return entry


def attach(run_tmp, entry):
    """Make `entry` the run's payload directory (ansible-core's <local tmp>/ansiballz_cache). A run that has
    built payloads already keeps its own directory."""
    link = os.path.join(run_tmp, "ansiballz_cache")
    if os.path.lexists(link):
        return False
    os.symlink(entry, link)
    return True
