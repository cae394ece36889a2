"""A throwaway PostgreSQL 15 + PostGIS cluster for the tools (tools/bench-pg, tools/crash-test
--postgres), as KeepTrackTesting.Postgres starts one for the tests: initdb into a temporary directory,
the server on a free loopback port and a Unix socket in that directory, never the system service;
run as the `postgres` user when root (initdb refuses root); fsync stays on unless asked."""
import os, shutil, signal, socket, subprocess, tempfile, time

BIN = "/usr/lib/postgresql/15/bin"


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Cluster:
    def __init__(self, settings=(), user="kt"):
        self.user = user
        self.dir = tempfile.mkdtemp(prefix="keeptrack-pg-", dir="/tmp")
        self.port = free_port()
        self.settings = ["listen_addresses=127.0.0.1", f"unix_socket_directories={self.dir}",
                         "max_connections=400", "shared_buffers=256MB", *settings]
        if os.getuid() == 0:
            import pwd
            pw = pwd.getpwnam("postgres")
            os.chown(self.dir, pw.pw_uid, pw.pw_gid)
        os.chmod(self.dir, 0o700)
        self.owner(f"{BIN}/initdb", "-D", f"{self.dir}/data", "-U", user, "--auth=trust", "-E", "UTF8",
                   "--locale=C.UTF-8", "--no-sync")
        self.start()

    def owner(self, *cmd, check=True):
        if os.getuid() == 0:
            cmd = ("runuser", "-u", "postgres", "--", *cmd)
        return subprocess.run(cmd, check=check, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                              stdin=subprocess.DEVNULL, cwd="/tmp")

    def start(self):
        options = " ".join(f"-c {s}" for s in self.settings) + f" -p {self.port}"
        self.owner(f"{BIN}/pg_ctl", "-D", f"{self.dir}/data", "-l", f"{self.dir}/log", "-w", "-t", "120",
                   "-o", options, "start")

    def stop(self, mode="fast"):
        self.owner(f"{BIN}/pg_ctl", "-D", f"{self.dir}/data", "-m", mode, "-w", "stop", check=False)

    def restart(self):
        self.stop()
        self.start()

    def kill(self):
        """SIGKILL to the postmaster (its backends end at once; the next start recovers from the WAL)."""
        everyone = self.pids()
        if not everyone:
            return
        os.kill(everyone[0], signal.SIGKILL)
        # Its backends notice the postmaster's death and exit; a new one starts once they are gone.
        while any(os.path.exists(f"/proc/{p}") for p in everyone):
            time.sleep(0.01)
        self.start()

    def pids(self):
        """The server's processes (the postmaster and its children), for CPU and memory figures."""
        try:
            root = int(open(f"{self.dir}/data/postmaster.pid").readline())
        except (OSError, ValueError):
            return []
        out = subprocess.run(["pgrep", "-P", str(root)], stdout=subprocess.PIPE, text=True).stdout.split()
        return [root] + [int(p) for p in out]

    def psql(self, sql, database="postgres", *extra):
        r = subprocess.run(["psql", "-X", "-q", "-A", "-t", "-v", "ON_ERROR_STOP=1", "-h", self.dir, "-p",
                            str(self.port), "-U", self.user, "-d", database, *extra, "-c", sql],
                           check=True, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd="/tmp")
        return r.stdout

    def create_database(self, name, postgis=True):
        self.psql(f"CREATE DATABASE {name}")
        if postgis:
            self.psql("CREATE EXTENSION postgis", name)
        return f"postgres://{self.user}@127.0.0.1:{self.port}/{name}?sslmode=disable"

    def remove(self):
        self.stop("immediate")
        shutil.rmtree(self.dir, ignore_errors=True)
