"""Choose the isolation mode: the configured one if it works here, else say exactly why not."""

import logging
import os

from temper.sandbox import bwrap, seccomp
from temper.sandbox.config import SandboxConfig
from temper.sandbox.errors import IsolationUnavailable
from temper.sandbox.inside import native

log = logging.getLogger("temper.sandbox")
_warned = False

NONE_WARNING = ("isolation: none — commands run as this user with its access to the host's files, network and "
                "processes; only rlimits and the wall-time limit apply")


def landlock_ok() -> tuple[bool, str]:
    abi = native.landlock_abi()
    if abi < 1:
        return False, "Landlock is not available in this kernel"
    ok, why = seccomp.available()
    if not ok:
        return False, why
    return True, f"Landlock ABI {abi}" + ("" if abi >= 6 else " (no signal scoping: ABI < 6)")


def resolve(cfg: SandboxConfig) -> str:
    global _warned
    if cfg.image is not None:  # an image's root: bwrap with a user namespace the host maps (as root)
        ok, why = bwrap.probe(cfg.uid)
        if not ok:
            raise IsolationUnavailable(f"image sandboxes need bwrap: {why}")
        if os.geteuid() != 0:
            raise IsolationUnavailable("image sandboxes need root on the host (to map 65,536 uids for the image)")
        return "image"
    if cfg.isolation == "none":
        if not _warned:
            log.warning(NONE_WARNING)
            _warned = True
        return "none"
    b_ok, b_why = bwrap.probe(cfg.uid)
    if cfg.isolation == "bwrap" or (cfg.isolation == "auto" and b_ok):
        if not b_ok:
            raise IsolationUnavailable(f"isolation: bwrap is unavailable here: {b_why}")
        s_ok, s_why = seccomp.available()
        if not s_ok:
            raise IsolationUnavailable(f"isolation: bwrap needs seccomp: {s_why}")
        return "bwrap"
    l_ok, l_why = landlock_ok()
    if not l_ok:
        if cfg.isolation == "landlock":
            raise IsolationUnavailable(f"isolation: landlock is unavailable here: {l_why}")
        raise IsolationUnavailable(
            f"no isolation works here ({b_why}; {l_why}); set isolation: none to run without, knowingly")
    return "landlock"
