"""The demo server in a child process of its own: what ``evaluate`` starts when a contract
names it (demo/autostart.py). In the command's own process the server's thread competes
with the runs for the interpreter lock (and its start-up, aiohttp's server side included,
is the command's); a child starts while the command imports Dagster and answers from the
second core.

The listening socket is made here, so the URL is known at once and a request sent before the
child is serving waits in the socket's backlog; the child inherits it and never binds. The
child reads its stdin until end of file and then exits: when this process closes the pipe,
or dies (kill -9 included), the server goes too. Only the standard library (and
core/processes.py) is imported here.
"""

from __future__ import annotations

import socket
import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager

from decguard_pipeline.core.processes import end_child

BACKLOG = 128  # connections waiting for the child (aiohttp's own default)


@contextmanager
def serve_demo_process(*, delay_ms: float = 0.0) -> Iterator[str]:
    """Serve the demo from a child process on a free loopback port while the block runs;
    yields its URL (``http://127.0.0.1:<port>``)."""
    listener = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    try:
        listener.bind(("127.0.0.1", 0))
        listener.listen(BACKLOG)
        port = listener.getsockname()[1]
        fd = listener.fileno()
        command = [sys.executable, "-m", "decguard_pipeline.demo.llm_server", "--listen-fd",
                   str(fd), "--delay-ms", str(delay_ms)]  # fmt: skip
        # its own session: a Ctrl-C in the terminal reaches the command, which stops it
        child = subprocess.Popen(command, pass_fds=(fd,), stdin=subprocess.PIPE,
                                 stdout=subprocess.DEVNULL, start_new_session=True)  # fmt: skip
    finally:
        listener.close()  # the child's copy is the only one: if it dies, requests are refused
    try:
        yield f"http://127.0.0.1:{port}"
    finally:
        end_child(child)  # end of file on its stdin: the child exits
