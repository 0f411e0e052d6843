# strata attach PID: the script handed to sys.remote_exec(PID, path) (CPython 3.14+).
#
# sys.remote_exec runs the file's text in the target's main thread, in a fresh namespace
# with no __file__, so the script cannot find anything by itself. The caller (strata's Rust
# side) writes a COPY of this file whose first lines assign these names, each value a JSON
# string literal (valid Python) or a number, with paths as seen in the target's mount
# namespace (through /proc/PID/root/... from outside a container):
#
#   STRATA_PACKAGE_DIR = "/abs/dir"         # the directory that holds strata_feed/
#   STRATA_STATUS_PATH = "/abs/x.status"    # where this script writes its JSON status
#   STRATA_FEED_DIR = "/tmp/strata-0"       # optional; else $STRATA_FEED_DIR or the default
#   STRATA_FEED_INTERVAL = 0.5              # optional
#
# Run directly (python3 _attach.py, or exec with __file__ set), the package dir is the
# parent of this file's directory and the status goes to <this file>.status.
#
# The status file is written once, atomically (a temporary file then rename), as one JSON
# object: {"ok": true, "pid": 4242, "socket": "/tmp/strata-0/4242.sock", "already": false}
# or {"ok": false, "pid": 4242, "error": "..."}. Nothing here raises into the target.


def _strata_attach(ns):
    import json
    import os
    import sys

    status_path = ns.get("STRATA_STATUS_PATH")
    pkg_dir = ns.get("STRATA_PACKAGE_DIR")
    me = ns.get("__file__")
    if me:
        me = os.path.abspath(me)
        if not pkg_dir:
            pkg_dir = os.path.dirname(os.path.dirname(me))
        if not status_path:
            status_path = me + ".status"
    status = {"ok": False, "pid": os.getpid()}
    try:
        if not pkg_dir:
            raise RuntimeError("STRATA_PACKAGE_DIR is not set in the attach script")
        already = "strata_feed" in sys.modules
        added = pkg_dir not in sys.path
        if added:
            sys.path.insert(0, pkg_dir)
        try:
            import strata_feed
        finally:
            # The package finds its own modules from now on: leave the job's path as it was.
            if added:
                try:
                    sys.path.remove(pkg_dir)
                except ValueError:
                    pass

        info = strata_feed.info()
        was_running = bool(info.get("running"))
        kwargs = {}
        if ns.get("STRATA_FEED_DIR"):
            kwargs["feed_dir"] = ns["STRATA_FEED_DIR"]
        if ns.get("STRATA_FEED_INTERVAL"):
            kwargs["interval"] = ns["STRATA_FEED_INTERVAL"]
        ok = strata_feed.start(**kwargs)
        info = strata_feed.info()
        if ok:
            status = {
                "ok": True,
                "pid": os.getpid(),
                "socket": info.get("socket"),
                "already": was_running,
                "imported_before": already,
            }
        else:
            status = {"ok": False, "pid": os.getpid(), "error": info.get("error") or "start failed"}
    except Exception as e:
        status = {"ok": False, "pid": os.getpid(), "error": "%s: %s" % (type(e).__name__, e)}
    if status_path:
        try:
            tmp = "%s.%d.tmp" % (status_path, os.getpid())
            with open(tmp, "w") as f:
                f.write(json.dumps(status) + "\n")
            os.replace(tmp, status_path)
        except Exception:
            pass


try:
    _strata_attach(globals())
except Exception:
    pass
