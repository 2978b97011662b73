"""The import table of docs/architecture.md, read from the document itself and checked on every module's
imports (top of the file and inside functions alike), and the boundaries that need a fresh interpreter."""

import ast
import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
TEMPER = ROOT / "temper"
DOC = ROOT / "docs" / "architecture.md"
NOT_TEMPER_CODE = (TEMPER / "envs" / "tasks",)  # task data: files that run inside sandboxes


def _section_rows(heading: str, min_rows: int = 1) -> list[list[str]]:
    """The rows of the first Markdown table under `## heading` in docs/architecture.md, header dropped."""
    lines = DOC.read_text().splitlines()
    start = lines.index(f"## {heading}") + 1
    rows = []
    for line in lines[start:]:
        if line.startswith("## "):
            break
        if line.startswith("|"):
            rows.append([cell.strip() for cell in line.strip().strip("|").split("|")])
        elif rows:
            break  # the first table ended
    assert len(rows) >= 2 + min_rows, f"no table (of {min_rows}+ rows) under '## {heading}' in {DOC}"
    return rows[2:]  # header and separator


def _names(cell: str) -> set[str]:
    return set(re.findall(r"`([A-Za-z_][\w]*)`", cell))


def _table(heading: str) -> dict[str, set[str]]:
    table: dict[str, set[str]] = {}
    for row in _section_rows(heading):
        (module,) = _names(row[0])
        assert module not in table, f"{module} has two rows in {DOC.name}"
        table[module] = _names(row[1])
    return table


def _allowed() -> dict[str, set[str]]:
    """module -> the temper modules it may import: a leaf those of its row, any other module its row's and
    every leaf."""
    leaves = _table("Leaves")
    others = _table("What each module may import")
    assert not set(leaves) & set(others), f"rows in both tables: {sorted(set(leaves) & set(others))}"
    assert all(names <= set(leaves) for names in leaves.values()), "a leaf may import only leaves"
    return leaves | {module: names | set(leaves) for module, names in others.items()}


def _exceptions() -> dict[tuple[str, str], str]:
    return {(next(iter(_names(row[0]))), next(iter(_names(row[1])))): row[2]
            for row in _section_rows("Known exceptions", min_rows=0)}


ALLOWED = _allowed()
EXCEPTIONS = _exceptions()


def _module_files() -> dict[str, list[Path]]:
    """Top-level modules of temper/ (a package or a .py file; the package's own __init__ is `temper`)."""
    modules: dict[str, list[Path]] = {"temper": [TEMPER / "__init__.py"]}
    for child in sorted(TEMPER.iterdir()):
        if child.is_dir() and (child / "__init__.py").exists():
            files = [p for p in sorted(child.rglob("*.py")) if not any(p.is_relative_to(d) for d in NOT_TEMPER_CODE)]
            modules[child.name] = files
        elif child.suffix == ".py" and child.name != "__init__.py":
            modules[child.stem] = [child]
    return modules


MODULES = _module_files()


def imported_modules(path: Path) -> set[str]:
    """The top-level temper modules `path` imports, anywhere in the file (`from temper import native`
    counts as `native`; a relative import is resolved against the file's package)."""
    package = list(path.relative_to(ROOT).parts[:-1])  # of a module file and of an __init__.py alike
    found: set[str] = set()

    def add(dotted: str, names: list[str]) -> None:
        parts = dotted.split(".")
        if parts[0] != "temper":
            return
        if len(parts) > 1:
            found.add(parts[1])
        else:  # `import temper` or `from temper import x`: x may be a module or a name of the package
            found.update(n if n in MODULES else "temper" for n in names or ["temper"])

    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            for alias in node.names:
                add(alias.name, [])
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package[: len(package) - (node.level - 1)]
                dotted = ".".join(base + ([node.module] if node.module else []))
            else:
                dotted = node.module or ""
            add(dotted, [a.name for a in node.names])
    return found


def _edges() -> dict[tuple[str, str], list[str]]:
    """(module, imported module) -> the files that import it."""
    edges: dict[tuple[str, str], list[str]] = {}
    for module, files in MODULES.items():
        for path in files:
            for imported in imported_modules(path) - {module}:
                edges.setdefault((module, imported), []).append(str(path.relative_to(ROOT)))
    return edges


