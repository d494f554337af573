"""Warm Python module runner ("zygote"), run by the node's own interpreter.

Most of the time of an Ansible module task is spent importing ``ansible.module_utils`` from the
module's payload zip. The zygote imports that core once, from the first payload it sees, then forks
one child per module run. A child only uses the preloaded modules if the new payload carries
byte-identical copies of every one of them (CRC and size from the zip directory); otherwise it
re-executes a fresh interpreter on the payload, exactly like plain pipelining.

Protocol with the agent (a socketpair): each request is a JSON message carrying three file
descriptors (SCM_RIGHTS): a per-run socket, the stdout and the stderr write ends. The payload is
then sent length-prefixed on the per-run socket. Replies on the per-run socket: {"pid"},
{"mode": "warm"|"cold"} from the child, and {"status": waitstatus} when the child exits.

Stdlib only and free of agent imports: this file is the program text of the zygote.
"""

import base64
import binascii
import hashlib
import io
import json
import os
import re
import select
import signal
import socket
import struct
import sys
import traceback
import zipfile

LEN = struct.Struct(">I")
ZIP_DATA = re.compile(rb"\nzip_data='([A-Za-z0-9+/=]+)'")
PRELOAD = ("ansible.module_utils._internal._ansiballz._loader", "ansible.module_utils.basic")
MAX_PAYLOAD = 256 * 1024 * 1024


def send_msg(sock, obj):
    data = json.dumps(obj).encode()
    sock.sendall(LEN.pack(len(data)) + data)


def read_exact(sock, size):
    buf = bytearray()
    while len(buf) < size:
        chunk = sock.recv(min(size - len(buf), 1 << 20))
        if not chunk:
            raise EOFError("payload truncated")
        buf += chunk
    return bytes(buf)


def read_payload(sock):
    (size,) = LEN.unpack(read_exact(sock, LEN.size))
    if size > MAX_PAYLOAD:
        raise ValueError(f"payload of {size} bytes is too large")
    return read_exact(sock, size)


def zip_bytes(payload):
    match = ZIP_DATA.search(payload)
    if not match:
        return None
    try:
        return base64.b64decode(match.group(1))
    except (binascii.Error, ValueError):
        return None


class Warm:
    """Modules preloaded from one payload zip, and the zip members they came from."""

    def __init__(self, zip_path, members):
        self.zip_path = zip_path
        self.members = members  # member name -> (crc, size)

    def compatible(self, payload):
        data = zip_bytes(payload)
        if data is None:
            return False
        try:
            infos = {i.filename: (i.CRC, i.file_size) for i in zipfile.ZipFile(io.BytesIO(data)).infolist()}
        except zipfile.BadZipFile:
            return False
        return all(infos.get(name) == crc_size for name, crc_size in self.members.items())


def warm_up(payload, cache_dir):
    data = zip_bytes(payload)
    if data is None:
        return None
    os.makedirs(cache_dir, mode=0o700, exist_ok=True)
    zip_path = os.path.join(cache_dir, hashlib.sha256(data).hexdigest()[:20] + ".zip")
    if not os.path.exists(zip_path):
        tmp = f"{zip_path}.{os.getpid()}.tmp"
        with open(tmp, "wb") as fh:
            fh.write(data)
        os.replace(tmp, zip_path)
    sys.path.insert(0, zip_path)
    try:
        for name in PRELOAD:
            try:
                __import__(name)
            except Exception:  # an older or trimmed payload: preload what exists
                pass
    finally:
        sys.path.remove(zip_path)
    infos = {i.filename: (i.CRC, i.file_size) for i in zipfile.ZipFile(zip_path).infolist()}
    prefix = zip_path + os.sep
    members = {}
    for module in list(sys.modules.values()):
        path = getattr(module, "__file__", None) or ""
        if path.startswith(prefix):
            members[path[len(prefix):]] = infos.get(path[len(prefix):])
    return Warm(zip_path, members) if members else None


class PayloadFinder:
    """Finds ansible.* modules that are not preloaded in the zip the module run put first on sys.path.

    Preloaded packages keep their __path__ into the warm zip; without this finder a module
    missing from sys.modules could be loaded from there instead of from the current payload.
    """

    PREFIXES = ("ansible.", "ansible_collections.")

    @classmethod
    def find_spec(cls, fullname, path=None, target=None):
        import zipimport

        if not fullname.startswith(cls.PREFIXES):
            return None
        parts = fullname.split(".")[:-1]
        for entry in sys.path:
            if entry.endswith(".zip") and os.path.isfile(entry):
                spec = zipimport.zipimporter(os.path.join(entry, *parts)).find_spec(fullname)
                if spec is not None:
                    return spec
        return None


