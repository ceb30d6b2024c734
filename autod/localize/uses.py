"""What a definition uses, read from its AST: free dotted names, calls, local types, special methods.

A method called on a parameter or local whose type the AST does not tell is recorded as `?.name`.

Pure functions over `ast` nodes; the index stores their results and `resolve` follows them.
"""

from __future__ import annotations

import ast

MAX_REFS = 400  # names one definition may record


def dotted(node: ast.AST) -> str | None:
    """`a.b.c` for a Name/Attribute chain (calls and subscripts on the way end it), else None."""
    parts: list[str] = []
    while isinstance(node, ast.Attribute):
        parts.append(node.attr)
        node = node.value
    if isinstance(node, ast.Call):  # `Foo(x).bar`: a member of what Foo returns
        base = dotted(node.func)
        return ".".join([base, *reversed(parts)]) if base else None
    if isinstance(node, ast.Name):
        parts.append(node.id)
        return ".".join(reversed(parts))
    return None


_BINOPS = {
    ast.Add: "__add__", ast.Sub: "__sub__", ast.Mult: "__mul__", ast.Div: "__truediv__",
    ast.FloorDiv: "__floordiv__", ast.Mod: "__mod__", ast.Pow: "__pow__", ast.BitAnd: "__and__",
    ast.BitOr: "__or__", ast.BitXor: "__xor__", ast.LShift: "__lshift__", ast.RShift: "__rshift__",
    ast.MatMult: "__matmul__",
}
_CMPOPS = {
    ast.Eq: "__eq__", ast.NotEq: "__ne__", ast.Lt: "__lt__", ast.LtE: "__le__", ast.Gt: "__gt__",
    ast.GtE: "__ge__", ast.In: "__contains__", ast.NotIn: "__contains__",
}
_UNARY = {ast.Invert: "__invert__", ast.USub: "__neg__", ast.Not: "__bool__"}
_BUILTIN_DUNDER = {
    "repr": "__repr__", "str": "__str__", "len": "__len__", "iter": "__iter__", "hash": "__hash__",
    "bool": "__bool__", "reversed": "__reversed__", "list": "__iter__", "sorted": "__iter__",
    "int": "__int__", "float": "__float__", "format": "__format__", "next": "__next__",
    "copy": "__copy__", "deepcopy": "__deepcopy__", "dumps": "__reduce_ex__",
}


def dunders(node: ast.AST) -> tuple[str, ...]:
    """Special methods a function's operators and builtin calls reach (`a & b`, `x[k]`, `repr(x)`)."""
    out: dict[str, None] = {}
    for sub in ast.walk(node):
        if isinstance(sub, ast.BinOp | ast.AugAssign) and type(sub.op) in _BINOPS:
            out.setdefault(_BINOPS[type(sub.op)], None)
        elif isinstance(sub, ast.Compare):
            for op in sub.ops:
                if type(op) in _CMPOPS:
                    out.setdefault(_CMPOPS[type(op)], None)
        elif isinstance(sub, ast.UnaryOp) and type(sub.op) in _UNARY:
            out.setdefault(_UNARY[type(sub.op)], None)
        elif isinstance(sub, ast.Subscript):
            name = {ast.Load: "__getitem__", ast.Store: "__setitem__", ast.Del: "__delitem__"}
            out.setdefault(name.get(type(sub.ctx), "__getitem__"), None)
        elif isinstance(sub, ast.For | ast.comprehension):
            out.setdefault("__iter__", None)
        elif isinstance(sub, ast.With):
            out.setdefault("__enter__", None)
            out.setdefault("__exit__", None)
        elif isinstance(sub, ast.Call):
            callee = dotted(sub.func)
            if isinstance(sub.func, ast.Call):
                out.setdefault("__call__", None)  # `juxt(f, g)(x)`
            elif callee and callee.rsplit(".", 1)[-1] in _BUILTIN_DUNDER:
                out.setdefault(_BUILTIN_DUNDER[callee.rsplit(".", 1)[-1]], None)
    return tuple(out)


def uses(
    node: ast.AST,
) -> tuple[tuple[str, ...], tuple[str, ...], tuple[tuple[str, str], ...], tuple[tuple[str, int], ...]]:
    """Free dotted names a definition reads and calls, the classes its locals are built from, and where
    it calls each name (name, line), in line order."""
    bound: set[str] = set()
    if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.Lambda):
        a = node.args
        bound |= {x.arg for x in [*a.posonlyargs, *a.args, *a.kwonlyargs]}
        bound |= {x.arg for x in (a.vararg, a.kwarg) if x is not None}
    for sub in ast.walk(node):
        if isinstance(sub, ast.Name) and isinstance(sub.ctx, ast.Store | ast.Del):
            bound.add(sub.id)
        elif isinstance(sub, ast.arg):
            bound.add(sub.arg)
        elif isinstance(sub, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef) and sub is not node:
            bound.add(sub.name)
    bound -= {"self", "cls"}
    types: dict[str, str] = {}
    for sub in ast.walk(node):
        if isinstance(sub, ast.Assign) and isinstance(sub.value, ast.Call | ast.Name | ast.Attribute):
            # `c = Cache(2)`: c is a Cache; `f = mod.func` (an alias): "=mod.func"
            is_call = isinstance(sub.value, ast.Call)
            callee = dotted(sub.value.func if is_call else sub.value)  # type: ignore[attr-defined]
            if callee and callee.split(".")[0] not in bound:
                for t in sub.targets:
                    if isinstance(t, ast.Name):
                        types.setdefault(t.id, callee if is_call else f"={callee}")
        elif isinstance(sub, ast.withitem) and isinstance(sub.context_expr, ast.Call):
            callee = dotted(sub.context_expr.func)
            if callee and isinstance(sub.optional_vars, ast.Name) and callee.split(".")[0] not in bound:
                types.setdefault(sub.optional_vars.id, callee)

    def free(name: str) -> bool:
        head = name.split(".")[0]
        known = head in types and ("." in name or types[head].startswith("="))
        return head not in bound or known

    refs: dict[str, None] = {}
    calls: dict[str, None] = {}
    sites: list[tuple[str, int]] = []
    inner = {id(x.value) for x in ast.walk(node) if isinstance(x, ast.Attribute)}
    for sub in ast.walk(node):
        if isinstance(sub, ast.Call):
            name = dotted(sub.func)
            if name and name in types and not types[name].startswith("="):
                name += ".__call__"  # calling an instance built here: `j = juxt(f, g); j(x)`
            if name and free(name):
                calls.setdefault(name, None)
                sites.append((name, sub.lineno))
            elif name and "." in name:
                # a method of a parameter or local of unknown type: `?.name` (resolved, if at all,
                # to the one definition of that name: autod.localize.resolve)
                calls.setdefault("?." + name.rsplit(".", 1)[-1], None)
                sites.append(("?." + name.rsplit(".", 1)[-1], sub.lineno))
        elif isinstance(sub, ast.Attribute | ast.Name) and isinstance(sub.ctx, ast.Load):
            name = dotted(sub) if id(sub) not in inner else None
            if name and free(name):
                refs.setdefault(name, None)
        if len(refs) >= MAX_REFS:
            break
    return (tuple(refs), tuple(list(calls)[:MAX_REFS]), tuple(types.items()),
            tuple(sorted(sites, key=lambda x: x[1])[:MAX_REFS]))
