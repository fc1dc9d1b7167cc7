"""Run a top-level script in a fresh process that starts with pandas and numpy already imported.

Most tests run a script the way a user does: its own process, its argv, its working folder, its
exit code, its stdout and stderr. Each such run used to start a new interpreter and import
pandas and numpy again (~0.3 s of CPU, most of a small run). Here one helper process per test
worker imports them once and, for every run, forks a child: the child *is* a new process (own
memory, own file descriptors, own exit status, killed on timeout like any other), and nothing
of one run can leak into the next, since each child starts from the same pristine helper. The
helper is single-threaded, so forking it is safe (forking the multi-threaded pytest worker
would not be). Only pandas and numpy are pre-imported: the scripts' own import order (e.g.
``lazy_imports`` before statsmodels) is untouched.

Where fork is unavailable, or a run happens while another is in progress on the same worker
(a test running scripts from threads), ``run`` returns None and the caller starts a plain
interpreter instead.
"""

from __future__ import annotations

import json
import os
import select
import signal
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

HELPER = r'''
import json, os, runpy, sys
import numpy, pandas  # the point of the helper: imported once, inherited by every child
requests_in, replies = sys.stdin.buffer, sys.stdout.buffer
sys.stdout = open(os.devnull, "w")  # the helper itself never prints on the reply pipe
for line in requests_in:
    job = json.loads(line)
    pid = os.fork()
    if pid == 0:  # the child: become the script's process
        os.setpgid(0, 0)
        for fd, path in ((1, job["stdout"]), (2, job["stderr"])):
            f = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
            os.dup2(f, fd)
            os.close(f)
        os.close(0)
        os.open(os.devnull, os.O_RDONLY)
        sys.stdout, sys.stderr = open(1, "w", closefd=False), open(2, "w", closefd=False)
        os.chdir(job["cwd"])
        sys.argv = [job["script"], *job["args"]]
        sys.path[0] = os.path.dirname(job["script"])
        code = 0
        try:
            runpy.run_path(job["script"], run_name="__main__")
        except SystemExit as e:
            code = e.code if isinstance(e.code, int) else (0 if e.code is None else 1)
            if not isinstance(e.code, (int, type(None))):
                print(e.code, file=sys.stderr)
        except BaseException:
            import traceback
            traceback.print_exc()
            code = 1
        import atexit, threading
        for t in threading.enumerate():  # as interpreter shutdown does: wait for non-daemon threads
            if t is not threading.main_thread() and not t.daemon:
                t.join()
        atexit._run_exitfuncs()
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(code)
    replies.write(json.dumps({"pid": pid}).encode() + b"\n")
    replies.flush()
    _, status = os.waitpid(pid, 0)
    replies.write(json.dumps({"code": os.waitstatus_to_exitcode(status)}).encode() + b"\n")
    replies.flush()
'''


class Zygote:
    def __init__(self):
        self.proc: subprocess.Popen | None = None
        self.busy = threading.Lock()

    def _start(self) -> subprocess.Popen:
        if self.proc is None or self.proc.poll() is not None:
            self.proc = subprocess.Popen([sys.executable, "-c", HELPER], stdin=subprocess.PIPE, stdout=subprocess.PIPE)
        return self.proc

    def _reply(self, deadline: float | None) -> dict | None:
        out = self.proc.stdout
        wait = None if deadline is None else max(0.0, deadline - time.monotonic())
        ready, _, _ = select.select([out], [], [], wait)
        if not ready:
            return None
        line = out.readline()
        if not line:
            raise RuntimeError("the test helper process died")
        return json.loads(line)

    def run(self, script: Path, args: list[str], cwd: Path, timeout: float) -> subprocess.CompletedProcess | None:
        if not hasattr(os, "fork") or not self.busy.acquire(blocking=False):
            return None
        try:
            proc = self._start()
            with tempfile.TemporaryDirectory() as tmp:
                out, err = Path(tmp) / "stdout", Path(tmp) / "stderr"
                job = {"script": str(script), "args": args, "cwd": str(cwd), "stdout": str(out), "stderr": str(err)}
                proc.stdin.write(json.dumps(job).encode() + b"\n")
                proc.stdin.flush()
                pid = self._reply(None)["pid"]
                reply = self._reply(time.monotonic() + timeout)
                if reply is None:  # past the timeout: kill the run's process group, like subprocess.run's timeout
                    try:
                        os.killpg(pid, signal.SIGKILL)
                    except ProcessLookupError:
                        pass
                    self._reply(None)
                    raise subprocess.TimeoutExpired([script, *args], timeout)
                return subprocess.CompletedProcess([sys.executable, str(script), *args], reply["code"],
                                                   out.read_text(errors="replace"), err.read_text(errors="replace"))
        finally:
            self.busy.release()


ZYGOTE = Zygote()
