#!/usr/bin/env python3
"""Finds cycles between the modules of a crate's library (default: abi-sdk-core and the host crates;
name crates as arguments, or `--all`).

For every crate under crates/, each directory or file module under src/ is a
node at every level (`jobs`, `jobs::host`, `jobs::host::delivery`, ...); an
edge a -> b means code in a (outside its #[cfg(test)] parts) names b through
`crate::` or `super::`. Edges between siblings of one parent are what count:
a cycle there means neither module can be read, tested or moved without the
other. Comments (doc links) are not dependencies; the crate root's
re-exports count as the module they come from. Prints each strongly connected group of modules with the edges that tie it,
one file and line per edge, and exits 1 if there is one.
"""

import re
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PATH_RE = re.compile(r"\b(crate|super(?:::super)*)((?:::[A-Za-z_][A-Za-z0-9_]*)+)")
ROOT_USE_RE = re.compile(r"^pub use ([a-z_][a-z0-9_]*)(?:::[a-z_][a-z0-9_]*)*::(\{[^;]*\}|[A-Za-z_][A-Za-z0-9_]*);", re.M | re.S)
USE_GROUP_RE = re.compile(r"\buse\s+(crate|super(?:::super)*)::\{([^;]*)\};", re.S)


def module_path(src: Path, file: Path) -> list[str]:
    parts = list(file.relative_to(src).with_suffix("").parts)
    if parts[-1] in ("mod", "lib", "main"):
        parts = parts[:-1]
    return parts


def code_outside_tests(text: str) -> str:
    """The code of a file before its tests, with comments blanked (a doc link
    is no dependency); line numbers are kept."""
    cut = text.find("#[cfg(test)]")
    text = text if cut < 0 else text[:cut]
    return re.sub(r"//[^\n]*", "", text)


def targets(text: str, here: list[str], is_mod_file: bool):
    """Module paths named from a file whose module path is `here`."""
    # `super` in foo/bar.rs (module foo::bar) is foo; in foo/mod.rs it is foo's parent.
    base = here if is_mod_file else here
    found = []

    def resolve(head: str, rest: list[str]):
        if head == "crate":
            return rest
        ups = head.count("super")
        anchor = base[: len(base) - ups] if ups <= len(base) else []
        return anchor + rest

    def line_of(pos: int) -> int:
        return text.count("\n", 0, pos) + 1

    for m in PATH_RE.finditer(text):
        head, tail = m.group(1), m.group(2)
        found.append((resolve(head, [p for p in tail.split("::") if p]), line_of(m.start())))
    for m in USE_GROUP_RE.finditer(text):
        head, group = m.group(1), m.group(2)
        for item in re.split(r",", group):
            name = item.strip().split("::")[0].strip()
            if re.fullmatch(r"[a-z_][a-z0-9_]*", name or ""):
                found.append((resolve(head, [name]), line_of(m.start())))
    return found


def root_reexports(src: Path) -> dict:
    """What the crate root re-exports, item name -> the module it lives in,
    so that `crate::Context` counts as a use of `runner`."""
    lib = src / "lib.rs"
    found = {}
    if lib.exists():
        for module, items in ROOT_USE_RE.findall(lib.read_text()):
            for item in re.split(r"[,{}\s]+", items):
                if item and item not in ("self",):
                    found[item] = module
    return found


def crate_cycles(src: Path):
    files = [f for f in src.rglob("*.rs") if "bin" not in f.relative_to(src).parts]
    modules = {tuple(module_path(src, f)) for f in files}
    reexports = root_reexports(src)
    edges: dict[tuple, dict] = {}
    for file in files:
        here = module_path(src, file)
        text = code_outside_tests(file.read_text())
        for target, line in targets(text, here, file.stem == "mod"):
            if target and target[0] in reexports:
                target = [reexports[target[0]]]
            # The longest known module prefix of the path named.
            while target and tuple(target) not in modules:
                target = target[:-1]
            if not target:
                continue
            a, b = tuple(here), tuple(target)
            # Lift both to the children of their closest common parent.
            common = 0
            while common < min(len(a), len(b)) and a[common] == b[common]:
                common += 1
            if common == len(a) or common == len(b):
                continue  # a parent and its own child
            witness = f"{file.relative_to(src.parent)}:{line}"
            edges.setdefault(a[: common + 1], {}).setdefault(b[: common + 1], witness)
    return strongly_connected(edges), edges


def strongly_connected(edges):
    """Tarjan's algorithm: the groups of two or more modules that reach each other."""
    index, low, on_stack, stack, groups = {}, {}, set(), [], []
    counter = [0]

    def visit(node):
        index[node] = low[node] = counter[0]
        counter[0] += 1
        stack.append(node)
        on_stack.add(node)
        for nxt in edges.get(node, {}):
            if nxt not in index:
                visit(nxt)
                low[node] = min(low[node], low[nxt])
            elif nxt in on_stack:
                low[node] = min(low[node], index[nxt])
        if low[node] == index[node]:
            group = []
            while True:
                top = stack.pop()
                on_stack.discard(top)
                group.append(top)
                if top == node:
                    break
            if len(group) > 1:
                groups.append(sorted(group))

    sys.setrecursionlimit(10000)
    for node in sorted(edges):
        if node not in index:
            visit(node)
    return groups


def name(module) -> str:
    return "::".join(module) or "crate"


def main() -> int:
    args = sys.argv[1:]
    crates = sorted((ROOT / "crates").glob("*/Cargo.toml"))
    if args != ["--all"]:
        wanted = set(args or ["abi-sdk-core", "abi-jobs", "abi-agents", "abi-models", "abi-workflows"])
        crates = [c for c in crates if c.parent.name in wanted]
    bad = 0
    for manifest in crates:
        src = manifest.parent / "src"
        if not src.is_dir():
            continue
        groups, edges = crate_cycles(src)
        for group in groups:
            bad += 1
            print(f"{manifest.parent.name}: a cycle between {', '.join(map(name, group))}")
            members = set(group)
            for a in group:
                for b, witness in sorted(edges.get(a, {}).items()):
                    if b in members:
                        print(f"  {name(a)} -> {name(b)}  ({witness})")
    names = ", ".join(c.parent.name for c in crates)
    if bad:
        print(f"module-cycles: {bad} cycle(s) in {names}")
        return 1
    print(f"module-cycles: no cycle between the modules of {names}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
