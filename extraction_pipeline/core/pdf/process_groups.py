"""Process groups: a child started in a session of its own is its group, killed and watched as one
(pdf/isolation.py, pdf/warm.py, the instance's servers)."""

from __future__ import annotations

import os


def group_alive(pgid: int) -> bool:
    """True while any process (a zombie too: reap your child first) is in process group ``pgid``."""
    try:
        os.killpg(pgid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True
