"""Where multiprocessing puts the Unix sockets that hand tensors between the judge and the kernel
process (harness.run.kernel_process): a path that fits.

torch.multiprocessing passes a CPU tensor's shared memory as a file descriptor, through a Unix
socket that multiprocessing creates in its temp dir (under $TMPDIR). A socket's path holds at most
107 bytes: under a longer $TMPDIR (a deep CI workspace, pytest's tmp_path) every send fails with
"AF_UNIX path too long", and a kernel that never received its inputs would look hung.
"""

from __future__ import annotations

import os

_SUN_PATH_MAX = 107  # Linux's sockaddr_un.sun_path less its final NUL
_LISTENER_TAIL = len("/pymp-12345678/listener-12345678")  # what multiprocessing adds to the temp dir


def fit_socket_dir() -> None:
    """Where $TMPDIR is too long for a socket path, multiprocessing's temp dir goes under the
    first writable short system directory instead (what Python 3.13 does by itself). Called in
    the judge and in the kernel process before any tensor travels."""
    import shutil
    import tempfile
    from multiprocessing import process, util

    config = process.current_process()._config  # where multiprocessing.util.get_temp_dir keeps it
    if config.get("tempdir") is not None or len(tempfile.gettempdir()) + _LISTENER_TAIL <= _SUN_PATH_MAX:
        return
    for base in ("/tmp", "/var/tmp", "/dev/shm"):
        if os.path.isdir(base) and os.access(base, os.W_OK | os.X_OK):
            tempdir = tempfile.mkdtemp(prefix="pymp-", dir=base)
            util.Finalize(None, shutil.rmtree, args=(tempdir,), kwargs={"ignore_errors": True}, exitpriority=-100)
            config["tempdir"] = tempdir
            return
