"""docs/deploy.md's single-host path and docs/rehearsal.md, run as written on a fresh Debian root.

Every ```sh block of the single-host section runs in order in one shell, then the rehearsal's,
in a throwaway root (tests/arena/docsandbox.py: its own /etc, /srv, /run, loopback network,
PostgreSQL cluster, Redis and nginx), as root with `sudo`. Only two things stand in: systemd
(`systemctl` starts a unit's ExecStart as its User= with its EnvironmentFile=, and
`systemd-analyze verify` checks the units as installed) and the certificate (a self-signed pair
where certbot would put it, so `nginx -t` and a request through nginx over TLS run). The
documented `<repo>` is a snapshot of this checkout, and the rehearsal's own run is asked for its
`--help` after every documented option (tests/rehearsal/test_rehearse_run.py runs a rehearsal).
"""

from __future__ import annotations

import json
import os
import re
import secrets
import shutil
import socket
import subprocess
import sys
import tempfile
import threading
from pathlib import Path

import pytest

from tests.arena import docsandbox

ROOT = Path(__file__).resolve().parents[2]
SANDBOX = Path(__file__).with_name("docsandbox.py")
SH = re.compile(r"^```sh\n(.*?)^```", re.S | re.M)
FENCE = re.compile(r"^```(?:sh)?\n(.*?)^```", re.S | re.M)

# In .ci/run's PostgreSQL + Redis pass, once (the sandbox brings its own cluster and Redis).
pytestmark = [pytest.mark.slow, pytest.mark.postgres, pytest.mark.timeout(900)]


def _section(text: str, title: str) -> str:
    start = text.index(f"\n## {title}\n")
    end = text.find("\n## ", start + 1)
    return text[start : end if end != -1 else None]


def _serve_connect_proxy(path: str) -> socket.socket:
    """A CONNECT-only HTTPS proxy on a unix socket: the sandbox's way out for pip and uv."""
    server = socket.socket(socket.AF_UNIX)
    server.bind(path)
    server.listen(32)

    def handle(conn: socket.socket) -> None:
        head = b""
        while b"\r\n\r\n" not in head:
            data = conn.recv(4096)
            if not data:
                conn.close()
                return
            head += data
        line = head.split(b"\r\n", 1)[0].decode()
        method, target, _ = line.split(" ", 2)
        host, _, port = target.rpartition(":")
        if method != "CONNECT":
            conn.sendall(b"HTTP/1.1 405 CONNECT only\r\n\r\n")
            conn.close()
            return
        try:
            out = socket.create_connection((host, int(port)), timeout=30)
            out.settimeout(None)
        except OSError:
            conn.sendall(b"HTTP/1.1 502 Bad Gateway\r\n\r\n")
            conn.close()
            return
        conn.sendall(b"HTTP/1.1 200 Connection established\r\n\r\n")
        threading.Thread(target=docsandbox.pipe, args=(conn, out), daemon=True).start()
        docsandbox.pipe(out, conn)

    def serve() -> None:
        while True:
            try:
                conn, _ = server.accept()
            except OSError:
                return
            threading.Thread(target=handle, args=(conn,), daemon=True).start()

    threading.Thread(target=serve, daemon=True).start()
    return server


def _blocks(dev: Path) -> list[dict]:
    deploy = _section((ROOT / "docs" / "deploy.md").read_text(), "Single host")
    rehearsal = (ROOT / "docs" / "rehearsal.md").read_text()
    steps = SH.findall(deploy)
    # Every block of the path is marked, so none can be left out of the run.
    assert steps == FENCE.findall(deploy) and len(steps) == 6, steps
    install, units, check, proxy, trial, live = steps
    assert install.rstrip().endswith("/etc/arena/env")  # filled next, by hand, as the doc says
    assert "<repo>" in install
    hooks = [("install", None, "fill-env"), ("units", None, "units-up"),
             ("local check", None, "local-check"), ("nginx", "certificate", "proxied"),
             ("trial", None, "trial-up"), ("live", None, "live-again")]  # fmt: skip
    texts = [install.replace("<repo>", "git://127.0.0.1/arena.git"), units, check, proxy, trial, live]
    blocks = [{"name": n, "before": b, "after": a, "text": t}
              for (n, b, a), t in zip(hooks, texts, strict=True)]  # fmt: skip
    (run,) = SH.findall(rehearsal)
    assert "./run arena rehearse --weeks" in run
    blocks.append({"name": "rehearsal", "cd": str(dev), "text": run.rstrip() + " --help"})
    return blocks


