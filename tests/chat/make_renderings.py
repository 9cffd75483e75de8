#!/usr/bin/env python3
"""Writes the expected chat-template renderings that chat_template_test checks.

Renders every template with jinja2 exactly as transformers' apply_chat_template
does (ImmutableSandboxedEnvironment with trim_blocks, lstrip_blocks and
loopcontrols; its tojson, raise_exception and strftime_now; tools and documents
None unless given) over every conversation in tests/chat/conversations, with
add_generation_prompt off and on. strftime_now formats a fixed moment (UTC).

  tests/chat/templates/*.jinja        -> tests/data/chat/own/<name>.json
  ../shared/chat_templates/*.jinja    -> tests/data/chat/shared/<name>.json
    (read from ../shared at generation time; never copied into the repo)

Usage: python3 tests/chat/make_renderings.py   (needs jinja2 from PyPI)
"""
import datetime
import json
import pathlib
import sys

import jinja2
from jinja2.ext import Extension
from jinja2.sandbox import ImmutableSandboxedEnvironment

ROOT = pathlib.Path(__file__).resolve().parents[2]
FIXED_TIME = 1735732800  # 2025-01-01 12:00:00 UTC; chat_template_test uses the same


class GenerationTag(Extension):
    """transformers' {% generation %} ... {% endgeneration %}: renders its body."""
    tags = {"generation"}

    def parse(self, parser):
        lineno = next(parser.stream).lineno
        body = parser.parse_statements(["name:endgeneration"], drop_needle=True)
        return jinja2.nodes.CallBlock(self.call_method("_render"), [], [], body).set_lineno(lineno)

    def _render(self, caller):
        return caller()


def make_environment():
    def raise_exception(message):
        raise jinja2.exceptions.TemplateError(message)

    def tojson(x, ensure_ascii=False, indent=None, separators=None, sort_keys=False):
        return json.dumps(x, ensure_ascii=ensure_ascii, indent=indent, separators=separators,
                          sort_keys=sort_keys)

    def strftime_now(fmt):
        return datetime.datetime.fromtimestamp(FIXED_TIME, datetime.timezone.utc).strftime(fmt)

    env = ImmutableSandboxedEnvironment(trim_blocks=True, lstrip_blocks=True,
                                        extensions=[GenerationTag, jinja2.ext.loopcontrols])
    env.filters["tojson"] = tojson
    env.globals["raise_exception"] = raise_exception
    env.globals["strftime_now"] = strftime_now
    return env


def render_cases(env, source, conversations):
    template = env.from_string(source)
    cases = []
    for name, conversation in conversations:
        for generation in (False, True):
            context = dict(conversation.get("context", {}))
            kwargs = {"tools": None, "documents": None}
            kwargs.update(context)
            case = {"conversation": name, "add_generation_prompt": generation}
            try:
                case["output"] = template.render(messages=conversation["messages"],
                                                 add_generation_prompt=generation, **{
                                                     k: v for k, v in kwargs.items()
                                                     if k not in ("messages", "add_generation_prompt")})
            except Exception as error:  # the C++ side must fail too, with this message
                case["error"] = str(error)
            cases.append(case)
    return cases


def main():
    env = make_environment()
    conversations = []
    for path in sorted((ROOT / "tests/chat/conversations").glob("*.json")):
        conversations.append((path.stem, json.loads(path.read_text(encoding="utf-8"))))
    groups = [("own", ROOT / "tests/chat/templates")]
    shared = ROOT.parent / "shared/chat_templates"
    if shared.is_dir():
        groups.append(("shared", shared))
    else:
        print(f"note: {shared} not found; only the own templates are rendered", file=sys.stderr)
    for group, folder in groups:
        out_dir = ROOT / "tests/data/chat" / group
        out_dir.mkdir(parents=True, exist_ok=True)
        for path in sorted(folder.glob("*.jinja")):
            cases = render_cases(env, path.read_text(encoding="utf-8"), conversations)
            document = {"template": path.name, "generated_by": "tests/chat/make_renderings.py",
                        "jinja2": jinja2.__version__, "cases": cases}
            (out_dir / (path.stem + ".json")).write_text(
                json.dumps(document, ensure_ascii=False, indent=1) + "\n", encoding="utf-8")
            errors = sum("error" in c for c in cases)
            print(f"{group}/{path.stem}: {len(cases)} cases, {errors} raise")


if __name__ == "__main__":
    main()
