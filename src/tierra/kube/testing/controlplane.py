"""A real etcd and kube-apiserver on loopback ports, for tests, benchmarks and people.

tierra's Kubernetes edge is tested against the real API server, not a mock: admission, CEL
rules on CRDs, the binding subresource and resourceVersion semantics only behave faithfully
there. The binaries are built from the Go module proxy by ``hack/controlplane/build.sh`` and
found the envtest way (``TEST_ASSET_<NAME>``, then ``KUBEBUILDER_ASSETS``, then the build
cache), so Go envtest suites and this module share one set of binaries.

The flags follow controller-runtime's envtest, plus what a kubelet-less cluster needs: the
``ServiceAccount`` admission plugin is off (no controller creates default service accounts)
and so is ``TaintNodesByCondition`` (no node-lifecycle controller would ever lift the
not-ready taint from fake nodes). Clients authenticate with static bearer tokens; each
identity gets its own kubeconfig so RBAC is exercised as in a real cluster.

Run ``python -m tierra.kube.testing up`` to get one in the foreground.
"""

from __future__ import annotations

import argparse
import contextlib
import ctypes
import json
import os
import secrets
import shutil
import signal
import socket
import ssl
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from types import TracebackType
from typing import IO, TYPE_CHECKING, Any

if TYPE_CHECKING:
    from kubernetes_asyncio.client import ApiClient, Configuration

# Pinned in hack/controlplane/{kube,etcd,helm}/go.mod; a test keeps these in step with them.
K8S_VERSION = "v1.36.3"
ETCD_VERSION = "v3.6.16"
HELM_VERSION = "v4.3.2"

ADMIN = "admin"
KUBE_SCHEDULER = "system:kube-scheduler"
KUBE_CONTROLLER_MANAGER = "system:kube-controller-manager"

# Flags for load runs only: with priority and fairness on, a burst of thousands of creates
# from one client is queued and measured as the client's slowness, not the server's.
SCALE_APISERVER_ARGS = (
    "--enable-priority-and-fairness=false",
    "--max-requests-inflight=2000",
    "--max-mutating-requests-inflight=1000",
)

# The upstream Workload API (scheduling.k8s.io/v1alpha2 Workload and PodGroup, and the
# pods' spec.schedulingGroup) is alpha in 1.36: off unless the gate and the group are
# switched on. The API server also drops a PodGroup's schedulingConstraints unless
# TopologyAwareWorkloadScheduling is on, and its priorityClassName/priority unless
# WorkloadAwarePreemption is (pkg/registry/scheduling/podgroup/strategy.go).
WORKLOAD_GATES = (
    "GenericWorkload=true,GangScheduling=true,TopologyAwareWorkloadScheduling=true,"
    "WorkloadAwarePreemption=true"
)
WORKLOAD_API_ARGS = (
    f"--feature-gates={WORKLOAD_GATES}",
    "--runtime-config=scheduling.k8s.io/v1alpha2=true",
)

# Claims a whole PodGroup shares (its spec.resourceClaims, reserved for the PodGroup) are
# alpha in 1.36 behind DRAWorkloadResourceClaims: the API server drops the field without
# it (pkg/registry/scheduling/podgroup/strategy.go), kube-scheduler reserves such claims
# for the group only with it, and kube-controller-manager's resourceclaim controller makes
# a group's claims from templates only with it. The same gates go to all three.
DRA_WORKLOAD_GATES = f"{WORKLOAD_GATES},DRAWorkloadResourceClaims=true"
DRA_WORKLOAD_ARGS = (
    f"--feature-gates={DRA_WORKLOAD_GATES}",
    "--runtime-config=scheduling.k8s.io/v1alpha2=true",
)


class ControlPlaneUnavailable(RuntimeError):
    """The control plane cannot run on this machine; the message says what is missing."""


class ControlPlaneError(RuntimeError):
    """A control plane process failed to start or died; the message carries its log's tail."""


def cache_folder() -> Path:
    """Where build.sh puts the binaries for the pinned versions (keep in step with it)."""
    root = os.environ.get("TIERRA_CONTROLPLANE_CACHE")
    if root:
        base = Path(root)
    else:
        xdg = os.environ.get("XDG_CACHE_HOME")
        base = (Path(xdg) if xdg else Path.home() / ".cache") / "tierra" / "controlplane"
    return base / f"{K8S_VERSION}-{ETCD_VERSION}"


