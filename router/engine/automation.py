"""The Pulumi engine through the Automation API: one stack per job, an inline program.

The program is components.program.placement_program, run in-process (no language-host binary).
Config is written through the CLI (`pulumi config set-all --json`), which honours Pulumi.yaml's
`stackConfigDir`, so it lands in stacks/Pulumi.<job>.yaml where it is reviewed. The Python
Automation API itself would write next to Pulumi.yaml (pulumi issue #10305), so it is never
asked to save stack settings.
"""

from __future__ import annotations

import os
import secrets
import shutil
import signal
import sys
import threading
from collections.abc import Callable, Iterator, Mapping
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from router.config.project import Project
from router.config.stack_files import restore_reviewed
from router.core.errors import BadInput, OperationFailed, RouteError
from router.core.strict_json import dumps
from router.engine.locks import (
    StackLock,
    StackLocks,
    repair_interrupted_writes,
    stack_locks_for,
)
from router.engine.processes import OWNER_ENV, guarded_python, owner_token, pulumi_wrapper

if TYPE_CHECKING:
    from pulumi import automation as auto

    from router.engine.records import RecordStore

PASSPHRASE_FILE = "passphrase"

EventHandler = Callable[[Any], None]


@dataclass(frozen=True)
class Backend:
    """Where stack state lives: file:// (default, under SPOTROUTE_HOME), s3://, gs://, azblob://, postgres://."""

    url: str
    is_default: bool
    secrets_provider: str | None = None  # None: a passphrase (PULUMI_CONFIG_PASSPHRASE[_FILE])


KMS_SCHEMES = ("awskms://", "gcpkms://", "azurekeyvault://", "hashivault://")


def choose_backend(
    home: Path, configured: str | None, secrets_provider: str | None = None
) -> Backend:
    """The org config's backend_url, else $PULUMI_BACKEND_URL, else file://$SPOTROUTE_HOME/state."""
    if secrets_provider in ("passphrase", ""):
        secrets_provider = None
    if secrets_provider is not None and not secrets_provider.startswith(KMS_SCHEMES):
        raise BadInput(
            f"secrets_provider: '{secrets_provider}' — use passphrase, awskms://, gcpkms://, "
            "azurekeyvault:// or hashivault://"
        )
    url = configured or os.environ.get("PULUMI_BACKEND_URL")
    if url:
        if not url.startswith(("file://", "s3://", "gs://", "azblob://", "postgres://")):
            raise BadInput(
                f"backend_url: '{url}' is not a DIY backend — use file://, s3://, gs://, "
                "azblob:// or postgres://"
            )
        return Backend(url, is_default=False, secrets_provider=secrets_provider)
    state = home / "state"
    state.mkdir(parents=True, exist_ok=True, mode=0o700)
    return Backend(f"file://{state}", is_default=True, secrets_provider=secrets_provider)


def passphrase_env(home: Path, backend: Backend) -> dict[str, str]:
    """Secrets-provider settings for the engine; never logged.

    A user-set PULUMI_CONFIG_PASSPHRASE(_FILE) always wins. With the default local backend a
    random passphrase file is created under SPOTROUTE_HOME (mode 0600) so the quickstart works;
    shared backends require the user to choose one, because teammates must share it.
    """
    for var in ("PULUMI_CONFIG_PASSPHRASE", "PULUMI_CONFIG_PASSPHRASE_FILE"):
        if var in os.environ:
            return {var: os.environ[var]}
    if backend.secrets_provider:
        return {}  # a KMS key: each engineer's cloud credentials decrypt, no shared passphrase
    if not backend.is_default:
        raise BadInput(
            f"no passphrase for stack secrets on backend {backend.url} — set "
            "PULUMI_CONFIG_PASSPHRASE_FILE (or PULUMI_CONFIG_PASSPHRASE) to the team's passphrase"
        )
    path = home / PASSPHRASE_FILE
    if not path.exists():
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        with os.fdopen(fd, "w") as f:
            f.write(secrets.token_urlsafe(32))
    return {"PULUMI_CONFIG_PASSPHRASE_FILE": str(path)}


