"""Jupyter notebooks (.ipynb): the code cells are rewritten as one program.

A notebook is one program split into cells: names flow from cell to cell and the
shared device is defined once, after the imports. So devmod joins the code cells
into one module, with a marker comment before each cell, runs the one engine on it
and splits the result back at the markers.

IPython syntax (``%matplotlib inline``, ``!pip install x``, ``files = !ls``, ``%%time``,
``obj?``, ``torch.*Tensor?``) is not Python: such lines are masked to placeholder names that parse, and
put back byte-identical afterwards. A cell magic whose body is not Python
(``%%bash``, ``%%writefile``) is masked whole.

Only the ``source`` of changed code cells is written back. Markdown cells, outputs,
execution counts and metadata keep their bytes: a file exactly as nbformat writes
it is written with nbformat; any other layout (Colab's two-space indent and
unsorted keys, for example) gets only the changed ``source`` values replaced in
the original text, so a git diff shows the changed source lines and nothing else.

Cells are numbered as they appear in the file, 1-based, markdown cells included:
``nb.ipynb:cell-3:2:5`` is line 2, column 5 of the notebook's third cell.
"""

from __future__ import annotations

import ast
import dataclasses
import json
import os
import re
import warnings
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Sequence

from .config import Config
from .engine import SourceError, transform_source
from .positions import LINES_IN_MESSAGE
from .rules.base import Finding

if TYPE_CHECKING:  # pragma: no cover
    from .analysis.project import FileRole
    from .driver import FileReport

NOTEBOOK_SUFFIX = ".ipynb"

# Cell magics whose body is Python (IPython runs it after the first line); any other
# cell magic (%%bash, %%html, %%writefile, ...) holds another language and is masked whole.
PYTHON_CELL_MAGICS = frozenset({"time", "timeit", "capture", "prun", "debug", "memit", "mprun", "snakeviz"})
# `%magic`, `!cmd`, `?obj`, `x = !cmd`, `x = %magic`.
_ESCAPE = re.compile(r"^\s*(?:[%!?]|[A-Za-z_][\w.,\s]*=\s*[%!])")
# Help after the name: `obj?`, `obj??`, `f()?`, `items[0]?`, and the wildcard search `torch.*Tensor?`
# (IPython's psearch: `*` may stand anywhere in a dotted name).
_HELP = re.compile(r"^\s*(?!\d)[\w*]+(?:\.(?!\d)[\w*]+|\[-?\d+\])*(?:\(\))?\?\??\s*$")
_CELL_MAGIC = re.compile(r"^%%(\w+)")


class NotebookError(Exception):
    """The notebook cannot be processed; ``cell`` (1-based) and ``line``/``column`` point at the cause."""

    def __init__(self, message: str, cell: int | None = None, line: int = 0, column: int = 0) -> None:
        super().__init__(message)
        self.message, self.cell, self.line, self.column = message, cell, line, column


@dataclass
class Program:
    """The code cells joined into one module, and how to take it apart again."""

    text: str
    marker: str  # "# devmod-cell-<nonce>:"
    prefix: str  # placeholder names are "<prefix>_<n>_"
    placeholders: dict[str, str]  # placeholder name -> the original IPython line
    cells: list[int]  # notebook index (0-based) of each code cell, in order


@dataclass
class NotebookResult:
    """What the engine did to a notebook. ``sources`` maps a changed cell's 0-based index
    to its new source; ``output`` is the notebook text to write (equal to ``text`` when
    nothing changed)."""

    text: str
    output: str
    before: dict[int, str] = field(default_factory=dict)
    sources: dict[int, str] = field(default_factory=dict)
    findings: list[Finding] = field(default_factory=list)
    skipped: str | None = None

    @property
    def changed(self) -> bool:
        return self.output != self.text


# -- reading ----------------------------------------------------------------------------------
def read_notebook(text: str) -> Any:
    """The notebook as nbformat's node, version 4; NotebookError when it is not one."""
    import nbformat

    try:
        json.loads(text)  # for the line and column of a JSON mistake, which nbformat's error lacks
    except json.JSONDecodeError as exc:
        raise NotebookError(f"cannot read notebook: invalid JSON ({exc.msg})", None, exc.lineno, exc.colno) from exc
    try:
        with warnings.catch_warnings():  # nbformat warns about cell ids it would add; devmod adds none
            warnings.simplefilter("ignore")
            notebook = nbformat.reads(text, as_version=nbformat.NO_CONVERT)
    except Exception as exc:  # nbformat raises its own reader errors for non-notebook JSON
        raise NotebookError(f"cannot read notebook: {exc}") from exc
    if notebook.get("nbformat") != 4:
        raise NotebookError(f"cannot read notebook: nbformat {notebook.get('nbformat')} is not supported "
                            "(open and save it in a current Jupyter to upgrade it to version 4)")
    return notebook