def _pinned_version(name: str) -> str:
    return {"etcd": ETCD_VERSION, "helm": HELM_VERSION}.get(name, K8S_VERSION)


def _candidates(name: str) -> list[Path]:
    """envtest's lookup order (TEST_ASSET_<NAME>, KUBEBUILDER_ASSETS), then the build cache."""
    out: list[Path] = []
    if explicit := os.environ.get("TEST_ASSET_" + name.upper().replace("-", "_")):
        out.append(Path(explicit))
    if assets := os.environ.get("KUBEBUILDER_ASSETS"):
        out.append(Path(assets) / name)
    out.append(cache_folder() / name)
    return out


def _missing_message(names: Sequence[str]) -> str:
    what = " and ".join(f"{n} {_pinned_version(n)}" for n in names)
    looked = ", ".join(str(p) for n in names for p in _candidates(n))
    return (
        f"{what} not found (looked in: {looked}); build with `make controlplane-build` "
        "(bash hack/controlplane/build.sh) or set KUBEBUILDER_ASSETS to a folder that has them"
    )


def find_binary(name: str) -> Path:
    """Locate ``name`` the envtest way, then in the build cache.

    Raises ControlPlaneUnavailable naming every place looked at, so a skipped test tells the
    reader exactly what to build or where to point ``KUBEBUILDER_ASSETS``.
    """
    for path in _candidates(name):
        if path.is_file() and os.access(path, os.X_OK):
            return path
    raise ControlPlaneUnavailable(_missing_message([name]))


@dataclass(frozen=True, slots=True)
class Binaries:
    """The two programs a control plane needs; the scheduler and kubectl are looked up lazily."""

    etcd: Path
    kube_apiserver: Path

    @classmethod
    def find(cls) -> Binaries:
        found: dict[str, Path] = {}
        missing: list[str] = []
        for name in ("etcd", "kube-apiserver"):
            try:
                found[name] = find_binary(name)
            except ControlPlaneUnavailable:
                missing.append(name)
        problems = [_missing_message(missing)] if missing else []
        if shutil.which("openssl") is None:
            problems.append("openssl not found on PATH (it makes the service-account key)")
        if problems:
            raise ControlPlaneUnavailable("; ".join(problems))
        return cls(etcd=found["etcd"], kube_apiserver=found["kube-apiserver"])


def free_ports(count: int) -> list[int]:
    """Distinct free loopback ports (all held open together, so no two are the same)."""
    sockets: list[socket.socket] = []
    try:
        for _ in range(count):
            s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
            s.bind(("127.0.0.1", 0))
            sockets.append(s)
        return [s.getsockname()[1] for s in sockets]
    finally:
        for s in sockets:
            s.close()


def _parent_death_hook() -> Callable[[], None] | None:
    """A pre-exec hook that kills the child when the test runner dies.

    Without it a runner killed by SIGKILL (a CI timeout) leaves etcd and the API server
    running. SIGKILL, not SIGTERM: the data is throwaway, and an API server told to shut
    down gracefully after its etcd went away waits for it for a long time.

    libc is resolved here, in the parent, so the hook that runs between fork and exec only
    makes one foreign call and never loads a library while other threads may hold the
    loader's lock. PR_SET_PDEATHSIG fires when the *thread* that started the child exits,
    so start control planes from a long-lived thread (pytest and the CLI use the main
    thread). It survives exec, so a wrapper script that execs its server passes it on.
    """
    if sys.platform != "linux":
        return None
    try:
        prctl = ctypes.CDLL(None, use_errno=True).prctl
    except (OSError, AttributeError):
        return None
    pr_set_pdeathsig = 1

    def hook() -> None:
        prctl(pr_set_pdeathsig, signal.SIGKILL)

    return hook


