"""DM101 shared-device: a file that uses a device gets exactly one device variable.

Why: tensors, models and batches only meet safely when they all name the same
device. One ``device = torch.device("cuda" if torch.cuda.is_available() else "cpu")``,
placed after the imports and before its first use, gives every other fix something
to point at and falls back to the CPU on machines without a GPU.

- A device the file already defines (any name: ``dev = torch.device(...)``,
  ``DEVICE = ...``) is reused; no second one is created. So is a ``device`` that a
  ``from config import *`` of a project file brings.
- A definition that comes after its first use moves up to the imports; several
  identical definitions collapse into one (within a notebook cell: each cell that defines
  its own device keeps it, so that it still runs on its own).
- A notebook imports as it goes (``import torch`` in the first cell, ``from torch import nn``
  in a later one): the device goes after the last torch import above its first use.
- Where no place comes before the first use (torch is imported only below it, or inside a
  function), nothing is defined and it is reported; no other rule then writes ``device``
  in the file: their fixes there are reported, not applied (a NameError is worse than a
  hard-coded ``.cuda()``).
- In a file other project files import, or a module of a package, a device that only the
  ``__main__`` block (and the functions only it calls) uses is defined at the top of that
  block, so that ``from models import *`` never exports a ``device`` over the importer's own.
- This rule runs whenever another rule writes ``device``, even under ``--select``,
  because their fixes rely on it. It adds nothing to a file that needs no device.
"""

from __future__ import annotations

from typing import Sequence

import libcst as cst

from ..analysis.candidates import FileFacts
from ..analysis.device_anchor import (DevicePlaces, bound_at_module_level, device_uses, first_call_at_import,
                                      imports_torch_module, pure, star_bound)
from ..analysis.devices import movable
from ..analysis.scopes import is_main_guard
from ..analysis.tree import ancestors, children_of, code_of, nodes_of, top_level_statement
from ..comments import is_cell_marker
from .base import Invalid, Rule, Valid

DEVICE_EXPRESSIONS = {
    "cuda": '{t}.device("cuda" if {t}.cuda.is_available() else "cpu")',
    "cuda-mps": '{t}.device("cuda" if {t}.cuda.is_available() else "mps" '
                'if {t}.backends.mps.is_available() else "cpu")',
    "accelerator": '({t}.accelerator.current_accelerator() if {t}.accelerator.is_available() '
                   'else {t}.device("cpu"))',
}


def device_expression(style: str, torch_alias: str) -> cst.BaseExpression:
    """The canonical shared-device expression for a configured style."""
    return cst.parse_expression(DEVICE_EXPRESSIONS[style].format(t=torch_alias))


