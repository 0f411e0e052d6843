# strata run: starts the strata allocator feed in every Python process started with this
# directory on PYTHONPATH (the directory holding the strata_feed package is there too), then
# runs the sitecustomize this one hides, if any. It never raises and never imports a
# framework: the agent waits on its own thread until the job initialises one.
#
# Environment: STRATA_FEED_DIR (read by strata_feed), STRATA_FEED_INTERVAL (seconds, 0.5).


def _strata_start():
    try:
        import os
        import sys

        if sys.version_info < (3, 8):
            return
        import strata_feed

        strata_feed.start(interval=os.environ.get("STRATA_FEED_INTERVAL") or 0.5)
    except Exception:
        pass


def _strata_chain():
    # Only the first sitecustomize on sys.path runs, and PYTHONPATH comes before
    # site-packages: import the next one as site.py would have.
    import os
    import sys

    def resolved(p):
        try:
            return os.path.realpath(p or os.getcwd())
        except Exception:
            return p

    try:
        here = resolved(os.path.dirname(os.path.abspath(__file__)))
    except Exception:
        return
    mine = sys.modules.get("sitecustomize")
    removed = []
    try:
        for i in range(len(sys.path) - 1, -1, -1):
            if resolved(sys.path[i]) == here:
                removed.append((i, sys.path.pop(i)))
        removed.reverse()
        sys.modules.pop("sitecustomize", None)
        try:
            try:
                import sitecustomize  # noqa: F401  (the next one on sys.path)
            except ImportError as exc:
                if getattr(exc, "name", None) != "sitecustomize":
                    raise
                if mine is not None:
                    sys.modules["sitecustomize"] = mine
        except Exception as err:
            # What site.py does with an error in sitecustomize.
            if mine is not None and "sitecustomize" not in sys.modules:
                sys.modules["sitecustomize"] = mine
            try:
                if sys.flags.verbose:
                    sys.excepthook(*sys.exc_info())
                else:
                    sys.stderr.write(
                        "Error in sitecustomize; set PYTHONVERBOSE for traceback:\n"
                        "%s: %s\n" % (err.__class__.__name__, err)
                    )
            except Exception:
                pass
    finally:
        for i, p in removed:
            try:
                sys.path.insert(i, p)
            except Exception:
                pass


_strata_start()
try:
    _strata_chain()
except Exception:
    pass