class ManagedProcess:
    """A child in its own process group with its output in a log file.

    Its own group means stopping it also stops whatever it spawned (a wrapper script and the
    server it runs), and Ctrl-C in a terminal reaches only the runner, which then stops the
    group in order.
    """

    def __init__(
        self,
        name: str,
        argv: Sequence[str | os.PathLike[str]],
        log_path: Path,
        *,
        env: Mapping[str, str] | None = None,
    ) -> None:
        self.name = name
        self.log_path = log_path
        self._log: IO[bytes] = log_path.open("ab")
        preexec = _parent_death_hook()
        try:
            self._popen = subprocess.Popen(
                [os.fspath(a) for a in argv],
                stdin=subprocess.DEVNULL,
                stdout=self._log,
                stderr=subprocess.STDOUT,
                start_new_session=True,
                env=dict(env) if env is not None else None,
                preexec_fn=preexec,  # noqa: PLW1509 - only sets the parent-death signal
            )
        except OSError:
            self._log.close()
            raise

    @property
    def pid(self) -> int:
        return self._popen.pid

    def poll(self) -> int | None:
        return self._popen.poll()

    def log_tail(self, lines: int = 30) -> str:
        try:
            text = self.log_path.read_text(errors="replace")
        except OSError:
            return ""
        return "\n".join(text.splitlines()[-lines:])

    def kill(self) -> None:
        """SIGKILL the group now, as a crash or an OOM kill would, and reap it."""
        with contextlib.suppress(ProcessLookupError):
            os.killpg(self._popen.pid, signal.SIGKILL)
        self._popen.wait()

    def stop(self, timeout: float = 10.0) -> None:
        """SIGTERM the group, SIGKILL it after ``timeout``, then sweep any straggler."""
        if self._popen.poll() is None:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(self._popen.pid, signal.SIGTERM)
            try:
                self._popen.wait(timeout)
            except subprocess.TimeoutExpired:
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(self._popen.pid, signal.SIGKILL)
                self._popen.wait()
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(self._popen.pid, signal.SIGKILL)
        self._log.close()


@dataclass(frozen=True, slots=True)
class Identity:
    """A user the API server knows by a static token (``--token-auth-file``)."""

    user: str
    groups: tuple[str, ...]
    token: str


def _default_identities() -> dict[str, Identity]:
    return {
        ADMIN: Identity(ADMIN, ("system:masters",), secrets.token_hex(16)),
        # Bootstrap RBAC already binds the system:kube-scheduler role to this user name.
        KUBE_SCHEDULER: Identity(KUBE_SCHEDULER, (), secrets.token_hex(16)),
        # Its controllers run under its own credentials (no --use-service-account-credentials:
        # nothing here mints the per-controller ServiceAccounts' tokens), and the garbage
        # collector and namespace controller delete any kind, CRDs' included.
        KUBE_CONTROLLER_MANAGER: Identity(
            KUBE_CONTROLLER_MANAGER, ("system:masters",), secrets.token_hex(16)
        ),
    }


def _start_timeout() -> float:
    raw = os.environ.get("KUBEBUILDER_CONTROLPLANE_START_TIMEOUT", "")
    try:
        return float(raw.rstrip("s")) if raw else 90.0
    except ValueError:
        return 90.0


def wait_http(
    process: ManagedProcess,
    url: str,
    deadline: float,
    timeout: float,
    *,
    context: ssl.SSLContext | None,
    token: str | None = None,
) -> None:
    """Poll ``url`` until it answers 200; fail with the process's log if it exits first or
    ``deadline`` passes (``timeout`` is what the message says it waited)."""
    request = urllib.request.Request(url)
    if token is not None:
        request.add_header("Authorization", f"Bearer {token}")
    last = "no answer yet"
    while True:
        code = process.poll()
        if code is not None:
            raise ControlPlaneError(
                f"{process.name} exited with status {code} during start; "
                f"log {process.log_path}:\n{process.log_tail()}"
            )
        try:
            with urllib.request.urlopen(request, timeout=2, context=context) as response:
                if response.status == 200:
                    return
                last = f"HTTP {response.status}"
        except urllib.error.HTTPError as exc:
            last = f"HTTP {exc.code}"
        except (urllib.error.URLError, OSError) as exc:
            last = str(exc)
        if time.monotonic() > deadline:
            raise ControlPlaneError(
                f"{process.name} not ready at {url} after {timeout:.0f} s "
                f"(last: {last}); log {process.log_path}:\n{process.log_tail()}"
            )
        time.sleep(0.2)


