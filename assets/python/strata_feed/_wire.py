"""A feed line as it goes on the wire: one JSON object, compact, ending in a newline
(encode), the most bytes a line may have, its newline included (LINE_LIMIT), and the most
the agent makes one that may be sent again from its backlog or kept lines (MADE_LIMIT);
PROTOCOL.md, "Lines".

A leaf: it imports nothing of the agent's. The serving side (_core) and the sampling side
(_sampler) both encode lines, and _core starts the sampler, so the sampler takes these from
here rather than from _core. json is imported at the first line encoded, not at start-up.
"""

LINE_LIMIT = 65536

# A sample or oom sent again from the backlog, and a line kept for the monitors to come (a
# segment map, a sites outcome), carry `"backlog": true`, added by backlog_form: such a line
# is made within MADE_LIMIT, so that its backlog form is still within LINE_LIMIT. (Made up to
# LINE_LIMIT, a segment map cut to fit reached a monitor that came after it a few bytes too
# long, and the monitor discarded it.)
BACKLOG_MARK = b',"backlog":true'
MADE_LIMIT = LINE_LIMIT - len(BACKLOG_MARK)


def backlog_form(line):
    """The same message with "backlog": true (line is one JSON object ending in "}\\n")."""
    return line[:-2] + BACKLOG_MARK + b"}\n"


def encode(obj):
    import json

    return (json.dumps(obj, separators=(",", ":"), allow_nan=False) + "\n").encode("utf-8")
