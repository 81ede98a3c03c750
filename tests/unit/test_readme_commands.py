"""Every command the README and docs/ show runs as written: ``logicmap ...`` through the real parser, ``python -m
logicmap.X ...`` through the module's own argparse parser, strategies (``-s``) through the strategy registry.

A figure the README quotes names the command that prints it; a renamed flag, subcommand, module or strategy
would leave the reader with a command that fails. Nothing is run: each command is only parsed.
"""

from __future__ import annotations

import argparse
import importlib
import importlib.util
import re
import shlex
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
README = ROOT / "README.md"
PAGES = [README, *sorted((ROOT / "docs").glob("*.md"))]
ENV_ASSIGNMENT = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*=")


class _Parsed(Exception):
    """Raised in place of a module's ``parse_args``, carrying its parser: a ``main`` is stopped before it runs."""

    def __init__(self, parser: argparse.ArgumentParser) -> None:
        self.parser = parser


def command_texts(markdown: str) -> list[tuple[str, bool]]:
    """Shell commands in the README, each with whether it is a whole command: lines of fenced and indented
    code blocks are; inline code spans (`logicmap chat`) only name a command and its flags."""
    found: list[tuple[str, bool]] = []
    fenced = False
    for line in markdown.splitlines():
        if line.lstrip().startswith("```"):
            fenced = not fenced
            continue
        if fenced or line.startswith("    "):
            found.append((line.strip(), True))
    prose = re.sub(r"```.*?```", "", markdown, flags=re.DOTALL)
    # A span may wrap over lines of one paragraph, never over a blank line.
    spans = re.findall(r"`([^`]+)`", prose)
    found += [(" ".join(span.split()), False) for span in spans if "\n\n" not in span]
    return [(c, whole) for c, whole in found if _invocation(c) is not None]


def _invocation(text: str) -> tuple[str, list[str]] | None:
    """``("cli", args)`` for ``[ENV=..] [path/]logicmap args``, ``(module, args)`` for ``[path/]python -m
    logicmap.module args``; None for anything else (Python code, pip, make, other programs)."""
    try:
        tokens = shlex.split(text, comments=True)
    except ValueError:
        return None
    while tokens and ENV_ASSIGNMENT.match(tokens[0]):
        tokens = tokens[1:]
    if not tokens:
        return None
    program = tokens[0].rsplit("/", 1)[-1]
    if program == "logicmap":
        return "cli", tokens[1:]
    if re.fullmatch(r"python(3(\.\d+)?)?", program) and tokens[1:2] == ["-m"] and len(tokens) > 2:
        if tokens[2] == "logicmap" or tokens[2].startswith("logicmap."):
            return tokens[2], tokens[3:]
    return None


def _parse(parser: argparse.ArgumentParser, args: list[str], whole: bool) -> argparse.Namespace | str:
    """The parsed arguments, or what is wrong. A whole command must parse; a command only named needs an
    existing subcommand and known flags."""
    if whole:
        try:
            return parser.parse_args(args)
        except SystemExit:
            return f"argparse rejects {args}"
    subparsers = [a for a in parser._actions if isinstance(a, argparse._SubParsersAction)]
    if subparsers and args and not args[0].startswith("-"):
        if args[0] not in subparsers[0].choices:
            return f"no subcommand {args[0]!r}"
        parser, args = subparsers[0].choices[args[0]], args[1:]
    known = {o for a in parser._actions for o in a.option_strings}
    unknown = [a.split("=", 1)[0] for a in args if re.match(r"--?[A-Za-z]", a) and a.split("=", 1)[0] not in known]
    return f"unknown flags {unknown}" if unknown else argparse.Namespace()


def _module_parser(module: str, monkeypatch: pytest.MonkeyPatch) -> argparse.ArgumentParser | str:
    """The parser a ``python -m`` module's ``main`` builds (captured at its ``parse_args``, before it runs)."""
    if importlib.util.find_spec(module) is None:
        return f"no module {module}"
    main = getattr(importlib.import_module(module), "main", None)
    if main is None:
        return f"{module} has no main(argv)"

    def capture(self: argparse.ArgumentParser, *args: object, **kwargs: object) -> None:
        raise _Parsed(self)

    with monkeypatch.context() as patch:
        patch.setattr(argparse.ArgumentParser, "parse_args", capture)
        try:
            main([])
        except _Parsed as parsed:
            return parsed.parser
    return f"{module}.main never parsed its arguments"