class SharedDevice(Rule):
    CODE = "DM101"
    NAME = "shared-device"
    SUMMARY = "one `device = torch.device(...)` per file, after the imports, reused by every fix"
    ERROR = "NameError: name 'device' is not defined / tensors on different devices"
    ORDER = 90  # last: it defines what the other rules referenced in this pass
    DEFINES_DEVICE = True

    @classmethod
    def may_apply(cls, facts: FileFacts) -> bool:
        # It acts only on loads of the shared name (the configured one or a device the file
        # defines) that resolve to the module's binding.
        return facts.global_loads(facts.shared_names())

    def visit_Module(self, node: cst.Module) -> bool:
        super().visit_Module(node)
        self._remove: set[cst.CSTNode] = set()
        self._on_path: set[cst.CSTNode] | None = None
        self._insert: list[cst.BaseStatement] = []
        self._anchor = -1
        self._keeper: cst.CSTNode | None = None  # the definition kept; comments of dropped copies join it
        self._carried: list[cst.EmptyLine] = []
        # Lines that stay where a removed statement was (a notebook cell's marker and what is above it).
        self._left: dict[cst.CSTNode, list[cst.EmptyLine]] = {}
        self._guard: cst.If | None = None  # the main block that gets the definition instead
        self._plan(node)
        return False  # all work is planned on the whole module; children stay as they are

    def _plan(self, module: cst.Module) -> None:
        name = self.shared_name
        immediate, deferred = device_uses(self.metadata, name)
        if not immediate and not deferred:
            return
        body = list(module.body)
        first_use = min((body.index(s) for s in immediate), default=len(body))
        # After a torch import above the first use (see analysis/device_anchor.py; the fixes of
        # the other rules asked the same question before writing the name).
        places = DevicePlaces(module, self.torch_alias, self.state.source or None)
        anchor = places.anchor(first_use)
        definitions = [d for d in self.device_definitions if d.name == name]
        if not definitions and bound_at_module_level(self.metadata, module, name):
            return  # the file's own variable of that name (``device = 0``): not ours to replace
        if not definitions and star_bound(module, name, self.state.role.star_names, first_use):
            # ``from data import *`` already brings the project's own ``device``: a new one below
            # it would shadow the user's choice.
            return
        if not definitions:
            # A function reading it that the file calls as it runs (``main()`` above a later
            # ``import torch``) needs it defined before that call, not only before module-level reads.
            called = first_call_at_import(self.metadata, module, deferred)
            if called < first_use:
                first_use, anchor = called, places.anchor(called)
            if anchor is None:
                where = body[first_use] if immediate else deferred[0]
                self.report(where, f"`{name}` cannot be defined above its first use: {places.why_not()}; "
                                   "define it by hand")
                return
            statement = self._definition_statement(name)
            where = immediate[0] if immediate else deferred[0]
            guard = self._main_block_only(module, immediate, deferred)
            if guard is not None:
                statement = statement.with_changes(leading_lines=[])
                if self.fix(where, module, statement, f"add the shared `{name}` variable") is statement:
                    # (``import torch.nn as nn`` alone binds no ``torch``: the block imports it first)
                    self._guard, self._insert = guard, self._import_torch_if_missing() + [statement]
                return
            if self.fix(where, module, statement, f"add the shared `{name}` variable") is statement:
                self._anchor, self._insert = anchor, self._import_torch_if_missing() + [statement]
                self._keeper = statement
                for duplicate in self._local_duplicates(module, name, statement):
                    self._remove.add(duplicate)
                    self._carried += self._moving_comments(duplicate)
            return
        keep = definitions[0]
        keep_index = body.index(top_level_statement(self.metadata, keep.statement))
        called = first_call_at_import(self.metadata, module, deferred)
        if called < min(first_use, keep_index):  # a function reading it runs above the definition
            first_use, anchor = called, places.anchor(called)
        if first_use < keep_index:
            if not movable(keep, module) or not pure(keep.assign.value, self.torch_alias) or anchor is None:
                self.report(body[first_use], f"`{name}` is used before it is defined")
                return
            # The comments right above the definition move with it; a notebook cell's marker, and a section
            # header set off by a blank line (``## Score ##``), stay where they are.
            stay, move = split_at_cell_marker(keep.statement.leading_lines)
            blank = max((i for i, line in enumerate(move) if line.comment is None), default=-1)
            stay, move = [*stay, *move[:blank + 1]], move[blank + 1:]
            if stay:
                self._left[keep.statement] = stay
            moved = keep.statement.with_changes(
                leading_lines=[cst.EmptyLine(), *(line for line in move if line.comment)])
            if self.fix(keep.statement, keep.statement, moved, f"move `{name}` above its first use") is moved:
                self._anchor, self._insert = anchor, [moved]
                self._remove.add(keep.statement)
                self._keeper = moved
        elif keep.statement in body:
            self._keeper = keep.statement
        same = code_of(keep.assign.value)
        cells = _cells(body)
        for other in definitions[1:]:
            # Only a copy at module level: one inside a block (an ``if cuda: ... elif mps: ...`` chain
            # of a notebook cell) would leave a ``pass`` behind in the middle of the author's choice.
            # Not a copy in another notebook cell: each experiment cell that defines its own device
            # still runs on its own (lr-finder's notebooks).
            if code_of(other.assign.value) == same and len(other.statement.body) == 1 and other.statement in body \
                    and cells.get(id(other.statement)) == cells.get(id(keep.statement)):
                comments = self._moving_comments(other.statement)
                if comments and self._keeper is None:
                    continue  # nowhere to carry its comments: leave the copy in place
                if self.fix(other.statement, other.statement, None, f"drop a repeated definition of `{name}`") is None:
                    self._remove.add(other.statement)
                    self._carried += comments

    def _main_block_only(self, module: cst.Module, immediate: list[cst.CSTNode],
                         deferred: list[cst.CSTNode]) -> cst.If | None:
        """The main block, when the file is imported by others (or is a module of a package, with a
        demo below its library code) and every use of the device is in that block or in a
        function only that block reaches."""
        if not (self.state.role.imported or self.state.role.in_package and not deferred):
            return None  # (a package module's functions may be called from outside the project)
        guards = [s for s in module.body if is_main_guard(s)]
        if len(guards) != 1 or any(s is not guards[0] for s in immediate):
            return None
        for use in deferred:
            outer = [p for p in ancestors(self.metadata, use) if isinstance(p, cst.FunctionDef)]
            if not outer or outer[-1].name.value not in self.state.role.main_only:
                return None
        return guards[0]

    def _definition_statement(self, name: str) -> cst.SimpleStatementLine:
        value = device_expression(self.state.config.device_style, self.torch_alias)
        return cst.SimpleStatementLine(
            [cst.Assign([cst.AssignTarget(cst.Name(name))], value)], leading_lines=[cst.EmptyLine()])

    def _import_torch_if_missing(self) -> list[cst.BaseStatement]:
        return [] if imports_torch_module(self.tree) else [cst.parse_statement("import torch\n")]

    def _local_duplicates(self, module: cst.Module, name: str, statement: cst.SimpleStatementLine):
        """Function-level copies of the very definition being added become redundant."""
        wanted = code_of(statement.body[0])
        for node in nodes_of(module, cst.FunctionDef):
            if isinstance(node.body, cst.IndentedBlock):
                for stmt in node.body.body:
                    if (isinstance(stmt, cst.SimpleStatementLine) and len(stmt.body) == 1
                            and code_of(stmt.body[0]) == wanted and len(node.body.body) > 1):
                        yield stmt

    def leave_Module(self, original_node: cst.Module, updated_node: cst.Module) -> cst.Module:
        if not self._insert and not self._remove:
            return updated_node
        if self._guard is not None:
            guard = self._guard
            block = guard.body.with_changes(body=[*self._insert, *guard.body.body])
            return updated_node.with_changes(body=[guard.with_changes(body=block) if s is guard else s
                                                   for s in original_node.body])
        body = [s for s in original_node.body if s not in self._remove]
        index = sum(1 for s in original_node.body[: self._anchor + 1] if s not in self._remove)
        body, footer = self._leave_behind(original_node, body)
        body[index:index] = self._insert
        if self._carried:
            body = [s.with_changes(leading_lines=[*s.leading_lines, *self._carried]) if s is self._keeper else s
                    for s in body]
        return updated_node.with_changes(body=[self._strip(s) for s in body], footer=footer)

    def _moving_comments(self, statement: cst.CSTNode) -> list[cst.EmptyLine]:
        """The comments of a removed statement that go with it; a cell marker and those above it stay."""
        if not isinstance(statement, cst.SimpleStatementLine):
            return []
        stay, _ = split_at_cell_marker(statement.leading_lines)
        if stay:
            self._left[statement] = stay
        return comment_lines(statement)[len([line for line in stay if line.comment]):]

    def _leave_behind(self, module: cst.Module, body: list[cst.BaseStatement]
                      ) -> tuple[list[cst.BaseStatement], Sequence[cst.EmptyLine]]:
        """Put the lines left by removed statements above the next statement kept (or in the footer)."""
        footer = module.footer
        pending: list[cst.EmptyLine] = []
        kept = {id(s): s for s in body}
        replaced: dict[int, cst.BaseStatement] = {}
        for statement in module.body:
            if id(statement) in kept and pending:
                own = list(statement.leading_lines)
                while own and own[0].comment is None:
                    own.pop(0)  # the cell starts at its marker: no blank line of the removed statement's
                replaced[id(statement)] = statement.with_changes(leading_lines=[*pending, *own])
                if statement is self._keeper:
                    self._keeper = replaced[id(statement)]
                pending = []
            pending += self._left.get(statement, [])
        if pending:
            footer = [*pending, *footer]
        return [replaced.get(id(s), s) for s in body], footer

    def _strip(self, statement: cst.BaseStatement) -> cst.BaseStatement:
        """Remove duplicate definitions nested in blocks (module-level ones went above)."""
        if not self._remove or isinstance(statement, cst.SimpleStatementLine):
            return statement
        if self._on_path is None:  # the blocks that hold a removed statement: only they are rebuilt
            self._on_path = {parent for node in self._remove for parent in ancestors(self.metadata, node)}
        # ``statement`` may be a copy with other leading lines: its children are the originals
        if statement in self._on_path or any(child in self._on_path for child in children_of(statement)):
            return statement.visit(_Remover(self._remove, self._on_path))
        return statement

    VALID = [
        Valid('import torch\ndevice = torch.device("cuda" if torch.cuda.is_available() else "cpu")\n'
              "x = torch.ones(2, device=device)\n"),
        Valid("import torch\n\ndef f(x, device):\n    return x.to(device)\n"),
        Valid('import torch\ndev = torch.device("cuda" if torch.cuda.is_available() else "cpu")\n'
              "x = torch.ones(2, device=dev)\n"),
    ]
    INVALID = [
        Invalid(
            '"""Docs."""\nfrom __future__ import annotations\nimport torch as th\n\nx = th.ones(2).to(device)\n',
            '"""Docs."""\nfrom __future__ import annotations\nimport torch as th\n\n'
            'device = th.device("cuda" if th.cuda.is_available() else "cpu")\n\nx = th.ones(2).to(device)\n',
        ),
        Invalid(
            "import torch\nx = torch.ones(2).to(device)\n"
            'device = torch.device("cuda" if torch.cuda.is_available() else "cpu")\n'
            "y = x.to(device)\n"
            'device = torch.device("cuda" if torch.cuda.is_available() else "cpu")\n',
            'import torch\n\ndevice = torch.device("cuda" if torch.cuda.is_available() else "cpu")\n'
            "x = torch.ones(2).to(device)\ny = x.to(device)\n",
        ),
        # A notebook's second torch import, below the first use: the device goes above that use.
        Invalid(
            "import torch\nx = torch.ones(2).to(device)\nfrom torch import nn\nlayer = nn.Linear(2, 2).to(device)\n",
            'import torch\n\ndevice = torch.device("cuda" if torch.cuda.is_available() else "cpu")\n'
            "x = torch.ones(2).to(device)\nfrom torch import nn\nlayer = nn.Linear(2, 2).to(device)\n",
        ),
        # torch is imported only inside the function: no module-level place for the device.
        Invalid("import numpy as np\n\ndef main():\n    import torch\n    return torch.ones(2).to(device)\n"),
        # A function that reads it runs above the definition (a move another rule just added there).
        Invalid(
            "import torch\n\ndef score(rows):\n    return [r.to(device) for r in rows]\n\n"
            "print(score([torch.ones(2)]))\ndevice = 'cuda' if torch.cuda.is_available() else 'cpu'\n",
            "import torch\n\ndevice = 'cuda' if torch.cuda.is_available() else 'cpu'\n\n"
            "def score(rows):\n    return [r.to(device) for r in rows]\n\nprint(score([torch.ones(2)]))\n",
        ),
    ]


