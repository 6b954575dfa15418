"""The one engine behind `devmod apply`, `--diff`, `--check`, `verify --compare` and bots.

For one file: skip it unless it mentions torch, parse once, run the enabled rules
in order, repeat until a pass changes nothing (so nested fixes land and a second
run is a no-op), re-parse the output, and only then hand it back.
"""

from __future__ import annotations

import ast
import dataclasses
import itertools
import os
import re
from collections import Counter
from dataclasses import dataclass, field
from typing import Iterable, Sequence

import libcst as cst
from libcst.codemod import CodemodContext
from libcst.metadata import ExpressionContextProvider, MetadataWrapper, ParentNodeProvider

from .analysis.candidates import FileFacts
from .analysis.project import FileRole, ProjectIndex
from .analysis.names import forget_answers
from .analysis.tree import TreeIndex
from .collector import rarer_full_collections
from .comments import lost_comments
from .config import Config
from .device_name import conflict_in_file
from .preflight import PreflightError, check_source, deep_recursion, eof_padding, split_trailing_comments
from .rules import all_rules
from .positions import LINES_IN_MESSAGE, OriginMap
from .scan import scan
from . import fast_visit
from .rules.base import STATE_KEY, Allow, Finding, Rule, RunState
from .suppression import read_suppressions

MAX_PASSES = 5
DEFAULT_DEVICE_NAME = Config.device_name  # the name a user who chose none gets
FALLBACK_DEVICE_NAME = "torch_device"  # when a file binds the default name to something else
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
    try:
        with rarer_full_collections():
            return _transform(source, path, config or Config(), rules, role, allow)
    finally:
        forget_tree()  # this file's tree goes now


def forget_tree() -> None:
    """What the analyses keep of the tree they last read (a walk of it, answers about it)."""
    TreeIndex.forget()
    forget_answers()


def _transform(source: str, path: str, config: Config, rules: Sequence[type[Rule]] | None,
               role: FileRole | None, allow: Allow | None) -> TransformResult:
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
        if config.device_name == DEFAULT_DEVICE_NAME and FALLBACK_DEVICE_NAME not in source:
            # The default name is taken (seq2seq's ``import torch.cuda as device``): the file gets
            # another, as a user who never chose one would want, not an error.
            return _transform(source, path, dataclasses.replace(config, device_name=FALLBACK_DEVICE_NAME),
                              rules, role, allow)
        if allow is None:
            # A name the user chose: an error only where a fix needs it. Tried with a free name, a
            # result that never uses it is the answer.
            spare = next(f"_devmod_device{n}" for n in itertools.count() if f"_devmod_device{n}" not in source)
            result = _transform(source, path, dataclasses.replace(config, device_name=spare), rules, role, None)
            if spare not in result.output and not any(spare in f.message for f in result.findings):
                return result
        raise SourceError(f"device name {config.device_name!r} is already {conflict[0]} in this file; "
                          "choose another with --device-name", conflict[1], 1)
    chosen = active_rules(config, rules)
    with deep_recursion():
        if role is None:
            role = ProjectIndex.build([(path, source)]).role_for(path)
        # Asked of the whole text: a trigger found only in the trailing comments keeps a rule that
        # then finds nothing, and most files stop here, before they are tokenized for their tail.
        candidates = candidate_rules(chosen, source, config, role, tree, user_text=True)
        if not candidates:
            return TransformResult(source, source)  # no rule can act here: what the full run gives
        code, tail = split_trailing_comments(source)  # comment lines after the code are put back as they were
        pad = eof_padding(code)
        # Memory: only one tree at a time is kept alive (a 240 kB file's libcst tree is ~75 MiB,
        # its ``ast`` tree ~20 MiB): the ``ast`` tree is done with, and ``_run_passes`` holds the
        # only reference to the libcst tree, so each pass's rebuilt tree frees the one before.
        del tree
        # The rules see the text libcst parsed (code + pad); the tail goes back on afterwards.
        findings, output = _run_passes(parse(code + pad), chosen, config, suppressions, code + pad, role, allow,
                                       candidates)[1:]
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
    try:
        module, _, _ = _run_passes(module, chosen, config, read_suppressions(source), source, role)
    finally:
        forget_tree()
    return module


def _triggered(rule: type[Rule], source: str) -> bool:
    return rule.CODE == SHARED_DEVICE_CODE or not rule.TRIGGERS or any(t in source for t in rule.TRIGGERS)


def candidate_rules(rules: Sequence[type[Rule]], text: str, config: Config, role: FileRole,
                    tree: ast.Module | None = None, user_text: bool = False) -> list[type[Rule]]:
    """The rules of ``rules`` that may fix or report something in ``text``, in their order.

    Each rule answers from the ``ast`` tree (``Rule.may_apply``), after its text trigger: a rule
    left out would record nothing, so a pass runs without it and resolves no metadata for it.
    Asked again on the text of every pass and after every fix, because a fix can give another
    rule something to do. DM101 stays whenever another fixer does: it defines the shared device
    that a fix of the same pass may start to use. None kept on a file's text: libcst is skipped.
    ``user_text``: ``text`` is the file as its author wrote it (no earlier fix in it)."""
    triggered = [rule for rule in rules if _triggered(rule, text)]
    if os.environ.get(NO_PREFILTER_ENV):
        return triggered
    try:
        facts = FileFacts(tree if tree is not None else ast.parse(text), text, role, config.device_name, user_text)
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        return triggered  # (never for text libcst parsed; if so, every rule runs as before)
    kept = [rule for rule in triggered if rule.may_apply(facts)]
    if any(rule.SAFETY != "report" and rule.CODE != SHARED_DEVICE_CODE for rule in kept):
        kept = [rule for rule in triggered if rule in kept or rule.CODE == SHARED_DEVICE_CODE]
    return kept


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


