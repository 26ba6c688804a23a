#!/usr/bin/env python3
"""How many workspace source files one cell's walk crosses (issue 40), from a callgrind profile
of the harness process running that one cell:

    valgrind --tool=callgrind --callgrind-out-file=walk.out \\
        target/debug/harness run -j 1 --out DIR CELL
    python3 .ci/cell-walk.py walk.out .

Counted: the functions reachable from `matrix::cell::run_cell` in the profile's call graph,
following only calls into workspace functions (a closure is reached with the function that
holds it); nothing is followed through std, tokio or serde, whose shared generic functions
would link callers that never call each other. Each function is mapped by its symbol path
(`crate::module::item`, `<Type as Trait>::f` by the type's path) to its module's file; the
number is the distinct files. Only the harness process is profiled: the fake app-server, the
tap's relay and the reference driver are processes of their own (the same binary) and are
not counted. Debug build (no inlining hides a function).
"""

import collections
import os
import re
import sys

STD = ("core::", "alloc::", "std::", "<core::", "<alloc::", "<std::")
START = "matrix::cell::run_cell"


def crate_sources(workspace):
    """Each workspace crate's `src/`, by the name its symbols start with."""
    roots = {}
    for parent in ("harness/crates", "."):
        for name in os.listdir(os.path.join(workspace, parent)):
            src = os.path.join(workspace, parent, name, "src")
            if os.path.isdir(src):
                roots[name.replace("-", "_")] = src
    roots["harness"] = os.path.join(workspace, "harness", "src")
    return roots


def read_call_graph(path):
    """Every function named in the profile, and who calls whom (names decompressed)."""
    names, edges, functions, current = {}, collections.defaultdict(set), set(), None

    def name(rest):
        match = re.match(r"\((\d+)\)(?: (.*))?", rest)
        if not match:
            return rest
        if match.group(2) is not None:
            names[match.group(1)] = match.group(2)
        return names.get(match.group(1), "?")

    with open(path, errors="replace") as profile:
        for line in profile:
            key, _, rest = line.rstrip("\n").partition("=")
            if key == "fn":
                current = name(rest)
                functions.add(current)
            elif key == "cfn":
                callee = name(rest)
                functions.add(callee)
                edges[current].add(callee)
    return functions, edges


def own_path(symbol):
    """The module path a function is defined under: `<T as Trait>::f` by T, generics dropped,
    cut at the first segment that is no identifier (`{{closure}}`, `_`)."""
    symbol = re.sub(r"'\d+$", "", symbol)
    if symbol.startswith("<"):
        depth, end = 0, len(symbol)
        for at, char in enumerate(symbol):
            if char == "<":
                depth += 1
            elif char == ">":
                depth -= 1
                if depth == 0:
                    end = at
                    break
            elif depth == 1 and symbol.startswith(" as ", at):
                end = at
                break
        symbol = symbol[1:end].lstrip("&").replace("mut ", "").replace("dyn ", "")
    plain, depth = "", 0
    for char in symbol:
        if char == "<":
            depth += 1
        elif char == ">":
            depth -= 1
        elif depth == 0:
            plain += char
    segments = []
    for segment in plain.split("::"):
        if segment == "_" or not re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*", segment):
            break
        segments.append(segment)
    return segments


def file_of(symbol, roots, workspace):
    segments = own_path(symbol)
    if symbol.startswith(STD) or len(segments) < 2 or segments[0] not in roots:
        return None
    src, modules = roots[segments[0]], segments[1:]
    for count in range(len(modules), 0, -1):
        for candidate in (
            os.path.join(src, *modules[:count]) + ".rs",
            os.path.join(src, *modules[:count], "mod.rs"),
        ):
            if os.path.isfile(candidate):
                return os.path.relpath(candidate, workspace)
    for root_file in ("lib.rs", "main.rs"):
        if os.path.isfile(os.path.join(src, root_file)):
            return os.path.relpath(os.path.join(src, root_file), workspace)
    return None


def main(profile, workspace):
    roots = crate_sources(workspace)
    functions, edges = read_call_graph(profile)
    if START not in functions:
        sys.exit(f"{profile}: no `{START}` in the profile (a release build inlines it?)")
    closures = collections.defaultdict(set)
    for function in functions:
        match = re.match(r"(.*?)::\{\{closure\}\}", function)
        if match:
            closures[match.group(1)].add(function)
    seen, todo = {START}, [START]
    while todo:
        function = todo.pop()
        reached = {g for g in edges.get(function, ()) if file_of(g, roots, workspace)}
        reached |= closures.get(function, set())
        for callee in reached - seen:
            seen.add(callee)
            todo.append(callee)
    files = collections.defaultdict(set)
    for function in seen:
        path = file_of(function, roots, workspace)
        if path:
            files[path].add(function)
    print(f"{len(files)} workspace files ({len(seen)} functions reached from {START})")
    for path in sorted(files):
        print(f"{len(files[path]):5} {path}")


if __name__ == "__main__":
    if len(sys.argv) != 3:
        sys.exit("usage: cell-walk.py CALLGRIND_OUT WORKSPACE_ROOT")
    main(sys.argv[1], sys.argv[2])
