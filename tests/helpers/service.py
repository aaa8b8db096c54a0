"""What every server a test starts shares: ``start()``, ``stop()`` and a ``with`` block."""

from __future__ import annotations

from abc import ABC, abstractmethod
from types import TracebackType
from typing import Self

__all__ = ["Service"]


class Service(ABC):
    """A process or thread serving the tests; ``with service:`` starts and stops it."""

    @abstractmethod
    def start(self) -> None:
        """Start serving; return once clients are served."""

    @abstractmethod
    def stop(self) -> None:
        """Stop serving and release what was started."""

    def __enter__(self) -> Self:
        self.start()
        return self

    def __exit__(
        self,
        kind: type[BaseException] | None,
        error: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        self.stop()
