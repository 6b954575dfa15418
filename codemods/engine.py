"""The one engine behind `devmod apply`, `--diff`, `--check`, `verify --compare` and bots.

For one file: skip it unless it mentions torch, parse once, run the enabled rules
in order, repeat until a pass changes nothing (so nested fixes land and a second
run is a no-op), re-parse the output, and only then hand it back.
"""

from __future__ import annotations

import ast
import os
import re
from collections import Counter
from dataclasses import dataclass, field
from typing import Iterable, Sequence

import libcst as cst
from libcst.codemod import CodemodContext
from libcst.metadata import MetadataWrapper, ParentNodeProvider

from .analysis.candidates import FileFacts
from .analysis.project import FileRole, ProjectIndex
from .comments import lost_comments
from .config import Config
from .device_name import conflict_in_file
from .preflight import PreflightError, check_source, deep_recursion, eof_padding, split_trailing_comments
from .rules import all_rules
from .positions import OriginMap
from .scan import scan
from . import fast_visit
from .rules.base import STATE_KEY, Allow, Finding, Rule, RunState
from .suppression import read_suppressions

MAX_PASSES = 5
fast_visit.install()  # read-only libcst traversals (the metadata) stop copying the tree
SHARED_DEVICE_CODE = "DM101"  # runs whenever another rule needs the shared variable
# Benchmarks and the equivalence check turn the prefilter off to compare (never needed otherwise).
NO_PREFILTER_ENV = "DEVMOD_NO_PREFILTER"


class SourceError(Exception):
    """The file cannot be processed; ``line`` and ``column`` point at the cause (1-based)."""

    def __init__(self, message: str, line: int = 0, column: int = 0) -> None:
        super().__init__(message)
        self.message, self.line, self.column = message, line, column


@dataclass
class TransformResult:
    source: str
    output: str
    findings: list[Finding] = field(default_factory=list)
    skipped: str | None = None  # why the file was not looked at

    @property
    def changed(self) -> bool:
        return self.output != self.source

    @property
    def fix_counts(self) -> Counter:
        return Counter(f.code for f in self.findings if f.fixed)

    @property
    def open_findings(self) -> list[Finding]:
        return [f for f in self.findings if not f.fixed]


def mentions_torch(source: str) -> bool:
    return "torch" in source


def active_rules(config: Config, rules: Sequence[type[Rule]] | None = None) -> list[type[Rule]]:
    chosen = [r for r in (rules or all_rules()) if config.enabled(r.CODE)]
    return _with_shared_device(chosen)


def _with_shared_device(rules: list[type[Rule]]) -> list[type[Rule]]:
    shared = [r for r in all_rules() if r.CODE == SHARED_DEVICE_CODE]
    if rules and shared and shared[0] not in rules:
        rules = sorted([*rules, shared[0]], key=lambda r: (r.ORDER, r.CODE))
    return rules


def transform_source(source: str, path: str = "<string>", config: Config | None = None,
                     rules: Sequence[type[Rule]] | None = None, role: FileRole | None = None,
                     allow: Allow | None = None) -> TransformResult:
    """Rewrite ``source``; raises SourceError when it cannot be parsed or the rewrite is broken.

    ``role`` is what the project index says about the file (imported by others, which
    functions are driver code, which names build models); alone, the file is its own project.
    ``allow``, when given, is asked before each fix with its position in ``source``
    ((0, 0) for a fix on a line that only a fix wrote) and may decline it.
    """
    config = config or Config()
    suppressions = read_suppressions(source)
    if suppressions.skip_file:
        return TransformResult(source, source, skipped="devmod: skip-file")
    if not mentions_torch(source):
        return TransformResult(source, source, skipped="does not use torch")
    try:  # CPython decides what is Python; libcst never sees nesting that crashes it
        tree = check_source(source)
    except PreflightError as exc:
        raise SourceError(exc.message, exc.line, exc.column) from None
    if conflict := conflict_in_file(tree, config.device_name):
        raise SourceError(f"device name {config.device_name!r} is already {conflict[0]} in this file; "
                          "choose another with --device-name", conflict[1], 1)
    code, tail = split_trailing_comments(source)  # comment lines after the code are put back as they were
    pad = eof_padding(code)
    chosen = active_rules(config, rules)
    with deep_recursion():
        if role is None:
            role = ProjectIndex.build([(path, source)]).role_for(path)
        if not may_need_libcst(tree, code + pad, chosen, config, role):
            return TransformResult(source, source)  # no rule can act here: what the full run gives
        # Memory: only one tree at a time is kept alive (a 240 kB file's libcst tree is ~75 MiB,
        # its ``ast`` tree ~20 MiB): the ``ast`` tree is done with, and ``_run_passes`` holds the
        # only reference to the libcst tree, so each pass's rebuilt tree frees the one before.
        del tree
        # The rules see the text libcst parsed (code + pad); the tail goes back on afterwards.
        findings, output = _run_passes(parse(code + pad), chosen, config, suppressions, code + pad, role, allow)[1:]
    output = (output[: len(output) - len(pad)] if pad and output.endswith(pad) else output) + tail
    if not any(f.fixed for f in findings):
        output = source  # no fix, no write: libcst's round trip is not always exact
    if output != source:
        try:
            cst.parse_module(output + eof_padding(output))
        except cst.ParserSyntaxError as exc:  # a rule bug: never write it
            raise SourceError(f"internal error: the rewrite does not parse ({exc.message}); "
                              "file left unchanged, please report this") from exc
        lost = lost_comments(source, output)
        if lost:  # checked with tokenize, independently of libcst
            raise SourceError(f"internal error: the rewrite would drop the comment {lost[0]!r}; "
                              "file left unchanged, please report this")
    return TransformResult(source, output, findings)


