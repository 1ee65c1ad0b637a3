"""A throwaway Debian root for running docs/deploy.md and docs/rehearsal.md as written.

`python docsandbox.py main DIR` runs as pid 1 of `unshare --mount --net --pid --fork
--mount-proc` (tests/arena/test_deploy_docs_run.py starts it). In that namespace:

- /etc, /root and /usr/local are overlays whose writes land in DIR (the service user the docs
  add exists only there), /srv is DIR/srv, /run and /var/log are empty tmpfs;
- the network is a loopback of its own, so the documented ports (PostgreSQL 5432, Redis 6379 and
  6380, gunicorn 8000, nginx 80/443, the stand-ins) are free and nobody else's; HTTPS for pip and
  uv goes out through a proxy on 127.0.0.1:3128 that forwards to a unix socket the test serves;
- what a fresh Debian host with the packages installed has running: a PostgreSQL cluster
  (peer auth on the socket, passwords over TCP, as Debian sets it up), the distribution's Redis
  from /etc/redis/redis.conf, nginx with its default site;
- /usr/local/sbin holds `sudo` (Debian's env_reset: HOME, PATH and the user of the target) and
  `systemctl` (records every call; starts a unit's ExecStart as its User= with its
  EnvironmentFile=, and the two Redis units from their config files).

The blocks (DIR/blocks.json) run in one `bash -euo pipefail` on a pty that answers the
password prompts, with the test's checks (`hook NAME`) between them. When pid 1 exits the
kernel ends every process of the namespace.
"""

from __future__ import annotations

import contextlib
import json
import os
import pty
import pwd
import re
import select
import shlex
import shutil
import signal
import socket
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.request
from pathlib import Path

SECURE_PATH = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"
KEEP = ("TERM", "https_proxy", "HTTPS_PROXY", "no_proxy", "NO_PROXY", "SSL_CERT_FILE",
        "DOCSANDBOX")  # fmt: skip  # env_keep of the sandbox host's sudoers: its proxy and CA
PROXY_PORT = 3128
# Debian's PostgreSQL server, whichever major version is installed.
PGBIN = max(Path("/usr/lib/postgresql").glob("*/bin/initdb"), default=Path("/missing/initdb")).parent


def _dir() -> Path:
    return Path(os.environ["DOCSANDBOX"])


def _say(*words: object) -> None:
    print("docsandbox:", *words, flush=True)


def _deadline(seconds: float, what: str, probe) -> object:
    end = time.monotonic() + seconds
    while True:
        got = probe()
        if got:
            return got
        if time.monotonic() > end:
            raise SystemExit(f"docsandbox: gave up after {seconds:.0f} s waiting for {what}")
        time.sleep(0.2)


def _as(user: str, cmd: list[str]) -> list[str]:
    entry = pwd.getpwnam(user)
    return ["setpriv", f"--reuid={entry.pw_uid}", f"--regid={entry.pw_gid}", "--init-groups",
            "--", *cmd]  # fmt: skip


# -- sudo -------------------------------------------------------------------------------------


def sudo(args: list[str]) -> None:
    user = "root"
    while args and args[0].startswith("-"):
        opt = args.pop(0)
        if opt == "-u":
            user = args.pop(0)
        elif opt.startswith("-u"):
            user = opt[2:]
        else:
            raise SystemExit(f"sudo (sandbox): option {opt} not supported")
    if not args:
        raise SystemExit("usage: sudo [-u USER] COMMAND ...")
    entry = pwd.getpwnam(user)
    env = {k: v for k, v in os.environ.items() if k in KEEP}
    env.update(PATH=SECURE_PATH, HOME=entry.pw_dir, USER=user, LOGNAME=user, SHELL=entry.pw_shell,
               SUDO_USER="root")  # fmt: skip
    cmd = args[0] if "/" in args[0] else shutil.which(args[0], path=SECURE_PATH)
    if cmd is None:
        raise SystemExit(f"sudo: {args[0]}: command not found")
    argv = [cmd, *args[1:]]
    if user != "root":
        argv = _as(user, argv)
        argv[0] = shutil.which("setpriv") or "setpriv"
    os.execve(argv[0], argv, env)


# -- systemctl --------------------------------------------------------------------------------


def _units() -> Path:
    path = _dir() / "units"
    path.mkdir(exist_ok=True)
    return path


def _alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except (FileNotFoundError, IndexError):
        return False
    return state != "Z"


def _pid(unit: str) -> int | None:
    path = _units() / f"{unit}.pid"
    if not path.exists():
        return None
    pid = int(path.read_text())
    return pid if _alive(pid) else None