def is_python_notebook(notebook: Any) -> bool:
    metadata = notebook.get("metadata", {})
    language = (metadata.get("kernelspec", {}).get("language")
                or metadata.get("language_info", {}).get("name") or "python")
    return str(language).lower() == "python"


def code_cells(notebook: Any) -> list[tuple[int, str]]:
    """(0-based index in the notebook, source) of each code cell."""
    return [(i, _source_text(cell.get("source", ""))) for i, cell in enumerate(notebook.get("cells", []))
            if cell.get("cell_type") == "code"]


def _source_text(source: str | list[str]) -> str:
    return "".join(source) if isinstance(source, list) else source


# -- masking IPython syntax --------------------------------------------------------------------
def _parses(source: str) -> bool:
    try:
        ast.parse(source)
    except (SyntaxError, ValueError, MemoryError, RecursionError):
        return False
    return True


def mask_cell(source: str, placeholders: dict[str, str], prefix: str = "_devmod_ipython") -> str:
    """``source`` with each IPython-only line replaced by a placeholder name (same indentation).
    A cell that already parses as Python is returned as it is: a `%` line inside a string stays."""
    if _parses(source):
        return source
    lines = source.splitlines(keepends=True)
    out: list[str] = []
    magic = _CELL_MAGIC.match(lines[0]) if lines else None
    whole = magic is not None and magic.group(1) not in PYTHON_CELL_MAGICS
    continued_indent: str | None = None  # a masked line ended in a backslash: its next line is part of it
    for number, line in enumerate(lines):
        body = line.rstrip("\r\n")
        if whole or continued_indent is not None or (number == 0 and magic) or _ESCAPE.match(body) \
                or _HELP.match(body):
            name = f"{prefix}_{len(placeholders)}_"
            placeholders[name] = body
            if whole:
                indent = ""
            elif continued_indent is not None:
                indent = continued_indent
            else:
                indent = body[:len(body) - len(body.lstrip())]
            out.append(indent + name + line[len(body):])
            continued_indent = indent if body.endswith("\\") and not whole else None
        else:
            out.append(line)
    return "".join(out)


# -- one program ------------------------------------------------------------------------------
def build_program(cells: Sequence[tuple[int, str]]) -> Program:
    """The code cells as one module: a marker comment line before each, IPython lines masked."""
    joined = "".join(source for _, source in cells)
    nonce = 0  # names no cell uses, so the markers and placeholders are found again unambiguously
    while f"devmod-cell-{nonce}" in joined or f"_devmod_ipython{nonce}_" in joined:
        nonce += 1
    # comments.CELL_MARKER matches these lines: rules that move statements leave them in place.
    marker, prefix = f"# devmod-cell-{nonce}:", f"_devmod_ipython{nonce}"
    placeholders: dict[str, str] = {}
    parts: list[str] = []
    for index, source in cells:
        masked = mask_cell(source, placeholders, prefix)
        if masked and not masked.endswith("\n"):
            masked += "\n"
        parts.append(f"{marker} {index}\n{masked}")
    return Program("".join(parts), marker, prefix, placeholders, [index for index, _ in cells])


def split_program(program: Program, text: str) -> dict[int, str]:
    """The rewritten module back as cell sources (0-based notebook index -> masked source)."""
    pattern = re.compile(rf"^{re.escape(program.marker)} (\d+)\r?\n", re.M)
    found = list(pattern.finditer(text))
    if [int(m.group(1)) for m in found] != program.cells or (found and found[0].start() != 0):
        raise NotebookError("internal error: the rewrite lost the cell boundaries; notebook left unchanged, "
                            "please report this")
    bounds = [m.end() for m in found] + [len(text)]
    starts = [m.start() for m in found[1:]] + [len(text)]
    return {int(m.group(1)): text[bounds[i]:starts[i]] for i, m in enumerate(found)}


def unmask(source: str, program: Program) -> str:
    """Put the masked IPython lines back, byte for byte."""
    pattern = rf"^[ \t]*({re.escape(program.prefix)}_\d+_)[ \t]*$"
    return re.sub(pattern, lambda m: program.placeholders[m.group(1)], source, flags=re.M)