PULUMI_VERSION = "3.274.1"  # keep in step with scripts/ensure-pulumi.sh


def tools_bin_dir() -> Path:
    """Where scripts/ensure-pulumi.sh puts the CLI it builds and the Python plugin shims."""
    default = Path.home() / ".cache" / "spotroute" / f"pulumi-v{PULUMI_VERSION}"
    return Path(os.environ.get("SPOTROUTE_TOOLS_DIR") or default) / "bin"


def find_pulumi() -> Path:
    """The pulumi CLI: spotroute's own build if present, else the one on PATH."""
    own = tools_bin_dir() / "pulumi"
    if own.is_file() and os.access(own, os.X_OK):
        return own
    found = shutil.which("pulumi")
    if not found:
        # scripts/ ships with the repository, not with the installed package: say both ways.
        raise OperationFailed(
            "the pulumi CLI was not found — install it and put it on PATH "
            "(https://www.pulumi.com/docs/install/); in a spotroute checkout, "
            "`bash scripts/ensure-pulumi.sh` builds one into ~/.cache/spotroute"
        )
    return Path(found)


@dataclass
class Engine:
    """One project's stacks on one backend."""

    project: Project
    home: Path
    backend: Backend
    program: Callable[[], None] | None = None  # default: components.program.placement_program
    _workspace: auto.LocalWorkspace | None = field(default=None, repr=False)
    _records: RecordStore | None = field(default=None, repr=False)

    def records(self) -> RecordStore:
        """spotroute's records (placements, decisions, locks), kept in the same backend."""
        if self._records is None:
            from router.engine.records import records_for

            self._records = records_for(
                self.backend.url, self.home, is_default=self.backend.is_default
            )
        return self._records

    def env(self) -> dict[str, str]:
        # The shims for the engine's Python plugins live next to spotroute's CLI build; put that
        # directory first so the engine finds them whichever pulumi binary runs.
        dirs = [str(tools_bin_dir()), str(find_pulumi().parent), os.environ.get("PATH", "")]
        path = os.pathsep.join(dirs)
        return {
            "PATH": path,
            "PULUMI_BACKEND_URL": self.backend.url,
            "PULUMI_SKIP_UPDATE_CHECK": "true",
            "PULUMI_DIY_BACKEND_NO_LEGACY_WARNING": "true",
            # The engine's Python plugins (dynamic providers, policy packs) use this interpreter,
            # wrapped so that a plugin exits when the engine that started it is gone.
            "SPOTROUTE_PYTHON": str(guarded_python(self.home, sys.executable)),
            "SPOTROUTE_HOME": str(self.home),
            **self._local_market_env(),
            # Which route command started these processes: the orphan sweep's evidence.
            OWNER_ENV: owner_token(),
            **passphrase_env(self.home, self.backend),
        }

    def _local_market_env(self) -> dict[str, str]:
        """The local market (spotroute.yaml local_market) for the local target's launches."""
        from router.config.local_market import load_local_market
        from router.config.org_file import load_org_config
        from router.contract.local_market import ENV_VAR

        market = load_local_market(load_org_config(self.project.org_config_path), self.project.root)
        return {ENV_VAR: market.to_env()} if market is not None else {}

    def workspace(self) -> auto.LocalWorkspace:
        """The project's workspace, built once (building one runs `pulumi version`)."""
        if self._workspace is None:
            from pulumi import automation as auto

            from components.program import placement_program

            pulumi = find_pulumi()
            self._workspace = auto.LocalWorkspace(
                work_dir=str(self.project.root),
                program=self.program or placement_program,
                env_vars=self.env(),
                secrets_provider=self.backend.secrets_provider,
                # PulumiCommand runs <root>/bin/pulumi: a wrapper that cancels the CLI cleanly
                # if this process dies (router.engine.processes).
                pulumi_command=auto.PulumiCommand(root=str(pulumi_wrapper(self.home, pulumi))),
            )
        return self._workspace

    def locks(self) -> StackLocks | None:
        """The backend's stack-lock reader (None when spotroute cannot read this backend's)."""
        return stack_locks_for(self.backend.url, pulumi_project_name(self.project))

    def repair_backend(self) -> int:
        """Undo what a killed CLI leaves half-written in a file:// backend; returns how many."""
        if not self.backend.url.startswith("file://"):
            return 0
        state = Path(self.backend.url.removeprefix("file://")).expanduser()
        return len(repair_interrupted_writes(state))

    def held_locks(self, job: str) -> list[StackLock]:
        reader = self.locks()
        return reader.held(job) if reader is not None else []

    def clear_dead_locks(self, job: str) -> list[StackLock]:
        """Remove locks whose holder provably died (same host, process gone); returns them."""
        reader = self.locks()
        if reader is None:
            return []
        cleared = [lock for lock in reader.held(job) if lock.provably_dead()]
        for lock in cleared:
            reader.remove(lock)
        return cleared

    def clear_stale_locks(self, job: str) -> list[tuple[StackLock, str]]:
        """Remove the locks on the job's stacks (`job`, `job.2`, ...) that hold nothing: the stack
        was removed since (a route killed at the end of a destroy), or the holder provably died;
        returns each with why.

        Locks are read before the stacks are listed: the engine takes a lock only on a stack that
        exists, so a locked stack missing from the later listing was removed after its lock.
        """
        from router.core.journal import job_of_stack

        reader = self.locks()
        if reader is None:
            return []
        held = [
            lock
            for name in reader.locked_stacks()
            if job_of_stack(name) == job
            for lock in reader.held(name)
        ]
        if not held:
            return []
        existing = {s.name for s in self.list_stacks()}
        gone, dead = "that stack was deleted", "that process is gone"
        stale = [
            (lock, gone if lock.stack not in existing else dead)
            for lock in held
            if lock.stack not in existing or lock.provably_dead()
        ]
        for lock, _why in stale:
            reader.remove(lock)
        return stale

    def unlock(self, job: str) -> list[StackLock]:
        """`route unlock JOB`: clear the stack's locks unless a live process here holds one."""
        from pulumi import automation as auto

        held = self.held_locks(job)
        live = [lock for lock in held if lock.hostname == _hostname() and not lock.provably_dead()]
        if live:
            raise OperationFailed(
                f"job {job} is being changed right now by {live[0].holder()} — wait for it, or "
                f"stop that process first (kill {live[0].pid}), then run `route unlock {job}`"
            )
        stack = self.stack(job, create=False)
        try:
            stack.cancel()  # removes the stack's locks on every DIY backend
        except auto.CommandError as exc:
            if "no stack" in str(exc).lower():
                raise OperationFailed(f"no deployed job '{job}' — see `route status`") from None
            raise engine_error(job, exc) from None
        return held

    def select_or_create(self, job: str) -> tuple[auto.Stack, bool]:
        """The job's stack and whether this call created it.

        Two homes on one backend may both find no stack and both try to create it: the loser of
        that race selects the winner's stack instead of failing with "already exists".
        """
        from pulumi import automation as auto

        ws = self.workspace()
        for _attempt in range(3):
            try:
                return auto.Stack.select(job, ws), False
            except auto.StackNotFoundError:
                pass
            except auto.CommandError as exc:
                raise engine_error(job, exc, self) from None
            # A reviewed stack file (`route plan --write`) may be there before the stack: `stack
            # init` would rewrite it with every scalar quoted, so it is set aside meanwhile and
            # put back with the engine's encryption salt. Killed in between, the file is gone
            # from the working tree only (git has it), and the next deploy writes every key again.
            path = self.project.stack_config_path(job)
            reviewed = path.read_text(encoding="utf-8") if path.is_file() else None
            if reviewed is not None:
                path.unlink()
            try:
                return auto.Stack.create(job, ws), True
            except auto.StackAlreadyExistsError:
                continue
            except auto.CommandError as exc:
                if "already exists" in str(exc):
                    continue
                raise engine_error(job, exc, self) from None
            finally:
                if reviewed is not None:
                    restore_reviewed(path, reviewed)
        raise OperationFailed(f"job {job}: the stack keeps appearing and vanishing — try again")

    def stack(self, job: str, *, create: bool = True) -> auto.Stack:
        from pulumi import automation as auto

        ws = self.workspace()
        try:
            if create:
                return self.select_or_create(job)[0]
            return auto.Stack.select(job, ws)
        except auto.StackNotFoundError:
            raise OperationFailed(
                f"no deployed job '{job}' on backend {self.backend.url} — see `route status`"
            ) from None
        except auto.CommandError as exc:
            raise engine_error(job, exc, self) from None

    def write_config(
        self, job: str, config: Mapping[str, Any], namespace: str = "spotroute"
    ) -> list[str]:
        """Set every spotroute:* key in one CLI call; the CLI writes stacks/Pulumi.<job>.yaml.

        The contract's secret keys (spotroute:secretEnv) are written as Pulumi secrets: only
        ciphertext reaches the stack file and the state. An unchanged secret is not rewritten
        (each encryption differs, which would change the reviewed file on every deploy).
        Returns the masked diff lines of the secrets it wrote (`~ spotroute:secretEnv: [secret]`).
        """
        from pulumi import automation as auto

        from router.contract.stack_config import MASKED

        secret = secret_keys(namespace)
        unchanged = self._unchanged_secrets(job, config, namespace, secret)
        written = [
            f"~ {namespace}:{key}: {MASKED}"
            for key, value in config.items()
            if key in secret and value and key not in unchanged
        ]
        payload = {
            f"{namespace}:{key}": config_value(value, secret=key in secret and bool(value))
            for key, value in config.items()
            if key not in unchanged
        }
        ws = self.workspace()
        try:
            ws.set_all_config_json(job, dumps(payload, indent=None))
        except auto.CommandError as exc:
            raise engine_error(job, exc) from None
        return written

    def _unchanged_secrets(
        self, job: str, config: Mapping[str, Any], namespace: str, secret: frozenset[str]
    ) -> set[str]:
        from pulumi import automation as auto

        wanted = {k: v for k, v in config.items() if k in secret and v}
        if not wanted:
            return set()
        try:
            current = self.workspace().get_all_config(job)
        except auto.CommandError:
            return set()
        unchanged = set()
        for key, value in wanted.items():
            held = current.get(f"{namespace}:{key}")
            if held is not None and held.secret and held.value == dumps(value, indent=None):
                unchanged.add(key)
        return unchanged

    def list_stacks(self) -> list[auto.StackSummary]:
        from pulumi import automation as auto

        try:
            return self.workspace().list_stacks()
        except auto.CommandError as exc:
            raise OperationFailed(
                f"cannot list jobs on {self.backend.url}: {first_line(exc)}"
            ) from None


