"""The shell every `acp-relay run` shares, stdio (run/relay.py) and remote (run/connect.py): trio owns
the signals, the tasks and worker threads of the connection, and the recorder's close; trio_core loads the
part of trio it needs.
"""

from __future__ import annotations

import signal
from collections.abc import Awaitable, Callable
from functools import partial
from typing import Any, NamedTuple

from ..record.pipe import RecorderClient

FORWARDED_SIGNALS = (signal.SIGTERM, signal.SIGINT, signal.SIGHUP)
Final = tuple[int, dict[str, Any]]  # the exit status to pass on, and the connection's closing fields


def trio_core() -> Any:
    """trio's run loop, nursery, cancel scopes, Event, signal receiver and worker threads: the part of
    trio the shell uses, loaded without the rest of the package when nothing has imported trio yet.

    Why: `import trio` runs trio/__init__.py, which also loads ssl, sockets, subprocesses, DTLS and
    paths: 9.6 MB on the relay's peak RSS, against issue 29's budget of main + 8 MB; its core modules are
    3.5 MB (measured: VmRSS before and after, in a process holding the relay's modules). The package is
    registered with its __init__ not yet run; a lookup of any other name of it (trio.X, `from trio import
    X`, trio.lowlevel.X beyond the core's) runs __init__ into the same module first, so code that imports
    trio later in this process gets the whole package. If trio's private layout ever differs, the whole
    package is imported instead (costing only the RSS)."""
    import sys

    if "trio" not in sys.modules:
        # The import holds the GIL for tens of milliseconds while the pumps forward the editor's first
        # exchanges: let a pump that wants the GIL have it within 0.1 ms instead of 5 (early round trips'
        # p99, measured with tools/bench_shell.py).
        interval = sys.getswitchinterval()
        sys.setswitchinterval(min(interval, 0.0001))
        try:
            _register_trio_core()
        except Exception:
            sys.modules.pop("trio", None)
            import trio  # noqa: F401
        finally:
            sys.setswitchinterval(interval)
        # Everything loaded so far lives as long as the process: out of the collector's sight, a full
        # collection (which holds the GIL the pumps need) does not grow with trio's objects.
        import gc

        gc.freeze()
    from trio import _core, _signals, _sync, _threads

    return _TrioCore(
        _core.run,
        _core.open_nursery,
        _core.CancelScope,
        _core.current_time,
        _sync.Event,
        _signals.open_signal_receiver,
        _threads.to_thread_run_sync,
    )


class _TrioCore(NamedTuple):
    run: Any
    open_nursery: Any
    CancelScope: Any
    current_time: Any
    Event: Any
    open_signal_receiver: Any
    to_thread: Any  # trio.to_thread.run_sync

    def move_on_after(self, seconds: float) -> Any:
        return self.CancelScope(deadline=self.current_time() + seconds)


def _register_trio_core() -> None:
    import importlib.util
    import sys
    import types

    spec = importlib.util.find_spec("trio")
    assert spec is not None and spec.loader is not None
    package = importlib.util.module_from_spec(spec)
    loader = spec.loader

    def complete(name: str) -> Any:
        """PEP 562: a name the core does not hold: run the package's __init__, then look again (a
        submodule being imported, `from .. import _core` inside it, is not such a name)."""
        if f"trio.{name}" in sys.modules:
            return sys.modules[f"trio.{name}"]
        core = sys.modules.get("trio._core")
        if "__getattr__" in package.__dict__ and core is not None and hasattr(core, name):
            return getattr(core, name)  # trio.RunFinishedError, trio.Cancelled...: the package re-exports them
        if "__getattr__" in package.__dict__:
            del package.__dict__["__getattr__"]
            del package.__dict__["lowlevel"]
            loader.exec_module(package)
        return getattr(package, name)

    def lowlevel_name(name: str) -> Any:
        core = sys.modules.get("trio._core")
        return getattr(core, name) if hasattr(core, name) else getattr(complete("lowlevel"), name)

    lowlevel = types.ModuleType("trio.lowlevel")  # not in sys.modules: `import trio.lowlevel` gets the real one
    lowlevel.__getattr__ = lowlevel_name  # type: ignore[method-assign]
    package.__getattr__ = complete  # type: ignore[method-assign]
    package.lowlevel = lowlevel  # type: ignore[attr-defined]  # the core's own modules use trio.lowlevel.X
    sys.modules["trio"] = package
    try:
        import trio._core
        import trio._signals
        import trio._sync
        import trio._threads  # noqa: F401
    except BaseException:
        for name in [m for m in sys.modules if m == "trio" or m.startswith("trio.")]:
            del sys.modules[name]
        raise


def run_shell(recorder: RecorderClient, body: Callable[[Any], Awaitable[Final]]) -> int:
    """`run`'s one shell, stdio and remote alike: in trio, with SIGTERM, SIGINT and SIGHUP received from
    before anything starts, run `body(signals)` (it decides what a signal means: forwarded to the agent,
    or the end of the connection), then close the recorder and return the status to exit with.

    Cancellation: every task and worker thread is owned by a nursery in `body`, which returns only once
    it has cancelled what is left (an editor's stdin may stay open forever). Closing the recorder waits
    for it to commit (RecorderClient.close, bounded) in a worker thread; meanwhile a signal ends us with
    its default action, as the recorder finishes alone (it reads to the pipe's EOF)."""
    trio = trio_core()

    async def main() -> int:
        with trio.open_signal_receiver(*FORWARDED_SIGNALS) as signals:
            code, final = await body(signals)
        for sig in FORWARDED_SIGNALS:
            signal.signal(sig, signal.SIG_DFL)
        await trio.to_thread(partial(recorder.close, **final))
        return code

    return trio.run(main)
