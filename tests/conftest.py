"""Fixtures only; shared helper functions live in helpers.py and support/ (the CLI runner, the databases)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest


@pytest.fixture(scope="session", autouse=True)
def private_cache(tmp_path_factory: pytest.TempPathFactory) -> Iterator[None]:
    """$XDG_CACHE_HOME for the whole run, the commands it starts included: whatever they cache goes to a
    directory of this run, shared by its workers, not the user's ~/.cache."""
    import os

    saved = os.environ.get("XDG_CACHE_HOME")
    os.environ["XDG_CACHE_HOME"] = str(tmp_path_factory.getbasetemp().parent / "xdg-cache")
    try:
        yield
    finally:
        if saved is None:
            os.environ.pop("XDG_CACHE_HOME", None)
        else:
            os.environ["XDG_CACHE_HOME"] = saved


@pytest.fixture(scope="session", autouse=True)
def peer_server() -> Iterator[None]:
    """One tests/peers/peer_server.py for this pytest process, which starts the SDK peers by forking (each
    would spend about 0.7 s of CPU importing the SDK: tests/peers/quick_sdk.py). ACP_PEER_SERVER=off in the
    environment: none, each peer imports the SDK itself."""
    import os
    import shutil
    import subprocess
    import sys
    import tempfile
    import warnings

    if os.environ.get("ACP_PEER_SERVER"):
        yield
        return
    where = tempfile.mkdtemp(prefix="acp-peers-")
    path = os.path.join(where, "server.sock")
    log = Path(where, "server.log")
    with log.open("wb") as stderr:  # not the first test's captured stderr: said at the end, if anything
        server = subprocess.Popen(
            [sys.executable, str(Path(__file__).parent / "peers" / "peer_server.py"), path],
            stdin=subprocess.PIPE,
            stdout=subprocess.DEVNULL,
            stderr=stderr,
        )
    os.environ["ACP_PEER_SERVER"] = path
    try:
        yield
    finally:
        os.environ.pop("ACP_PEER_SERVER", None)
        assert server.stdin is not None
        server.stdin.close()  # the server's cue to end, its peers with it
        try:
            server.wait(10)
        except subprocess.TimeoutExpired:
            server.kill()
            server.wait()
        said = log.read_text(errors="replace")
        shutil.rmtree(where, ignore_errors=True)
        if said or server.returncode:
            warnings.warn(f"the SDK peer server ended with {server.returncode}, saying: {said[-2000:]}", stacklevel=1)


@pytest.fixture
def db(tmp_path: Path) -> Path:
    return tmp_path / "state" / "relay.db"


@pytest.fixture(scope="session")
def fixture_db(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The scripted fixture recordings (tests/fixtures/recordings.py), built once for the whole run and
    shared: read it, never write it (a test that writes, e.g. a search index, copies it first)."""
    from support.databases import recordings

    return recordings(tmp_path_factory.mktemp("fixtures") / "fixtures.db")


@pytest.fixture(scope="session")
def sdk_remote_server() -> Iterator[Any]:
    """The Python SDK's ASGI agent under hypercorn, with the affinity cookie (tests/peers/sdk_remote_agent.py),
    started once for every test that only connects to it (test_remote_e2e, test_remote_ts): each connection
    gets its own agent, so tests do not see each other; the SDK's import alone costs a second of CPU."""
    from test_remote_e2e import Server

    s = Server("--set-cookie")
    yield s
    s.stop()