def secret_keys(namespace: str) -> frozenset[str]:
    """The keys of `namespace` the stack-config contract marks secret."""
    from router.contract.stack_config import NAMESPACE, SECRET_KEYS

    return frozenset(SECRET_KEYS) if namespace == NAMESPACE else frozenset()


def config_value(value: Any, *, secret: bool) -> dict[str, Any]:
    """One `pulumi config set-all --json` entry: strings as they are, the rest as JSON.

    A secret is sent as its JSON text with `secret: true` (the CLI encrypts it); the program
    reads it back with Config.get_secret_object.
    """
    if secret:
        return {"value": value if isinstance(value, str) else dumps(value, indent=None),
                "secret": True}  # fmt: skip
    if isinstance(value, str):
        return {"value": value, "secret": False}
    return {"value": dumps(value, indent=None), "objectValue": value, "secret": False}


def first_line(exc: Exception) -> str:
    """The most telling line of an engine error (the CLI prints pages)."""
    lines = []
    for raw in str(exc).splitlines():
        line = raw.strip()
        for prefix in ("stdout:", "stderr:"):  # CommandError quotes the CLI's streams so
            line = line.removeprefix(prefix).strip()
        lines.append(line)
    for marker in ("error: ", "Error: "):
        for line in lines:
            if line.startswith(marker) and len(line) > len(marker):
                return line[len(marker) :].strip()
    meaningful = [ln for ln in lines if ln and not ln.startswith("code:")]
    return meaningful[0] if meaningful else type(exc).__name__