def _env_file(path: str) -> dict[str, str]:
    """systemd's EnvironmentFile=: KEY=VALUE lines, # and ; comments on lines of their own."""
    env = {}
    for line in Path(path).read_text().splitlines():
        line = line.strip()
        if not line or line[0] in "#;":
            continue
        key, _, value = line.partition("=")
        if len(value) >= 2 and value[0] == value[-1] and value[0] in "'\"":
            value = value[1:-1]
        env[key.strip()] = value
    return env


def _redis_argv(unit: str) -> list[str]:
    conf = "/etc/redis/redis.conf" if unit == "redis-server" else "/etc/redis/redis-cache.conf"
    data = _dir() / "redis" / unit
    data.mkdir(parents=True, exist_ok=True)
    shutil.chown(data, "redis", "redis")
    # The distribution's config as installed; only where it writes moves into the sandbox.
    return _as("redis", ["redis-server", conf, "--daemonize", "no", "--dir", str(data),
                         "--pidfile", str(data / "pid"), "--logfile", "", "--save", ""])  # fmt: skip


def _start(unit: str) -> None:
    if _pid(unit):
        return
    log = open(_units() / f"{unit}.log", "ab")  # noqa: SIM115 - the child keeps it
    if unit in ("redis-server", "redis-server@cache"):
        argv, cwd, env = _redis_argv(unit), "/", {"PATH": SECURE_PATH}
    else:
        path = Path(f"/etc/systemd/system/{unit}.service")
        if not path.exists():
            raise SystemExit(f"Failed to start {unit}.service: Unit {unit}.service not found.")
        keys = dict(
            re.findall(r"^(User|WorkingDirectory|EnvironmentFile|ExecStart)=(.*)$",
                       path.read_text(), re.M)  # fmt: skip
        )
        env = {"PATH": SECURE_PATH, **_env_file(keys["EnvironmentFile"])}
        argv, cwd = _as(keys["User"], shlex.split(keys["ExecStart"])), keys["WorkingDirectory"]
    proc = subprocess.Popen(argv, cwd=cwd, env=env, stdin=subprocess.DEVNULL, stdout=log,
                            stderr=log, start_new_session=True)  # fmt: skip
    (_units() / f"{unit}.pid").write_text(str(proc.pid))


def _stop(unit: str) -> None:
    pid = _pid(unit)
    if pid is None:
        return
    os.killpg(pid, signal.SIGTERM)
    end = time.monotonic() + 30
    while _alive(pid) and time.monotonic() < end:
        time.sleep(0.1)
    if _alive(pid):
        os.killpg(pid, signal.SIGKILL)


def systemctl(args: list[str]) -> None:
    with open(_dir() / "systemctl.calls", "a") as calls:
        calls.write(shlex.join(args) + "\n")
    verb, units = args[0], [a.removesuffix(".service") for a in args[1:] if a != "--now"]
    if verb == "daemon-reload":
        return
    if verb in ("start", "enable", "restart", "stop"):
        for unit in units:
            if verb in ("restart", "stop"):
                _stop(unit)
            if verb in ("start", "restart") or (verb == "enable" and "--now" in args):
                _start(unit)
        return
    raise SystemExit(f"systemctl (sandbox): {verb} not supported")


# -- apt-get ----------------------------------------------------------------------------------


def apt_get(args: list[str]) -> None:
    """`apt-get install -y PKG...` is satisfied by what the host has installed: the sandbox
    shares the host's /usr and /var/lib/dpkg, so a real apt-get would change the host."""
    with open(_dir() / "apt-get.calls", "a") as calls:
        calls.write(shlex.join(args) + "\n")
    if args[:1] != ["install"] or any(a.startswith("-") and a != "-y" for a in args[1:]):
        raise SystemExit(f"apt-get (sandbox): only install -y PKG... is supported: {args}")
    missing = []
    for name in (a for a in args[1:] if a != "-y"):
        done = subprocess.run(["dpkg-query", "-W", "-f", "${Status}", name],
                              capture_output=True, text=True, check=False)  # fmt: skip
        if done.stdout != "install ok installed":
            missing.append(name)
    if missing:
        raise SystemExit(f"E: not installed on the host, the sandbox cannot install: {missing}")
    print("apt-get (sandbox): all installed:", " ".join(a for a in args[1:] if a != "-y"))


# -- hooks: the test's checks between the documented blocks ----------------------------------