def program_location(program_text: str, marker: str, line: int) -> tuple[int | None, int]:
    """A 1-based line of the joined program as (1-based cell number in the notebook, line in the cell)."""
    cell, start = None, 0
    for number, text in enumerate(program_text.splitlines()[:max(line, 0)], start=1):
        if text.startswith(marker + " "):
            cell, start = int(text[len(marker) + 1:]) + 1, number
    return cell, max(line - start, 1)


@dataclass
class Script:
    """The code cells as a plain Python script (IPython lines become ``pass``), for `devmod verify`."""

    text: str
    lines: list[tuple[int, int]]  # script line (0-based) -> (1-based cell number, 1-based line in the cell)
    sources: dict[int, str]  # 1-based cell number -> the cell's source as the notebook has it
    ipython_lines: int  # how many IPython lines were skipped


def notebook_script(text: str) -> Script:
    """The notebook ``text`` as a script that runs the code cells in order."""
    cells = code_cells(read_notebook(text))
    placeholders: dict[str, str] = {}
    parts: list[str] = []
    lines: list[tuple[int, int]] = []
    for index, source in cells:
        masked = mask_cell(source, placeholders, "_devmod_ipython")
        masked = re.sub(r"^([ \t]*)_devmod_ipython_\d+_[ \t]*$", r"\1pass", masked, flags=re.M)
        cell_lines = masked.split("\n")  # only "\n" ends a line for Python's tokenizer
        if len(cell_lines) > 1 and cell_lines[-1] == "":
            cell_lines.pop()
        parts.extend(line + "\n" for line in cell_lines)
        lines.extend((index + 1, number) for number in range(1, len(cell_lines) + 1))
    return Script("".join(parts), lines, {index + 1: source for index, source in cells}, len(placeholders))


def _restore_ending(original: str, new: str) -> str:
    """Keep the cell's own trailing newlines: Jupyter stores most cells without one."""
    trailing = len(original) - len(original.rstrip("\n"))
    return new.rstrip("\n") + "\n" * trailing if new.strip() or not original.strip() else new


# -- the transform ----------------------------------------------------------------------------
def transform_notebook(text: str, path: str = "<notebook>", config: Config | None = None,
                       role: "FileRole | None" = None) -> NotebookResult:
    """Rewrite the code cells of notebook ``text``; raises NotebookError (with the cell) when a cell
    cannot be parsed or the result cannot be written back safely."""
    notebook = read_notebook(text)
    if not is_python_notebook(notebook):
        return NotebookResult(text, text, skipped="not a Python notebook")
    cells = code_cells(notebook)
    if not any("torch" in source for _, source in cells):
        return NotebookResult(text, text, skipped="does not use torch")
    program = build_program(cells)
    try:
        result = transform_source(program.text, path, config, role=role)  # the project's view of it
    except SourceError as exc:
        cell, line = program_location(program.text, program.marker, exc.line)
        raise NotebookError(exc.message, cell, line, exc.column) from exc
    findings = [_in_cell(f, program.text, program.marker) for f in result.findings]  # (all placed in the cells as written)
    if not result.changed:
        return NotebookResult(text, text, findings=findings, skipped=result.skipped)
    originals = dict(cells)
    before = split_program(program, program.text)
    after = split_program(program, result.output)
    sources = {index: _restore_ending(originals[index], unmask(after[index], program))
               for index in program.cells if after[index] != before[index]}
    sources = {index: source for index, source in sources.items() if source != originals[index]}
    if not sources:
        return NotebookResult(text, text, findings=findings)
    output = write_sources(text, notebook, sources)
    return NotebookResult(text, output, {i: originals[i] for i in sources}, sources, findings)


def _in_cell(finding: Finding, program_text: str, marker: str) -> Finding:
    """The finding at its cell and line, and the lines its message names (``held at line 12``,
    counted in the joined program) as ``cell-3:4`` too."""
    cell, line = program_location(program_text, marker, finding.line)

    def located(match: re.Match) -> str:
        places = (program_location(program_text, marker, int(n)) for n in match.group(1).split(", "))
        return ", ".join(f"cell-{c}:{n}" for c, n in places)

    return dataclasses.replace(finding, line=line, cell=cell,
                               message=LINES_IN_MESSAGE.sub(located, finding.message))


