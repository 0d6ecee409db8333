"""A link that goes down and up in a loop, from a thread, until stopped (then it is left up)."""

from __future__ import annotations

import threading
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field


@dataclass
class Flapper:
    """Calls ``down()``, waits the next of ``down_s`` (cycled), calls ``up()``, waits ``up_s``, and again."""

    down: Callable[[], None]
    up: Callable[[], None]
    down_s: Sequence[float]
    up_s: float
    flaps: int = 0  # down periods ended (read by the test thread; written by the flapping thread only)
    _stop: threading.Event = field(default_factory=threading.Event)
    _thread: threading.Thread | None = None
    failure: BaseException | None = None

    def start(self) -> Flapper:
        self._thread = threading.Thread(target=self._run, name="link-flapper", daemon=True)
        self._thread.start()
        return self

    def _run(self) -> None:
        try:
            while not self._stop.is_set():
                self.down()
                try:
                    # The flapping's own rhythm: what the test injects, not a wait for a condition.
                    self._stop.wait(self.down_s[self.flaps % len(self.down_s)])
                finally:
                    self.up()
                self.flaps += 1
                self._stop.wait(self.up_s)
        except BaseException as exc:  # noqa: B036 -- reported by stop()
            self.failure = exc

    def stop(self) -> None:
        self._stop.set()
        assert self._thread is not None
        self._thread.join(30)
        if self.failure is not None:
            raise AssertionError(f"the flapping thread failed: {self.failure!r}") from self.failure
