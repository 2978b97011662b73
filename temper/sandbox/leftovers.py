"""What a crashed run leaves in a sandbox state folder, found and removed by the next run or `temper doctor`.

A sandbox's per-run state is an idmapped view of the templates (`views/<id>`, bwrap with a leased uid),
its own folder (`sb/<id>`, Landlock and `none` modes; a tmpfs as root) or an image sandbox's writable layer
(`uppers/<id>`, a loop-mounted filesystem, with its file `uppers/<id>.img`). Each records its owner
before it is made (temper/firsttime.py `write_owner`), so state whose owner is gone is a leftover:
unmounted and removed. Interrupted copies (`.tmp-*` beside templates/ and inside/ whose build lock no
one holds) go too. State with no owner recorded (an older temper's) is left to `temper doctor`.
"""

import logging
from dataclasses import dataclass
from pathlib import Path

from temper import firsttime
from temper.sandbox import idmap

log = logging.getLogger(__name__)
COPY = "interrupted copy"
UPPER = "image sandbox's writable layer"


@dataclass(frozen=True)
class Leftover:
    path: Path
    what: str
    owner: firsttime.Owner | None  # the dead owner recorded, or None: none recorded

    @property
    def reason(self) -> str:
        if self.what == COPY:
            return "its build lock is free"
        return f"owner {self.owner} is gone" if self.owner else "no owner recorded"

    def __str__(self) -> str:
        return f"{self.what} {self.path} ({self.reason})"


def find(state: Path, unrecorded: bool = True) -> list[Leftover]:
    """The leftovers under `state`; `unrecorded=False` skips state that records no owner."""
    found: list[Leftover] = []
    for sub, what in (("views", "idmapped view"), ("sb", "sandbox folder"), ("uppers", UPPER)):
        folder = state / sub
        entries = list(folder.iterdir()) if folder.is_dir() else []
        # its folders, and the records of any never made (killed between the record and the mkdir)
        targets = {p for p in entries if p.is_dir()} | {p.with_name(p.name[1:-6]) for p in entries
                                                         if p.name.startswith(".") and p.name.endswith(".owner")}
        for path in sorted(targets):
            gone, owner = firsttime.stale(path)
            if gone and (owner is not None or unrecorded):
                found.append(Leftover(path, what, owner))
    locks = state / "locks"
    for sub, prefix in (("templates", "template"), ("inside", "inside")):
        found += [Leftover(path, COPY, None) for path in
                  firsttime.interrupted_builds(state / sub, lambda name, p=prefix: locks / f"{p}-{name}.lock")]
    return found


def remove(leftover: Leftover) -> None:
    if leftover.what != COPY:
        idmap.unmount_view(leftover.path)  # a view, a tmpfs sandbox folder or a layer's volume (detached, busy or not)
    firsttime.remove(leftover.path)
    firsttime.drop_owner(leftover.path)
    if leftover.what == UPPER:  # its filesystem's file (volume.py)
        leftover.path.with_name(leftover.path.name + ".img").unlink(missing_ok=True)


def sweep(state: Path) -> list[Leftover]:
    """Remove what crashed runs left (owner recorded and gone); called once per state folder and process."""
    found = find(state, unrecorded=False)
    for leftover in found:
        log.warning("temper: removing a crashed run's %s", leftover)
        remove(leftover)
    return found