def transform_module_with(module: cst.Module, rules: Sequence[type[Rule]], config: Config) -> cst.Module:
    """For libcst's own codemod runner: the same passes on an already parsed module."""
    chosen = _with_shared_device(list(rules))
    source = module.code
    role = ProjectIndex.build([("<module>", source)]).role_for("<module>")
    module, _, _ = _run_passes(module, chosen, config, read_suppressions(source), source, role)
    return module


def _triggered(rule: type[Rule], source: str) -> bool:
    return rule.CODE == SHARED_DEVICE_CODE or not rule.TRIGGERS or any(t in source for t in rule.TRIGGERS)


def may_need_libcst(tree: ast.Module, text: str, rules: Sequence[type[Rule]], config: Config,
                    role: FileRole) -> bool:
    """Could any of ``rules`` fix or report something in this file? Each rule answers from the
    ``ast`` tree (``Rule.may_apply``), after its text trigger; False skips libcst altogether.

    A pass where no rule acts changes nothing, so no later pass can give another rule a
    reason to act: the first pass decides for the whole file."""
    if os.environ.get(NO_PREFILTER_ENV):
        return True
    facts = FileFacts(tree, text, role, config.device_name)
    return any(_triggered(rule, text) and rule.may_apply(facts) for rule in rules)


def parse(source: str) -> cst.Module:
    try:
        return cst.parse_module(source)
    except cst.ParserSyntaxError as exc:
        reason = str(exc.message).splitlines()[0] if exc.message else "invalid syntax"
        reason = re.sub(r"^(parser error: )?error at \d+:\d+: ", "", reason)
        line, column = exc.raw_line, exc.raw_column + 1
        try:  # CPython points at the mistake itself; libcst often at the token after it
            compile(source, "<file>", "exec", ast.PyCF_ONLY_AST, dont_inherit=True)
        except SyntaxError as syntax:
            line, column = syntax.lineno or line, syntax.offset or column
            reason = syntax.msg or reason
        except (ValueError, RecursionError, MemoryError):
            pass
        raise SourceError(f"cannot parse: {reason}", line, column) from exc
    except (RecursionError, ValueError) as exc:  # pathological nesting, odd bytes
        raise SourceError(f"cannot parse: {exc}") from exc


def _from_origin(allow: Allow, original: str, module: cst.Module) -> Allow:
    """``allow`` asked with positions in ``original`` while the rules read ``module``."""
    origins = OriginMap(original, module.code)

    def asked(code: str, line: int, column: int, message: str) -> bool:
        line, column = origins.origin(line, column) or (0, 0)
        return allow(code, line, column, message)
    return asked


def _wrap(module: cst.Module) -> MetadataWrapper:
    wrapper = MetadataWrapper(module, unsafe_skip_copy=True)
    # The same mapping libcst's ParentNodeProvider would compute, without copying every node.
    wrapper._metadata[ParentNodeProvider] = fast_visit.parents(module)
    return wrapper


def _run_passes(module: cst.Module, rules: Iterable[type[Rule]], config: Config,
                suppressions, source: str, role: FileRole,
                allow: Allow | None = None) -> tuple[cst.Module, list[Finding], str]:
    """The settled module, its findings and its text (``module.code``, known without a codegen)."""
    all_chosen = list(rules)
    original, first_pass = source, True
    fixed: list[Finding] = []
    for _ in range(MAX_PASSES):
        # Triggers are read from the current text: one rule's fix can make another's apply.
        rules = [r for r in all_chosen if _triggered(r, source)]
        state = RunState(config=config, suppressions=suppressions, role=role, source=source, source_module=module)
        context = CodemodContext(scratch={STATE_KEY: state})
        wrapper: MetadataWrapper | None = None
        pass_changed = False
        # Report-only rules never change the tree: they run once, in the pass that settles.
        fixers = [r for r in rules if r.SAFETY != "report"]
        reporters = [r for r in rules if r.SAFETY == "report"]
        if allow is None and rules:  # (``allow`` may ask a person: never twice for one fix)
            # Most passes fix nothing: one walk for all rules, no rebuilt tree (see scan.py).
            wrapper = _wrap(module)
            if scan(wrapper, [r(context) for r in fixers + reporters], state):
                fixed.extend(f for f in state.findings if f.fixed)
                return module, fixed + [f for f in state.findings if not f.fixed], source
        for rule_cls in fixers + reporters:
            if rule_cls.SAFETY == "report" and pass_changed:
                break
            state.changed = False
            if wrapper is None:
                wrapper = _wrap(module)
                if allow is not None:
                    state.allow = allow if first_pass and not pass_changed else _from_origin(allow, original, module)
            if allow is None and scan(wrapper, [rule_cls(context)], state):
                continue  # this rule changes nothing: the tree and its metadata stay as they are
            try:
                result = wrapper.visit(rule_cls(context))
            except (SourceError, RecursionError):
                raise
            except Exception as exc:  # a rule bug: report it, never write half a rewrite
                raise SourceError(f"internal error in rule {rule_cls.CODE} ({type(exc).__name__}: {exc}); "
                                  "file left unchanged, please report this") from exc
            if state.changed:
                module, wrapper, pass_changed = result, None, True
            del result  # a rebuilt tree that changed nothing goes now, not after the next rule's visit
        fixed.extend(f for f in state.findings if f.fixed)
        if not pass_changed:
            return module, fixed + [f for f in state.findings if not f.fixed], source
        source, first_pass = module.code, False
        if suppressions.by_line:  # line numbers moved: read the comments again
            suppressions = read_suppressions(source)
    raise SourceError(f"internal error: rules did not settle after {MAX_PASSES} passes; "
                      "file left unchanged, please report this")
