"""A throwaway PostgreSQL 15 + PostGIS cluster for the tools (tools/bench-pg.py, tools/crash-test.py
--postgres), as KeepTrackTesting.Postgres starts one for the tests: initdb into a temporary directory,
the server on a free loopback port and a Unix socket in that directory, never the system service;
run as the `postgres` user when root (initdb refuses root); fsync stays on unless asked."""
import os, shutil, signal, subprocess, tempfile, time

from keeptrack_tools import candidate_port

BIN = "/usr/lib/postgresql/15/bin"


PACKAGES = "postgresql-15 postgresql-15-postgis-3"


class MissingTool(Exception):
    """PostgreSQL 15 (or PostGIS) is not installed: says which Debian packages to install."""


class Cluster:
    def __init__(self, settings=(), user="kt"):
        self.user = user
        for tool in ("initdb", "pg_ctl"):
            if not os.access(f"{BIN}/{tool}", os.X_OK):
                raise MissingTool(f"{BIN}/{tool} is not installed: install the Debian packages {PACKAGES} "
                                  f"(apt-get install {PACKAGES}), or run tools/setup")
        self.dir = tempfile.mkdtemp(prefix="keeptrack-pg-", dir="/tmp")
        self.port = candidate_port()
        self.fixed_port = False
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
        """pg_ctl start; while the log says the port was taken (another program bound it after
        candidate_port() drew it), on another port, up to 10 times; the first start only: a restart keeps
        the port its clients know."""
        for attempt in range(10):
            try:
                logged = os.path.getsize(f"{self.dir}/log")
            except OSError:
                logged = 0
            options = " ".join(f"-c {s}" for s in self.settings) + f" -p {self.port}"
            try:
                self.owner(f"{BIN}/pg_ctl", "-D", f"{self.dir}/data", "-l", f"{self.dir}/log", "-w", "-t", "120",
                           "-o", options, "start")
                self.fixed_port = True
                return
            except subprocess.CalledProcessError:
                with open(f"{self.dir}/log", errors="replace") as f:
                    f.seek(logged)
                    said = f.read()
                if self.fixed_port or "Address already in use" not in said:
                    raise
                self.port = candidate_port(attempt + 1)
        raise OSError(f"PostgreSQL found every port tried in use; its log is {self.dir}/log")

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