def run_warm(payload):
    import atexit
    import types

    sys.meta_path.insert(0, PayloadFinder)
    main = types.ModuleType("__main__")
    sys.modules["__main__"] = main
    sys.argv = [""]
    code = 0
    try:
        exec(compile(payload, "<stdin>", "exec"), main.__dict__)
    except SystemExit as exc:
        if exc.code is None:
            code = 0
        elif isinstance(exc.code, int):
            code = exc.code
        else:
            print(exc.code, file=sys.stderr)
            code = 1
    except BaseException:
        traceback.print_exc()
        code = 1
    try:
        atexit._run_exitfuncs()
    finally:
        for stream in (sys.stdout, sys.stderr):
            try:
                stream.flush()
            except Exception:
                pass
        os._exit(code & 0xFF)


def run_cold(payload):
    fd = os.memfd_create("kubenest-module")
    os.write(fd, payload)
    os.lseek(fd, 0, os.SEEK_SET)
    os.dup2(fd, 0)
    os.close(fd)
    os.execv(sys.executable, [sys.executable])


def child(request, run_sock, out_fd, err_fd, payload, warm, inherited):
    try:
        signal.set_wakeup_fd(-1)
        signal.signal(signal.SIGCHLD, signal.SIG_DFL)
        for fd in inherited:
            os.close(fd)
        os.setsid()
        null = os.open(os.devnull, os.O_RDONLY)
        os.dup2(null, 0)
        os.dup2(out_fd, 1)
        os.dup2(err_fd, 2)
        for fd in (null, out_fd, err_fd):
            os.close(fd)
        if payload is None:
            payload = read_payload(run_sock)
        os.chdir(request.get("cwd") or "/")
        os.environ.clear()
        os.environ.update(request.get("env") or {})
        use_warm = warm is not None and warm.compatible(payload)
        send_msg(run_sock, {"mode": "warm" if use_warm else "cold"})
        run_sock.close()
        if use_warm:
            run_warm(payload)
        run_cold(payload)
    except BaseException:
        try:
            traceback.print_exc()
        finally:
            os._exit(70)


def serve(ctl_fd, cache_dir):
    ctl = socket.socket(fileno=ctl_fd)
    wake_r, wake_w = os.pipe()
    os.set_blocking(wake_r, False)
    os.set_blocking(wake_w, False)
    signal.set_wakeup_fd(wake_w)
    signal.signal(signal.SIGCHLD, lambda *_args: None)
    warm, tried = None, False
    children = {}
    while True:
        try:
            readable, _w, _x = select.select([ctl, wake_r], [], [])
        except InterruptedError:
            continue
        if wake_r in readable:
            while True:
                try:
                    if not os.read(wake_r, 512):
                        break
                except BlockingIOError:
                    break
        while children:
            try:
                pid, status = os.waitpid(-1, os.WNOHANG)
            except ChildProcessError:
                break
            if pid == 0:
                break
            run_sock = children.pop(pid, None)
            if run_sock is not None:
                try:
                    send_msg(run_sock, {"status": status})
                except OSError:
                    pass
                run_sock.close()
        if ctl not in readable:
            continue
        msg, fds, _flags, _addr = socket.recv_fds(ctl, 65536, 3)
        if not msg:
            os._exit(0)  # the agent went away; running children finish on their own
        if len(fds) != 3:
            for fd in fds:
                os.close(fd)
            continue
        run_sock = socket.socket(fileno=fds[0])
        payload = None
        if not tried:
            tried = True
            payload = read_payload(run_sock)
            warm = warm_up(payload, cache_dir)
        pid = os.fork()
        if pid == 0:
            inherited = [ctl.fileno(), wake_r, wake_w] + [s.fileno() for s in children.values()]
            child(json.loads(msg), run_sock, fds[1], fds[2], payload, warm, inherited)
        os.close(fds[1])
        os.close(fds[2])
        children[pid] = run_sock
        send_msg(run_sock, {"pid": pid})


if __name__ == "__main__":
    serve(int(sys.argv[-2]), sys.argv[-1])
