"""torch's CUDA allocator settings as torch reads them from the environment."""

import os

GENERIC_CONF_SINCE = (2, 9)  # torch reads PYTORCH_ALLOC_CONF from 2.9 on


def split_alloc_conf(raw):
    """'k:v,k:[a:1,b:2]' -> {k: v, ...}; commas inside [...] belong to the value."""
    conf = {}
    if not raw:
        return conf
    depth, cur, items = 0, [], []
    for ch in raw:
        if ch == "[":
            depth += 1
        elif ch == "]":
            depth = max(0, depth - 1)
        if ch == "," and depth == 0:
            items.append("".join(cur))
            cur = []
        else:
            cur.append(ch)
    items.append("".join(cur))
    for item in items:
        if ":" in item:
            k, v = item.split(":", 1)
            conf[k.strip()] = v.strip()
    return conf


def alloc_conf_from_env(environ=None, generic=True):
    """The string torch's CUDA allocator parses: PYTORCH_CUDA_ALLOC_CONF wins; the generic
    PYTORCH_ALLOC_CONF is read only when that is unset, and only by a torch that knows it
    (`generic`). Returns (variable name or None, raw string or None)."""
    env = os.environ if environ is None else environ
    raw = env.get("PYTORCH_CUDA_ALLOC_CONF")
    if raw is not None:
        return "PYTORCH_CUDA_ALLOC_CONF", raw
    if generic:
        raw = env.get("PYTORCH_ALLOC_CONF")
        if raw is not None:
            return "PYTORCH_ALLOC_CONF", raw
    return None, None


def parse_alloc_conf(environ=None):
    """(raw, {key: value}) as the CUDA allocator of a current torch reads the environment."""
    _, raw = alloc_conf_from_env(environ)
    return raw, split_alloc_conf(raw)
