"""What the Checkpointer's mixins (environment, notice_handling, plain, handover) use of it.

Declarations for the type checker only: at run time the class is empty, and every attribute
and method below is the one checkpointer.Checkpointer sets or defines.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import threading
    from collections.abc import Callable

    from router.checkpoint.manifest import Manifest
    from router.checkpoint.notices import Notice, SigtermNotices
    from router.checkpoint.ranks import Ranks
    from router.checkpoint.results import Resume, SaveReport
    from router.checkpoint.retention import Retention
    from router.checkpoint.storage import Location
    from router.checkpoint.watcher import NoticeWatcher


class CheckpointerState:
    """The Checkpointer's attributes and methods that its mixins call (typing only)."""

    if TYPE_CHECKING:
        url: str
        location: Location
        interval_s: float | None
        every_steps: int | None
        job_id: str
        exit_on_notice: bool
        checksum_algorithm: str
        reports: list[SaveReport]
        last_saved_step: int | None
        watcher: NoticeWatcher
        _sigterm: SigtermNotices | None
        _ranks: Ranks
        _objects: dict[str, Any]
        _pending: threading.Thread | None
        _pending_report: SaveReport | None
        _retention: Retention
        _stager: Any
        reuse_staging_memory: bool
        asynchronous: bool
        io_threads: int
        last_error: str | None
        _clock: Callable[[], float]
        _last_save_at: float
        placement: str
        _request: dict[str, Any] | None

        def __init__(self, url: str, **settings: Any) -> None: ...
        def save(self, step: int, *, blocking: bool | None = None, epoch: int | None = None,
                 data_position: Any = None, user: dict[str, Any] | None = None,
                 **objects: Any) -> bool: ...
        def wait(self) -> SaveReport | None: ...
        def close(self) -> None: ...
        def _say(self, resume: Resume) -> Resume: ...
        def _candidates(self) -> list[tuple[int, Manifest | None, str | None]]: ...
        def _passed_over(self, rejected: list[tuple[int, str, bool]], *,
                         using: int | None) -> list[str]: ...
        def _prepare_step_dir(self, step: int) -> bool: ...
        def _committed(self, step: int) -> None: ...
        def _release_step(self, step: int) -> None: ...
        def _remember(self, objects: dict[str, Any]) -> None: ...
        def _terminal_notice(self) -> Notice | None: ...
        def _write_marker(self, notice: Notice, step: int, *, exiting: bool) -> None: ...
        def _save_request(self) -> dict[str, Any] | None: ...
        def _answer_request(self, step: int, request: dict[str, Any] | None,
                            save: Callable[[], object]) -> bool: ...
        def _resumed(self, resume: Resume) -> Resume: ...
        def _await_handover(self) -> None: ...
        def _handover_given_up(self) -> bool: ...
        def _abandon_handover(self, step: int) -> bool: ...