def test_every_module_of_temper_has_one_row_and_every_row_a_module() -> None:
    assert set(MODULES) == set(ALLOWED), (
        f"modules without a row in {DOC.name}: {sorted(set(MODULES) - set(ALLOWED))}; "
        f"rows without a module: {sorted(set(ALLOWED) - set(MODULES))}")
    unknown = {(m, n) for m, names in ALLOWED.items() for n in names if n not in MODULES}
    assert not unknown, f"'may import' names modules that do not exist: {sorted(unknown)}"


def test_the_allowed_imports_have_no_cycle() -> None:
    done: set[str] = set()

    def visit(module: str, path: tuple[str, ...]) -> None:
        assert module not in path, "cycle in the import table: " + " -> ".join((*path, module))
        if module not in done:
            for imported in sorted(ALLOWED.get(module, ())):
                visit(imported, (*path, module))
            done.add(module)

    for module in sorted(ALLOWED):
        visit(module, ())


@pytest.mark.parametrize("module", sorted(ALLOWED))
def test_module_imports_only_what_its_row_allows(module: str) -> None:
    offenders = [f"{where} imports temper.{imported}"
                 for (importer, imported), files in sorted(_edges().items()) if importer == module
                 if imported not in ALLOWED[module] and (importer, imported) not in EXCEPTIONS
                 for where in files]
    assert not offenders, f"not allowed by {DOC.name}:\n" + "\n".join(offenders)


def test_each_known_exception_still_occurs() -> None:
    """A listed exception (there may be none) is forbidden by the table and still made by the code."""
    edges = _edges()
    for edge in sorted(EXCEPTIONS):
        assert edge[1] not in ALLOWED[edge[0]], f"{edge} is both allowed and listed as an exception"
        assert edge in edges, (f"{edge[0]} no longer imports {edge[1]}: delete its row under "
                               f"'Known exceptions' in {DOC.name}")


def test_the_import_scan_sees_function_level_and_package_imports() -> None:
    assert "engine" in imported_modules(TEMPER / "episode_runner.py")  # inside open_runner
    assert "native" in imported_modules(TEMPER / "engine" / "llm_engine.py")  # `from temper import native`
    assert "temper" in imported_modules(TEMPER / "cli" / "main.py")  # `from temper import __version__`


def test_the_vllm_worker_extension_imports_only_what_vllms_venv_has() -> None:
    """It runs inside vLLM's interpreter (.venv-vllm), where temper's dependencies are not installed."""
    path = TEMPER / "rollout_servers" / "vllm_worker_extension.py"
    tree = ast.parse(path.read_text())
    names = {a.name for n in ast.walk(tree) if isinstance(n, ast.Import) for a in n.names}
    names |= {n.module for n in ast.walk(tree) if isinstance(n, ast.ImportFrom) and n.module}
    assert names == {"hashlib", "pathlib", "safetensors.torch"}, names
    init = ast.parse((TEMPER / "rollout_servers" / "__init__.py").read_text())
    assert not [n for n in ast.walk(init) if isinstance(n, ast.Import | ast.ImportFrom)]  # imported first


def _modules_after_import(module: str) -> set[str]:
    code = f"import sys, {module}; print('\\n'.join(sys.modules))"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, timeout=120)
    return set(out.stdout.split())


def test_the_generation_boundary_imports_no_torch_and_no_engine() -> None:
    mods = _modules_after_import("temper.generation")
    assert "temper.generation.remote_client" in mods  # the check saw the whole package
    assert "torch" not in mods
    assert not {m for m in mods if m.startswith("temper.engine")}


def test_agents_and_environments_load_without_the_engine() -> None:
    mods = _modules_after_import("temper.agent, temper.envs, temper.envs.suites")
    assert "temper.agent.loop" in mods and "temper.envs.suites.terminal" in mods
    assert not {m for m in mods if m.startswith(("temper.engine", "temper.models", "temper.serve"))}