def _get(url: str, headers: dict[str, str] | None = None) -> tuple[int, str]:
    request = urllib.request.Request(url, headers=headers or {})
    opener = urllib.request.build_opener(urllib.request.ProxyHandler({}), _NoRedirect)
    try:
        with opener.open(request, timeout=5) as answer:
            return answer.status, answer.read().decode(errors="replace")
    except urllib.error.HTTPError as answer:
        return answer.code, answer.read().decode(errors="replace")


class _NoRedirect(urllib.request.HTTPRedirectHandler):
    def redirect_request(self, *args, **kwargs):  # noqa: ANN002, ANN003
        return None


def _answers(url: str) -> bool:
    try:
        _get(url)
    except OSError:
        return False
    return True


def _listening(port: int) -> bool:
    try:
        socket.create_connection(("127.0.0.1", port), timeout=1).close()
    except OSError:
        return False
    return True


def _check(ok: bool, what: str) -> None:
    if not ok:
        raise SystemExit(f"docsandbox: FAILED: {what}")
    _say("ok:", what)


def _owner(path: str) -> tuple[str, int]:
    st = os.stat(path)
    return pwd.getpwuid(st.st_uid).pw_name, st.st_mode & 0o777


def _units_running(units: list[str]) -> None:
    for unit in units:
        pid = _pid(unit)
        log = (_units() / f"{unit}.log").read_text(errors="replace")[-3000:]
        _check(pid is not None, f"{unit} is running\n{'' if pid else log}")


def hook(name: str) -> None:
    spec = json.loads((_dir() / "blocks.json").read_text())
    if name == "fill-env":
        _check(_owner("/etc/arena") == ("arena", 0o700), "/etc/arena: arena's, mode 700")
        _check(_owner("/etc/arena/env") == ("arena", 0o600), "/etc/arena/env: arena's, mode 600")
        Path("/etc/arena/env").write_text(spec["env"])  # as an operator fills it: owner kept
        _check(_owner("/srv/arena") == ("arena", 0o755), "/srv/arena is arena's")
        _check(_owner("/srv/arena/.venv")[0] == "arena", "the .venv is arena's")
        _check(os.access("/srv/arena/.tools/bin/uv", os.X_OK), "uv in arena's own venv")
        _check(shutil.which("uv", path=SECURE_PATH) is None, "no uv installed system-wide")
        _check(pwd.getpwnam("arena").pw_shell == "/usr/sbin/nologin", "arena has no login shell")
    elif name == "units-up":
        units = [f"/etc/systemd/system/arena-{u}.service" for u in ("web", "worker", "beat")]
        done = subprocess.run(["systemd-analyze", "verify", *units], capture_output=True,
                              text=True, check=False)  # fmt: skip
        _check(done.returncode == 0 and not done.stderr.strip(),
               f"systemd-analyze verify of the installed units\n{done.stderr}")  # fmt: skip
        _deadline(180, "gunicorn on 127.0.0.1:8000", lambda: _answers("http://127.0.0.1:8000/"))
        _units_running(["arena-web", "arena-worker", "arena-beat", "redis-server@cache"])
        done = subprocess.run(_as("postgres", ["psql", "-tA", "arena", "-c", "SELECT username, "
                                               "is_superuser FROM auth_user"]),
                              capture_output=True, text=True, check=False)  # fmt: skip
        _check(done.stdout.split() == ["admin|t"], f"createsuperuser made admin: {done.stdout}")
        done = subprocess.run(["redis-cli", "-p", "6380", "config", "get", "maxmemory-policy"],
                              capture_output=True, text=True, check=False)  # fmt: skip
        _check("allkeys-lru" in done.stdout, "the cache's Redis on 6380 runs its config")
        done = subprocess.run(["redis-cli", "config", "get", "maxmemory-policy"],
                              capture_output=True, text=True, check=False)  # fmt: skip
        _check("noeviction" in done.stdout, "the broker's Redis restarted with its limits")
    elif name == "local-check":
        status, _ = _get("http://127.0.0.1:8000/", {"Host": "arena.example.org",
                                                   "X-Forwarded-Proto": "https"})  # fmt: skip
        _check(status == 200, f"/ with the proxy's headers: {status}")
        _check(_get("http://127.0.0.1:8000/")[0] == 400, "/ without them: 400")
    elif name == "certificate":
        live = Path("/etc/letsencrypt/live/arena.example.org")
        live.mkdir(parents=True)
        subprocess.run(["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "2",
                        "-subj", "/CN=arena.example.org", "-keyout", str(live / "privkey.pem"),
                        "-out", str(live / "fullchain.pem")], check=True,
                       capture_output=True)  # fmt: skip
        _say("a self-signed pair where certbot puts arena.example.org's")
    elif name == "proxied":
        done = subprocess.run(["curl", "-ksS", "--noproxy", "*", "-o", "/dev/null", "-w",
                               "%{http_code}", "--resolve", "arena.example.org:443:127.0.0.1",
                               "https://arena.example.org/"], capture_output=True, text=True,
                              check=False)  # fmt: skip
        _check(done.stdout == "200", f"/ through nginx over TLS: {done.stdout} {done.stderr}")
    elif name == "trial-up":
        env = _env_file("/etc/arena/env")
        _check(env["DATABASE_URL"].endswith("/arena_trial"), "the trial's database in the env")
        _check(env["ARENA_CLOCK_RATE"] == "168", "the trial's clock in the env")
        _deadline(120, "the Polymarket stand-in on 8101",
                  lambda: _answers("http://127.0.0.1:8101/"))  # fmt: skip
        _deadline(60, "the simulated models on 8765", lambda: _answers("http://127.0.0.1:8765/"))
        _deadline(180, "gunicorn on the trial", lambda: _answers("http://127.0.0.1:8000/"))
        _units_running(["arena-web", "arena-worker", "arena-beat"])
    elif name == "live-again":
        env = _env_file("/etc/arena/env")
        _check(env["DATABASE_URL"].endswith("/arena") and "ARENA_CLOCK_RATE" not in env,
               "the live env is back")  # fmt: skip
        _check(_owner("/etc/arena/env") == ("arena", 0o600), "and arena's, mode 600")
        _check(not _answers("http://127.0.0.1:8101/"), "the stand-ins stopped")
        _deadline(180, "gunicorn, live", lambda: _answers("http://127.0.0.1:8000/"))
        _units_running(["arena-web", "arena-worker", "arena-beat"])
    else:
        raise SystemExit(f"docsandbox: no hook {name}")


