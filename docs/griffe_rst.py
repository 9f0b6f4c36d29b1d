"""Griffe extension: the reStructuredText of rosetree's docstrings, as Markdown.

The docstrings are numpy style with a little Sphinx markup, which Markdown would print
literally. Before mkdocstrings parses a docstring, this rewrites

- ``:math:`x``` to inline math and ``.. math::`` blocks to display math (pymdownx.arithmatex);
- ``:class:``, ``:meth:``, ``:func:``, ``:attr:``, ``:exc:`` and ``:mod:`` roles to
  cross-references, resolved as Sphinx would from the docstring's object outwards (its
  class, module, then the ``rosetree`` package). A role that names nothing is logged as a
  warning, which fails ``mkdocs build --strict``; an attribute that exists only in its class's
  ``Attributes`` section links to that class.

Loaded by mkdocs.yml (``extensions: - docs/griffe_rst.py``); not part of the package.
"""

from __future__ import annotations

import builtins
import re
from typing import Any

import griffe

logger = griffe.get_logger("griffe_rst")

_ROLE = re.compile(r":(class|meth|func|attr|exc|mod|obj):`(~?)([^`<]+?)\s*(?:<([^`>]+)>)?`")
_MATH_ROLE = re.compile(r":math:`([^`]+)`")
_MATH_DIRECTIVE = re.compile(r"^(\s*)\.\. math::(.*)$")
_ATTRIBUTE_ENTRY = re.compile(r"^([A-Za-z_][\w, ]*?)\s*:")
# Roles naming these are shown as code, without a link (no inventories are fetched).
_EXTERNAL = frozenset({"numpy", "np", "scipy", "json", "pandas", "matplotlib", "sklearn"})


def _math_blocks(text: str) -> str:
    """``.. math::`` directives (one-line or indented block) as ``$$`` blocks."""
    lines = text.split("\n")
    out: list[str] = []
    i = 0
    while i < len(lines):
        match = _MATH_DIRECTIVE.match(lines[i])
        if not match:
            out.append(lines[i])
            i += 1
            continue
        indent = match.group(1)
        body = [match.group(2).strip()] if match.group(2).strip() else []
        i += 1
        while i < len(lines) and (
            not lines[i].strip() or len(lines[i]) - len(lines[i].lstrip()) > len(indent)
        ):
            if lines[i].strip():
                body.append(lines[i].strip())
            elif body:
                # A blank line after the body ends the directive.
                break
            i += 1
        out.extend([f"{indent}$$", *(indent + b for b in body), f"{indent}$$"])
    return "\n".join(out)


def _lookup(scope: griffe.Object, name: str) -> Any:
    """The object ``name`` (dotted) names inside ``scope``, or None."""
    obj: Any = scope
    for part in name.split("."):
        try:
            members = obj.all_members if obj.is_class else obj.members
        except Exception:
            return None
        if part not in members:
            return None
        obj = members[part]
        if obj.is_alias:
            try:
                obj = obj.final_target
            except Exception:
                return None
    return obj


def _documents_attribute(cls: Any, name: str) -> bool:
    """Whether the ``Attributes`` section of class ``cls``'s docstring lists ``name``."""
    if cls is None or not cls.is_class or not cls.docstring:
        return False
    in_section = False
    for line in cls.docstring.value.split("\n"):
        if line.strip() == "Attributes":
            in_section = True
        elif in_section and line and not line[0].isspace():
            entry = _ATTRIBUTE_ENTRY.match(line)
            if entry and name in [n.strip() for n in entry.group(1).split(",")]:
                return True
    return False


class RstToMarkdown(griffe.Extension):
    """Rewrite the Sphinx markup of every docstring in the package once it is loaded."""

    def on_package(self, *, pkg: griffe.Module, **kwargs: Any) -> None:
        """Rewrite the docstrings of ``pkg`` and of everything in it."""
        self._root = pkg
        self._visit(pkg)

    def _visit(self, obj: griffe.Object) -> None:
        if obj.docstring is not None:
            obj.docstring.value = self._convert(obj, obj.docstring.value)
        for member in obj.members.values():
            if not member.is_alias:
                self._visit(member)

    def _convert(self, obj: griffe.Object, text: str) -> str:
        text = _math_blocks(text)
        text = _MATH_ROLE.sub(lambda m: rf"\({m.group(1)}\)", text)
        return _ROLE.sub(lambda m: self._reference(obj, m), text)

    def _reference(self, obj: griffe.Object, match: re.Match[str]) -> str:
        role, short, title, explicit = match.groups()
        name = (explicit or title).strip().removesuffix("()")
        label = title.strip() if explicit else name
        if short:
            label = label.rsplit(".", 1)[-1]
        if role in ("meth", "func") and not explicit:
            label += "()"
        path = self._resolve(obj, name, role)
        if path is None:
            first = name.split(".", 1)[0]
            if first not in _EXTERNAL and not hasattr(builtins, first):
                logger.warning("%s: %s does not name an object", obj.path, match.group(0))
            return f"`{label}`"
        return f"[`{label}`][{path}]"

    def _resolve(self, obj: griffe.Object, name: str, role: str) -> str | None:
        """The path to link for ``name`` as seen from ``obj``, as Sphinx would look it up."""
        scopes: list[Any] = []
        scope: Any = obj
        while scope is not None:
            scopes.append(scope)
            scope = scope.parent
        if name.startswith("rosetree."):
            name = name.removeprefix("rosetree.")
            scopes = [self._root]
        elif scopes[-1] is not self._root:
            scopes.append(self._root)
        owner_name, _, attr = name.rpartition(".")
        for scope in scopes:
            target = _lookup(scope, name)
            if target is not None:
                if target.is_attribute and not target.docstring and target.parent.is_class:
                    # Undocumented class-level annotations are not rendered: their class's
                    # Attributes section documents them.
                    return target.parent.path
                return target.path
            if role == "attr":
                # An instance attribute that only the class docstring documents.
                owner = _lookup(scope, owner_name) if owner_name else scope
                if _documents_attribute(owner, attr):
                    return owner.path
        return None
