"""A feed line as it goes on the wire: one JSON object, compact, ending in a newline
(encode), and the most bytes a line may have, its newline included (LINE_LIMIT);
PROTOCOL.md, "Lines".

A leaf: it imports nothing of the agent's. The serving side (_core) and the sampling side
(_sampler) both encode lines, and _core starts the sampler, so the sampler takes these from
here rather than from _core. json is imported at the first line encoded, not at start-up.
"""

LINE_LIMIT = 65536


def encode(obj):
    import json

    return (json.dumps(obj, separators=(",", ":"), allow_nan=False) + "\n").encode("utf-8")