# -- writing back -----------------------------------------------------------------------------
def write_sources(text: str, notebook: Any, sources: dict[int, str]) -> str:
    """``text`` with the given cells' sources replaced, every other byte kept."""
    import nbformat

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        try:
            canonical = nbformat.writes(notebook)
        except Exception:  # an output nbformat cannot write (``"outputs": [{}]``): splice the text instead
            canonical = None
        if canonical is not None and text in (canonical, canonical + "\n"):
            # Written by Jupyter itself: nbformat reproduces every byte, so it may write the result.
            for index, source in sources.items():
                notebook.cells[index].source = source
            output = nbformat.writes(notebook) + text[len(canonical):]
        else:
            output = _splice_sources(text, sources)
    _check_only_sources_changed(text, output, sources)
    return output


def _check_only_sources_changed(text: str, output: str, sources: dict[int, str]) -> None:
    before, after = json.loads(text), json.loads(output)
    for index, source in sources.items():
        if _source_text(after["cells"][index]["source"]) != source:
            break
        after["cells"][index]["source"] = before["cells"][index]["source"]
    else:
        if before == after:
            return
    raise NotebookError("internal error: writing the notebook back would change more than the cell "
                        "sources; notebook left unchanged, please report this")


_WHITESPACE = re.compile(r"[ \t\n\r]*")


def _skip(text: str, i: int) -> int:
    return _WHITESPACE.match(text, i).end()  # type: ignore[union-attr]


def _members(text: str, i: int) -> dict[str, tuple[int, int]]:
    """The members of the JSON object starting at ``text[i]`` as key -> (value start, value end)."""
    decoder = json.JSONDecoder()
    members: dict[str, tuple[int, int]] = {}
    i = _skip(text, i + 1)
    while text[i] != "}":
        key, i = json.decoder.scanstring(text, i + 1)  # type: ignore[attr-defined]
        i = _skip(text, _skip(text, i) + 1)  # past the colon
        _, end = decoder.raw_decode(text, i)
        members[key] = (i, end)
        i = _skip(text, end)
        if text[i] == ",":
            i = _skip(text, i + 1)
    return members


def _items(text: str, i: int) -> list[tuple[int, int]]:
    """The (start, end) of each item of the JSON array starting at ``text[i]``."""
    decoder = json.JSONDecoder()
    items: list[tuple[int, int]] = []
    i = _skip(text, i + 1)
    while text[i] != "]":
        _, end = decoder.raw_decode(text, i)
        items.append((i, end))
        i = _skip(text, end)
        if text[i] == ",":
            i = _skip(text, i + 1)
    return items


def source_spans(text: str) -> list[tuple[int, int] | None]:
    """Where each cell's ``source`` value lies in the notebook text (None: the cell has none)."""
    start = _skip(text, 0)
    cells = _members(text, start).get("cells")
    if cells is None:
        return []
    return [_members(text, cell_start).get("source") for cell_start, _ in _items(text, cells[0])]


def _splice_sources(text: str, sources: dict[int, str]) -> str:
    spans = source_spans(text)
    ascii_only = text.isascii()
    pieces, last = [], 0
    for index in sorted(sources):
        span = spans[index]
        if span is None:
            raise NotebookError("internal error: a changed cell has no source in the file")
        start, end = span
        pieces += [text[last:start], _source_json(text, start, end, sources[index], ascii_only)]
        last = end
    pieces.append(text[last:])
    return "".join(pieces)


def _source_json(text: str, start: int, end: int, source: str, ascii_only: bool) -> str:
    """The new ``source`` value laid out as the old one was: a string, or a list of lines
    with the same indentation, unchanged lines copied byte for byte."""
    if text[start] == '"':
        return json.dumps(source, ensure_ascii=ascii_only)
    items = _items(text, start)
    raw = {}
    for item_start, item_end in items:
        raw.setdefault(json.loads(text[item_start:item_end]), text[item_start:item_end])
    lines = source.splitlines(keepends=True)
    if not lines:
        return "[]"
    newline = "\r\n" if "\r\n" in text else "\n"
    line_start = text.rfind("\n", 0, start) + 1
    own_indent = text[line_start:_skip(text, line_start)].replace("\n", "").replace("\r", "")
    if items:
        between = text[start + 1:items[0][0]]
        item_indent = between[between.rfind("\n") + 1:] if "\n" in between else None
        close = text[items[-1][1]:end - 1]  # the whitespace before "]"
    else:
        item_indent, close = own_indent + _indent_unit(text), newline + own_indent
    encoded = [raw.get(line) or json.dumps(line, ensure_ascii=ascii_only) for line in lines]
    if item_indent is None:  # all on one line: ["a", "b"]
        return "[" + ", ".join(encoded) + "]"
    return "[" + newline + ("," + newline).join(item_indent + item for item in encoded) + close + "]"