# -- the namespace's pid 1 --------------------------------------------------------------------


def _mount(*args: str) -> None:
    subprocess.run(["mount", *args], check=True)


def _overlay(target: str, work: Path) -> None:
    name = target.strip("/").replace("/", "_")
    upper, scratch = work / "up" / name, work / "work" / name
    upper.mkdir(parents=True)
    scratch.mkdir(parents=True)
    _mount("-t", "overlay", "overlay", "-o",
           f"lowerdir={target},upperdir={upper},workdir={scratch}", target)  # fmt: skip


def pipe(src: socket.socket, dst: socket.socket) -> None:
    """Copy src to dst until either side closes, then close both ways."""
    try:
        while data := src.recv(65536):
            dst.sendall(data)
    except OSError:
        pass
    finally:
        for end in (src, dst):
            with contextlib.suppress(OSError):
                end.shutdown(socket.SHUT_RDWR)


def _forward(listener: socket.socket, unix_path: str) -> None:
    """127.0.0.1:3128 in here -> the test's CONNECT proxy on a unix socket out there."""
    while True:
        conn, _ = listener.accept()
        out = socket.socket(socket.AF_UNIX)
        out.connect(unix_path)
        threading.Thread(target=pipe, args=(conn, out), daemon=True).start()
        threading.Thread(target=pipe, args=(out, conn), daemon=True).start()


