# strata run: starts the strata allocator feed in every Python process started with this
# directory on PYTHONPATH, then runs the sitecustomize this one hides, if any. It never
# raises and never imports a framework: the agent waits on its own thread until the job
# initialises one.
#
# Which copy of the agent runs: strata installs its own (embedded) copy in the directory
# above this one. When the job's environment has strata_feed installed at the same version
# (strata installed with pip into the job's environment), that one is used; otherwise the
# embedded copy is imported. The feed's hello names the copy (agent_copy, agent_path).
#
# Environment: STRATA_FEED_DIR (read by strata_feed), STRATA_FEED_INTERVAL (seconds, 0.5).


def _strata_version(init_py):
    try:
        with open(init_py) as f:
            for line in f:
                if line.startswith("__version__"):
                    return line.split("=", 1)[1].strip().strip("\"'")
    except (OSError, IndexError):
        pass
    return None


def _strata_start():
    try:
        import os
        import sys

        if sys.version_info < (3, 8):
            return
        here = os.path.dirname(os.path.abspath(__file__))
        embedded = os.path.dirname(here)
        want = _strata_version(os.path.join(embedded, "strata_feed", "__init__.py"))
        copy = "embedded"
        if "strata_feed" not in sys.modules:
            import importlib.machinery

            spec = importlib.machinery.PathFinder.find_spec("strata_feed")
            origin = getattr(spec, "origin", None) if spec is not None else None
            if origin and os.path.realpath(os.path.dirname(os.path.dirname(origin))) != os.path.realpath(embedded):
                if want is not None and _strata_version(origin) == want:
                    copy = "environment"
        added = False
        if copy == "embedded" and "strata_feed" not in sys.modules:
            sys.path.insert(0, embedded)
            added = True
        try:
            import strata_feed
        finally:
            if added:
                # The package finds its own modules from now on: the job's path stays its own.
                try:
                    sys.path.remove(embedded)
                except ValueError:
                    pass
        if getattr(strata_feed, "_copy", None) is None:
            strata_feed._copy = copy
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
