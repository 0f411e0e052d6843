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
    # The `__version__ = "..."` line, read as bytes (no text layer: this runs in every
    # process).
    import os

    try:
        fd = os.open(init_py, os.O_RDONLY)
        try:
            head = os.read(fd, 4096)
        finally:
            os.close(fd)
        for line in head.splitlines():
            if line.startswith(b"__version__"):
                return line.split(b"=", 1)[1].strip().strip(b"\"'").decode("ascii")
    except (OSError, IndexError, UnicodeDecodeError):
        pass
    return None


def _strata_find_spec(name):
    # importlib.machinery.PathFinder without importing importlib (half a millisecond at
    # start-up): the import system's own frozen module, in sys.modules from the start.
    import sys

    boot = sys.modules.get("_frozen_importlib_external")
    finder = getattr(boot, "PathFinder", None)
    if finder is None:
        import importlib.machinery

        finder = importlib.machinery.PathFinder
    return finder.find_spec(name)


def _strata_bytecode(embedded):
    # strata's installed copy of the agent lives in strata's own private directory, which
    # strata writes no bytecode into (it cannot know the job's Python). The first process
    # of each Python version compiles the whole copy there, once, also when the job sets
    # PYTHONDONTWRITEBYTECODE (which otherwise leaves every process compiling the agent
    # again): later processes only read it, and the agent's threads never compile.
    import os
    import sys

    boot = sys.modules.get("_frozen_importlib_external")
    cache = getattr(boot, "cache_from_source", None)
    if cache is None or sys.implementation.cache_tag is None:
        return
    # Written once everything is compiled: one stat in every later process.
    pycache = os.path.dirname(cache(os.path.join(embedded, "strata_feed", "__init__.py")))
    done = os.path.join(pycache, "strata-compiled-" + sys.implementation.cache_tag)
    if os.path.exists(done):
        return
    # Only strata's installed copy: agent-<digest>/, this user's, mode 0700 (a checkout
    # or a copy of someone else's is not ours to write into).
    try:
        st = os.stat(embedded)
    except OSError:
        return
    if not os.path.basename(embedded).startswith("agent-") or st.st_uid != os.geteuid() or st.st_mode & 0o077:
        return
    sources = []
    for sub in ("strata_run", "strata_feed"):
        d = os.path.join(embedded, sub)
        try:
            sources.extend(os.path.join(d, n) for n in sorted(os.listdir(d)) if n.endswith(".py"))
        except OSError:
            return
    if not sources:
        return
    try:
        os.makedirs(os.path.dirname(done), exist_ok=True)
    except OSError:
        return
    if not os.access(os.path.dirname(done), os.W_OK):
        return  # a read-only copy: nothing to gain from trying in every process
    import py_compile

    for path in sources:
        try:
            py_compile.compile(path, cfile=cache(path), doraise=True)
        except Exception:
            return
    try:
        os.close(os.open(done, os.O_WRONLY | os.O_CREAT, 0o600))
    except OSError:
        pass


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
            spec = _strata_find_spec("strata_feed")
            origin = getattr(spec, "origin", None) if spec is not None else None
            if origin and os.path.realpath(os.path.dirname(os.path.dirname(origin))) != os.path.realpath(embedded):
                if want is not None and _strata_version(origin) == want:
                    copy = "environment"
        added = False
        if copy == "embedded" and "strata_feed" not in sys.modules:
            try:
                _strata_bytecode(embedded)
            except Exception:
                pass
            sys.path.insert(0, embedded)
            added = True
        try:
            import strata_feed
        finally:
            # The package finds its own modules from now on: the job's path stays its own.
            if added:
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

    def identity(p):
        # The same directory, however spelt (a link, a relative path): one stat, where
        # realpath would take one per component.
        try:
            st = os.stat(p or ".")
            return (st.st_dev, st.st_ino)
        except (OSError, TypeError, ValueError):
            return None

    here = identity(os.path.dirname(os.path.abspath(__file__)))
    if here is None:
        return
    mine = sys.modules.get("sitecustomize")
    removed = []
    try:
        for i in range(len(sys.path) - 1, -1, -1):
            if identity(sys.path[i]) == here:
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
