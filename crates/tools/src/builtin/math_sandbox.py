# The `math` tool's sandbox (turnstone-tools, src/builtin/math.rs): run as
#   python3 -I -S -c <this> <cpu_seconds> <memory_bytes>
# with the model's code on standard input, in an empty temporary directory, with an almost
# empty environment (and in a network namespace of its own where the kernel allows).
# Layers, each enough on its own for what it guards (docs/security.md, "The math sandbox"):
#   1. the code is parsed first: imports outside ALLOWED, names with a double underscore
#      and attributes starting with "_" are refused before anything runs;
#   2. it runs with a small set of builtins (no open, exec, eval, compile, getattr, input,
#      globals, vars, breakpoint) and an __import__ that only hands out ALLOWED modules;
#   3. an audit hook (it cannot be removed) refuses opening files, sockets, processes,
#      ctypes and any import that is not already loaded;
#   4. resource limits: CPU seconds, address space, no file writes (FSIZE 0), no new
#      processes (NPROC 0) and no new file descriptors (NOFILE 3).
import ast
import resource
import sys

ALLOWED = (
    "math", "cmath", "decimal", "fractions", "statistics", "random", "itertools",
    "functools", "operator", "collections", "heapq", "bisect", "re", "string",
    "datetime", "json", "numbers", "textwrap", "calendar",
)
SAFE_BUILTINS = (
    "abs", "all", "any", "ascii", "bin", "bool", "bytearray", "bytes", "callable", "chr",
    "complex", "dict", "divmod", "enumerate", "filter", "float", "format", "frozenset",
    "hash", "hex", "int", "isinstance", "issubclass", "iter", "len", "list", "map", "max",
    "min", "next", "object", "oct", "ord", "pow", "print", "range", "repr", "reversed",
    "round", "set", "slice", "sorted", "str", "sum", "tuple", "zip", "__build_class__",
    "ArithmeticError", "AssertionError", "AttributeError", "Exception", "IndexError",
    "KeyError", "LookupError", "MemoryError", "NameError", "NotImplementedError",
    "OverflowError", "RecursionError", "RuntimeError", "StopIteration", "TypeError",
    "ValueError", "ZeroDivisionError", "True", "False", "None", "NotImplemented",
    "Ellipsis",
)


class Refused(Exception):
    pass


def fail(kind, message):
    sys.stdout.flush()
    sys.stderr.write(kind + ": " + message + "\n")
    sys.stderr.flush()
    sys.exit(3)


def check(tree):
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                top = alias.name.split(".")[0]
                if top not in ALLOWED:
                    raise Refused("import of '%s' is not allowed (allowed: %s)"
                                  % (alias.name, ", ".join(ALLOWED)))
        elif isinstance(node, ast.ImportFrom):
            top = (node.module or "").split(".")[0]
            if node.level or top not in ALLOWED:
                raise Refused("import from '%s' is not allowed (allowed: %s)"
                              % (node.module or ".", ", ".join(ALLOWED)))
        elif isinstance(node, ast.Attribute) and node.attr.startswith("_"):
            raise Refused("access to the attribute '%s' is not allowed (line %d)"
                          % (node.attr, node.lineno))
        elif isinstance(node, ast.Name) and node.id.startswith("__"):
            raise Refused("the name '%s' is not allowed (line %d)" % (node.id, node.lineno))


def main():
    cpu, memory = int(sys.argv[1]), int(sys.argv[2])
    source = sys.stdin.read()
    sys.stdin.close()
    try:
        tree = ast.parse(source, "<math>", "exec")
        check(tree)
        code = compile(tree, "<math>", "exec")
    except SyntaxError as e:
        fail("SyntaxError", "%s (line %s)" % (e.msg, e.lineno))
    except Refused as e:
        fail("Refused", str(e))

    import builtins
    for name in ALLOWED:
        __import__(name)
    import _strptime  # noqa: F401  (datetime.strptime imports it lazily)
    import traceback

    modules = {name: sys.modules[name] for name in ALLOWED}

    def guarded_import(name, globals=None, locals=None, fromlist=(), level=0):
        top = name.split(".")[0]
        if not level and top not in modules and name.startswith("_") and name in sys.modules:
            # An allowed module's own lazy import of a loaded helper (datetime: _strptime).
            return sys.modules[name]
        if level or top not in modules:
            raise ImportError("import of '%s' is not allowed" % name)
        module = sys.modules.get(name)
        if module is None:
            raise ImportError("import of '%s' is not allowed" % name)
        return module if fromlist else modules[top]

    safe = {name: getattr(builtins, name) for name in SAFE_BUILTINS if hasattr(builtins, name)}
    safe["__import__"] = guarded_import
    env = {"__builtins__": safe, "__name__": "__math__"}

    started = [False]
    # The wrapper's own exec of the checked code is the one exec allowed.
    exec_left = [1]

    def audit(event, args):
        if not started[0]:
            return
        if event == "exec" and exec_left[0]:
            exec_left[0] -= 1
            return
        if event in ("open", "os.system", "subprocess.Popen", "os.posix_spawn", "os.fork",
                     "os.forkpty", "os.exec", "os.spawn", "os.startfile", "os.kill",
                     "os.killpg", "pty.spawn", "import", "compile", "exec", "code.__new__",
                     "function.__new__", "sys._getframe", "sys._current_frames",
                     "sys.setprofile", "sys.settrace", "gc.get_objects",
                     "gc.get_referrers", "gc.get_referents", "builtins.input",
                     "shutil.rmtree", "shutil.copyfile", "webbrowser.open") \
                or event.startswith(("socket.", "ctypes.", "os.", "subprocess.", "_winapi.",
                                     "urllib.", "http.", "ftplib.", "smtplib.")):
            if event == "import" and args and args[0] in sys.modules:
                return
            raise RuntimeError("the math sandbox refuses '%s'" % event)

    resource.setrlimit(resource.RLIMIT_CPU, (cpu, cpu + 1))
    resource.setrlimit(resource.RLIMIT_AS, (memory, memory))
    resource.setrlimit(resource.RLIMIT_FSIZE, (0, 0))
    resource.setrlimit(resource.RLIMIT_NPROC, (0, 0))
    resource.setrlimit(resource.RLIMIT_NOFILE, (3, 3))
    sys.addaudithook(audit)
    started[0] = True
    try:
        exec(code, env)
    except MemoryError:
        started[0] = False
        fail("MemoryError", "the code needed more than the %d MB memory limit"
             % (memory // (1024 * 1024)))
    except RecursionError:
        fail("RecursionError", "maximum recursion depth exceeded")
    except SystemExit:
        pass
    except BaseException as e:
        started[0] = False
        frames = [f for f in traceback.extract_tb(e.__traceback__) if f.filename == "<math>"]
        where = " (line %d)" % frames[-1].lineno if frames else ""
        fail(type(e).__name__, "%s%s" % (e, where))
    sys.stdout.flush()


main()