class EngineFailed(OperationFailed):
    """The engine failed an operation; `detail` keeps its whole text (for launch failover)."""

    def __init__(self, message: str, detail: str = "") -> None:
        super().__init__(message)
        self.detail = detail


def engine_error(job: str, exc: Exception, engine: Engine | None = None) -> OperationFailed:
    """A one-line OperationFailed for an engine CommandError (locks say who holds them)."""
    text = str(exc)
    if "currently locked" in text or "Conflict: Another update is currently in progress" in text:
        held = engine.held_locks(job) if engine is not None else []
        who = f"by {held[0].holder()}" if held else "by another process"
        return OperationFailed(
            f"job {job} is being changed {who} — wait for it to finish, or if it died, run "
            f"`route unlock {job}`"
        )
    from router.core.failover import classify_launch_error

    refused = classify_launch_error(text)
    if refused is not None:  # the provider's sentence says more than "update failed"
        return EngineFailed(f"job {job}: {refused.code}: {refused.message}", text)
    return EngineFailed(f"job {job}: {first_line(exc)}", text)


def _hostname() -> str:
    import socket

    return socket.gethostname()


def pulumi_project_name(project: Project) -> str:
    """The `name:` in the project's Pulumi.yaml (the DIY backend files stacks under it)."""
    import yaml

    from router.config.user_files import CONFIG_LIMIT_BYTES, FileProblem, read_user_text

    try:
        text = read_user_text(project.root / "Pulumi.yaml", limit_bytes=CONFIG_LIMIT_BYTES)
        data = yaml.safe_load(text)
    except (FileProblem, yaml.YAMLError):
        return "spotroute"
    name = data.get("name") if isinstance(data, dict) else None
    return str(name) if name else "spotroute"


