"""nbgrader's ``Execute`` preprocessor, made to survive cells that ignore interrupts and kernels that die.

A cell that swallows ``KeyboardInterrupt`` outlives the interrupt sent on timeout; nbclient then gives up
waiting for the kernel's idle message and autograde exits 1 for the whole notebook. ``GraderExecute``
interrupts, waits a grace period, then starts a fresh kernel and records a timeout error in that cell;
the next cells run in the fresh kernel. A kernel that dies (``os._exit`` in learner code, the memory
limit) is replaced the same way. Imported by the worker only (``nb_worker.py``): nbgrader is heavy.
"""
from __future__ import annotations

import asyncio
import time

from jupyter_client.utils import ensure_async
from jupyter_core.utils import run_sync
from nbclient.exceptions import DeadKernelError
from nbformat.v4 import new_output
from nbgrader.preprocessors import Execute
from traitlets import Float


def timeout_text(timeout) -> str:
    return (f"this cell ran longer than {timeout} s and ignored the interrupt; the kernel was "
            "restarted, so later cells ran in a fresh kernel")


DEAD_KERNEL_TEXT = ("the Python kernel died while running this cell (os._exit, a crash or the memory "
                    "limit); later cells ran in a fresh kernel")


class GraderExecute(Execute):
    """nbgrader's Execute that survives cells ignoring interrupts and kernels that die."""

    grace_s = Float(3.0, help="seconds to wait after an interrupt before restarting the kernel").tag(config=True)

    async def _restart(self) -> None:
        """Kill the kernel (and, in bubblewrap, everything it started) and start a fresh one.

        A fresh kernel manager and client, not ``restart_kernel``: reconnecting the old client's
        sockets to a restarted kernel sometimes loses the first request and hangs.
        """
        old_km, old_kc = self.km, self.kc
        try:
            old_kc.stop_channels()
        except Exception:  # noqa: BLE001 - the old client may be half gone already
            pass
        try:
            await ensure_async(old_km.shutdown_kernel(now=True))
        except Exception:  # noqa: BLE001
            pass
        self.create_kernel_manager()
        await self.async_start_new_kernel()
        await self.async_start_new_kernel_client()

    async def _async_handle_timeout(self, timeout, cell=None):
        self.log.error("Cell timed out after %s s: interrupting", timeout)
        await ensure_async(self.km.interrupt_kernel())
        deadline = time.monotonic() + self.grace_s
        while time.monotonic() < deadline:
            if await ensure_async(self.kc.shell_channel.msg_ready()):
                self._interrupted = timeout  # the kernel answered the interrupt: its error follows
                return None
            await asyncio.sleep(0.1)
        self.log.error("Kernel ignored the interrupt: restarting it")
        await self._restart()
        self._restarted = timeout
        return {"content": {"status": "error", "ename": "CellTimeoutError",
                            "evalue": timeout_text(timeout), "traceback": []}}

    async def async_execute_cell(self, cell, cell_index, execution_count=None, store_history=True):
        self._interrupted = self._restarted = None
        try:
            cell = await super().async_execute_cell(cell, cell_index, execution_count, store_history)
        except DeadKernelError:
            await self._after_dead_kernel(cell, cell_index)
            return cell
        if self._interrupted is not None:  # say why a KeyboardInterrupt happened
            for out in cell.outputs:
                if out.get("output_type") == "error" and out.get("ename") == "KeyboardInterrupt":
                    out["evalue"] = f"this cell ran longer than {self._interrupted} s and was interrupted"
        return cell

    async def _after_dead_kernel(self, cell, cell_index) -> None:
        if self._restarted is not None:  # the old client noticed the kernel we replaced
            if not any(o.get("ename") == "CellTimeoutError" for o in cell.outputs):
                cell.outputs.append(new_output("error", ename="CellTimeoutError",
                                               evalue=timeout_text(self._restarted), traceback=[]))
            return
        self.log.error("Kernel died in cell %s: restarting it", cell_index)
        cell.outputs.append(new_output("error", ename="DeadKernelError", evalue=DEAD_KERNEL_TEXT, traceback=[]))
        await self._restart()

    # nbclient binds the sync wrapper to its own coroutine: rebind it to ours
    execute_cell = run_sync(async_execute_cell)