class ControlPlane:
    """etcd plus kube-apiserver in a temporary folder, removed again by :meth:`stop`.

    Use it as a context manager; the folder holds the logs, the tokens, the service-account
    key and one kubeconfig per identity (``admin``, ``system:kube-scheduler``,
    ``system:kube-controller-manager`` and any extra ones given).
    """

    def __init__(
        self,
        binaries: Binaries | None = None,
        *,
        scale: bool = False,
        extra_identities: Sequence[Identity] = (),
        apiserver_args: Sequence[str] = (),
        workdir: Path | None = None,
        keep_workdir: bool = False,
        start_timeout: float | None = None,
    ) -> None:
        self.binaries = binaries
        self.scale = scale
        self.identities = _default_identities()
        for identity in extra_identities:
            self.identities[identity.user] = identity
        self._apiserver_args = tuple(apiserver_args)
        self._requested_workdir = workdir
        self._keep_workdir = keep_workdir
        self._start_timeout = start_timeout if start_timeout is not None else _start_timeout()
        self._workdir: Path | None = None
        self._owns_workdir = False
        self._processes: list[ManagedProcess] = []
        self.port = 0
        self.etcd_url = ""

    # -- the parts clients use ---------------------------------------------------------

    @property
    def workdir(self) -> Path:
        if self._workdir is None:
            raise RuntimeError("the control plane is not started")
        return self._workdir

    @property
    def processes(self) -> tuple[ManagedProcess, ...]:
        """The running servers, etcd first."""
        return tuple(self._processes)

    @property
    def url(self) -> str:
        return f"https://127.0.0.1:{self.port}"

    @property
    def ca_file(self) -> Path:
        """The API server's self-generated serving certificate bundle (leaf and its CA)."""
        return self.workdir / "certs" / "apiserver.crt"

    @property
    def token(self) -> str:
        return self.identities[ADMIN].token

    @property
    def kubeconfig(self) -> Path:
        return self.kubeconfig_for(ADMIN)

    def kubeconfig_for(self, user: str) -> Path:
        return self.workdir / f"{user.replace(':', '-')}.kubeconfig"

    def client_configuration(self, user: str = ADMIN) -> Configuration:
        """A kubernetes_asyncio configuration for ``user``, verifying the serving cert."""
        from kubernetes_asyncio.client import Configuration  # noqa: PLC0415 - optional dep

        config = Configuration(host=self.url)
        config.api_key = {"BearerToken": self.identities[user].token}
        config.api_key_prefix = {"BearerToken": "Bearer"}
        config.ssl_ca_cert = str(self.ca_file)
        return config

    def api_client(self, user: str = ADMIN) -> ApiClient:
        """A kubernetes_asyncio ApiClient; create it inside a running event loop and close it."""
        from kubernetes_asyncio.client import ApiClient  # noqa: PLC0415 - optional dep

        return ApiClient(self.client_configuration(user))

    def kubectl(
        self,
        *args: str,
        user: str = ADMIN,
        input: str | None = None,
        check: bool = True,
        timeout: float = 60.0,
    ) -> subprocess.CompletedProcess[str]:
        """Run kubectl as ``user``: the built one, or the one on PATH if none was built."""
        try:
            binary = str(find_binary("kubectl"))
        except ControlPlaneUnavailable:
            found = shutil.which("kubectl")
            if found is None:
                raise
            binary = found
        env = {**os.environ, "KUBECONFIG": str(self.kubeconfig_for(user))}
        return subprocess.run(
            [binary, *args],
            env=env,
            input=input,
            capture_output=True,
            text=True,
            check=check,
            timeout=timeout,
        )

    # -- lifecycle ---------------------------------------------------------------------

    def __enter__(self) -> ControlPlane:
        self.start()
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.stop()

    def start(self) -> None:
        """Start etcd and the API server and wait until ``/readyz`` answers ok.

        Free ports are picked before the servers bind them, so another program can win the
        race; the whole start is then retried on fresh ports.
        """
        if self.binaries is None:
            self.binaries = Binaries.find()
        if self._requested_workdir is not None:
            self._workdir = self._requested_workdir
            self._workdir.mkdir(parents=True, exist_ok=True)
        else:
            self._workdir = Path(tempfile.mkdtemp(prefix="tierra-controlplane-"))
            self._owns_workdir = True
        try:
            self._write_credentials()
            for attempt in range(3):
                try:
                    self._start_servers(self.binaries)
                    break
                except ControlPlaneError as exc:
                    self._stop_processes()
                    if attempt == 2 or "address already in use" not in str(exc):
                        raise
            self._write_kubeconfigs()
        except BaseException:
            self.stop()
            raise

    def stop(self) -> None:
        """Stop the servers (API server first, so it does not spin on a missing etcd)."""
        self._stop_processes()
        if self._workdir is not None and self._owns_workdir and not self._keep_workdir:
            shutil.rmtree(self._workdir, ignore_errors=True)
        self._workdir = None if not self._keep_workdir else self._workdir

    def check_alive(self) -> None:
        """Raise ControlPlaneError if a server died (the CLI polls this while it waits)."""
        for process in self._processes:
            code = process.poll()
            if code is not None:
                raise ControlPlaneError(
                    f"{process.name} exited with status {code}; log {process.log_path}:\n"
                    + process.log_tail()
                )

    # -- internals ---------------------------------------------------------------------

    def _stop_processes(self) -> None:
        while self._processes:
            self._processes.pop().stop()

    def _write_credentials(self) -> None:
        work = self.workdir
        lines = []
        for identity in self.identities.values():
            groups = ",".join(identity.groups)
            lines.append(f'{identity.token},{identity.user},{identity.user},"{groups}"')
        tokens = work / "tokens.csv"
        tokens.write_text("\n".join(lines) + "\n")
        tokens.chmod(0o600)
        # The API server refuses to start without a service-account signing key; an EC key is
        # generated in milliseconds where RSA takes a noticeable moment.
        subprocess.run(
            [
                "openssl",
                "ecparam",
                "-name",
                "prime256v1",
                "-genkey",
                "-noout",
                "-out",
                str(work / "sa.key"),
            ],
            check=True,
            capture_output=True,
        )

    def _start_servers(self, binaries: Binaries) -> None:
        work = self.workdir
        etcd_port, peer_port, self.port = free_ports(3)
        self.etcd_url = f"http://127.0.0.1:{etcd_port}"
        peer_url = f"http://127.0.0.1:{peer_port}"
        data_dir = work / "etcd"
        shutil.rmtree(data_dir, ignore_errors=True)
        etcd = ManagedProcess(
            "etcd",
            [
                binaries.etcd,
                f"--data-dir={data_dir}",
                f"--listen-client-urls={self.etcd_url}",
                f"--advertise-client-urls={self.etcd_url}",
                f"--listen-peer-urls={peer_url}",
                f"--initial-advertise-peer-urls={peer_url}",
                f"--initial-cluster=default={peer_url}",
                "--unsafe-no-fsync",  # throwaway data: durability buys nothing here
                "--quota-backend-bytes=8589934592",
                "--log-level=warn",
            ],
            work / "etcd.log",
        )
        self._processes.append(etcd)
        deadline = time.monotonic() + self._start_timeout
        self._wait_http(etcd, f"{self.etcd_url}/health", deadline, context=None, token=None)
        self._start_apiserver(binaries, deadline)

    def stop_apiserver(self) -> None:
        """Kill only the API server (etcd keeps the data): clients see it vanish at once,
        as after a crash, instead of a graceful drain that keeps serving a while."""
        if len(self._processes) == 2:
            apiserver = self._processes.pop()
            apiserver.kill()
            apiserver.stop()  # closes its log

    def start_apiserver(self) -> None:
        """Start the API server again on the same port, certificate and etcd."""
        if self.binaries is None or len(self._processes) != 1:
            raise RuntimeError("start_apiserver needs a running etcd and a stopped API server")
        self._start_apiserver(self.binaries, time.monotonic() + self._start_timeout)

    def _start_apiserver(self, binaries: Binaries, deadline: float) -> None:
        work = self.workdir
        args: list[str | os.PathLike[str]] = [
            binaries.kube_apiserver,
            f"--etcd-servers={self.etcd_url}",
            f"--cert-dir={work / 'certs'}",
            f"--secure-port={self.port}",
            "--bind-address=127.0.0.1",
            "--advertise-address=127.0.0.1",
            "--service-cluster-ip-range=10.0.0.0/24",
            "--allow-privileged=true",
            "--authorization-mode=RBAC",
            f"--token-auth-file={work / 'tokens.csv'}",
            "--disable-admission-plugins=ServiceAccount,TaintNodesByCondition",
            f"--service-account-issuer=https://127.0.0.1:{self.port}/",
            f"--service-account-key-file={work / 'sa.key'}",
            f"--service-account-signing-key-file={work / 'sa.key'}",
        ]
        if self.scale:
            args.extend(SCALE_APISERVER_ARGS)
        args.extend(self._apiserver_args)
        apiserver = ManagedProcess("kube-apiserver", args, work / "kube-apiserver.log")
        self._processes.append(apiserver)
        # The serving certificate appears only once the server runs; readiness is polled
        # without verification, clients verify against it afterwards.
        unverified = ssl.create_default_context()
        unverified.check_hostname = False
        unverified.verify_mode = ssl.CERT_NONE
        self._wait_http(
            apiserver, f"{self.url}/readyz", deadline, context=unverified, token=self.token
        )

    def _wait_http(
        self,
        process: ManagedProcess,
        url: str,
        deadline: float,
        *,
        context: ssl.SSLContext | None,
        token: str | None,
    ) -> None:
        wait_http(process, url, deadline, self._start_timeout, context=context, token=token)

    def _write_kubeconfigs(self) -> None:
        for identity in self.identities.values():
            config: dict[str, Any] = {
                "apiVersion": "v1",
                "kind": "Config",
                "clusters": [
                    {
                        "name": "tierra-test",
                        "cluster": {"server": self.url, "certificate-authority": str(self.ca_file)},
                    }
                ],
                "users": [{"name": identity.user, "user": {"token": identity.token}}],
                "contexts": [
                    {
                        "name": "tierra-test",
                        "context": {"cluster": "tierra-test", "user": identity.user},
                    }
                ],
                "current-context": "tierra-test",
            }
            path = self.kubeconfig_for(identity.user)
            # JSON is YAML, and needs no YAML library here.
            path.write_text(json.dumps(config, indent=2) + "\n")
            path.chmod(0o600)


