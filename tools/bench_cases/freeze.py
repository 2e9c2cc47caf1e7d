"""The freeze case: the lock case's stream with the database's filesystem frozen (fsfreeze) instead of its
write lock held. It needs root and a loop device: the database goes on a private ext4 image mounted for the
case, so no other filesystem is ever frozen. Skipped, with the reason, where the machine does not allow it."""

from __future__ import annotations

import argparse
import os
import shlex
import shutil
import subprocess
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from .common import log
from .lock import fault_case

IMAGE_MB = 256
TOOLS = ("fsfreeze", "mkfs.ext4", "mount", "umount", "losetup")


def why_not() -> str | None:
    """None when this machine lets us freeze a filesystem of our own; else why not."""
    if os.geteuid() != 0:
        return "needs root (mount -o loop, fsfreeze)"
    for tool in TOOLS:
        if shutil.which(tool) is None:
            return f"{tool} is not installed"
    r = subprocess.run(["losetup", "-f"], capture_output=True, text=True)
    if r.returncode != 0:
        return f"no free loop device ({r.stderr.strip() or 'losetup -f failed'})"
    return None


@contextmanager
def loop_filesystem(where: Path, size_mb: int = IMAGE_MB) -> Iterator[Path]:
    """A fresh ext4 from an image file, mounted at where/mnt for the block; thawed and unmounted after
    (whatever happened), the image removed. Raises OSError when it cannot be made or mounted."""
    img, mnt = where / "fs.img", where / "mnt"
    mnt.mkdir(parents=True, exist_ok=True)
    with open(img, "wb") as f:
        f.truncate(size_mb << 20)
    for cmd in (["mkfs.ext4", "-q", "-F", str(img)], ["mount", "-o", "loop", str(img), str(mnt)]):
        r = subprocess.run(cmd, capture_output=True, text=True, timeout=60)
        if r.returncode != 0:
            img.unlink(missing_ok=True)
            raise OSError(f"{cmd[0]} failed: {r.stderr.strip()}")
    try:
        yield mnt
    finally:
        thaw(mnt)
        if subprocess.run(["umount", str(mnt)], capture_output=True, timeout=60).returncode != 0:
            subprocess.run(["umount", "-l", str(mnt)], capture_output=True, timeout=60)  # detached once unused
        img.unlink(missing_ok=True)


def thaw(mnt: Path) -> None:
    """Unfreeze (an error when it is not frozen is fine)."""
    subprocess.run(["fsfreeze", "--unfreeze", str(mnt)], capture_output=True, timeout=60)


def freezer(db: Path, seconds: float) -> list[str]:
    """The holder for fault_case: freezes the filesystem holding `db`, says "locked", thaws after `seconds`.
    It is its own process, so a bench that dies meanwhile still leaves the filesystem thawed."""
    m = shlex.quote(str(db.parent))
    return [
        "sh",
        "-c",
        f"trap 'fsfreeze --unfreeze {m}' EXIT; fsfreeze --freeze {m} && echo locked && sleep {seconds}",
    ]


def case_freeze(args: argparse.Namespace, tmp: Path) -> dict[str, Any]:
    why = why_not()
    if why is None:
        try:
            with loop_filesystem(tmp / "freeze") as mnt:
                return fault_case("freeze", freezer, 5.0 if args.quick else 20.0, args.reps_lock, mnt)
        except OSError as exc:
            why = str(exc)
    log(f"  freeze: skipped: {why}")
    return {"skipped": why, "rows": [("frozen filesystem: skipped", why, "", None, "", "", None)]}
