"""Debian's dovecot-imapd on loopback with a throwaway mail directory, for the IMAP source's tests and benchmark.

``Dovecot(root)`` writes a configuration of its own under ``root`` (no system file is read), a self-signed
certificate, one user (``alice``, password ``PASSWORD``) whose mail is a Maildir, and starts ``dovecot -F`` on two
free ports: IMAPS (``tls_port``) and IMAP with STARTTLS (``port``). ``deliver`` drops a message file into
the Maildir (dovecot gives it a UID when a client next looks); ``expunge`` deletes one by its file.
``available()`` says why it cannot run here, or None.
"""

from __future__ import annotations

import os
import pwd
import shutil
import socket
import subprocess
import time
import uuid
from pathlib import Path
from typing import Any

from testkit.live_server import free_port

BINARY = "/usr/sbin/dovecot"
USER, PASSWORD = "alice", "Tr0ub4dor-imap-pw"


def available() -> str | None:
    """None when dovecot can run here, else why not."""
    if not Path(BINARY).exists():
        return "dovecot-imapd is not installed (apt-get install dovecot-imapd)"
    if shutil.which("openssl") is None:
        return "openssl is not installed (it makes the test certificate)"
    return None


class Dovecot:
    def __init__(self, root: Path) -> None:
        self.root = root
        self.port, self.tls_port = free_port(), free_port()
        self.maildir = root / "home" / USER / "Maildir"
        for sub in ("cur", "new", "tmp"):
            (self.maildir / sub).mkdir(parents=True, exist_ok=True)
        user = pwd.getpwuid(os.getuid())
        # Dovecot never serves mail as root: under root the mail belongs to its own user, whose processes must
        # reach the Maildir (so ``root`` must sit in a directory anyone can traverse, as tempfile's do).
        mail = pwd.getpwnam("dovecot") if os.getuid() == 0 else user
        root.chmod(0o755)
        for path in [root / "home", *(root / "home").rglob("*")]:
            os.chown(path, mail.pw_uid, mail.pw_gid)
        self._mail = mail
        subprocess.run(
            ["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "2", "-subj", "/CN=localhost"]
            + ["-keyout", str(root / "key.pem"), "-out", str(root / "cert.pem")],
            check=True,
            capture_output=True,
        )
        (root / "passwd").write_text(f"{USER}:{{PLAIN}}{PASSWORD}::::::\n")
        (root / "dovecot.conf").write_text(self._config(user.pw_name, mail.pw_uid, mail.pw_gid))
        self._process: subprocess.Popen[bytes] | None = None

    def _config(self, user: str, uid: int, gid: int) -> str:
        root = self.root
        return f"""
base_dir = {root}/run
state_dir = {root}/state
log_path = {root}/dovecot.log
listen = 127.0.0.1
protocols = imap
ssl = yes
ssl_cert = <{root}/cert.pem
ssl_key = <{root}/key.pem
disable_plaintext_auth = yes
auth_failure_delay = 0
first_valid_uid = 0
mail_location = maildir:{root}/home/%u/Maildir
service imap-login {{
  inet_listener imap {{
    address = 127.0.0.1
    port = {self.port}
  }}
  inet_listener imaps {{
    address = 127.0.0.1
    port = {self.tls_port}
    ssl = yes
  }}
}}
service anvil {{
  chroot =
}}
service imap-login {{
  chroot =
}}
service auth {{
  user = {user}
}}
service auth-worker {{
  user = {user}
}}
passdb {{
  driver = passwd-file
  args = {root}/passwd
}}
userdb {{
  driver = static
  args = uid={uid} gid={gid} home={root}/home/%u
}}
"""

    def __enter__(self) -> Dovecot:
        self._process = subprocess.Popen(
            [BINARY, "-F", "-c", str(self.root / "dovecot.conf")], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE
        )
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline:
            try:
                socket.create_connection(("127.0.0.1", self.tls_port), timeout=0.2).close()
                return self
            except OSError:
                if self._process.poll() is not None:
                    break
                time.sleep(0.05)
        self.__exit__()
        log = (self.root / "dovecot.log").read_text() if (self.root / "dovecot.log").exists() else ""
        raise RuntimeError(f"dovecot did not start: {log[-2000:]}")

    def __exit__(self, *exc: Any) -> None:
        if self._process is not None and self._process.poll() is None:
            self._process.terminate()
            try:
                self._process.wait(5)
            except subprocess.TimeoutExpired:
                self._process.kill()

    def deliver(self, message: bytes, folder: str = "") -> str:
        """Drop a message into INBOX (or ``folder``), as a delivery agent would; its file's name."""
        base = self.maildir if not folder else self.maildir / f".{folder}"
        for sub in ("cur", "new", "tmp"):
            (base / sub).mkdir(parents=True, exist_ok=True)
        name = f"{time.time():.0f}.{uuid.uuid4().hex}.localhost"
        for sub in ("cur", "new", "tmp"):
            os.chown(base / sub, self._mail.pw_uid, self._mail.pw_gid)
        os.chown(base, self._mail.pw_uid, self._mail.pw_gid)
        (base / "new" / name).write_bytes(message)
        return name

    def expunge(self, name: str, folder: str = "") -> None:
        base = self.maildir if not folder else self.maildir / f".{folder}"
        for path in [*(base / "new").glob(f"{name}*"), *(base / "cur").glob(f"{name}*")]:
            path.unlink()


def message(
    subject: str, body: str, sender: str = "notices@example.org", date: str = "Mon, 2 Feb 2026 10:00:00 +0000"
) -> bytes:
    return (
        f"From: {sender}\r\nTo: {USER}@example.org\r\nSubject: {subject}\r\nDate: {date}\r\n"
        f"Message-ID: <{uuid.uuid4().hex}@example.org>\r\nContent-Type: text/plain; charset=utf-8\r\n\r\n{body}\r\n"
    ).encode()