def _apiserver_args(args: argparse.Namespace) -> tuple[str, ...]:
    if args.dra_workload_claims:
        return DRA_WORKLOAD_ARGS
    return WORKLOAD_API_ARGS if args.workload_api else ()


def _up(args: argparse.Namespace) -> int:
    try:
        binaries = Binaries.find()
    except ControlPlaneUnavailable as exc:
        print(f"controlplane: {exc}", file=sys.stderr)
        return 1
    stop_requested = False

    def request_stop(signum: int, frame: object) -> None:
        nonlocal stop_requested
        stop_requested = True

    signal.signal(signal.SIGTERM, request_stop)
    signal.signal(signal.SIGINT, request_stop)
    workdir = Path(args.workdir) if args.workdir else None
    plane = ControlPlane(
        binaries,
        scale=args.scale,
        workdir=workdir,
        keep_workdir=args.keep,
        apiserver_args=_apiserver_args(args),
    )
    try:
        plane.start()
    except ControlPlaneError as exc:
        print(f"controlplane: {exc}", file=sys.stderr)
        return 1
    try:
        versions = f"kube-apiserver {K8S_VERSION}, etcd {ETCD_VERSION}"
        print(f"control plane ready at {plane.url} ({versions})")
        print(f"  export KUBECONFIG={plane.kubeconfig}")
        print(f"  kube-scheduler kubeconfig: {plane.kubeconfig_for(KUBE_SCHEDULER)}")
        print(f"  logs and data: {plane.workdir}")
        if args.workload_api or args.dra_workload_claims:
            gates = DRA_WORKLOAD_GATES if args.dra_workload_claims else WORKLOAD_GATES
            print(f"  serving scheduling.k8s.io/v1alpha2 (feature gates {gates})")
        if args.dra_workload_claims:
            print(f"  give kube-scheduler and kube-controller-manager --feature-gates={gates}")
        print("Ctrl-C stops it" + ("." if args.keep else " and removes that folder."), flush=True)
        while not stop_requested:
            plane.check_alive()
            time.sleep(0.5)
    except ControlPlaneError as exc:
        print(f"controlplane: {exc}", file=sys.stderr)
        return 1
    finally:
        plane.stop()
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m tierra.kube.testing",
        description="Run a throwaway etcd + kube-apiserver on loopback ports.",
    )
    commands = parser.add_subparsers(dest="command", required=True)
    up = commands.add_parser("up", help="start in the foreground until Ctrl-C")
    up.add_argument("--scale", action="store_true", help="apply the load-run API server flags")
    up.add_argument("--workdir", help="folder for data, logs and kubeconfigs (default: temporary)")
    up.add_argument("--keep", action="store_true", help="keep the folder after stopping")
    up.add_argument(
        "--workload-api",
        action="store_true",
        help="serve the upstream Workload API (scheduling.k8s.io/v1alpha2: Workloads and "
        "PodGroups) with the feature gates the tests use",
    )
    up.add_argument(
        "--dra-workload-claims",
        action="store_true",
        help="the Workload API with DRAWorkloadResourceClaims on too (claims a PodGroup "
        "shares, its spec.resourceClaims)",
    )
    args = parser.parse_args(argv)
    if args.command == "up":
        return _up(args)
    return 2  # pragma: no cover - argparse rejects unknown commands
