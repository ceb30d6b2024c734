"""Resolve the dotted names a definition uses to definitions in the index.

Through the module's own definitions, its imports (aliases, `from x import y`, relative imports,
re-exports and star imports, followed a few steps), `self`/`cls` receivers (with the class's bases),
and locals built by calling a class (`c = Cache(2); c.get(1)`). A method called on a receiver whose type
cannot be told (a parameter, an attribute) resolves to the one function of that name in the workspace,
when there is exactly one (and its name is not one builtin types have too).
"""

from __future__ import annotations

import builtins

from autod.localize.frames import is_test_path
from autod.localize.index import Definition, Index, Module

MAX_HOPS = 6  # re-exports followed through packages, at most
_BUILTINS = frozenset(dir(builtins))
# called on an instance of a class we know: the dunder that runs
_INIT = ("__init__", "__post_init__", "__new__")
# attribute names of builtin types: `d.get(...)` on a dict must not resolve to the workspace's `get`
_TYPE_ATTRS = frozenset(
    name for t in (dict, list, str, bytes, set, frozenset, tuple, int, float, object) for name in dir(t)
)


class Resolver:
    def __init__(self, index: Index) -> None:
        self.index = index
        self._names: dict[str, list[Definition]] | None = None  # function name -> definitions

    def uses(self, d: Definition, *, calls_only: bool = False) -> list[Definition]:
        """Definitions `d` calls (or also reads), resolved, in first-use order, each once."""
        mod = self.index.modules.get(d.path)
        if mod is None:
            return []
        types = dict(d.local_types)
        out: dict[tuple[str, str], Definition] = {}
        names = d.calls if calls_only else tuple(dict.fromkeys(d.calls + d.refs))
        for name in names:
            for target in self.resolve(mod, d, name, types):
                if target.path == d.path and target.qualname == d.qualname:
                    continue
                out.setdefault((target.path, target.qualname), target)
        return list(out.values())

    def resolve(
        self, mod: Module, scope: Definition | None, dotted: str, types: dict[str, str] | None = None
    ) -> list[Definition]:
        """The definitions a dotted name in `scope` (a definition of `mod`) refers to."""
        parts = dotted.split(".")
        head, rest = parts[0], parts[1:]
        if head == "?":  # a method of a receiver of unknown type (autod.localize.uses)
            return self.unique(rest[-1]) if rest else []
        if head in ("self", "cls") and scope is not None:
            cls = self._class_of(mod, scope)
            if cls is None or not rest:
                return []
            found = self._member(mod, cls, rest, 0)
            # `self.formatter.format_pct()`: an attribute's type is not known either
            return found or (self.unique(rest[-1]) if len(rest) > 1 else [])
        if types and head in types and types[head].startswith("="):
            alias = types[head][1:]
            if alias.split(".")[0] != head:  # `x = x.y` would chase itself
                return self.resolve(mod, scope, ".".join([alias, *rest]), None)
            return []
        if types and head in types and rest:
            for cls_def in self.resolve(mod, scope, types[head]):
                if cls_def.kind == "class":
                    cmod = self.index.modules[cls_def.path]
                    return self._member(cmod, cls_def.qualname, rest, 0)
            return []
        if head in _BUILTINS and head not in mod.defs and head not in mod.imports:
            return []
        found = self._in_module(mod, parts, 0)
        if not found and rest and head not in mod.defs and head not in mod.imports:
            # `x.format_pct()` on a receiver of unknown type: the one definition of that name, if unique
            return self.unique(rest[-1])
        return found

    def unique(self, name: str) -> list[Definition]:
        """The single function or method in the workspace called `name` (tests aside), else []. Names
        that builtin types also have (`get`, `append`, `split`...) and dunders never resolve this way."""
        if name.startswith("__") or name in _TYPE_ATTRS:
            return []
        if self._names is None:
            names: dict[str, list[Definition]] = {}
            for m in self.index.modules.values():
                if is_test_path(m.path):
                    continue
                for d in m.defs.values():
                    if d.kind == "function":
                        names.setdefault(d.name, []).append(d)
            self._names = names
        found = self._names.get(name, [])
        return list(found) if len(found) == 1 else []

    # -- helpers --------------------------------------------------------------------------------
    def _class_of(self, mod: Module, scope: Definition) -> str | None:
        q = scope.qualname if scope.kind == "class" else scope.cls
        while q:
            d = mod.defs.get(q)
            if d is not None and d.kind == "class":
                return q
            q = q.rpartition(".")[0]
        return None

    def _in_module(self, mod: Module, parts: list[str], hops: int) -> list[Definition]:
        if hops > MAX_HOPS or not parts:
            return []
        head = parts[0]
        d = mod.defs.get(head)
        if d is not None:
            return self._expand(mod, d, parts[1:], hops)
        if head in mod.imports:
            return self._global(mod.imports[head].split(".") + parts[1:], hops + 1)
        for star in mod.stars:
            smod = self.index.module_named(star)
            if smod is not None and smod is not mod:
                found = self._in_module(smod, parts, hops + 1)
                if found:
                    return found
        return []

    def _expand(self, mod: Module, d: Definition, rest: list[str], hops: int) -> list[Definition]:
        if d.alias and d.kind in ("constant", "attribute") and d.alias.split(".")[0] != d.name:
            # `OMD = OrderedMultiDict`: the alias and what it names
            return [d, *self._in_module(mod, [*d.alias.split("."), *rest], hops + 1)]
        if not rest:
            if d.kind == "class":
                inits = [mod.defs[f"{d.qualname}.{n}"] for n in _INIT if f"{d.qualname}.{n}" in mod.defs]
                return [d, *inits]
            return [d]
        if d.kind == "class":
            return self._member(mod, d.qualname, rest, hops)
        return [d]  # an attribute of a function or constant: the definition itself is the lead

    def _member(self, mod: Module, cls: str, rest: list[str], hops: int) -> list[Definition]:
        """`cls.rest[0]`, looked up in the class and then its bases (resolved like any name)."""
        if hops > MAX_HOPS:
            return []
        q = f"{cls}.{rest[0]}"
        d = mod.defs.get(q)
        if d is not None:
            return self._expand(mod, d, rest[1:], hops)
        cls_def = mod.defs.get(cls)
        for base in cls_def.bases if cls_def else ():
            for bdef in self._in_module(mod, base.split("."), hops + 1):
                if bdef.kind == "class":
                    found = self._member(self.index.modules[bdef.path], bdef.qualname, rest, hops + 1)
                    if found:
                        return found
        return []

    def callers(self, target: Definition, limit: int = 8) -> list[Definition]:
        """Functions anywhere in the index whose calls resolve to `target` (how it is used)."""
        out: list[Definition] = []
        name = target.name
        for path in sorted(self.index.modules):
            mod = self.index.modules[path]
            for d in mod.defs.values():
                if d.kind != "function" or d is target:
                    continue
                if not any(c.rsplit(".", 1)[-1] == name for c in d.calls):
                    continue
                called = self.uses(d, calls_only=True)
                if any(t.path == target.path and t.qualname == target.qualname for t in called):
                    out.append(d)
                    if len(out) >= limit:
                        return out
        return out

    def special(self, cls: Definition, names: tuple[str, ...]) -> list[Definition]:
        """The class's (or its bases') special methods among `names`."""
        mod = self.index.modules.get(cls.path)
        out: list[Definition] = []
        for name in names:
            found = self._member(mod, cls.qualname, [name], 0) if mod else []
            out += [d for d in found if d.kind == "function"]
        return out

    def _global(self, parts: list[str], hops: int) -> list[Definition]:
        """A fully dotted name: the longest prefix that is an indexed module, then names inside it."""
        for k in range(len(parts), 0, -1):
            mod = self.index.module_named(".".join(parts[:k]))
            if mod is not None:
                return self._in_module(mod, parts[k:], hops) if parts[k:] else []
        return []