@contextmanager
def job_lock(engine: Engine, job: str) -> Iterator[None]:
    """Exclusive right to change one job, across every machine on the backend; fails at once."""
    from router.engine.records import Held

    with ExitStack() as held:
        try:
            held.enter_context(engine.records().exclusive(f"job-{job}"))
        except Held as exc:
            raise OperationFailed(
                f"job {job} is being changed by {exc.holder} — wait for it to finish, or if that "
                f"process died, run `route unlock {job}`"
            ) from None
        yield


@contextmanager
def config_transaction(path: Path) -> Iterator[None]:
    """Restore the stack file as it was if the block fails: nothing half-changed is left behind."""
    before = path.read_bytes() if path.exists() else None
    try:
        yield
    except BaseException as exc:
        try:
            if before is None:
                path.unlink(missing_ok=True)
            else:
                path.write_bytes(before)
        except OSError as restore:
            # The original error is what the user must see; the failed restore is added to it.
            if isinstance(exc, RouteError):
                exc.message += (
                    f" (and {path.name} could not be restored: {restore.strerror}; "
                    "check it with `git diff`)"
                )
        raise


@contextmanager
def engine_interrupts() -> Iterator[Callable[[], bool]]:
    """While the engine runs, the first Ctrl-C is only noted here.

    The terminal sends SIGINT to the whole process group, so the pulumi CLI gets it too: it
    cancels the operation cleanly and releases the stack lock, and the Automation API call then
    fails. The caller turns that into `Interrupted`. A second Ctrl-C stops this process at once.
    """
    if threading.current_thread() is not threading.main_thread():
        yield lambda: False
        return
    noted: list[bool] = []

    def on_sigint(_signum: int, _frame: object) -> None:
        if noted:
            signal.signal(signal.SIGINT, signal.default_int_handler)
            raise KeyboardInterrupt
        noted.append(True)

    previous = signal.signal(signal.SIGINT, on_sigint)
    try:
        yield lambda: bool(noted)
    finally:
        signal.signal(signal.SIGINT, previous)
        # A Ctrl-C noted here while no engine call was cancelled by it (between the calls, or
        # before `destroy` started) would otherwise be lost: a caller listening for it (route
        # migrate and watch stop at the next journal step) hears it too.
        if noted and callable(previous) and previous is not signal.default_int_handler:
            previous(signal.SIGINT, None)