def _prepare(work: Path) -> None:
    subprocess.run(["ip", "link", "set", "lo", "up"], check=True)
    for target in ("/etc", "/root", "/usr/local"):
        _overlay(target, work)
    (work / "srv").mkdir(mode=0o755)
    _mount("--bind", str(work / "srv"), "/srv")
    for target in ("/run", "/var/log"):
        _mount("-t", "tmpfs", "-o", "mode=755", "tmpfs", target)
    for path, owner, mode in (("/run/postgresql", "postgres", 0o2775), ("/run/redis", "redis",
                              0o755), ("/run/lock", "root", 0o1777), ("/var/log/nginx", "root",
                              0o755), ("/var/log/redis", "redis", 0o750),
                              ("/var/log/postgresql", "postgres", 0o755)):  # fmt: skip
        os.makedirs(path)
        shutil.chown(path, owner, owner if owner != "root" else "root")
        os.chmod(path, mode)
    sbin = Path("/usr/local/sbin")
    sbin.mkdir(exist_ok=True)
    for verb in ("sudo", "systemctl", "apt-get"):
        (sbin / verb).write_text(f"#!/bin/sh\nexec {sys.executable} {__file__} {verb} \"$@\"\n")
        (sbin / verb).chmod(0o755)
    listener = socket.create_server(("127.0.0.1", PROXY_PORT))
    threading.Thread(target=_forward, args=(listener, str(work / "proxy.sock")),
                     daemon=True).start()  # fmt: skip
    # What apt-get install leaves running on a fresh Debian host.
    pg = work / "postgresql"
    pg.mkdir()
    shutil.chown(pg, "postgres", "postgres")
    data = pg / "data"
    subprocess.run(_as("postgres", [str(PGBIN / "initdb"), "-D", str(data), "-U", "postgres",
                                    "--auth-local=peer", "--auth-host=scram-sha-256"]),
                   check=True, capture_output=True)  # fmt: skip
    subprocess.run(_as("postgres", [str(PGBIN / "pg_ctl"), "-D", str(data), "-w", "-l",
                                    str(pg / "log"), "-o",
                                    "-c listen_addresses=127.0.0.1 -c fsync=off "
                                    "-c unix_socket_directories=/run/postgresql", "start"]),
                   check=True, capture_output=True)  # fmt: skip
    os.environ["DOCSANDBOX"] = str(work)
    _start("redis-server")
    subprocess.run(["nginx"], check=True)
    # The documented <repo>: a snapshot of the checkout served as a remote is.
    subprocess.Popen(["git", "daemon", "--reuseaddr", "--export-all", "--listen=127.0.0.1",
                      f"--base-path={work}", str(work / "arena.git")],
                     stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)  # fmt: skip
    _deadline(30, "git daemon", lambda: _listening(9418))
    _deadline(30, "Redis on 6379", lambda: subprocess.run(
        ["redis-cli", "ping"], capture_output=True, text=True).stdout.strip() == "PONG")


def _run_on_pty(script: Path, env: dict[str, str], answers: list[tuple[str, str]],
                transcript: Path, seconds: float) -> int:  # fmt: skip
    pid, fd = pty.fork()
    if pid == 0:
        os.chdir("/root")
        os.execve("/bin/bash", ["bash", "-euo", "pipefail", str(script)], env)
    prompts = [(re.compile(p), a) for p, a in answers]
    seen = b""
    end = time.monotonic() + seconds
    with open(transcript, "wb") as out:
        while True:
            if time.monotonic() > end:
                os.kill(pid, signal.SIGKILL)
                out.write(b"\ndocsandbox: the blocks ran out of time\n")
                break
            ready, _, _ = select.select([fd], [], [], 1)
            if not ready:
                continue
            try:
                data = os.read(fd, 65536)
            except OSError:
                break
            if not data:
                break
            out.write(data)
            out.flush()
            seen = (seen + data)[-400:]
            tail = seen.decode(errors="replace")
            for pattern, answer in prompts:
                if pattern.search(tail):
                    os.write(fd, answer.encode() + b"\n")
                    seen = b""
                    break
    _, status = os.waitpid(pid, 0)
    return os.waitstatus_to_exitcode(status)


def main(work: Path) -> int:
    spec = json.loads((work / "blocks.json").read_text())
    _prepare(work)
    hook_cmd = f"{sys.executable} {__file__} hook"
    parts = []
    for block in spec["blocks"]:
        if block.get("before"):
            parts.append(f"{hook_cmd} {block['before']}")
        if block.get("cd"):
            parts.append(f"cd {shlex.quote(block['cd'])}")
        parts.append(f"echo '== block {block['name']}' \"(at $SECONDS s)\"")  # where time went
        parts.append(block["text"])
        if block.get("after"):
            parts.append(f"{hook_cmd} {block['after']}")
    parts.append("echo '== every block ran' \"(at $SECONDS s)\"")
    script = work / "blocks.sh"
    script.write_text("\n".join(parts) + "\n")
    env = {k: v for k, v in os.environ.items() if k in KEEP}
    env.update(PATH=SECURE_PATH, HOME="/root", USER="root", LOGNAME="root", SHELL="/bin/bash",
               TERM="dumb", LANG="C.UTF-8", DOCSANDBOX=str(work))  # fmt: skip
    code = _run_on_pty(script, env, spec["answers"], work / "transcript.txt", spec["seconds"])
    for unit in sorted(p.stem for p in _units().glob("*.log")):
        _say(f"--- {unit} log, last lines")
        print((_units() / f"{unit}.log").read_text(errors="replace")[-1500:], flush=True)
    return code


if __name__ == "__main__":
    verb, rest = sys.argv[1], sys.argv[2:]
    if verb == "sudo":
        sudo(rest)
    elif verb == "systemctl":
        systemctl(rest)
    elif verb == "apt-get":
        apt_get(rest)
    elif verb == "hook":
        hook(rest[0])
    elif verb == "main":
        sys.exit(main(Path(rest[0])))
    else:
        raise SystemExit(f"unknown verb {verb}")