def _indent_unit(text: str) -> str:
    match = re.search(r"\n([ \t]+)\S", text)
    return match.group(1) if match else " "


def cell_diff(result: NotebookResult, path: str) -> str:
    """A unified diff per changed cell, labelled ``a/nb.ipynb:cell-3`` (1-based, all cells counted)."""
    return cells_diff({i: (result.before[i], result.sources[i]) for i in result.sources}, path)


def cells_diff(cells: dict[int, tuple[str, str]], path: str) -> str:
    """``cell_diff`` of each changed cell's (before, after) source, by 0-based index."""
    from .driver import unified_diff

    return "".join(unified_diff(*_for_display(*cells[i]), f"{path}:cell-{i + 1}") for i in sorted(cells))


def _for_display(before: str, after: str) -> tuple[str, str]:
    """Jupyter stores a cell without its last newline; a diff need not say so on every hunk."""
    if not before.endswith("\n") and not after.endswith("\n"):
        return before + "\n", after + "\n"
    return before, after


# -- `devmod apply` on one notebook -------------------------------------------------------------
def process_notebook(path: str, config: Config, mode: str, role: "FileRole | None" = None) -> FileReport:
    """The driver's process_file for a .ipynb: diff hunks are labelled by cell (``a/nb.ipynb:cell-3``)."""
    from .driver import FileReport, finish

    try:
        with open(path, "rb") as handle:
            read_stat = os.fstat(handle.fileno())  # Jupyter's autosave meanwhile is a conflict, not overwritten
            data = handle.read()
    except OSError as exc:
        return FileReport(path, error=f"0:0: cannot read: {exc.strerror or exc}")
    return finish(path, notebook_outcome(data, path, config, role)[0], mode, data, path, read_stat)  # type: ignore[arg-type]


def notebook_outcome(data: bytes, path: str, config: Config,
                     role: "FileRole | None" = None) -> "tuple[NotebookOutcome, bool]":
    """The engine's verdict on a notebook's bytes, and whether it may be cached (no internal error)."""
    from .cache import NotebookOutcome

    if b"torch" not in data:
        return NotebookOutcome(skipped="does not use torch"), True
    try:
        text = data.decode("utf-8")  # nbformat: notebooks are UTF-8 JSON
        result = transform_notebook(text, path, config, role)
    except UnicodeDecodeError as exc:
        return NotebookOutcome(error=f"0:0: cannot decode: a notebook must be UTF-8 ({exc.reason} at byte "
                                     f"{exc.start})"), True
    except NotebookError as exc:
        return NotebookOutcome(error=f"{exc.line}:{exc.column}: {exc.message}", error_cell=exc.cell), \
            "internal error" not in exc.message
    except RecursionError:
        return NotebookOutcome(error="0:0: cannot process: nesting too deep"), True
    except Exception as exc:  # a bug must cost one file, never the run
        return NotebookOutcome(error=(f"0:0: internal error ({type(exc).__name__}: {exc}); notebook left unchanged, "
                                      "please report this")), False
    outcome = NotebookOutcome(findings=result.findings, skipped=result.skipped)
    if result.changed:
        outcome.new_data = result.output.encode("utf-8")
        outcome.cells = {i: (result.before[i], result.sources[i]) for i in result.sources}
    return outcome, True


def file_line(text: str, cell: int, line: int) -> int:
    """The line of the notebook file (1-based) that holds line ``line`` of cell ``cell`` (both
    1-based): where code scanning and annotations, which see the JSON, should point."""
    spans = source_spans(text)
    span = spans[cell - 1] if 0 < cell <= len(spans) else None
    if span is None:
        return 1
    start, end = span
    if text[start] == "[":
        items = _items(text, start)
        if items:
            start = items[min(max(line, 1), len(items)) - 1][0]
    return text.count("\n", 0, start) + 1


def annotation(path: str, finding: Finding) -> str:
    """A GitHub Actions annotation for a notebook finding: on the JSON line that holds it (what
    GitHub shows for an .ipynb file), the cell and its line named in the title."""
    try:
        with open(path, encoding="utf-8") as handle:
            line = file_line(handle.read(), finding.cell or 0, finding.line)
    except (OSError, UnicodeDecodeError, ValueError, IndexError):
        line = 1
    return (f"::warning file={path},line={line},title={finding.code} (cell {finding.cell}, line {finding.line})"
            f"::{finding.message}")