def _strategy_problems(args: argparse.Namespace) -> list[str]:
    from logicmap.evals.specs import resolve_strategies

    named = getattr(args, "strategy", None)
    try:
        resolve_strategies(named if isinstance(named, list) else [named] if named else [])
    except ValueError as exc:
        return [str(exc)]
    return []


def command_problems(text: str, monkeypatch: pytest.MonkeyPatch, whole: bool = True) -> list[str]:
    """What is wrong with one README command (empty: it parses as written, or names what exists)."""
    from logicmap.evals.cli import add_eval_commands
    from logicmap.graphs.surfaces.cli import build_parser

    target, args = _invocation(text)  # type: ignore[misc]  # the README command was checked to be one
    if target != "cli":
        parser = _module_parser(target, monkeypatch)
        if isinstance(parser, str):
            return [parser]
        parsed = _parse(parser, args, whole)
        return [parsed] if isinstance(parsed, str) else []
    if not args and not whole:  # the program's name in prose
        return []
    parsed = _parse(build_parser(add_eval_commands), args, whole)
    if isinstance(parsed, str):
        return [parsed]
    problems = _strategy_problems(parsed) if whole else []
    nested = " ".join(shlex.quote(a) for a in getattr(parsed, "run", None) or [] if a != "--")
    if _invocation(nested) is not None:  # local-llm -- CMD: the command it runs
        problems += command_problems(nested, monkeypatch)
    return problems


@pytest.fixture(scope="module")
def readme_commands() -> list[tuple[str, bool]]:
    return [c for page in PAGES for c in command_texts(page.read_text())]


def test_the_readme_shows_commands_of_both_kinds(readme_commands: list[tuple[str, bool]]) -> None:
    kinds = {_invocation(c)[0] == "cli" for c, _ in readme_commands}  # type: ignore[index]  # the fixture holds commands only
    assert kinds == {True, False} and len(readme_commands) > 20


def test_every_readme_command_parses_as_written(
    readme_commands: list[tuple[str, bool]], monkeypatch: pytest.MonkeyPatch
) -> None:
    problems = {c: p for c, whole in readme_commands if (p := command_problems(c, monkeypatch, whole))}
    assert problems == {}


BROKEN = """
```bash
.venv/bin/logicmap ask "Q?" -n sample --no-such-flag
logicmap frobnicate -n sample
```

    logicmap ask "Q?" -n sample -s nosuch
    .venv/bin/python -m logicmap.evals.bench.no_such_bench
    .venv/bin/python -m logicmap.evals.train.turn_ranker --no-such-option
    logicmap local-llm -- .venv/bin/logicmap ask "Q?" -n sample -s compass:nosuch

Prose names `python -m logicmap.evals.bench.bench_recall --strategies rerank --bogus` and `logicmap frob` inline.
"""


def test_the_check_finds_broken_commands(monkeypatch: pytest.MonkeyPatch) -> None:
    commands = command_texts(BROKEN)
    assert len(commands) == 8
    problems = {c: command_problems(c, monkeypatch, whole) for c, whole in commands}
    assert all(problems.values()), [c for c, p in problems.items() if not p]
    assert any("nosuch" in p for ps in problems.values() for p in ps)  # an unknown strategy is named


def test_the_check_passes_good_commands(monkeypatch: pytest.MonkeyPatch) -> None:
    good = command_texts(
        "    HF_HUB_OFFLINE=1 logicmap ask 'Q?' -n sample -s rerank --json\n"
        "    .venv/bin/python -m logicmap.evals.train.turn_ranker --out - data/a.json\n"
        "    logicmap eval FILE -s compass -s goalmem:bm25 -s rerank\n"
        "Inline, `logicmap chat` and `logicmap eval FILE -s compass --budgets 5,10` name real commands.\n"
    )
    assert len(good) == 5 and all(command_problems(c, monkeypatch, whole) == [] for c, whole in good)