def _env(password: str) -> str:
    text = (ROOT / "docs" / "deploy.md").read_text()
    block = next(b for b in FENCE.findall(_section(text, "Production environment"))
                 if b.startswith("DEBUG=0"))  # fmt: skip
    secret = secrets.token_urlsafe(50)
    filled = re.sub(r"^SECRET_KEY=.*$", f"SECRET_KEY={secret}", block, flags=re.M)
    return filled.replace("arena:change-me@", f"arena:{password}@")


def test_the_single_host_path_and_the_rehearsal_run_as_written():
    assert os.geteuid() == 0, "a throwaway Debian root needs root: namespaces, mounts, useradd"
    for tool in ("unshare", "setpriv", "ip", "git", "dpkg-query", "systemd-analyze", "nginx",
                 "redis-server", "openssl", str(docsandbox.PGBIN / "initdb")):  # fmt: skip
        assert shutil.which(tool), f"{tool} is missing (.ci/run installs it)"
    work = Path(tempfile.mkdtemp(prefix="arena-doctest-", dir="/tmp"))
    work.chmod(0o755)
    proxy = None
    try:
        repo, dev = work / "arena.git", work / "dev"
        subprocess.run(["git", "clone", "-q", "--bare", str(ROOT), str(repo)], check=True)
        # The working tree as it stands (a commit object of it), as the clone's default branch.
        snap = subprocess.run(["git", "stash", "create"], cwd=ROOT, capture_output=True,
                              text=True, check=True).stdout.strip() or "HEAD"  # fmt: skip
        subprocess.run(["git", "push", "-q", "-f", str(repo), f"{snap}:refs/heads/doctest"],
                       cwd=ROOT, check=True)  # fmt: skip
        subprocess.run(["git", "symbolic-ref", "HEAD", "refs/heads/doctest"], cwd=repo,
                       check=True)  # fmt: skip
        subprocess.run(["git", "clone", "-q", str(repo), str(dev)], check=True)
        pg_password, admin_password = secrets.token_hex(12), secrets.token_urlsafe(16)
        spec = {
            "blocks": _blocks(dev),
            "env": _env(pg_password),
            "answers": [
                (r"Enter password for new role: $", pg_password),
                (r"Enter it again: $", pg_password),
                (r"Username \(leave blank to use '[^']*'\): $", "admin"),
                (r"Email address: $", "admin@example.org"),
                (r"Password: $", admin_password),
                (r"Password \(again\): $", admin_password),
            ],
            "seconds": 780,
        }
        (work / "blocks.json").write_text(json.dumps(spec))
        proxy = _serve_connect_proxy(str(work / "proxy.sock"))
        env = {k: v for k, v in os.environ.items() if k in ("SSL_CERT_FILE", "TERM")}
        env.update(PATH=os.environ["PATH"], https_proxy="http://127.0.0.1:3128",
                   HTTPS_PROXY="http://127.0.0.1:3128", no_proxy="127.0.0.1,localhost",
                   NO_PROXY="127.0.0.1,localhost")  # fmt: skip
        done = subprocess.run(
            ["unshare", "--mount", "--net", "--pid", "--fork", "--mount-proc", "--",
             sys.executable, str(SANDBOX), "main", str(work)],
            env=env, capture_output=True, text=True, timeout=840, check=False,
        )  # fmt: skip
        path = work / "transcript.txt"
        transcript = path.read_text(errors="replace") if path.exists() else "(no transcript)"
        report = f"{transcript[-12000:]}\n--- sandbox\n{done.stdout[-6000:]}\n{done.stderr[-3000:]}"
        assert done.returncode == 0, report
        assert "== every block ran" in transcript, report
        # The documented local check printed what the doc says it prints.
        local = transcript.split("== block local check", 1)[1].split("docsandbox:", 1)[0]
        assert re.search(r'^\{"status": "', local, re.M), report
        assert re.search(r"^200\r?$", local, re.M), report
        calls = (work / "systemctl.calls").read_text().splitlines()
        assert "enable --now arena-web arena-worker arena-beat" in calls
        assert "usage: arena rehearse" in transcript.split("== block rehearsal", 1)[1], report
    finally:
        if proxy is not None:
            proxy.close()
        shutil.rmtree(work, ignore_errors=True)
