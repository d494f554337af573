"""Keys and directories of the module payload cache (kosmos.kubenest.module_cache)."""

from __future__ import annotations

import os

import pytest
from ansible_collections.kosmos.kubenest.plugins.plugin_utils import module_cache


def _collection(base, name, manifest=None):
    root = base / "ansible_collections" / "example" / name
    (root / "plugins" / "modules").mkdir(parents=True)
    (root / "plugins" / "module_utils").mkdir()
    (root / "plugins" / "modules" / "thing.py").write_text("RESULT = 1\n")
    if manifest is not None:
        (root / "MANIFEST.json").write_text(manifest)
    return root


@pytest.fixture
def paths(tmp_path):
    core = tmp_path / "ansible"
    (core / "modules").mkdir(parents=True)
    (core / "module_utils").mkdir()
    (core / "modules" / "ping.py").write_text("pass\n")
    checkout = _collection(tmp_path / "checkouts", "dev")
    installed = _collection(tmp_path / "installed", "released", manifest='{"collection_info": {"version": "1.0.0"}}')
    return core, [str(tmp_path / "checkouts"), str(tmp_path / "installed")], checkout, installed


def _key(core, search, version="2.19.0"):
    return module_cache.cache_key(version, str(core), search)


def test_the_same_sources_give_the_same_key(paths):
    core, search = paths[:2]
    assert _key(core, search) == _key(core, search)
    assert _key(core, search) != _key(core, search, version="2.20.0")


def test_a_changed_added_or_removed_module_of_a_checkout_gives_a_new_key(paths):
    core, search, checkout = paths[:3]
    seen = {_key(core, search)}
    module = checkout / "plugins" / "modules" / "thing.py"
    module.write_text("RESULT = 22\n")  # another size
    seen.add(_key(core, search))
    stat = module.stat()
    os.utime(module, ns=(stat.st_atime_ns, stat.st_mtime_ns + 1_000_000))  # same size, rewritten
    seen.add(_key(core, search))
    (checkout / "plugins" / "module_utils" / "shared.py").write_text("X = 1\n")
    seen.add(_key(core, search))
    module.unlink()
    seen.add(_key(core, search))
    (core / "module_utils" / "basic.py").write_text("pass\n")  # ansible-core's own files count too
    seen.add(_key(core, search))
    assert len(seen) == 6


def test_an_installed_collection_counts_by_its_manifest(paths):
    core, search, installed = paths[0], paths[1], paths[3]
    before = _key(core, search)
    # Its files are not read one by one: an install or upgrade rewrites the manifest.
    (installed / "MANIFEST.json").write_text('{"collection_info": {"version": "1.1.0"}}')
    assert _key(core, search) != before


def test_prepare_makes_private_directories_and_keeps_few_old_keys(tmp_path):
    cache = tmp_path / "cache"
    for number in range(module_cache.KEEP + 3):
        entry = module_cache.prepare(str(cache), f"key{number}")
        os.utime(entry, (number, number))  # older keys were used earlier
    entry = module_cache.prepare(str(cache), "current")
    assert oct(os.stat(entry).st_mode & 0o777) == oct(0o700) and oct(cache.stat().st_mode & 0o777) == oct(0o700)
    kept = sorted(os.listdir(cache))
    assert kept == sorted(["current"] + [f"key{n}" for n in range(3, 3 + module_cache.KEEP)])


def test_a_directory_others_may_write_to_is_refused(tmp_path):
    cache = tmp_path / "cache"
    cache.mkdir(mode=0o777)
    cache.chmod(0o777)
    with pytest.raises(module_cache.UnsafeCacheDir, match="may be written by others"):
        module_cache.prepare(str(cache), "key")
    assert not (cache / "key").exists()
    link = tmp_path / "link"
    link.symlink_to(tmp_path)
    with pytest.raises(module_cache.UnsafeCacheDir, match="is not a directory"):
        module_cache.check_private(str(link))


def test_attach_links_the_run_once_and_never_replaces_its_own_payloads(tmp_path):
    run_tmp, entry = tmp_path / "run", tmp_path / "entry"
    run_tmp.mkdir()
    entry.mkdir()
    assert module_cache.attach(str(run_tmp), str(entry))
    assert os.readlink(run_tmp / "ansiballz_cache") == str(entry)
    assert not module_cache.attach(str(run_tmp), str(tmp_path / "other"))
    other_run = tmp_path / "other-run"
    (other_run / "ansiballz_cache").mkdir(parents=True)
    assert not module_cache.attach(str(other_run), str(entry))
    assert not os.path.islink(other_run / "ansiballz_cache")
