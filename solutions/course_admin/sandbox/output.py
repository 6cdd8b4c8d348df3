"""A run's stdout and stderr: a pipe this process reads, never a file on the grader's disk.

Learner code writes its output to the write end of a pipe (fds 1 and 2 of the grading child); a thread
here keeps the first ``keep`` bytes and the last ``keep`` bytes in memory and counts the rest, and the log
file is written once, by this process, when the run has ended: at most ``2 * keep`` bytes and a line saying
how much was left out. So no call learner code can make on its output (write, fallocate, ftruncate, a seek
past the end) reserves a block of the grader's disk, and what ``/proc/self/fd/1`` shows it is ``pipe:[N]``,
not the grader's scratch path.
"""
from __future__ import annotations

import os
import select
import threading
from pathlib import Path

READ_CHUNK = 1 << 16
AFTER_STOP = 1 << 20  # read at most this much once the run has ended


class OutputPipe:
    """The pipe a run's output goes to, drained by a thread of this process into a capped buffer.

    ``write_end``: the fd to give the run (close it here once the run holds it: ``handed_over``).
    ``finish(path)``: stop reading (processes the run left that still hold the pipe are not waited for)
    and write what was kept to ``path``."""

    def __init__(self, keep: int) -> None:
        self.keep = keep
        self.read_end, self.write_end = os.pipe()
        self.head = bytearray()
        self.tail = bytearray()
        self.total = 0
        self.stop = threading.Event()
        self.thread = threading.Thread(target=self._drain, daemon=True)
        self.thread.start()

    def _take(self, data: bytes) -> None:
        self.total += len(data)
        room = self.keep - len(self.head)
        if room > 0:
            self.head += data[:room]
            data = data[room:]
        if data:
            self.tail += data
            if len(self.tail) > self.keep:
                del self.tail[:len(self.tail) - self.keep]

    def _drain(self) -> None:
        after_stop = 0  # bytes read since finish() was called: a writer left alive cannot hold this thread
        try:
            while after_stop <= AFTER_STOP:
                ready, _, _ = select.select([self.read_end], [], [], 0.1)
                if self.stop.is_set():
                    after_stop += READ_CHUNK
                if not ready:
                    if self.stop.is_set():
                        return
                    continue
                data = os.read(self.read_end, READ_CHUNK)
                if not data:
                    return
                self._take(data)
        except OSError:
            return

    def handed_over(self) -> None:
        """The run holds the write end now: close ours, so that the pipe ends when the run's copies do."""
        if self.write_end >= 0:
            os.close(self.write_end)
            self.write_end = -1

    def text(self) -> bytes:
        """What was kept: the whole output, or its head and tail around a line saying what was left out."""
        left_out = self.total - len(self.head) - len(self.tail)
        if left_out <= 0:
            return bytes(self.head + self.tail)
        return bytes(self.head) + f"\n… [{left_out} bytes of output left out] …\n".encode() + bytes(self.tail)

    def finish(self, path: Path | None = None) -> bytes:
        """Stop reading, close the pipe, and write the kept output to ``path`` (when given); returns it."""
        self.handed_over()
        self.stop.set()
        self.thread.join(10)
        os.close(self.read_end)
        kept = self.text()
        if path is not None:
            path.write_bytes(kept)
        return kept