def test_the_external_agent_endpoint_loads_without_the_engine() -> None:
    """It is serve's route layer plus /exec and /files: neither may pull the engine or the models in."""
    mods = _modules_after_import("temper.external.external_episode")
    assert "temper.external.external_episode" in mods
    assert not {m for m in mods if m.startswith(("temper.engine", "temper.models", "temper.serve.variants"))}


def test_no_package_import_cycle() -> None:
    """Packages of temper/ form no import cycle: none at import time (module level, TYPE_CHECKING aside),
    and none with function-level imports counted too. Self-contained: its own scan, not the table's."""

    def imports(path: Path, import_time: bool) -> set[str]:
        tree = ast.parse(path.read_text(), str(path))
        nodes: list[ast.AST] = []
        if import_time:
            todo = list(tree.body)
            while todo:
                node = todo.pop()
                if isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test):
                    continue
                if isinstance(node, ast.If | ast.Try):
                    todo += [*node.body, *node.orelse, *getattr(node, "finalbody", []),
                             *(s for h in getattr(node, "handlers", []) for s in h.body)]
                nodes.append(node)
        else:
            nodes = list(ast.walk(tree))
        names = {a.name for n in nodes if isinstance(n, ast.Import) for a in n.names}
        names |= {n.module for n in nodes if isinstance(n, ast.ImportFrom) and n.module and not n.level}
        names |= {f"temper.{a.name}" for n in nodes if isinstance(n, ast.ImportFrom) and n.module == "temper"
                  for a in n.names}
        return {n.split(".")[1] for n in names if n.startswith("temper.")}

    def cycle(graph: dict[str, set[str]]) -> list[str] | None:
        done: set[str] = set()

        def visit(pkg: str, path: tuple[str, ...]) -> list[str] | None:
            if pkg in path:
                return [*path, pkg]
            if pkg not in done:
                for imported in sorted(graph[pkg]):
                    if (found := visit(imported, (*path, pkg))) is not None:
                        return found
                done.add(pkg)
            return None

        return next((c for pkg in sorted(graph) if (c := visit(pkg, ())) is not None), None)

    packages = {p.name for p in TEMPER.iterdir() if (p / "__init__.py").exists()}
    for import_time in (True, False):
        graph: dict[str, set[str]] = {p: set() for p in packages}
        for pkg in packages:
            for path in (TEMPER / pkg).rglob("*.py"):
                if "tasks" not in path.relative_to(TEMPER).parts:
                    graph[pkg] |= {m for m in imports(path, import_time) & packages if m != pkg}
        found = cycle(graph)
        assert found is None, (f"import cycle {'at import time' if import_time else '(function-level imports too)'}"
                               f": {' -> '.join(found or [])}")


def test_external_builds_no_openai_envelope() -> None:
    """temper/external is serve's route layer over the run's client: the chat.completion, text_completion
    and response objects, error bodies and SSE chunks all come from temper.serve, none is built here."""
    shapes = {"chat.completion", "chat.completion.chunk", "text_completion", "response", "model", "list", "[DONE]"}
    keys = {"object", "choices", "delta", "finish_reason", "output_text"}
    makers = {"JSONResponse", "StreamingResponse", "EventStream", "error_body", "sse", "stream_job"}
    offenders = []
    for path in sorted((TEMPER / "external").rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            where = f"{path.relative_to(ROOT)}:{getattr(node, 'lineno', 0)}"
            if isinstance(node, ast.Constant) and isinstance(node.value, str) and (
                    node.value in shapes or node.value.startswith(("data: ", "event: "))):
                offenders.append(f"{where}: the string {node.value!r}")
            elif isinstance(node, ast.Dict) and ({k.value for k in node.keys if isinstance(k, ast.Constant)} & keys
                                                 or any(isinstance(k, ast.Constant) and k.value == "error"
                                                        and isinstance(v, ast.Dict)
                                                        for k, v in zip(node.keys, node.values, strict=True))):
                offenders.append(f"{where}: a dict shaped like an OpenAI body (or an error body)")
            elif isinstance(node, ast.Name | ast.alias) and (getattr(node, "id", None) or
                                                             getattr(node, "name", None)) in makers:
                offenders.append(f"{where}: {getattr(node, 'id', None) or node.name}")
    assert not offenders, "\n".join(offenders)
