"""ansible-runner runs: a fresh private data dir per run, a worker thread, bounded artifact retention.

Every run gets its own private_data_dir (so extravars of an earlier run can never leak into a later one) under
the runs directory. While a run goes, its directory holds an flock on `.lock`; the lock dies with the process,
so retention can tell live runs (of this or another operator process) from finished or abandoned ones and
keeps only the newest `keep` of those.

ansible-playbook's workers run in sessions of their own, so ending ansible-playbook (ansible-runner kills its
process group on cancel and timeout) or the operator leaves the task in flight running. The processes of a
run (see processes.py) are therefore ended after every run, and those of abandoned runs when the operator
starts.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
import datetime
import fcntl
import json
import logging
import os
import secrets
import shutil
import stat
import sys
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import ansible_runner

from . import pty_close
from .extravars import dump_unsafe
from .processes import end_processes, processes_of

log = logging.getLogger(__name__)
pty_close.install()

LOCK_FILE = ".lock"
RUN_PREFIX = "run-"
# A directory without its lock file is either being set up right now or left by a crash during set-up.
UNLOCKED_GRACE_SECONDS = 60
CANCEL_GRACE_SECONDS = 30


def new_run_id(namespace: str, name: str) -> str:
    stamp = datetime.datetime.now(datetime.UTC).strftime("%Y%m%dT%H%M%S")
    return f"{stamp}-{namespace}.{name}-{secrets.token_hex(3)}"


# ansible-playbook's main process checks for finished tasks every internal_poll_interval (default 1 ms). That
# spin takes a core's worth of CPU from the workers and the control plane starting beside them; 10 ms costs
# each task at most that much and saved about 2 s of a virtual cluster's create on 2 cores (3 creates each way).
ANSIBLE_CFG = """[defaults]
internal_poll_interval = 0.01
"""


def write_ansible_config(tmp_dir: Path) -> Path | None:
    """The run's ansible.cfg, unless the operator's environment names one (ANSIBLE_CONFIG) to use instead."""
    if os.environ.get("ANSIBLE_CONFIG"):
        return None
    path = tmp_dir / "ansible.cfg"
    path.write_text(ANSIBLE_CFG)
    return path


# Module payloads built by one run serve the next ones (kosmos.kubenest.module_cache): a promotion's first task with
# each of its seven node-side modules no longer waits about 0.25 s for the payload to be built.
MODULE_CACHE_CALLBACK = "kosmos.kubenest.module_cache"


def run_environment(collections_path: str | None, tmp_dir: Path, config: Path | None = None,
                    module_cache_dir: Path | None = None) -> dict[str, str]:
    venv_bin = str(Path(sys.executable).parent)
    env = {
        # The ansible-playbook next to this interpreter, with the same packages (kubernetes, kopf's deps).
        "PATH": os.pathsep.join([venv_bin, os.environ.get("PATH", "")]),
        "ANSIBLE_NOCOLOR": "1",
        "ANSIBLE_FORCE_COLOR": "0",
        "ANSIBLE_RETRY_FILES_ENABLED": "0",
        "ANSIBLE_LOCAL_TEMP": str(tmp_dir),
        # API-side modules run locally: sent over stdin, not written and chmod-ed first (~0.1 s per task).
        "ANSIBLE_PIPELINING": "True",
        # Modules unpack themselves (arguments included) under TMPDIR;
        # inside the run directory, what a killed run leaves goes with the directory.
        "TMPDIR": str(tmp_dir),
    }
    if config is not None:
        env["ANSIBLE_CONFIG"] = str(config)
    if module_cache_dir is not None:
        enabled = [name for name in os.environ.get("ANSIBLE_CALLBACKS_ENABLED", "").split(",") if name.strip()]
        env["ANSIBLE_CALLBACKS_ENABLED"] = ",".join([*enabled, MODULE_CACHE_CALLBACK])
        env["KUBENEST_MODULE_CACHE_DIR"] = str(module_cache_dir)
    if collections_path:
        existing = os.environ.get("ANSIBLE_COLLECTIONS_PATH")
        env["ANSIBLE_COLLECTIONS_PATH"] = os.pathsep.join(p for p in (collections_path, existing) if p)
    return env


def local_inventory(tmp_dir: Path) -> dict[str, Any]:
    # API-side work runs on the operator itself, with the interpreter that has the kubernetes client; its
    # module files (which embed the task's arguments) stay in the run directory rather than ~/.ansible/tmp.
    return {"all": {"hosts": {"localhost": {"ansible_connection": "local",
                                            "ansible_python_interpreter": sys.executable,
                                            "ansible_remote_tmp": str(tmp_dir / "remote")}}}}


class UnsafeRunsDir(RuntimeError):
    """The runs directory could be read or changed by someone else."""


def strip_run_dir(path: Path) -> None:
    """After a run only its artifacts (events, output; kept for --artifacts-keep runs) stay: the inputs
    (env/extravars), the inventory and the module files with their arguments (tmp/) go at once."""
    for entry in path.iterdir():
        if entry.name in ("artifacts", LOCK_FILE):
            continue
        if entry.is_dir() and not entry.is_symlink():
            shutil.rmtree(entry, ignore_errors=True)
        else:
            with contextlib.suppress(FileNotFoundError):
                entry.unlink()


class RunDirs:
    """Run directories under `base`, newest `keep` finished ones retained."""

    def __init__(self, base: Path, keep: int):
        self.base = Path(base)
        self.keep = max(0, keep)

    def ensure_private(self) -> None:
        """The base directory exists, is a real directory of this user and nobody else may write to it:
        run directories hold the inputs of playbook runs, and a directory planted by another user (the
        default name is predictable) would let them read or swap those."""
        self.base.parent.mkdir(parents=True, exist_ok=True)
        with contextlib.suppress(FileExistsError):
            self.base.mkdir(mode=0o700)
        info = os.lstat(self.base)
        if not stat.S_ISDIR(info.st_mode):
            raise UnsafeRunsDir(f"{self.base} is not a directory (a symlink?); refusing to run playbooks in it")
        if info.st_uid != os.getuid():
            raise UnsafeRunsDir(f"{self.base} belongs to uid {info.st_uid}, not to this user ({os.getuid()}); "
                                "remove it or choose another --runs-dir")
        if info.st_mode & 0o077:
            os.chmod(self.base, 0o700)  # ours, but too open: close it before use

    def create(self, run_id: str) -> tuple[Path, int]:
        """A new private data dir and the fd whose flock marks it live; close the fd to finish the run."""
        self.ensure_private()
        path = self.base / f"{RUN_PREFIX}{run_id}"
        path.mkdir(mode=0o700)
        fd = os.open(path / LOCK_FILE, os.O_CREAT | os.O_RDWR, 0o600)
        fcntl.flock(fd, fcntl.LOCK_EX)
        (path / "tmp").mkdir(mode=0o700)
        return path, fd

    @staticmethod
    def _is_live(path: Path) -> bool:
        try:
            fd = os.open(path / LOCK_FILE, os.O_RDWR)
        except FileNotFoundError:
            with contextlib.suppress(FileNotFoundError):
                return time.time() - path.stat().st_mtime < UNLOCKED_GRACE_SECONDS
            return False
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            return True
        finally:
            os.close(fd)  # closing drops the probe's lock too
        return False

    def finished(self) -> list[Path]:
        """Directories of runs that are over (or whose process died), oldest first."""
        if not self.base.is_dir():
            return []
        runs = sorted(p for p in self.base.iterdir() if p.is_dir() and p.name.startswith(RUN_PREFIX))
        return [p for p in runs if not self._is_live(p)]

    def reap_orphans(self) -> dict[str, list[int]]:
        """End what abandoned runs (their operator died) still have running."""
        reaped = {}
        for path in self.finished():
            pids = processes_of(path)
            if pids:
                log.warning("ending %d process(es) left over from run %s", len(pids), path.name)
                end_processes(pids)
                reaped[path.name] = pids
        return reaped

    def prune(self) -> list[Path]:
        done = self.finished()
        doomed = done[: len(done) - self.keep] if self.keep else done
        for path in doomed:
            shutil.rmtree(path, ignore_errors=True)
        return doomed


def write_extravars(private_data_dir: Path, extravars: dict[str, Any]) -> None:
    """env/extravars, which ansible-runner hands to ansible-playbook as `-e @file`: the values stay off the
    command line (visible to every local user) and reach Ansible marked unsafe (see extravars.dump_unsafe)."""
    env_dir = private_data_dir / "env"
    env_dir.mkdir(mode=0o700, exist_ok=True)
    fd = os.open(env_dir / "extravars", os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    with os.fdopen(fd, "w") as handle:
        handle.write(dump_unsafe(extravars))


def scrub_command_env(artifact_dir: Path) -> None:
    """ansible-runner records the whole environment in artifacts/<id>/command; keep only the names."""
    command_file = artifact_dir / "command"
    try:
        command = json.loads(command_file.read_text())
    except (OSError, ValueError):
        return
    if isinstance(command.get("env"), dict):
        command["env"] = sorted(command["env"])
        command_file.write_text(json.dumps(command))


@dataclass(frozen=True)
class RunOutcome:
    run_id: str
    status: str  # ansible-runner's: successful, failed, timeout, canceled
    rc: int | None
    seconds: float

    @property
    def ok(self) -> bool:
        return self.status == "successful"


class PlaybookRunner:
    """Runs one playbook of `playbook_dir` per call, in a thread of its own pool."""

    def __init__(self, *, playbook_dir: Path, run_dirs: RunDirs, collections_path: str | None,
                 max_parallel: int, timeout: int | None, module_cache_dir: Path | None = None):
        self.playbook_dir = Path(playbook_dir)
        self.module_cache_dir = module_cache_dir
        self.run_dirs = run_dirs
        self.collections_path = collections_path
        self.timeout = timeout
        self.executor = concurrent.futures.ThreadPoolExecutor(max_workers=max(1, max_parallel),
                                                              thread_name_prefix="runner")

    async def run(self, playbook: str, run_id: str, extravars: dict[str, Any],
                  event_handler: Callable[[dict[str, Any]], bool], abort: asyncio.Event | None = None) -> RunOutcome:
        """One run; setting `abort` ends it early (ansible-runner's status is then `canceled`)."""
        cancel = threading.Event()
        future = asyncio.get_running_loop().run_in_executor(
            self.executor, self._run_blocking, playbook, run_id, extravars, event_handler, cancel)
        try:
            if abort is not None:
                aborted = asyncio.ensure_future(abort.wait())
                try:
                    await asyncio.wait({future, aborted}, return_when=asyncio.FIRST_COMPLETED)
                finally:
                    aborted.cancel()
                if abort.is_set() and not future.done():
                    cancel.set()
            return await asyncio.shield(future)
        except asyncio.CancelledError:
            # The operator is stopping: end ansible-playbook too instead of leaving it running unattended.
            cancel.set()
            await asyncio.wait({future}, timeout=CANCEL_GRACE_SECONDS)
            raise

    def _run_blocking(self, playbook: str, run_id: str, extravars: dict[str, Any],
                      event_handler: Callable[[dict[str, Any]], bool], cancel: threading.Event) -> RunOutcome:
        started = time.monotonic()
        path, lock_fd = self.run_dirs.create(run_id)
        try:
            write_extravars(path, extravars)
            runner = ansible_runner.run(
                private_data_dir=str(path),
                project_dir=str(self.playbook_dir),
                playbook=playbook,
                ident=run_id,
                inventory=local_inventory(path / "tmp"),
                envvars=run_environment(self.collections_path, path / "tmp", write_ansible_config(path / "tmp"),
                                        self.module_cache_dir),
                quiet=True,  # task output may hold data the operator's log must not show
                event_handler=event_handler,
                cancel_callback=cancel.is_set,
                timeout=self.timeout,
            )
            scrub_command_env(path / "artifacts" / run_id)
            return RunOutcome(run_id, runner.status, runner.rc, time.monotonic() - started)
        finally:
            leftovers = processes_of(path)
            if leftovers:  # after a cancel or a timeout: the workers and the task they were running
                log.info("run %s: ending %d left-over process(es)", run_id, len(leftovers))
                end_processes(leftovers)
            strip_run_dir(path)
            os.close(lock_fd)
            self.run_dirs.prune()

    def shutdown(self) -> None:
        self.executor.shutdown(wait=False, cancel_futures=True)