class _Remover(cst.CSTTransformer):
    def __init__(self, remove: set[cst.CSTNode], on_path: set[cst.CSTNode]) -> None:
        super().__init__()
        self.remove, self.on_path, self.entered = remove, on_path, False

    def on_visit(self, node: cst.CSTNode) -> bool:
        entered, self.entered = self.entered, True
        return not entered or node in self.on_path  # a block without a removed statement is kept as is

    def leave_SimpleStatementLine(self, original_node, updated_node):
        return cst.RemovalSentinel.REMOVE if original_node in self.remove else updated_node


def _cells(body: Sequence[cst.BaseStatement]) -> dict[int, int]:
    """id of each top-level statement -> its notebook cell's number (all 0 in a plain file)."""
    cells, cell = {}, 0
    for statement in body:
        if any(line.comment is not None and is_cell_marker(line.comment.value) for line in statement.leading_lines):
            cell += 1
        cells[id(statement)] = cell
    return cells


def split_at_cell_marker(lines: Sequence[cst.EmptyLine]) -> tuple[list[cst.EmptyLine], list[cst.EmptyLine]]:
    """Leading lines as (up to and including the last notebook cell marker, the rest)."""
    last = max((i for i, line in enumerate(lines)
                if line.comment is not None and is_cell_marker(line.comment.value)), default=-1)
    return list(lines[:last + 1]), list(lines[last + 1:])


def comment_lines(statement: cst.CSTNode) -> list[cst.EmptyLine]:
    """The comments above and after a one-line statement, as lines to put above another."""
    if not isinstance(statement, cst.SimpleStatementLine):
        return []
    lines = [line for line in statement.leading_lines if line.comment]
    trailing = statement.trailing_whitespace.comment
    return lines + ([cst.EmptyLine(comment=trailing)] if trailing else [])
