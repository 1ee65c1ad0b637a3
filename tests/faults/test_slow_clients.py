"""Attack: idle and slow (trickling) sockets against the web front.

gunicorn alone stalls behind 50-200 of them (its threads read requests themselves). The shipped
compose front (deploy/nginx-compose.conf) runs here in a real Debian nginx before a real
gunicorn, with 200 idle sockets and 50 that send a header line a second. Proves: a normal
request through the front is still answered at once.
"""

from __future__ import annotations

import atexit
import contextlib
import shutil
import socket
import sys
import tempfile
import threading
import time
import urllib.request
from pathlib import Path

import pytest
from django.conf import settings

from simulations.rehearsal.procs import free_port
from tests.faults.conftest import Proc, child_env, wait_until

pytestmark = [pytest.mark.postgres, pytest.mark.django_db(transaction=True)]
NGINX = shutil.which("nginx") or "/usr/sbin/nginx"


def _get(url: str, timeout: float = 10) -> int:
    try:
        with urllib.request.urlopen(url, timeout=timeout) as response:
            return response.status
    except urllib.error.HTTPError as exc:
        return exc.code
    except OSError:
        return 0


def nginx_front(tmp_path: Path, listen: int, upstream: int) -> list[str]:
    """The shipped compose config, pointed at our gunicorn, wrapped in a minimal main file."""
    site = (settings.BASE_DIR / "deploy" / "nginx-compose.conf").read_text()
    site = site.replace("server web:8000;", f"server 127.0.0.1:{upstream};")
    site = site.replace("listen 8080;", f"listen 127.0.0.1:{listen};")
    # The micro-cache's folder, outside pytest's private (0700) folders: nginx's workers drop
    # root's rights and must reach it to write.
    cache = Path(tempfile.mkdtemp(prefix="arena-micro-cache-"))
    cache.chmod(0o777)
    atexit.register(shutil.rmtree, cache, ignore_errors=True)
    site = site.replace("/var/cache/arena-nginx", str(cache))
    (tmp_path / "site.conf").write_text(site)
    temp = {name: tmp_path / name for name in ("body", "proxy", "fastcgi", "uwsgi", "scgi")}
    for path in temp.values():
        path.mkdir()
    (tmp_path / "nginx.conf").write_text(
        f"worker_processes 1; pid {tmp_path / 'nginx.pid'}; error_log {tmp_path / 'error.log'};\n"
        "events { worker_connections 1024; }\n"
        f"http {{ access_log off; client_body_temp_path {temp['body']}; "
        f"proxy_temp_path {temp['proxy']}; fastcgi_temp_path {temp['fastcgi']}; "
        f"uwsgi_temp_path {temp['uwsgi']}; scgi_temp_path {temp['scgi']}; "
        f"include {tmp_path / 'site.conf'}; }}\n"
    )
    return [NGINX, "-c", str(tmp_path / "nginx.conf"), "-p", str(tmp_path), "-g", "daemon off;"]


def open_attack(port: int, idle: int, slow: int, until: float) -> list[socket.socket]:
    sockets = [socket.create_connection(("127.0.0.1", port)) for _ in range(idle)]
    trickling = []
    for _ in range(slow):
        s = socket.create_connection(("127.0.0.1", port))
        s.sendall(b"GET / HTTP/1.1\r\nHost: 127.0.0.1\r\n")
        trickling.append(s)

    def trickle() -> None:
        while time.monotonic() < until:
            for s in trickling:
                with contextlib.suppress(OSError):  # nginx may have cut it (header timeout)
                    s.sendall(b"X-Slow: 1\r\n")
            time.sleep(1)

    threading.Thread(target=trickle, daemon=True).start()
    return sockets + trickling


def test_the_shipped_front_keeps_answering_behind_idle_and_slow_sockets(tmp_path):
    assert Path(NGINX).exists(), "nginx is not installed: apt-get install nginx (.ci/run does)"
    gunicorn_port, front_port = free_port(), free_port()
    env = child_env(tmp_path, "memory://")
    web = Proc("gunicorn", [sys.executable, "-m", "gunicorn", "arena.wsgi:application",
                            "--bind", f"127.0.0.1:{gunicorn_port}", "--workers", "1",
                            "--threads", "4"], env, tmp_path)  # fmt: skip
    front = Proc("nginx", nginx_front(tmp_path, front_port, gunicorn_port), env, tmp_path)
    attack: list[socket.socket] = []
    try:
        url = f"http://127.0.0.1:{front_port}/methodology/"
        wait_until(lambda: _get(url) == 200, 90, "gunicorn behind nginx", procs=(web, front))
        attack = open_attack(front_port, idle=200, slow=50, until=time.monotonic() + 30)
        codes = [_get(url, timeout=5) for _ in range(5)]
        assert codes == [200] * 5, (codes, web.output()[-2000:])
    finally:
        for s in attack:
            s.close()
        front.stop()
        web.stop()
