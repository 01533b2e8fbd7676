"""Writing a file that readers in other processes poll: all or nothing."""
from __future__ import annotations

import json
import os
import tempfile


def write_json(path: str, data, **dump_kw) -> str:
    """Write ``data`` as JSON to ``path`` atomically: into a temporary file beside
    it, then renamed over it, so a reader never sees half a file. ``dump_kw`` go
    to ``json.dump``. Returns ``path``."""
    d = os.path.dirname(os.path.abspath(path))
    os.makedirs(d, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix="." + os.path.basename(path) + ".", dir=d)
    try:
        with os.fdopen(fd, "w") as f:
            json.dump(data, f, **dump_kw)
        os.replace(tmp, path)
    except BaseException:
        try:
            os.unlink(tmp)
        except OSError:
            pass
        raise
    return path