def _placed_in(original: str, text: str, findings: list[Finding]) -> list[Finding]:
    """``findings`` of a pass over ``text``, at their places in ``original`` (with the lines their
    messages name): a report after a fix (the device definition added above it) must point at
    the user's line. A place on a line a fix wrote keeps its number in ``text``."""
    if text == original or not findings:
        return list(findings)
    origins = OriginMap(original, text)

    def line(number: int) -> int:
        found = origins.origin(number, 1)
        return found[0] if found is not None else number

    def renumbered(match: re.Match) -> str:
        return "line " + ", ".join(str(line(int(n))) for n in match.group(1).split(", "))
    placed = []
    for finding in findings:
        where = origins.origin(finding.line, finding.column) or (line(finding.line), finding.column)
        placed.append(dataclasses.replace(finding, line=where[0], column=where[1],
                                          message=LINES_IN_MESSAGE.sub(renumbered, finding.message)))
    return placed


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
    # and ExpressionContextProvider's (the scope analysis needs it), in one walk of its own
    wrapper._metadata[ExpressionContextProvider] = fast_visit.expression_contexts(module)
    return wrapper


def _fixers_first(rules: Sequence[type[Rule]]) -> list[type[Rule]]:
    """Report-only rules never change the tree: they run last, once, in the pass that settles."""
    return [r for r in rules if r.SAFETY != "report"] + [r for r in rules if r.SAFETY == "report"]


def _run_passes(module: cst.Module, rules: Iterable[type[Rule]], config: Config,
                suppressions, source: str, role: FileRole,
                allow: Allow | None = None,
                candidates: list[type[Rule]] | None = None) -> tuple[cst.Module, list[Finding], str]:
    """The settled module, its findings and its text (``module.code``, known without a codegen).

    Every finding is placed in ``source`` (the text the user has), also those a later pass found
    in a rewritten text. ``candidates``: the rules that may act on ``source`` (``candidate_rules``),
    when known."""
    all_chosen = list(rules)
    original, first_pass = source, True
    fixed: list[Finding] = []
    for _ in range(MAX_PASSES):
        # Asked of the current text: one rule's fix can make another's apply.
        if candidates is None:
            candidates = candidate_rules(all_chosen, source, config, role)
        kept, candidates = candidates, None
        if not kept:  # nothing may act: this pass would settle with no finding
            return module, fixed, source
        state = RunState(config=config, suppressions=suppressions, role=role, source=source, source_module=module,
                         original=original)
        context = CodemodContext(scratch={STATE_KEY: state})
        wrapper: MetadataWrapper | None = None
        pass_changed = False
        # A rule after a fix in this pass reads the fixed text: its findings are placed (and its
        # suppressions read) in that text. (index of the first finding found in it, the text)
        read_texts: list[tuple[int, str]] = [(0, source)]
        if allow is None:  # (``allow`` may ask a person: never twice for one fix)
            # Most passes fix nothing: one walk for all rules, no rebuilt tree (see scan.py).
            wrapper = _wrap(module)
            if scan(wrapper, [r(context) for r in _fixers_first(kept)], state):
                found = _placed_in(original, source, state.findings)
                return module, fixed + [f for f in found if f.fixed] + [f for f in found if not f.fixed], source
        # One rule at a time, in order, each on the tree the ones before it left.
        for rule_cls in _fixers_first([r for r in all_chosen if _triggered(r, source)]):
            if rule_cls.SAFETY == "report" and pass_changed:
                break
            if rule_cls not in kept:
                continue  # after a fix, the new text gave it nothing to act on
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
                text = module.code
                state.source, state.source_module, state.origins = text, module, None
                if suppressions.by_line:  # line numbers moved: read the comments again
                    state.suppressions = suppressions = read_suppressions(text)
                read_texts.append((len(state.findings), text))
                # the rules after this one run on the new tree: ask them again (DM101 may now have a use)
                kept = candidate_rules(all_chosen, text, config, role)
                if state.device_used:
                    kept += [r for r in all_chosen if r.CODE == SHARED_DEVICE_CODE]
            del result  # a rebuilt tree that changed nothing goes now, not after the next rule's visit
        found = [placed for (start, text), (end, _) in zip(read_texts, read_texts[1:] + [(len(state.findings), "")])
                 for placed in _placed_in(original, text, state.findings[start:end])]
        fixed.extend(f for f in found if f.fixed)
        if not pass_changed:
            return module, fixed + [f for f in found if not f.fixed], source
        source, first_pass = state.source, False
    raise SourceError(f"internal error: rules did not settle after {MAX_PASSES} passes; "
                      "file left unchanged, please report this")
